"""A live, authenticated link to one peer: the Trio side of a protocol Connection.

The protocol state machine (``gleam.peer.protocol``) decides what bytes mean;
this module only moves them. One reader task drains events, one pinger keeps
the link measured and notices a silent peer, and a lock serialises writers so
frames never interleave.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from gleam.peer.linkio import LinkIO
from gleam.peer.protocol import (
    NEED_DATA,
    Connection,
    ConnectionClosed,
    DataBatch,
    ErrorMessage,
    Goodbye,
    Hello,
    Message,
    PeerAuthenticated,
    Ping,
    Pong,
    ProtocolError,
    Role,
)
from gleam.peer.rtt import RttEstimator

if TYPE_CHECKING:
    from gleam.peer.agent import Agent

log = logging.getLogger("gleam.link")

# Large reads keep bulk transfers cheap per byte; control traffic is tiny and
# unaffected.
RECEIVE_SIZE = 1 << 20

# What a stream raises when the other end or the network is gone.
STREAM_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


class HandshakeFailed(Exception):
    """The peer could not be authenticated; the message says why."""


async def _flush(stream: trio.abc.Stream, conn: Connection) -> None:
    out = conn.data_to_send()
    if out:
        await stream.send_all(out)


async def establish(
    stream: trio.abc.Stream, conn: Connection, timeout: float
) -> Hello:
    """Run the mesh-key handshake on ``stream``; return the peer's hello.

    Raises HandshakeFailed with a reason fit for the log. Whatever the
    protocol wants the peer to learn (its plaintext error) is sent first.
    """
    try:
        with trio.fail_after(timeout):
            await stream.send_all(conn.start())
            while True:
                event = conn.next_event()
                if event is NEED_DATA:
                    await _flush(stream, conn)
                    data = await stream.receive_some(65536)
                    if not data:
                        raise HandshakeFailed("the peer closed the connection during the handshake")
                    conn.receive_data(data)
                elif isinstance(event, PeerAuthenticated):
                    await _flush(stream, conn)
                    return event.peer
                elif isinstance(event, ErrorMessage):
                    raise HandshakeFailed(f"the peer refused us: {event.message}")
                elif isinstance(event, ConnectionClosed):
                    raise HandshakeFailed("the peer closed the connection during the handshake")
    except ProtocolError as exc:
        with trio.move_on_after(1), contextlib.suppress(*STREAM_ERRORS):
            await _flush(stream, conn)
        raise HandshakeFailed(str(exc)) from exc
    except trio.TooSlowError as exc:
        raise HandshakeFailed(f"no handshake within {timeout:.0f} s") from exc
    except STREAM_ERRORS as exc:
        raise HandshakeFailed(f"connection failed during the handshake: {exc}") from exc


class PeerLink:
    """One authenticated connection; created by the agent after ``establish``."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        conn: Connection,
        peer: Hello,
        address: str,
        *,
        ping_interval: float,
        peer_timeout: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.io = LinkIO(stream)
        self.conn = conn
        self.peer = peer
        self.address = address
        self.role: Role = conn.role
        self.ping_interval = ping_interval
        self.peer_timeout = peer_timeout
        self.rtt = RttEstimator()
        self.connected_at = clock()
        self.bytes_sent = 0
        self.bytes_received = 0
        self.batches_received = 0
        self._clock = clock
        self._last_heard = clock()
        self._send_lock = trio.Lock()
        self._ping_seq = itertools.count(1)
        self._ping_sent: dict[int, tuple[float, trio.Event]] = {}
        self._closed_reason: str | None = None
        self._cancel = trio.CancelScope()

    @property
    def node_id(self) -> str:
        return self.peer.node_id

    @property
    def closed(self) -> bool:
        return self._closed_reason is not None

    # ---------------------------------------------------------------- sending

    async def _write(self, data: bytes) -> None:
        async with self._send_lock:
            await self.io.send_all(data)
        self.bytes_sent += len(data)

    async def send(self, message: Message) -> None:
        """Send one control message (sealed)."""
        async with self._send_lock:
            data = self.conn.send(message)
            await self.io.send_all(data)
        self.bytes_sent += len(data)

    async def send_batch(self, payload: bytes | memoryview) -> None:
        """Send one opaque data-plane batch (sealed)."""
        async with self._send_lock:
            data = self.conn.send_batch(payload)
            await self.io.send_all(data)
        self.bytes_sent += len(data)

    async def ping(self, timeout: float = 5.0) -> float:
        """Send a ping and wait for its pong; return the round trip in seconds."""
        seq = next(self._ping_seq)
        done = trio.Event()
        start = self._clock()
        self._ping_sent[seq] = (start, done)
        try:
            await self.send(Ping(seq=seq))
            with trio.fail_after(timeout):
                await done.wait()
        finally:
            self._ping_sent.pop(seq, None)
        return self._clock() - start

    # ---------------------------------------------------------------- running

    async def run(self, agent: Agent) -> str:
        """Serve the link until it closes; return the reason."""
        try:
            with self._cancel:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._pinger)
                    await self._reader(agent)
                    nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                if self._closed_reason is None:
                    # Cancelled from outside: only the agent's shutdown does that.
                    await self.close("agent shutting down")
                await self.io.aclose()
        return self._closed_reason or "closed"

    async def close(self, reason: str, *, tell_peer: bool = True) -> None:
        """Close the link; the peer is told why with a goodbye."""
        if self._closed_reason is not None:
            return
        self._closed_reason = reason
        if tell_peer:
            with trio.move_on_after(1) as scope, contextlib.suppress(*STREAM_ERRORS, ProtocolError):
                scope.shield = True
                await self.send(Goodbye(reason=reason[:200]))
        self._cancel.cancel()

    def _end(self, reason: str) -> None:
        if self._closed_reason is None:
            self._closed_reason = reason

    async def _pinger(self) -> None:
        while True:
            await trio.sleep(self.ping_interval)
            silent = self._clock() - self._last_heard
            if silent > self.peer_timeout:
                self._end(f"peer stopped answering ({silent:.1f} s silent)")
                self._cancel.cancel()
                return
            seq = next(self._ping_seq)
            self._ping_sent[seq] = (self._clock(), trio.Event())
            # Forget pings that will never be answered, so the map stays small.
            for old in [s for s in self._ping_sent if s < seq - 64]:
                del self._ping_sent[old]
            try:
                await self.send(Ping(seq=seq))
            except STREAM_ERRORS as exc:
                self._end(f"send failed: {exc}")
                self._cancel.cancel()
                return

    async def _reader(self, agent: Agent) -> None:
        while True:
            try:
                event = self.conn.next_event()
            except ProtocolError as exc:
                log.warning("closing link to %s (%s): %s", self.peer.name, self.address, exc)
                self._end(f"protocol error: {exc}")
                with trio.move_on_after(1), contextlib.suppress(*STREAM_ERRORS):
                    await self._write(self.conn.data_to_send())
                return
            if event is NEED_DATA:
                # Read straight into the protocol's frame buffer: no copy.
                with self.conn.receive_buffer(RECEIVE_SIZE) as space:
                    try:
                        size = await self.io.receive_into(space)
                    except STREAM_ERRORS as exc:
                        self._end(f"connection lost: {exc}")
                        return
                self._last_heard = self._clock()
                self.bytes_received += size
                self.conn.receive_commit(size)
                continue
            if not await self._handle(agent, event):
                return

    async def _handle(self, agent: Agent, event: object) -> bool:
        """Act on one event; False when the link is over."""
        if isinstance(event, DataBatch):
            self.batches_received += 1
            if not agent.pm.hook.gleam_data_batch(agent=agent, link=self, payload=event.payload):
                log.debug("dropped a data batch from %s: no plugin consumed it", self.peer.name)
        elif isinstance(event, Ping):
            try:
                await self.send(Pong(seq=event.seq))
            except STREAM_ERRORS as exc:
                self._end(f"send failed: {exc}")
                return False
        elif isinstance(event, Pong):
            sent = self._ping_sent.pop(event.seq, None)
            if sent is not None:
                self.rtt.add(self._clock() - sent[0])
                sent[1].set()
        elif isinstance(event, Goodbye):
            self._end(f"peer said goodbye: {event.reason}")
            return False
        elif isinstance(event, ErrorMessage):
            self._end(f"peer reported an error: {event.code}: {event.message}")
            return False
        elif isinstance(event, ConnectionClosed):
            self._end("connection closed by the peer")
            return False
        elif isinstance(event, Message):
            handled = agent.pm.hook.gleam_control_message(agent=agent, link=self, message=event)
            if not handled:
                log.debug("no plugin handles %s from %s", type(event).__name__, self.peer.name)
        return True
