"""Moving an established link's bytes with two OS threads and blocking I/O.

Measured on loopback, two Trio (epoll) endpoints exchanging megabyte
frames reach about half of what plain blocking sockets do: both sides park
in epoll and every partial write costs a trip through the scheduler. So once
the handshake is done, a link's socket leaves Trio: a reader thread blocks
in ``recv_into`` straight into the protocol's frame buffer and decrypts, a
writer thread seals and blocks in ``sendall``. Trio keeps the decisions:
it receives events in batches and submits messages to send.

Ownership and threading rules:

* The reader thread alone calls the Connection's receiving side
  (``receive_buffer``, ``receive_commit``, ``next_event``); the writer
  thread alone calls its sending side (``send``, ``send_batch``,
  ``data_to_send``), so each direction's cipher state has one owner.
* Events reach Trio through ``TrioToken.run_sync_soon`` in batches. A
  semaphore bounds the batches in flight, so a slow consumer slows the
  reader (and TCP slows the peer) instead of growing memory.
* Pings are answered in the reader thread directly: the peer's RTT
  measurement does not wait for Trio's scheduler.
* Data-plane batches are handed to their consumer on the reader thread
  (the ``gleam_data_batch`` hook's contract), so bulk data never waits for
  the event loop; only control traffic reaches Trio.
* Submitting is thread-safe and never blocks; ``queued_bytes`` lets the
  Trio side wait for room before submitting more bulk data.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import trio

from gleam.peer.bandwidth import BandwidthProbe, BandwidthSample, TrainMeter
from gleam.peer.protocol import (
    NEED_DATA,
    Connection,
    ConnectionClosed,
    DataBatch,
    Message,
    Ping,
    Pong,
    ProtocolError,
)

log = logging.getLogger("gleam.link")

RECEIVE_SIZE = 1 << 20
# Below this, frames waiting in the queue are gathered into one write.
GATHER_LIMIT = 64 * 1024
# Event batches handed to Trio and not yet handled.
MAX_BATCHES_IN_FLIGHT = 16


@dataclass(frozen=True)
class PongAt:
    """A pong with the moment the reader thread saw it (for an honest RTT)."""

    seq: int
    at: float


_STOP = object()
_FLUSH = object()  # send what the connection queued (an error notice), then stop


class LinkIO:
    """The two I/O threads of one established link."""

    def __init__(
        self,
        sock: socket.socket,
        conn: Connection,
        deliver: Callable[[list[object]], None],
        ended: Callable[[str], None],
        on_batch: Callable[[bytes], None],
        *,
        name: str,
    ) -> None:
        """On the Trio thread, ``deliver`` gets each batch of events and
        ``ended`` the reason once the I/O has stopped. ``on_batch`` gets each
        data-plane batch on the reader thread itself (see ``_read_loop``)."""
        self.sock = sock
        self.conn = conn
        self.bytes_sent = 0
        self.bytes_received = 0
        self.last_heard = time.monotonic()
        self._deliver = deliver
        self._ended_callback = ended
        self._on_batch = on_batch
        self._token = trio.lowlevel.current_trio_token()
        self._outbox: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._queued = 0
        self._queued_lock = threading.Lock()
        self._room_callback: Callable[[], None] | None = None
        self._room_below = 0
        self._in_flight = threading.Semaphore(MAX_BATCHES_IN_FLIGHT)
        self._ended = threading.Event()
        self._closing = threading.Event()
        self._train = TrainMeter()
        self._meter_lock = threading.Lock()
        self._reader = threading.Thread(target=self._read_loop, name=f"{name}-rx", daemon=True)
        self._writer = threading.Thread(target=self._write_loop, name=f"{name}-tx", daemon=True)

    @classmethod
    def from_stream(
        cls, stream: trio.SocketStream, conn: Connection,
        deliver: Callable[[list[object]], None], ended: Callable[[str], None],
        on_batch: Callable[[bytes], None], *, name: str,
    ) -> LinkIO:
        """Take the socket away from Trio (after the handshake) and make it blocking."""
        sock = socket.socket(fileno=stream.socket.detach())
        sock.settimeout(None)
        return cls(sock, conn, deliver, ended, on_batch, name=name)

    def start(self) -> None:
        self._reader.start()
        self._writer.start()

    # ------------------------------------------------------------ submitting

    @property
    def queued_bytes(self) -> int:
        return self._queued

    def submit(self, message: Message) -> None:
        self._outbox.put(message)

    def submit_batch(self, payload: bytes) -> None:
        """Queue a data-plane batch; ``payload`` must not change until sent."""
        with self._queued_lock:
            self._queued += len(payload)
        self._outbox.put(payload)

    def on_room(self, callback: Callable[[], None], below: int) -> None:
        """Call ``callback`` on the Trio thread once fewer than ``below`` bytes are queued."""
        self._room_below = below
        self._room_callback = callback
        if self._queued < below:
            self._room_callback = None
            callback()

    def batch_handled(self) -> None:
        """The Trio side finished with one delivered batch of events."""
        self._in_flight.release()

    # ------------------------------------------------------------ stopping

    def stop(self) -> None:
        """Ask the writer to send what is queued, then end the link."""
        self._closing.set()
        self._outbox.put(_STOP)
        if not self._writer.is_alive() and self._writer.ident is None:
            # Never started (a duplicate link closed at once): the goodbye
            # still has to go out.
            self._writer.start()

    def shutdown(self) -> None:
        """Wake both threads: nothing more will be read or written."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def join(self, timeout: float) -> None:
        self._writer.join(timeout)
        self.shutdown()
        if self._reader.ident is not None:
            self._reader.join(timeout)
        self.sock.close()

    # ------------------------------------------------------------ the threads

    def _to_trio(self, callback: Callable[[object], None], arg: object) -> None:
        try:
            self._token.run_sync_soon(callback, arg)
        except trio.RunFinishedError:
            self._ended.set()

    def _end(self, reason: str) -> None:
        if not self._ended.is_set():
            self._ended.set()
            self._to_trio(self._ended_callback, reason)  # type: ignore[arg-type]

    def _meter(self, size: int, events: list[object]) -> None:
        with self._meter_lock:
            sample = self._train.observe(size, time.monotonic())
        if sample is not None:
            events.append(sample)

    def flush_meter(self) -> BandwidthSample | None:
        """A train that has gone quiet, measured; call now and then from Trio."""
        with self._meter_lock:
            return self._train.flush(time.monotonic())

    def _wait_for_room(self) -> bool:
        """Block until Trio has room for another batch; False once closing."""
        while not self._in_flight.acquire(timeout=0.2):
            if self._closing.is_set():
                return False
        return True

    def _read_loop(self) -> None:
        conn = self.conn
        try:
            while not self._ended.is_set():
                with conn.receive_buffer(RECEIVE_SIZE) as space:
                    size = self.sock.recv_into(space)
                conn.receive_commit(size)
                self.last_heard = time.monotonic()
                self.bytes_received += size
                events: list[object] = []
                while (event := conn.next_event()) is not NEED_DATA:
                    if isinstance(event, DataBatch):
                        self._meter(len(event.payload), events)
                        # The data plane's consumer runs here, not on Trio:
                        # a hop to the event loop per batch cost more than
                        # the AES that protects it.
                        self._on_batch(event.payload)
                    elif isinstance(event, BandwidthProbe):
                        self._meter(len(event.pad), events)
                    elif isinstance(event, Ping):
                        self._outbox.put(Pong(seq=event.seq))
                    elif isinstance(event, Pong):
                        events.append(PongAt(event.seq, time.monotonic()))
                    else:
                        events.append(event)
                    if isinstance(event, ConnectionClosed):
                        break
                if events:
                    if not self._wait_for_room():
                        break
                    self._to_trio(self._deliver, events)  # type: ignore[arg-type]
                if size == 0:
                    break
        except ProtocolError as exc:
            self._outbox.put(_FLUSH)
            self._end(f"protocol error: {exc}")
        except OSError as exc:
            self._end(f"connection lost: {exc.strerror or exc}")
        except Exception as exc:  # a data-plane consumer's bug must not hang the link
            log.exception("reader of %s failed", self._reader.name)
            self._end(f"internal error while reading: {exc!r}")
        else:
            self._end("connection closed by the peer")

    def _write_loop(self) -> None:
        pending: list[bytes | memoryview] = []
        try:
            while True:
                item = self._outbox.get()
                if self._write_round(item, pending):
                    return
        except (OSError, ProtocolError) as exc:
            self._end(f"send failed: {exc}")
        except Exception as exc:
            log.exception("writer of %s failed", self._writer.name)
            self._end(f"internal error while sending: {exc!r}")

    def _write_round(self, item: object, pending: list[bytes | memoryview]) -> bool:
        """Write ``item`` and whatever else is queued; True once told to stop."""
        while True:
            if item is _STOP or item is _FLUSH:
                if item is _FLUSH:
                    pending.append(self.conn.data_to_send())
                self._send(pending)
                return True
            self._frame(item, pending)
            try:
                item = self._outbox.get_nowait()
            except queue.Empty:
                break
        self._send(pending)
        return False

    def _frame(self, item: object, pending: list[bytes | memoryview]) -> None:
        if isinstance(item, Message):
            pending.append(self.conn.send(item))
            return
        assert isinstance(item, bytes | bytearray | memoryview)
        frame = self.conn.send_batch(item)
        with self._queued_lock:
            self._queued -= len(item)
        callback = self._room_callback
        if callback is not None and self._queued < self._room_below:
            # Wake the bulk sender while this frame is still going out, so
            # the queue never runs dry between its refills.
            self._room_callback = None
            with contextlib.suppress(trio.RunFinishedError):
                self._token.run_sync_soon(callback)
        if len(frame) < GATHER_LIMIT:
            pending.append(bytes(frame))  # the sealer reuses its buffer
        else:
            # Large frames go out at once, before the sealer's buffer is
            # reused, and alone, so they are never copied into a join.
            self._send(pending)
            pending.append(frame)
            self._send(pending)

    def _send(self, pending: list[bytes | memoryview]) -> None:
        if not pending:
            return
        if len(pending) == 1:
            self.sock.sendall(pending[0])
            self.bytes_sent += len(pending[0])
        else:
            data = b"".join(pending)
            self.sock.sendall(data)
            self.bytes_sent += len(data)
        pending.clear()
