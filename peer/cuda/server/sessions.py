"""Serving forwarded sessions: one executor OS thread per session.

Every session is served from its data connection (``dataconn.py``: a peer's
over TCP, this agent's own program's over an in-process pair): its executor
thread waits until the connection is attached, then reads it itself, in C
(``cffi_build/src/lanes/serve.c``): receive, open, run, seal the reply. Python
never handles an envelope: the lane returns only to ask for blobs its shelf
misses, which the store answers from disk or has the client resend on the same
connection while the lane keeps the batches that come meanwhile
(``resends.py``). TCP's flow control (or the local pair's bound) is the
backpressure.

The executor thread alone touches its ``ExecSession`` (it is not thread-safe)
and sends each reply on the data connection; control messages (``cuda_close``,
``cuda_blob_want``) go through the session's channel. The Trio thread only
opens sessions (the backend call runs in a worker thread) and asks them to stop.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from gleam.peer.cache.blobs import CachePolicy
from gleam.peer.cache.store import BlobStore
from gleam.peer.cuda.server import resends
from gleam.peer.cuda.server.resends import BlobResends, ResendFailed
from gleam.peer.cuda.wire.channel import Channel
from gleam.peer.cuda.wire.messages import MAX_WANTED, CudaBlobWant, CudaClose, short_reason
from gleam.peer.nativelib import ffi, lib

log = logging.getLogger("gleam.cuda.server")


class ExecLike(Protocol):
    va_base: int
    va_size: int

    def stats(self) -> dict[str, Any]: ...
    def live_bytes(self) -> int: ...
    def close(self) -> None: ...
    @property
    def native(self) -> Any: ...


@dataclass
class ServedSession:
    session: int
    channel: Channel
    program: str
    client: str
    exec: ExecLike
    reply_capacity: int
    batch_error: type[BaseException]
    on_end: Any  # Callable[[ServedSession, str], None], called once from the executor thread
    started: float = field(default_factory=time.time)
    batches: int = 0
    records: int = 0
    replies: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    stats: dict[str, Any] = field(default_factory=dict)
    end_reason: str | None = None
    # The blob cache (docs/cache.md); None for a session this agent serves itself.
    store: BlobStore | None = None
    policy: CachePolicy = field(default_factory=CachePolicy)
    blob_refs: int = 0
    # The session's data connection (dataconn.DataConnection): the executor
    # starts serving once ``attach_data`` gives it.
    data: Any = None

    def __post_init__(self) -> None:
        self._serve: Any = None  # the native lane (gl_serve) while it runs
        self._data_ready = threading.Event()
        self._exec_lock = threading.Lock()  # stats read by other threads vs close
        self._resends: BlobResends | None = None  # with a store, once serving
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"cuda-exec-{self.session:016x}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    # ----------------------------------------------------------- other threads

    def attach_data(self, conn: Any) -> None:
        """The client opened the session's data connection (any thread)."""
        self.data = conn
        self._data_ready.set()
        if self._stopping.is_set():
            conn.shutdown()

    def stop(self, reason: str) -> None:
        """Ask the executor to finish; never blocks."""
        if self.end_reason is None:
            self.end_reason = reason
        self._stopping.set()
        self._data_ready.set()
        if self.data is not None:
            self.data.shutdown()  # wakes the executor blocked on the connection

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    # ----------------------------------------------------------- executor thread

    def _run(self) -> None:
        try:
            self._data_ready.wait()
            if self.data is not None and not self._stopping.is_set():
                self._serve_data()
        except ResendFailed as exc:
            if not self._stopping.is_set():  # (a stop wakes a wait too: its reason stands)
                reason = short_reason(str(exc))
                log.warning("session %016x from %s: %s", self.session, self.client, reason)
                self.end_reason = reason
                self.channel.submit_control(CudaClose(session=self.session, reason=reason))
        except self.batch_error as exc:
            reason = short_reason(f"malformed batch: {exc}")
            log.warning("session %016x from %s: %s", self.session, self.client, reason)
            self.end_reason = reason
            self.channel.submit_control(CudaClose(session=self.session, reason=reason))
        except Exception as exc:  # an executor bug ends this session, not the agent
            log.exception("session %016x failed", self.session)
            self.end_reason = short_reason(f"server error: {exc!r}")
            self.channel.submit_control(CudaClose(session=self.session, reason=self.end_reason))
        finally:
            self._stopping.set()
            try:
                self.stats = self.exec.stats()
            finally:
                with self._exec_lock:
                    self.exec.close()
                    self._absorb_native()
                if self.data is not None:
                    self.data.close()
                self.on_end(self, self.end_reason or "closed")

    # ----------------------------------------------------------- the native lane

    def _serve_data(self) -> None:
        """Serve the data connection until it ends (the executor thread): the lane
        runs every batch; Python answers its blob requests."""
        # With a store, the lane does the batch's cache work on the store's shelf.
        shelf = self.store.shelf.native if self.store is not None else ffi.NULL
        pol = ffi.new("gl_cache_policy *", (self.policy.h2d_min, self.policy.image_min))
        serve = lib.gl_serve_new(self.exec.native, self.data.stream, self.session, shelf, pol,
                                 self.reply_capacity, resends.lane_limits())
        if serve == ffi.NULL:
            raise MemoryError("no memory for the session's native lane")
        self._serve = ffi.gc(serve, lib.gl_serve_free)
        if self.store is not None:
            self._resends = BlobResends(self.session, self._serve, self.data, self.store,
                                        self._want, MAX_WANTED)
        try:
            while not self._stopping.is_set():
                rc = lib.gl_serve_next(self._serve)
                if rc == lib.GL_SERVE_MISS and self._resends is not None:
                    self._resends.answer_miss()
                elif rc == lib.GL_SERVE_RESENT and self._resends is not None:
                    self._resends.answer_resent()
                else:
                    self._lane_ended(rc)
                    return
        finally:
            if self._resends is not None:
                self._resends.close()

    def _lane_ended(self, rc: int) -> None:
        """The lane returned for good: the reason, or an exception for the session's end."""
        if rc == lib.GL_SERVE_E_BATCH:
            code = int(self._serve.error)
            raise self.batch_error(code, ffi.string(lib.gl_exec_strerror(code)).decode())
        if rc == lib.GL_SERVE_E_ENVELOPE:
            raise self.batch_error(0, "not a batch of this session on its data connection")
        if rc == lib.GL_SERVE_E_CLAIMS:
            raise self.batch_error(0, "a CLAIMED batch whose claims are malformed")
        if rc == lib.GL_SERVE_E_NOMEM:
            raise MemoryError("no memory for a batch the session's lane keeps")
        stream_failed = rc == lib.GL_SERVE_E_STREAM
        why = self.data.describe(int(self._serve.error)) if stream_failed else ""
        if self._resends is not None and (self._resends.waiting or rc == lib.GL_SERVE_E_KEPT):
            raise self._resends.failed(rc, why)
        if stream_failed and not self._stopping.is_set():
            self.end_reason = self.end_reason or f"the data connection failed: {why}"
        # (GL_SERVE_END: the client closed it; the session is over)

    def _absorb_native(self) -> None:
        """Fold the native lane's counters into the session's (exec lock held)."""
        serve, self._serve = self._serve, None
        if serve is not None:
            self.batches += serve.batches
            self.records += serve.records
            self.replies += serve.replies
            self.bytes_in += serve.bytes_in
            self.bytes_out += serve.bytes_out
            self.blob_refs += serve.refs

    @property
    def blob_misses(self) -> int:
        """Blobs asked of the client (neither the shelf nor the disk had them)."""
        return self._resends.misses if self._resends is not None else 0

    def _want(self, digests: tuple[bytes, ...]) -> None:
        self.channel.submit_control(CudaBlobWant(session=self.session, digests=digests))

    def counts(self) -> tuple[int, int, int, int, int]:
        """(batches, records, replies, bytes in, bytes out), the native lane's included."""
        with self._exec_lock:
            serve = self._serve
            extra = ((serve.batches, serve.records, serve.replies, serve.bytes_in,
                      serve.bytes_out) if serve is not None else (0, 0, 0, 0, 0))
            if serve is not None:  # the executor's counters, read while it runs
                self.stats = self.exec.stats()
        own = (self.batches, self.records, self.replies, self.bytes_in, self.bytes_out)
        batches, records, replies, bytes_in, bytes_out = (
            int(a) + int(b) for a, b in zip(own, extra, strict=True))
        return batches, records, replies, bytes_in, bytes_out

    def live_bytes(self) -> int:
        """Device memory the session holds now (0 once its executor closed)."""
        with self._exec_lock:  # closing frees the executor under this lock
            return self.exec.live_bytes()

    def row(self) -> dict[str, Any]:
        batches, records, replies, bytes_in, bytes_out = self.counts()
        with self._exec_lock:  # the lane's references, resolved natively, while it runs
            serve = self._serve
            blob_refs = self.blob_refs + (int(serve.refs) if serve is not None else 0)
        return {
            "id": f"{self.session:016x}", "role": "served", "peer": self.client,
            "program": self.program, "started": self.started, "batches": batches,
            "calls": records, "waiting": replies,
            "bytes": bytes_in + bytes_out, "bytes_in": bytes_in,
            "bytes_out": bytes_out, "stats": dict(self.stats),
            "data_connection": self.data is not None,
            "blob_refs": blob_refs,
            "blob_misses": self.blob_misses,
            "blob_refused": self._resends.refused if self._resends is not None else 0,
        }


class SessionServer:
    """The served sessions of one agent, by session id."""

    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[int, ServedSession] = {}
        self._reserved: set[int] = set()  # admitted, backend session being created
        self._lock = threading.Lock()

    def count(self) -> int:
        return len(self._sessions) + len(self._reserved)

    def admit(self, session: int) -> str | None:
        """Reserve a place for ``session``: None when it may open, else why not."""
        with self._lock:
            if session in self._sessions or session in self._reserved:
                return "session id already in use"
            if len(self._sessions) + len(self._reserved) >= self.max_sessions:
                return f"server is full ({self.max_sessions} sessions)"
            self._reserved.add(session)
        return None

    def release(self, session: int) -> None:
        """Give back a place ``admit`` reserved for a session that did not open."""
        with self._lock:
            self._reserved.discard(session)

    def add(self, served: ServedSession) -> None:
        with self._lock:
            self._reserved.discard(served.session)
            self._sessions[served.session] = served
        served.start()

    def get(self, session: int) -> ServedSession | None:
        return self._sessions.get(session)

    def forget(self, served: ServedSession) -> None:
        with self._lock:
            if self._sessions.get(served.session) is served:
                del self._sessions[served.session]

    def close(self, node_id: str, session: int, reason: str) -> bool:
        served = self._sessions.get(session)
        if served is None or served.channel.node_id != node_id:
            return False
        served.stop(reason)
        return True

    def close_all(self, node_id: str | None, reason: str) -> list[ServedSession]:
        """Stop every session of ``node_id`` (every session when None)."""
        with self._lock:
            victims = [s for s in self._sessions.values()
                       if node_id is None or s.channel.node_id == node_id]
        for served in victims:
            served.stop(reason)
        return victims

    def rows(self) -> list[dict[str, Any]]:
        with self._lock:
            sessions = list(self._sessions.values())
        return [s.row() for s in sessions]

    def live_bytes(self) -> int:
        """Device memory every served session holds: the device's used memory."""
        with self._lock:
            sessions = list(self._sessions.values())
        return sum(s.live_bytes() for s in sessions)

