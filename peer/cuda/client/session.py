"""The local agent's side of a session: pumping envelopes for one interposer.

After the HELLO, the interposer's socket leaves Trio. The session's uplink
thread loops in C (``cffi_build/src/lanes/pump.c``): it reads each envelope into a
block of its own size, journals it, stamps the session id and seals it onto
the session's data connection (``dataconn.py``). Its downlink thread loops in
C too, writing the server's replies to the program under a lock shared with
FAIL. With the blob cache on, the uplink also does the session's cache work
(hashing, references, holding their bytes: ``cffi_build/src/cache/blobref.c``) and
the downlink confirms references on each reply. Neither lane hands Python an
envelope: the downlink drops a replay's replies the program already had and an
abandoned checkpoint's itself, and puts a checkpoint's snapshot reads' replies
on the pump's capture queue, from which the checkpoint here takes them.
Every session has a data connection: a peer server's over TCP, or an
in-process pair of queues for a session this agent serves itself. A blob the
server missed is resent on it too (``resend_blob``), whole between two envelopes.

Every batch also goes into the session's journal (the same buffer, no copy),
from which a move rebuilds the session on another server: the session is
*held* (the uplink journals batches natively and keeps them in its backlog,
sending none), the journal is replayed to the new
server by the pump (``gl_pump_replay``), and replies the program already had
are dropped (docs/consistency.md).
At a safe point the uplink asks for a checkpoint (``GL_PUMP_CHECKPOINT``),
keeping the envelope it read; its thread folds the journal into a checkpoint
here and calls the uplink again, which forwards that envelope natively.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from gleam.peer.cuda.client import checkpoint
from gleam.peer.cuda.client.journal import MIB, Journal, limit_from_env
from gleam.peer.cuda.client.lanes import PumpField, PumpLock, new_pump, uplink_error
from gleam.peer.cuda.wire import envelope
from gleam.peer.cuda.wire.blocks import block_view
from gleam.peer.cuda.wire.channel import Channel
from gleam.peer.cuda.wire.dataconn import DataConnection
from gleam.peer.nativelib import ffi, lib

log = logging.getLogger("gleam.cuda.client")

# A replay waits while more than this is queued towards the server on the
# link, so a long journal cannot make the agent buffer without bound.
MAX_QUEUED = 64 * 1024 * 1024
# The journal bytes one call of the native replay sends before it lets go of
# the route lock (the held uplink journals meanwhile).
REPLAY_SHARE = 4 * 1024 * 1024
_BACKPRESSURE_POLL = 0.002
# How long a checkpoint waits for each snapshot read before it gives up (the
# session goes on, with the journal it had).
SNAPSHOT_WAIT = 30.0


_REPLY_JOIN = 2.0
_NEVER = 0xFFFFFFFF


def _ignore_loss(client: ClientSession, reason: str) -> None:
    log.info("session %016x: %s", client.session, reason)


def _h2d_id() -> int:
    from gleam.peer.cuda.wire.calls import call_ids

    return call_ids()["glMemcpyHtoD"]


_H2D = _h2d_id()


class ClientSession:
    """One interposer's session, from HELLO until either side ends it."""

    # Kept in the native pump (the fast lanes count without Python).
    batches = PumpField("batches")
    records = PumpField("records")
    replies = PumpField("replies")
    bytes_to_server = PumpField("bytes_to_server")
    bytes_from_server = PumpField("bytes_from_server")
    waits_out = PumpField("waits_out")    # waiting batches forwarded to the current server
    replies_in = PumpField("replies_in")  # replies from the current server (dropped ones too)
    _held = PumpField("held", bool)
    _closed = PumpField("closed", bool)
    _checkpoint_at = PumpField("checkpoint_at")

    def __init__(
        self,
        session: int,
        sock: socket.socket,
        channel: Channel,
        on_end: Callable[[ClientSession, str], None],
        *,
        program: str,
        pid: int,
        backend: str,
        buffered: bytes = b"",
        reason: str = "",
        va: tuple[int, int] = (0, 0),
        journal: Journal | None = None,
        estimate: dict[str, Any] | None = None,
        ring: int | None = None,
    ) -> None:
        """``on_end`` runs once, on the reader thread, when the session is over.
        ``ring``: the hand-over ring passed to the program (handover.py; the
        caller closes its descriptor), mapped here for the uplink."""
        self.session = session
        self.sock = sock
        self.channel = channel
        self.program = program
        self.pid = pid
        self.backend = backend
        self.reason = reason
        # The cost model's estimate for its server at the open (ranked sessions only).
        self.estimate = estimate
        self.run = ""  # `gleam-peer run`'s id for its program's sessions (cuda/client/runs.py)
        self.started = time.time()
        self.failed: str | None = None
        # Context consistency (docs/consistency.md): the session's range, kept
        # on every server it moves to, and the journal that rebuilds it there.
        self.va_base, self.va_size = va
        self.journal = journal if journal is not None else Journal(limit_from_env(), backend)
        self._p = new_pump(sock.fileno(), session, self.journal.native, buffered, _H2D, ring)
        self._route_lock = PumpLock(self._p, lib.gl_pump_route_lock, lib.gl_pump_route_unlock)
        self._send_lock = PumpLock(self._p, lib.gl_pump_reply_lock, lib.gl_pump_reply_unlock)
        # The data connections this session used (the current one last), closed
        # when it ends, once no thread is inside them.
        self._data: list[DataConnection] = []
        self._downlinks: list[threading.Thread] = []
        self._on_data_lost: Callable[[ClientSession, str], None] | None = None
        self.migrations = 0
        self.failovers = 0
        self.moves: list[dict[str, Any]] = []
        self.moving = False  # a migration or failover is under way (Trio thread)
        # The program named its server (`gleam-peer run --peer`): re-evaluation
        # never moves it (a failover still may: the named server is gone).
        self.pinned = False
        # Held (``_held``): a move is under way; batches go into the journal only
        # (the uplink does it natively, keeping a backlog for a refused move), and
        # the move's replay sends them to the new server.
        # Checkpoints: the downlink puts the snapshot reads' replies on the pump's
        # capture queue, and swallows those of an abandoned checkpoint still to come.
        self._checkpoint_at = self.journal.next_checkpoint()
        # The blob cache's side of this session (peer/cache/client.py); None
        # when the server caches nothing or serves from this agent.
        self._blobs: Any = None
        self._on_end = on_end
        self._thread = threading.Thread(
            target=self._read_loop, name=f"cuda-client-{session:016x}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    @property
    def blobs(self) -> Any:
        """The blob cache's side of this session (peer/cache/client.py); None when
        the server caches nothing or serves from this agent."""
        return self._blobs

    @blobs.setter
    def blobs(self, blobs: Any) -> None:
        """(Before start, or with the route lock held: the uplink is out of the pump.)"""
        # Envelopes with a payload the cache may take get the native cache work.
        policy = blobs.policy if blobs is not None else None
        with self._send_lock:  # the downlink confirms references under it
            self._blobs = blobs
            self._p.blobref = blobs.native if blobs is not None else ffi.NULL
            # (A payload's length is a u32: a larger threshold means never.)
            self._p.cache_min = min(policy.image_min, _NEVER) if policy else 0
            self._p.h2d_min = min(policy.h2d_min, _NEVER) if policy else 0

    def use_data(self, conn: DataConnection,
                 on_lost: Callable[[ClientSession, str], None]) -> None:
        """Forward over ``conn`` from now on (before start, or with the session held):
        the fast lane sends on it, and a downlink thread writes its replies."""
        self._on_data_lost = on_lost
        self._data.append(conn)
        self._p.out = conn.stream
        thread = threading.Thread(target=self._downlink, args=(conn,),
                                  name=f"cuda-reply-{self.session:016x}", daemon=True)
        self._downlinks.append(thread)
        thread.start()

    @property
    def data(self) -> DataConnection | None:
        """The current data connection (None: between two servers, during a move)."""
        return self._data[-1] if self._data and self._p.out != ffi.NULL else None

    # ------------------------------------------------------------ any thread

    def fail(self, reason: str) -> None:
        """End the session: tell the interposer why and close its connection."""
        with self._send_lock:
            if self.failed is not None or self._closed:
                return
            self.failed = reason
            fail = envelope.fail_envelope(reason)
            lib.gl_pump_write_program(self._p, fail, len(fail))
            self._closed = True  # the downlink writes nothing after the FAIL
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    # ------------------------------------------------------------ reader thread

    def _lost_under_us(self, exc: OSError) -> None:
        """The server's link failed while this thread wrote to it (route lock held).
        The batch is journaled; the link's loss starts the failover that replays it,
        or ends the session with the reason."""
        log.info("session %016x: the server's link failed under a send: %s", self.session, exc)
        self._held = True

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
            live = sum(built.live.values())
            if live > journal.keep_at_most():
                # Its snapshot alone would pass the bound: reading it back cannot
                # help, and would repeat at every batch (docs/consistency.md).
                raise checkpoint.NotMovable(
                    f"its live device memory ({live / MIB:.2g} MiB) is more than the journal "
                    f"keeps ({journal.limit / MIB:g} MiB, GLEAM_JOURNAL_MB)")
            snapshot = self._snapshot(built)
        except checkpoint.NotMovable as exc:
            why_not, snapshot = str(exc), None
        except checkpoint.CheckpointError as exc:
            log.warning("session %016x: no checkpoint: %s", self.session, exc)
            snapshot = None
        with self._route_lock:
            if why_not is not None and not self._held:
                journal.cannot_move(why_not)
            elif snapshot is not None and not self._held and journal.count == len(entries):
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
        server in order; None when a move took over. The pump sends the reads and
        its downlink puts their replies on its capture queue (gl_pump_capture_*):
        the program's replies never come here."""
        got: list[tuple[int, bytes | None, tuple[int, ...]]] = []
        reply = ffi.new("gl_jblock **")
        lib.gl_pump_capture_begin(self._p)
        try:
            with self._route_lock:
                for request, _n in reads:
                    src = ffi.from_buffer("uint8_t[]", request)
                    rc = lib.gl_pump_capture_send(self._p, src, len(src))
                    if rc == lib.GL_PUMP_MOVED:
                        return None
                    if rc == lib.GL_PUMP_LOST_SEND:
                        conn = self.data
                        why = conn.describe(self._p.err) if conn is not None else "send failed"
                        raise checkpoint.CheckpointError(f"the server's link failed: {why}")
                    if rc != 0:
                        raise checkpoint.CheckpointError("no memory for a snapshot read")
            wait_ms = int(SNAPSHOT_WAIT * 1000)
            for _request, n in reads:
                rc = lib.gl_pump_capture_take(self._p, wait_ms, reply)
                if rc == lib.GL_PUMP_MOVED:
                    return None
                if rc == lib.GL_PUMP_E_TIMEOUT:
                    raise checkpoint.CheckpointError("a snapshot read went unanswered")
                if rc != lib.GL_PUMP_TAKEN:
                    raise checkpoint.CheckpointError("no memory for a snapshot read's reply")
                got.append(checkpoint.reply_parts(block_view(reply[0]), n))
            return got
        finally:
            # Replies of an abandoned checkpoint still to come are not the program's.
            lib.gl_pump_capture_end(self._p)

    # ------------------------------------------------------------ moves

    def hold(self) -> None:
        """Stop forwarding (any thread): a move takes the session over."""
        with self._route_lock:
            self._held = True

    def release(self) -> None:
        """A refused migration: go on forwarding to the same server."""
        with self._route_lock:
            # What came while held goes now, in order, from the pump's backlog
            # (with the cache work, as the uplink sends).
            rc = lib.gl_pump_release(self._p)
            if rc == lib.GL_PUMP_LOST_SEND:
                self._lost_under_us(OSError(self.data.describe(self._p.err)
                                            if self.data is not None else "send failed"))
            elif rc != 0:
                self._lost_under_us(OSError("no memory for the held batches' blob references"))

    def in_flight(self) -> int:
        """Waiting calls sent to the current server and not answered yet."""
        return self.waits_out - self.replies_in

    def replay_onto(self, channel: Channel, blobs: Any, data: DataConnection,
                    on_lost: Callable[[ClientSession, str], None] | None = None) -> int:
        """Rebuild the session on a new server (a worker thread; the session is held).

        The native pump sends every journaled batch on ``data`` in order, as the
        uplink sends a fresh one (``gl_pump_replay``); the downlink drops the
        replies of those the program already had answers to, the rest reach it.
        Returns the number of batches replayed. Raises RuntimeError when the
        journal cannot, OSError when ``data`` fails.
        """
        with self._route_lock:
            if self.journal.broken is not None:
                raise RuntimeError(self.journal.broken)
            self.channel, self.blobs = channel, blobs
            old = self.data
            if old is not None:
                old.shutdown()  # its downlink ends; the connection closes with the session
            self._p.out = ffi.NULL
            # The replayed calls' replies the program had are dropped; a checkpoint
            # reading from the old server gives up.
            lib.gl_pump_new_server(self._p)
            self.use_data(data, on_lost or self._on_data_lost or _ignore_loss)
        at = ffi.new("uint64_t *")
        while True:
            while channel.queued_bytes() > MAX_QUEUED and self.failed is None:
                time.sleep(_BACKPRESSURE_POLL)
            with self._route_lock:  # the pump sends a share of the journal under it
                rc = lib.gl_pump_replay(self._p, at, REPLAY_SHARE)
            if rc == lib.GL_PUMP_END:  # caught up: the uplink forwards again
                return int(at[0])
            if rc == lib.GL_PUMP_E_JOURNAL:
                raise RuntimeError(self.journal.broken or "the journal stopped")
            if rc == lib.GL_PUMP_LOST_SEND:
                raise OSError(data.describe(self._p.err))
            if rc != lib.GL_PUMP_REPLAYING:
                raise MemoryError("no memory for the replay's blob references")

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

    def _uplink(self) -> None:
        """Runs the native uplink until the program's stream ends, answering its
        requests: a checkpoint at a safe point, a send that failed."""
        while self.failed is None:
            rc = lib.gl_pump_uplink(self._p)
            if rc == lib.GL_PUMP_CHECKPOINT:  # the uplink keeps the envelope meanwhile
                self._checkpoint()
                continue
            if rc == lib.GL_PUMP_END:
                return
            if rc == lib.GL_PUMP_LOST_SEND:
                self._lost_under_us(OSError(self.data.describe(self._p.err)
                                            if self.data is not None else "send failed"))
                continue
            raise uplink_error(self._p, rc)

    def _downlink(self, conn: DataConnection) -> None:
        """The replies on ``conn`` (its own thread): the native loop, until it ends."""
        reason = "the server closed the data connection"
        try:
            rc = lib.gl_pump_downlink(self._p, conn.stream)
            if rc == lib.GL_PUMP_E_STREAM:
                reason = f"the data connection failed: {conn.describe(self._p.err)}"
            elif rc == lib.GL_PUMP_E_REPLY:
                reason = "the server sent a malformed reply on the data connection"
        except Exception as exc:  # keep the agent alive whatever a session does
            log.exception("session %016x: the downlink failed", self.session)
            reason = f"internal error: {exc!r}"
        with self._route_lock:
            current = self._p.out == conn.stream
        if current and self.failed is None and not self._closed and self._on_data_lost:
            self._on_data_lost(self, reason)

    def _read_loop(self) -> None:
        reason = "the program ended the session"
        try:
            self._uplink()
        except envelope.EnvelopeError as exc:
            reason = f"the program sent a malformed envelope: {exc}"
            log.warning("session %016x (%s): %s", self.session, self.program, reason)
        except OSError as exc:
            reason = f"the program's connection failed: {exc}"
        except Exception as exc:  # keep the agent alive whatever a session does
            log.exception("session %016x failed", self.session)
            reason = f"internal error: {exc!r}"
        finally:
            # Closed under the lock: a reply being written on another thread
            # must never land on a reused descriptor.
            with self._send_lock:
                self._closed = True
                if self.failed is not None:
                    reason = self.failed
                with contextlib.suppress(OSError):
                    self.sock.close()
            self._on_end(self, reason)
            self._close_data()

    def _close_data(self) -> None:
        """The data connections go once their downlinks are out of them."""
        for conn in self._data:
            conn.shutdown()
        for thread in self._downlinks:
            if thread is not threading.current_thread():
                thread.join(_REPLY_JOIN)
        for conn, thread in zip(self._data, self._downlinks, strict=True):
            if not thread.is_alive():
                conn.close()

    def resend_blob(self, blob: bytes) -> None:
        """Write a BLOB envelope the server asked for on the data connection (a worker
        thread: the write may wait for the server to read). The route lock makes it
        whole between two of the uplink's envelopes and keeps the route from
        changing under it; a session that is moving drops it, since the new server
        is sent the journal, not the old server's references."""
        with self._route_lock:
            conn = self.data
            if conn is None or self._held:
                return
            try:
                conn.send(blob)
            except OSError as exc:
                self._lost_under_us(exc)
                return
            self.bytes_to_server += len(blob)

    def row(self) -> dict[str, Any]:
        cache = dict(self.blobs.row()) if self.blobs is not None else {
            "h2d_sent": None, "bytes_saved": 0, "refs": 0, "ref_misses": 0,
            "bytes_resent": 0, "hit_rate": None}
        if self.blobs is not None:  # the fast lane's copies, too small to cache
            cache["h2d_sent"] = int(cache["h2d_sent"] or 0) + int(self._p.h2d_inline)
        return {**cache,
            "id": f"{self.session:016x}", "role": "client", "peer": self.channel.name,
            "program": self.program, "pid": self.pid, "backend": self.backend,
            "reason": self.reason, "estimate": self.estimate, "run": self.run,
            "started": self.started, "batches": self.batches,
            "calls": self.records, "oneway": self.records - self.replies,
            "waiting": self.replies, "bytes": self.bytes_to_server + self.bytes_from_server,
            "bytes_to_server": self.bytes_to_server,
            "bytes_from_server": self.bytes_from_server,
            "data_connection": self.data is not None,
            **self.journal.row(), "in_flight": self.in_flight(),
            "migrations": self.migrations, "failovers": self.failovers,
            "moves": list(self.moves[-8:]),
        }
