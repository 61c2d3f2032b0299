"""What a session needs of the path to the other side: a small, thread-safe interface.

A served session sends replies and control messages through a ``Channel``;
so does a client session towards its server. Over a peer link the channel
is the link's writer queue. When an agent serves its own interposer the
channel is a *loopback*: replies go straight to the interposer's socket,
and no link, encryption or Trio hop is involved.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gleam.peer.link import PeerLink
    from gleam.peer.protocol import Message


class Channel(Protocol):
    node_id: str
    name: str

    def submit_batch(self, buf: bytes | bytearray | memoryview) -> None:
        """Queue one envelope; ``buf`` must not change until it is sent. Thread-safe."""

    def submit_control(self, message: Message) -> None:
        """Queue one control message. Thread-safe."""

    def queued_bytes(self) -> int:
        """Bytes queued and not yet sent (for backpressure)."""

    def waiting(self) -> None:
        """The reader is held up by a full session queue, not by a silent peer."""


class LinkChannel:
    """A channel over an authenticated peer link."""

    def __init__(self, link: PeerLink) -> None:
        self.link = link
        self.node_id = link.node_id
        self.name = link.name

    def submit_batch(self, buf: bytes | bytearray | memoryview) -> None:
        # Called on OS threads (the program's reader, an executor) that are on a
        # round trip's critical path: write now when the link's writer is idle.
        self.link.io.send_batch_now(buf)

    def submit_control(self, message: Message) -> None:
        self.link.io.submit(message)

    def queued_bytes(self) -> int:
        return self.link.io.queued_bytes

    def waiting(self) -> None:
        # While backpressure holds the link's reader, the peer's bytes wait
        # in the socket unread; they must not count as silence (which would
        # close the link after peer_timeout).
        self.link.io.last_heard = time.monotonic()


class LoopbackChannel:
    """The channel of a session this agent serves for its own interposer.

    Replies go straight to the client session's socket; a ``cuda_close``
    from the executor (a malformed batch) ends the client session.
    """

    def __init__(self, node_id: str, name: str) -> None:
        self.node_id = node_id
        self.name = name
        self.client: Any = None  # the ClientSession, set once it exists

    def submit_batch(self, buf: bytes | bytearray | memoryview) -> None:
        if self.client is not None:
            self.client.deliver(buf)

    def submit_control(self, message: Message) -> None:
        reason = getattr(message, "reason", None)
        if self.client is not None and reason is not None:
            self.client.fail(f"{self.name} closed the session: {reason}")

    def queued_bytes(self) -> int:
        return 0

    def waiting(self) -> None:
        pass
