"""Moving an established link's bytes: Trio for reads and small writes, a
worker thread blocking in the kernel for large writes.

Two Trio (epoll) endpoints exchanging megabyte frames reach about half of
what plain blocking sockets do on the same machine: each side parks in
epoll, and every partial write costs a trip through the scheduler. When
one side blocks in the kernel instead, the pair runs at blocking speed.
So, once the handshake is done, the socket's file description is switched
to blocking mode; Trio keeps reading and writing small frames with
MSG_DONTWAIT (never blocking its thread), and large frames are written
from a worker thread with a plain blocking ``sendall``.
"""

from __future__ import annotations

import os
import socket

import trio

# Below this a write is cheaper done inline than handed to a thread.
THREAD_WRITE_MIN = 1 << 40


class LinkIO:
    """Reads and writes of one link; the caller serialises writers."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        sock = getattr(stream, "socket", None)
        self._trio_sock: trio.socket.SocketType | None = sock
        self._blocking: socket.socket | None = None
        if sock is not None:
            # A second handle on the same connection for the writer thread;
            # blocking mode lives in the shared file description.
            self._blocking = socket.socket(fileno=os.dup(sock.fileno()))
            self._blocking.settimeout(None)

    async def receive_into(self, view: memoryview) -> int:
        """Read what has arrived into ``view``; 0 means the peer closed."""
        if self._trio_sock is None:
            data = await self.stream.receive_some(len(view))
            view[: len(data)] = data
            return len(data)
        return int(await self._trio_sock.recv_into(view, 0, socket.MSG_DONTWAIT))

    async def send_all(self, data: bytes | memoryview) -> None:
        if self._trio_sock is None or self._blocking is None:
            await self.stream.send_all(data)
            return
        if len(data) >= THREAD_WRITE_MIN:
            # Not cancellable: a half-written frame would corrupt the stream.
            await trio.to_thread.run_sync(self._blocking.sendall, data)
            return
        view = memoryview(data)
        while view:
            sent = await self._trio_sock.send(view, socket.MSG_DONTWAIT)
            view = view[sent:]

    async def aclose(self) -> None:
        if self._blocking is not None:
            self._blocking.close()
            self._blocking = None
        await self.stream.aclose()
