"""A live, authenticated link to one peer.

``establish`` runs the mesh-key handshake on a Trio stream. Then a
``PeerLink`` hands the socket to its two I/O threads (``linkio``) and keeps
the decisions on the Trio thread: it hands received messages to its owner
(a ``LinkOwner``: the agent), measures round trips, notices a silent peer,
and closes with a goodbye that says why.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import trio

from gleam.peer.bandwidth import (
    BandwidthEstimate,
    BandwidthSample,
    ProbeRequest,
    probe_count,
    probe_frames,
)
from gleam.peer.linkio import LinkIO, PongAt
from gleam.peer.protocol import (
    NEED_DATA,
    Connection,
    ConnectionClosed,
    ErrorMessage,
    Goodbye,
    Hello,
    Message,
    PeerAuthenticated,
    Ping,
    ProtocolError,
    Role,
)
from gleam.peer.rtt import RttEstimator
from gleam.peer.tcpinfo import TcpRtt, read_tcp_rtt

log = logging.getLogger("gleam.link")

# What a stream raises when the other end or the network is gone.
STREAM_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)
# Bulk senders wait for the queue to drain below this before adding more.
MAX_QUEUED_BYTES = 32 * 1024 * 1024
# How long a closing link waits for its goodbye to go out.
CLOSE_TIMEOUT = 2.0
# The goodbye of an agent that shuts down (peers drop it at once, no suspicion).
LEAVING = "agent shutting down"
# How long a requested probe train may take to arrive and be measured.
PROBE_TIMEOUT = 5.0
# Follow-up probes, each sized from the last, while only short trains were seen.
PROBE_RESIZES = 3


@dataclass
class _PingWait:
    start: float
    done: trio.Event | None  # None for the pinger's own pings: nobody waits
    rtt: float | None = None


@dataclass(frozen=True)
class _IoEnded:
    reason: str


class LinkOwner(Protocol):
    """What a running link hands on: the messages and batches it does not handle itself.

    The agent is the owner; it turns both into plugin hooks. A link knows no more
    of it than these two methods, so a test can run a link with a stand-in.
    """

    def on_message(self, link: PeerLink, message: Message) -> None:
        """A control message the link itself does not handle (on the Trio thread)."""

    def on_data_batch(self, link: PeerLink, payload: bytes) -> bool:
        """A data-plane batch; False when nobody consumed it. Runs on the link's
        reader thread, so it must not touch Trio."""


class HandshakeFailed(Exception):
    """The peer could not be authenticated; the message says why."""


class LinkClosed(Exception):
    """The link closed before the operation could complete."""


async def _flush(stream: trio.abc.Stream, conn: Connection) -> None:
    out = conn.data_to_send()
    if out:
        await stream.send_all(out)


async def establish(stream: trio.abc.Stream, conn: Connection, timeout: float) -> Hello:
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
                    conn.receive_data(data)
                elif isinstance(event, PeerAuthenticated):
                    await _flush(stream, conn)
                    return event.peer
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
        stream: trio.SocketStream,
        conn: Connection,
        peer: Hello,
        address: str,
        *,
        ping_interval: float,
        peer_timeout: float,
        probe_interval: float = 30.0,
        probe_lock: trio.Lock | None = None,
        display_name: Callable[[str, str], str] | None = None,
    ) -> None:
        self.conn = conn
        # The agent's (node id, name) -> unique display name (peer/names.py).
        self._display_name = display_name
        self.peer = peer
        self.address = address
        self.role: Role = conn.role
        self.ping_interval = ping_interval
        self.peer_timeout = peer_timeout
        self.rtt = RttEstimator()  # the application ping (network + both agents' scheduling)
        self.tcp_rtt: TcpRtt | None = None  # the kernel's estimate: the link's RTT
        self.bandwidth = BandwidthEstimate()
        self.probe_interval = probe_interval
        # Shared by the agent's links: one inbound probe at a time (see _probe_once).
        self._probe_lock = probe_lock
        self._probes = itertools.count(1)
        self._sampled = trio.Event()  # set by each bandwidth sample
        self._last_probe_served = -1e9
        self.connected_at = time.monotonic()
        self.batches_received = 0
        self.peer_left = False  # the peer said goodbye because it shut down
        self._ping_seq = itertools.count(1)
        self._ping_sent: dict[int, _PingWait] = {}
        self._closed_reason: str | None = None
        self._ended = trio.Event()
        self._room: trio.Event | None = None
        self._owner: LinkOwner | None = None
        self._inbox_send, self._inbox = trio.open_memory_channel[list[object] | _IoEnded](
            float("inf")
        )
        self.io = LinkIO.from_stream(
            stream, conn, self._inbox_send.send_nowait, self._io_ended, self._on_batch,
            name=f"link-{peer.name[:12]}",
        )

    @property
    def node_id(self) -> str:
        return self.peer.node_id

    @property
    def name(self) -> str:
        """The peer's display name: its own name, told apart from another node's
        with the same name (peer/names.py). What logs and views print."""
        if self._display_name is None:
            return self.peer.name
        return self._display_name(self.peer.node_id, self.peer.name)

    @property
    def closed(self) -> bool:
        return self._closed_reason is not None

    @property
    def bytes_sent(self) -> int:
        return self.io.bytes_sent

    @property
    def bytes_received(self) -> int:
        return self.io.bytes_received

    # ---------------------------------------------------------------- sending

    def _check_open(self) -> None:
        if self._closed_reason is not None:
            raise LinkClosed(f"link to {self.name} is closed: {self._closed_reason}")

    async def send(self, message: Message) -> None:
        """Queue one control message (sealed and sent by the writer thread)."""
        self._check_open()
        self.io.submit(message)
        await trio.lowlevel.checkpoint()

    async def send_batch(self, payload: bytes) -> None:
        """Queue one opaque data-plane batch; waits while too much is queued.

        ``payload`` must not be modified afterwards (pass ``bytes``).
        """
        self._check_open()
        while self.io.queued_bytes > MAX_QUEUED_BYTES:
            room = self._room = trio.Event()
            self.io.on_room(room.set, below=MAX_QUEUED_BYTES // 2)
            await room.wait()
            self._check_open()
        self.io.submit_batch(payload)
        # A cancellation point without a trip through the scheduler: bulk
        # senders call this per frame, and yielding each time costs the
        # writer thread the GIL.
        await trio.lowlevel.checkpoint_if_cancelled()

    async def ping(self, timeout: float = 5.0) -> float:
        """Send a ping and wait for its pong; return the round trip in seconds.

        The pong follows everything queued before the ping, so it also
        proves the peer has read all of that.
        """
        seq = next(self._ping_seq)
        wait = self._ping_sent[seq] = _PingWait(time.monotonic(), trio.Event())
        try:
            await self.send(Ping(seq=seq))
            with trio.fail_after(timeout):
                await wait.done.wait()  # type: ignore[union-attr]
        finally:
            self._ping_sent.pop(seq, None)
        if wait.rtt is None:
            self._check_open()
            raise LinkClosed(f"link to {self.name} closed before the pong")
        return wait.rtt

    # ---------------------------------------------------------------- running

    async def run(self, owner: LinkOwner) -> str:
        """Serve the link until it closes; return the reason."""
        self._owner = owner
        self.io.start()
        self.refresh_tcp_rtt()  # the handshake already gave the kernel a sample
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._pinger)
                nursery.start_soon(self._prober)
                nursery.start_soon(self._dispatch, owner)
                await self._ended.wait()
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                # Cancelled from outside: only the agent's shutdown does that.
                await self.close(LEAVING)
        return self._closed_reason or "closed"

    async def close(self, reason: str, *, tell_peer: bool = True) -> None:
        """Close the link; the peer is told why with a goodbye."""
        if self._closed_reason is None:
            self._closed_reason = reason
            if tell_peer:
                self.io.submit(Goodbye(reason=reason[:200]))
        self._ended.set()
        if self._room is not None:
            self._room.set()
        for wait in self._ping_sent.values():
            if wait.done is not None:
                wait.done.set()
        self.io.stop()
        await trio.to_thread.run_sync(self.io.join, CLOSE_TIMEOUT, abandon_on_cancel=True)

    def _on_batch(self, payload: bytes) -> None:
        """Runs on the link's reader thread (see the gleam_data_batch hook)."""
        self.batches_received += 1
        owner = self._owner
        if owner is None or not owner.on_data_batch(self, payload):
            log.debug("dropped a data batch from %s: no plugin consumed it", self.name)

    def _io_ended(self, reason: str) -> None:
        # In band, after the events read before the end (a goodbye among them).
        self._inbox_send.send_nowait(_IoEnded(reason))

    def _finish(self, reason: str) -> None:
        if self._closed_reason is None:
            self._closed_reason = reason
        self._ended.set()

    async def _pinger(self) -> None:
        while True:
            await trio.sleep(self.ping_interval)
            silent = time.monotonic() - self.io.last_heard
            if silent > self.peer_timeout:
                self._finish(f"peer stopped answering ({silent:.1f} s silent)")
                return
            sample = self.io.flush_meter()
            if sample is not None:
                self._add_sample(sample)
            self.refresh_tcp_rtt()
            seq = next(self._ping_seq)
            self._ping_sent[seq] = _PingWait(time.monotonic(), None)
            # Forget pings that will never be answered, so the map stays small.
            for old in [s for s in self._ping_sent if s < seq - 64]:
                del self._ping_sent[old]
            self.io.submit(Ping(seq=seq))

    @property
    def rtt_ms(self) -> float | None:
        """The link's RTT for decisions: the kernel's estimate, else the ping's EWMA."""
        return self.tcp_rtt.rtt_ms if self.tcp_rtt is not None else self.rtt.summary().ewma_ms

    def refresh_tcp_rtt(self) -> TcpRtt | None:
        """Read the kernel's RTT estimate for the link's socket now (None kept
        back: a failed read leaves the last good one)."""
        reading = read_tcp_rtt(self.io.sock)
        if reading is not None:
            self.tcp_rtt = reading
        return self.tcp_rtt

    async def _prober(self) -> None:
        """Ask the peer for a probe train when no bulk data has been measured lately."""
        if self.probe_interval <= 0:
            return
        # The first estimate soon after joining (spread: agents started together
        # would otherwise all probe at once); then only when stale.
        await trio.sleep(min(1.0, self.probe_interval) * random.uniform(1.0, 2.0))
        while True:
            age = self.bandwidth.age()
            if age is None or age >= self.probe_interval:
                await self._probe_once()
                # Only short trains so far: one sized from them follows soon
                # (peers serve a probe a second); a few tries at most.
                for _ in range(PROBE_RESIZES):
                    if self.bandwidth.settled or self.bandwidth.bytes_per_s is None:
                        break
                    await trio.sleep(random.uniform(1.1, 1.5))
                    await self._probe_once()
            await trio.sleep(self.probe_interval * random.uniform(0.9, 1.1))

    async def _probe_once(self) -> None:
        """One probe train, alone among this agent's inbound probes."""
        lock = self._probe_lock
        if lock is None:  # a link made without one (tests)
            await self._measure_train()
            return
        async with lock:
            await self._measure_train()

    async def _measure_train(self) -> None:
        self._sampled = trio.Event()
        count = probe_count(self.bandwidth.bytes_per_s)
        self.io.submit(ProbeRequest(probe=next(self._probes), count=count))
        with trio.move_on_after(PROBE_TIMEOUT):
            await self._sampled.wait()

    def _add_sample(self, sample: BandwidthSample) -> None:
        self.bandwidth.add(sample)
        self._sampled.set()  # a probe waiting for its train is done

    def _serve_probe(self, request: ProbeRequest) -> None:
        # A peer may ask at most once a second: probes are bounded load.
        now = time.monotonic()
        if now - self._last_probe_served < 1.0:
            return
        self._last_probe_served = now
        for frame in probe_frames(request.probe, request.count):
            self.io.submit(frame)

    async def _dispatch(self, owner: LinkOwner) -> None:
        async for item in self._inbox:
            if isinstance(item, _IoEnded):
                if item.reason.startswith("protocol error") and self._closed_reason is None:
                    log.warning("closing link to %s (%s): %s",
                                self.name, self.address, item.reason)
                self._finish(item.reason)
                return
            try:
                for event in item:
                    if not self._handle(owner, event):
                        return
            finally:
                self.io.batch_handled()

    def _handle(self, owner: LinkOwner, event: object) -> bool:
        """Act on one event (on the Trio thread); False when the link is over."""
        if isinstance(event, BandwidthSample):
            self._add_sample(event)
        elif isinstance(event, ProbeRequest):
            self._serve_probe(event)
        elif isinstance(event, PongAt):
            wait = self._ping_sent.pop(event.seq, None)
            if wait is not None:
                wait.rtt = event.at - wait.start
                self.rtt.add(wait.rtt)
                if wait.done is not None:
                    wait.done.set()
        elif isinstance(event, Goodbye):
            self.peer_left = event.reason == LEAVING
            self._finish(f"peer said goodbye: {event.reason}")
            return False
        elif isinstance(event, ErrorMessage):
            self._finish(f"peer reported an error: {event.code}: {event.message}")
            return False
        elif isinstance(event, ConnectionClosed):
            self._finish("connection closed by the peer")
            return False
        elif isinstance(event, Message):
            owner.on_message(self, event)
        return True
