"""The local agent's side of a session: pumping envelopes for one interposer.

After the HELLO, the interposer's socket leaves Trio. A reader thread reads
each envelope straight into a buffer of its own size, stamps the session id
into the header in place, and hands that same buffer to the server's channel
(no copy). Replies arrive on the server link's reader thread and are
written to the socket right there, under a lock shared with FAIL. No Python
runs per call: only per batch, and only to move bytes and count them.

Every batch also goes into the session's journal (the same buffer, no copy),
from which a move rebuilds the session on another server: the session is
*held* (batches are journaled, not sent), the journal is replayed to the new
server, and replies the program already had are dropped (docs/consistency.md).
At safe points the forwarding thread folds the journal into a checkpoint.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

from gleam.peer.cuda import checkpoint, envelope
from gleam.peer.cuda.channel import Channel
from gleam.peer.cuda.journal import Entry, Journal, limit_from_env
from gleam.peer.nativelib import ffi

_ALLOCATE = ffi.new_allocator(should_clear_after_alloc=False)

log = logging.getLogger("gleam.cuda.client")

# The reader waits while more than this is queued towards the server, so a
# fast program cannot make the agent buffer without bound.
MAX_QUEUED = 64 * 1024 * 1024
_BACKPRESSURE_POLL = 0.002
_PIPE_DEPTH = 4  # envelopes between the reader and the hashing thread
# How long a checkpoint waits for each snapshot read before it gives up (the
# session goes on, with the journal it had).
SNAPSHOT_WAIT = 30.0
_DEFERRED = struct.Struct("<i")
_DEFERRED_AT = envelope.HEADER_SIZE + 4  # REPLY body: i32 result, i32 deferred, ...


def _uncleared(size: int) -> memoryview:
    """A writable buffer of ``size`` bytes that is not zero-filled first: every
    byte is about to be received into it, and clearing megabytes per envelope
    cost a tenth of the client agent's time on bulk copies."""
    return memoryview(ffi.buffer(_ALLOCATE("char[]", size)))


class ClientSession:
    """One interposer's session, from HELLO until either side ends it."""

    def __init__(
        self,
        session: int,
        sock: socket.socket,
        channel: Channel,
        forward: Callable[[memoryview], None],
        on_end: Callable[[ClientSession, str], None],
        *,
        program: str,
        pid: int,
        backend: str,
        buffered: bytes = b"",
        reason: str = "",
        va: tuple[int, int] = (0, 0),
        journal: Journal | None = None,
    ) -> None:
        """``forward`` hands one stamped BATCH envelope on (reader thread);
        ``on_end`` runs once, on the reader thread, when the session is over."""
        self.session = session
        self.sock = sock
        self.channel = channel
        self.program = program
        self.pid = pid
        self.backend = backend
        self.reason = reason
        self.started = time.time()
        self.batches = 0
        self.records = 0
        self.replies = 0
        self.bytes_to_server = 0
        self.bytes_from_server = 0
        self.failed: str | None = None
        # Context consistency (docs/consistency.md): the session's range, kept
        # on every server it moves to, and the journal that rebuilds it there.
        self.va_base, self.va_size = va
        self.journal = journal if journal is not None else Journal(limit_from_env())
        self.migrations = 0
        self.failovers = 0
        self.moves: list[dict[str, Any]] = []
        self.moving = False  # a migration or failover is under way (Trio thread)
        # The program named its server (`gleam-peer run --peer`): re-evaluation
        # never moves it (a failover still may: the named server is gone).
        self.pinned = False
        # Held: a move is under way; batches go into the journal only, and the
        # move's replay sends them to the new server.
        self._held = False
        self._backlog: list[Entry] = []  # what came in while held, for a refused move
        self._drop = 0        # replies of replayed calls the program already had
        self.waits_out = 0    # waiting batches forwarded to the current server
        self.replies_in = 0   # replies from the current server (dropped ones too)
        self._route_lock = threading.Lock()
        # Checkpoints: replies of the snapshot reads go to _capture, not the program;
        # _swallow counts those of an abandoned checkpoint still to come; a
        # deferred error such a reply carried is owed to the program's next reply.
        self._checkpoint_at = self.journal.next_checkpoint()
        self._capture: queue.Queue[bytes | bytearray | memoryview | None] | None = None
        self._swallow = 0
        self._owed_deferred = 0
        # The blob cache's side of this session (peer/cache/client.py); None
        # when the server caches nothing or serves from this agent.
        self.blobs: Any = None
        self._closed = False
        self._forward = forward
        self._on_end = on_end
        self._pending = bytearray(buffered)
        self._send_lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._read_loop, name=f"cuda-client-{session:016x}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    # ------------------------------------------------------------ any thread

    def deliver(self, buf: bytes | bytearray | memoryview) -> None:
        """Write one REPLY envelope to the interposer (the server link's reader thread)."""
        with self._send_lock:
            if self.failed is not None or self._closed:
                return
            if self._capture is not None:  # a checkpoint's snapshot read
                self._capture.put(buf)
                return
            if self._swallow > 0:
                self._swallow -= 1
                return
            self.replies_in += 1
            if self.blobs is not None:
                self.blobs.replied()
            if self._drop > 0:  # a replayed call the program already has the answer to
                self._drop -= 1
                return
            if self._owed_deferred:
                buf = self._with_deferred(buf)
            self.replies += 1
            self.journal.answered += 1
            self.bytes_from_server += len(buf)
            # When the interposer is gone its reader notices and ends the session.
            with contextlib.suppress(OSError):
                self.sock.sendall(buf)

    def _with_deferred(self, buf: bytes | bytearray | memoryview) -> bytes | bytearray | memoryview:
        """The reply carrying the deferred error a snapshot read took (send lock held)."""
        if len(buf) < _DEFERRED_AT + 4 or _DEFERRED.unpack_from(buf, _DEFERRED_AT)[0] != 0:
            return buf
        out = bytearray(buf)
        _DEFERRED.pack_into(out, _DEFERRED_AT, self._owed_deferred)
        self._owed_deferred = 0
        return out

    def fail(self, reason: str) -> None:
        """End the session: tell the interposer why and close its connection."""
        with self._send_lock:
            if self.failed is not None or self._closed:
                return
            self.failed = reason
            with contextlib.suppress(OSError):
                self.sock.sendall(envelope.fail_envelope(reason))
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    # ------------------------------------------------------------ reader thread

    def _recv_exact(self, view: memoryview) -> bool:
        """Fill ``view``; False at a clean end of stream before its first byte."""
        got = 0
        if self._pending:
            got = min(len(view), len(self._pending))
            view[:got] = self._pending[:got]
            del self._pending[:got]
        while got < len(view):
            n = self.sock.recv_into(view[got:])
            if n == 0:
                if got == 0:
                    return False
                raise ConnectionError("the program closed its connection mid-envelope")
            got += n
        return True

    def _read_one(self) -> memoryview | None:
        header = bytearray(envelope.HEADER_SIZE)
        if not self._recv_exact(memoryview(header)):
            return None
        kind, _session, body_len = envelope.parse_header(header)
        if kind != envelope.BATCH:
            raise envelope.EnvelopeError(f"the program sent a {envelope.TYPE_NAMES[kind]}")
        if body_len > envelope.MAX_BODY:
            raise envelope.EnvelopeError(f"envelope of {body_len} bytes is too large")
        buf = _uncleared(envelope.HEADER_SIZE + body_len)
        buf[: envelope.HEADER_SIZE] = header
        with memoryview(buf) as view:
            if body_len and not self._recv_exact(view[envelope.HEADER_SIZE :]):
                raise ConnectionError("the program closed its connection mid-envelope")
        return buf

    def _send_one(self, buf: memoryview) -> None:
        # A safe point: the program's last waiting call has its reply, and this
        # thread alone forwards, so nothing else is in flight.
        if (self.journal.bytes > self._checkpoint_at and self.in_flight() == 0
                and not self._held and self.journal.broken is None):
            self._checkpoint()
        self._backpressure()
        with self._route_lock:
            waits = self.journal.add(buf, envelope.HEADER_SIZE)
            self.batches += 1
            self.records += envelope.record_count(buf, envelope.HEADER_SIZE)
            if self._held:  # the move under way sends it from the journal
                self._backlog.append(Entry(buf, waits))
                return
            try:
                self._forward_locked(buf, waits)
            except OSError as exc:
                self._lost_under_us(exc)

    def _lost_under_us(self, exc: OSError) -> None:
        """The server's link failed while this thread wrote to it (route lock held).
        The batch is journaled; the link's loss starts the failover that replays it,
        or ends the session with the reason."""
        log.info("session %016x: the server's link failed under a send: %s", self.session, exc)
        self._held = True

    def _backpressure(self) -> None:
        while self.channel.queued_bytes() > MAX_QUEUED and self.failed is None and not self._held:
            time.sleep(_BACKPRESSURE_POLL)

    def _forward_locked(self, buf: memoryview, waits: bool) -> None:
        """To the current server, under the route lock (so a move sees every batch
        either as sent to the old server or as still to replay, never both)."""
        out = self.blobs.outgoing(buf) if self.blobs is not None else buf
        envelope.stamp_session(out, self.session)
        self.bytes_to_server += len(out)
        if waits:
            self.waits_out += 1
        self._forward(out)

    # ------------------------------------------------------------ checkpoints

    def _checkpoint(self) -> None:
        """Fold the journal into state + a snapshot of live memory and of the
        modules' variables (docs/consistency.md)."""
        journal = self.journal
        started = time.monotonic()
        with self._route_lock:
            entries = list(journal.entries)
        why_not: str | None = None
        try:
            built = checkpoint.compact(entries)
            snapshot = self._snapshot(built)
        except checkpoint.NotMovable as exc:
            why_not, snapshot = str(exc), None
        except checkpoint.CheckpointError as exc:
            log.warning("session %016x: no checkpoint: %s", self.session, exc)
            snapshot = None
        with self._route_lock:
            if why_not is not None and not self._held:
                journal.cannot_move(why_not)
            elif snapshot is not None and not self._held and len(journal.entries) == len(entries):
                pieces, variables = snapshot
                folded, answered = checkpoint.fold(built.state, pieces, variables)
                size = sum(len(d) for _p, d in pieces) + sum(len(d) for _h, d in variables)
                journal.replace(folded, answered, size, time.monotonic() - started,
                                len(entries))
            # Failed or not, the next try waits until the journal has grown again.
            self._checkpoint_at = journal.next_checkpoint()

    def _snapshot(self, built: checkpoint.Built) -> tuple[
            list[tuple[int, bytes]], list[tuple[int, bytes]]] | None:
        """Live memory and the modules' variables from the current server (pieces
        of (pointer or module handle, bytes)); None when a move took over."""
        wanted = list(checkpoint.chunks(built.live))
        first = checkpoint.VARS_FIRST
        reads = [(checkpoint.read_request(self.session, p, n), n) for p, n in wanted]
        reads += [(checkpoint.vars_request(self.session, h, 0, first), first)
                  for h in built.code]
        replies = self._read_back(reads)
        if replies is None:
            return None
        memory = []
        for (ptr, _n), (result, data, _v) in zip(wanted, replies, strict=False):
            if result != 0 or data is None:
                raise checkpoint.CheckpointError(f"reading 0x{ptr:x} back failed")
            memory.append((ptr, data))
        variables: dict[int, bytes] = {}
        rest: list[tuple[int, int, int]] = []
        for handle, reply in zip(built.code, replies[len(wanted):], strict=True):
            got = checkpoint.vars_first(handle, *reply)
            if got is not None and got[1] > 0:
                variables[handle] = got[0]
                rest += [(handle, off, n) for off, n in checkpoint.vars_rest(got[1])]
        if rest:
            more = self._read_back([(checkpoint.vars_request(self.session, h, off, n), n)
                                    for h, off, n in rest])
            if more is None:
                return None
            for (handle, _off, _n), reply in zip(rest, more, strict=True):
                got = checkpoint.vars_first(handle, *reply)
                if got is None:
                    raise checkpoint.CheckpointError(f"module 0x{handle:x} went away")
                variables[handle] += got[0]
        return memory, list(variables.items())

    def _read_back(self, reads: list[tuple[bytearray, int]]
                   ) -> list[tuple[int, bytes | None, tuple[int, ...]]] | None:
        """The replies (result, bytes, values) of waiting reads sent to the current
        server in order; None when a move took over."""
        got: list[tuple[int, bytes | None, tuple[int, ...]]] = []
        capture: queue.Queue[bytes | bytearray | memoryview | None] = queue.Queue()
        sent = taken = 0
        with self._send_lock:
            self._capture = capture
        try:
            with self._route_lock:
                if self._held:
                    return None
                for request, _n in reads:
                    self.bytes_to_server += len(request)
                    try:
                        self._forward(memoryview(request))
                    except OSError as exc:
                        raise checkpoint.CheckpointError(
                            f"the server's link failed: {exc}") from exc
                    sent += 1
            for _request, n in reads:
                try:
                    reply = capture.get(timeout=SNAPSHOT_WAIT)
                except queue.Empty:
                    raise checkpoint.CheckpointError("a snapshot read went unanswered") from None
                if reply is None:
                    return None
                taken += 1
                self.bytes_from_server += len(reply)
                result, data, values, deferred = checkpoint.reply_parts(reply, n)
                if deferred and not self._owed_deferred:
                    self._owed_deferred = deferred
                got.append((result, data, values))
            return got
        finally:
            with self._send_lock:
                if self._capture is capture:  # (a move has not taken over)
                    self._capture = None
                    # Replies of an abandoned checkpoint still to come are not the program's.
                    self._swallow += sent - taken - capture.qsize()

    # ------------------------------------------------------------ moves

    def hold(self) -> None:
        """Stop forwarding (any thread): a move takes the session over."""
        with self._route_lock:
            self._held = True

    def release(self) -> None:
        """A refused migration: go on forwarding to the same server."""
        with self._route_lock:
            self._held = False
            try:
                for entry in self._backlog:
                    self._forward_locked(entry.envelope, entry.waits)
            except OSError as exc:
                self._lost_under_us(exc)
            else:
                self._backlog = []

    def in_flight(self) -> int:
        """Waiting calls sent to the current server and not answered yet."""
        return self.waits_out - self.replies_in

    def replay_onto(self, channel: Channel, forward: Callable[[memoryview], None],
                    blobs: Any) -> int:
        """Rebuild the session on a new server (a worker thread; the session is held).

        Every journaled batch goes to ``forward`` in order; the replies of those
        the program already had answers to are dropped, the rest reach it. Returns
        the number of batches replayed. Raises RuntimeError when the journal cannot.
        """
        with self._route_lock:
            if self.journal.broken is not None:
                raise RuntimeError(self.journal.broken)
            self.channel, self._forward, self.blobs = channel, forward, blobs
            with self._send_lock:
                self._drop = self.journal.answered
                self.waits_out = self.replies_in = 0
                # A checkpoint reading from the old server gives up; the new one
                # owes nothing of the old one's replies.
                if self._capture is not None:
                    self._capture.put(None)
                    self._capture = None
                self._swallow = 0
        done = 0
        while True:
            while channel.queued_bytes() > MAX_QUEUED and self.failed is None:
                time.sleep(_BACKPRESSURE_POLL)
            with self._route_lock:
                entries = self.journal.entries
                if self.journal.broken is not None:
                    raise RuntimeError(self.journal.broken)
                if done >= len(entries):
                    self._held = False  # caught up: the reader forwards again
                    self._backlog = []
                    return done
                entry = entries[done]
                self._forward_locked(entry.envelope, entry.waits)
            done += 1

    def note_move(self, kind: str, old: str, new: str, batches: int, why: str,
                  seconds: float) -> None:
        """Count a finished migration or failover (``seconds`` from the hold to the
        end of the replay), for the status view."""
        if kind == "failover":
            self.failovers += 1
        else:
            self.migrations += 1
        self.moves.append({"kind": kind, "from": old, "to": new, "batches": batches,
                           "why": why, "at": time.time(), "seconds": seconds})

    def _hash_loop(self, pipe: queue.Queue[memoryview | None]) -> None:
        """With the blob cache, hashing (in C, GIL released) runs here while the
        reader receives the next envelope: one chunk hashed while the next arrives."""
        try:
            while (buf := pipe.get()) is not None:
                if self.failed is None:
                    self._send_one(buf)
        except Exception as exc:  # the reader sees the failure and ends the session
            log.exception("session %016x failed", self.session)
            self.fail(f"internal error: {exc!r}")
            while pipe.get() is not None:  # let the reader finish its puts
                pass

    def _read_loop(self) -> None:
        reason = "the program ended the session"
        pipe: queue.Queue[memoryview | None] | None = None
        hasher = None
        if self.blobs is not None:
            pipe = queue.Queue(_PIPE_DEPTH)
            hasher = threading.Thread(target=self._hash_loop, args=(pipe,),
                                      name=f"cuda-hash-{self.session:016x}", daemon=True)
            hasher.start()
        try:
            while self.failed is None:
                buf = self._read_one()
                if buf is None:
                    break
                if pipe is not None:
                    pipe.put(buf)
                else:
                    self._send_one(buf)
        except envelope.EnvelopeError as exc:
            reason = f"the program sent a malformed envelope: {exc}"
            log.warning("session %016x (%s): %s", self.session, self.program, reason)
        except OSError as exc:
            reason = f"the program's connection failed: {exc}"
        except Exception as exc:  # keep the agent alive whatever a session does
            log.exception("session %016x failed", self.session)
            reason = f"internal error: {exc!r}"
        finally:
            if pipe is not None and hasher is not None:
                pipe.put(None)  # everything read is forwarded before the session ends
                hasher.join()
            # Closed under the lock: a reply being written on another thread
            # must never land on a reused descriptor.
            with self._send_lock:
                self._closed = True
                if self.failed is not None:
                    reason = self.failed
                with contextlib.suppress(OSError):
                    self.sock.close()
            self._on_end(self, reason)

    def count_resend(self, envelope_bytes: bytes) -> None:
        """A resend the server asked for went out: it counts as bytes sent."""
        self.bytes_to_server += len(envelope_bytes)

    def row(self) -> dict[str, Any]:
        cache = self.blobs.row() if self.blobs is not None else {
            "h2d_sent": None, "bytes_saved": 0, "refs": 0, "ref_misses": 0,
            "bytes_resent": 0, "hit_rate": None}
        return {**cache,
            "id": f"{self.session:016x}", "role": "client", "peer": self.channel.name,
            "program": self.program, "pid": self.pid, "backend": self.backend,
            "reason": self.reason, "started": self.started, "batches": self.batches,
            "calls": self.records, "oneway": self.records - self.replies,
            "waiting": self.replies, "bytes": self.bytes_to_server + self.bytes_from_server,
            "bytes_to_server": self.bytes_to_server,
            "bytes_from_server": self.bytes_from_server,
            **self.journal.row(), "in_flight": self.in_flight(),
            "migrations": self.migrations, "failovers": self.failovers,
            "moves": list(self.moves[-8:]),
        }
