"""What a session needs of the control path to the other side: a small, thread-safe
interface.

A session's envelopes travel on its data connection (``dataconn.py``); its
control messages (a served session's ``cuda_close`` and ``cuda_blob_want``)
go through a ``Channel``. Over a peer link the channel is the link's writer
queue. When an agent serves its own interposer the channel is a *loopback*:
a ``cuda_close`` from the executor ends the client session directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gleam.peer.link import PeerLink
    from gleam.peer.protocol import Message


class Channel(Protocol):
    node_id: str
    name: str

    def submit_control(self, message: Message) -> None:
        """Queue one control message. Thread-safe."""

    def queued_bytes(self) -> int:
        """Bytes queued and not yet sent (for backpressure)."""


class LinkChannel:
    """A channel over an authenticated peer link."""

    def __init__(self, link: PeerLink) -> None:
        self.link = link
        self.node_id = link.node_id
        self.name = link.name

    def submit_control(self, message: Message) -> None:
        self.link.io.submit(message)

    def queued_bytes(self) -> int:
        return self.link.io.queued_bytes


class LoopbackChannel:
    """The channel of a session this agent serves for its own interposer.

    A ``cuda_close`` from the executor (a malformed batch) ends the client session.
    """

    def __init__(self, node_id: str, name: str) -> None:
        self.node_id = node_id
        self.name = name
        self.client: Any = None  # the ClientSession, set once it exists

    def submit_control(self, message: Message) -> None:
        reason = getattr(message, "reason", None)
        if self.client is not None and reason is not None:
            self.client.fail(f"{self.name} closed the session: {reason}")

    def queued_bytes(self) -> int:
        return 0
