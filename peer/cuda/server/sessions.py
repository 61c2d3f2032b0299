"""Serving forwarded sessions: one executor OS thread per session.

Every session is served from its data connection (``dataconn.py``: a peer's
over TCP, this agent's own program's over an in-process pair): its executor
thread waits until the connection is attached, then reads it itself, in C
(``cffi_build/src/lanes/serve.c``): receive, open, run, seal the reply, with
Python only for a batch the blob store must see. A blob the store misses is
asked of the client and read off the same connection, the batches that come
before it kept and run after the one that waits (``resends.py``). TCP's flow
control (or the local pair's bound) is the backpressure.

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

from gleam.peer.cache.blobs import BatchBlobs, CachePolicy, h2d_call_id
from gleam.peer.cache.store import BlobStore
from gleam.peer.cuda.server.resends import BlobResends, ResendFailed
from gleam.peer.cuda.wire import envelope
from gleam.peer.cuda.wire.channel import Channel
from gleam.peer.cuda.wire.messages import MAX_WANTED, CudaBlobWant, CudaClose, short_reason
from gleam.peer.nativelib import ffi, lib

log = logging.getLogger("gleam.cuda.server")


class ExecLike(Protocol):
    va_base: int
    va_size: int

    def run(self, batch: memoryview, reply: memoryview,
            blobs: list[tuple[bytes, bytes | memoryview]] | None = None) -> int: ...
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
    blob_misses: int = 0
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
        reply = bytearray(envelope.HEADER_SIZE + self.reply_capacity)
        try:
            self._data_ready.wait()
            if self.data is not None and not self._stopping.is_set():
                self._serve_data(reply)
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

    def _serve_data(self, reply: bytearray) -> None:
        """Serve the data connection until it ends (the executor thread)."""
        # With a store, the lane does the batch's cache work on the store's shelf.
        shelf = self.store.shelf.native if self.store is not None else ffi.NULL
        pol = ffi.new("gl_cache_policy *", (self.policy.h2d_min, self.policy.image_min))
        serve = lib.gl_serve_new(self.exec.native, self.data.stream, self.session, shelf, pol,
                                 self.reply_capacity)
        if serve == ffi.NULL:
            raise MemoryError("no memory for the session's native lane")
        self._serve = ffi.gc(serve, lib.gl_serve_free)
        if self.store is not None:
            self._resends = BlobResends(self.session, self.data, self.store, self._want)
        out, size = ffi.new("uint8_t **"), ffi.new("uint64_t *")
        while not self._stopping.is_set():
            rc = lib.gl_serve_next(self._serve, out, size)
            if rc == lib.GL_SERVE_SLOW:  # a reference the shelf misses: disk, or the client
                # (A copy: waiting for a resend reads the stream, whose buffer it was.)
                body = memoryview(bytes(ffi.buffer(out[0] + envelope.HEADER_SIZE,
                                                   size[0] - envelope.HEADER_SIZE)))
                self._execute(body, reply)
                self._run_kept(reply)
                continue
            if rc == lib.GL_SERVE_E_BATCH:
                code = int(self._serve.error)
                raise self.batch_error(code, ffi.string(lib.gl_exec_strerror(code)).decode())
            if rc == lib.GL_SERVE_E_ENVELOPE:
                raise self.batch_error(0, "not a batch of this session on its data connection")
            if rc == lib.GL_SERVE_E_STREAM and not self._stopping.is_set():
                why = self.data.describe(int(self._serve.error))
                self.end_reason = self.end_reason or f"the data connection failed: {why}"
            break  # the client closed it, or it failed: the session is over

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

    def _run_kept(self, reply: bytearray) -> None:
        """The batches that came while the executor waited for a resend, in order
        (each may wait for resends of its own, keeping more behind it)."""
        while self._resends is not None and not self._stopping.is_set():
            body = self._resends.next_kept()
            if body is None:
                return
            self._execute(body, reply)

    def _execute(self, body: memoryview, reply: bytearray) -> None:
        """Runs one batch in Python (one the lane handed back for a blob its shelf
        misses, or one kept while a resend was awaited) and seals its reply onto
        the data connection."""
        self.batches += 1
        self.bytes_in += len(body) + envelope.HEADER_SIZE
        self.records += envelope.record_count(body)
        blobs = self._blobs(body) if self.store is not None else None
        with memoryview(reply) as whole:
            size = self.exec.run(body, whole[envelope.HEADER_SIZE :], blobs)
        if size < 0:
            return
        envelope.write_header(reply, envelope.REPLY, self.session, size)
        total = envelope.HEADER_SIZE + size
        self.replies += 1
        self.bytes_out += total
        # Sealed into the stream's own buffer: the reply buffer is free again at once.
        self.data.send(memoryview(reply)[:total])

    def _blobs(self, body: memoryview) -> list[tuple[bytes, bytes | memoryview]] | None:
        """Stores the batch's cacheable inline payloads and resolves its references.

        Inline payloads are hashed here (so what enters the store matches its
        digest by construction); a reference the store misses is asked of the
        client, and the executor waits for its verified bytes.
        """
        assert self.store is not None
        scan = BatchBlobs(body, self.policy, hash_inline=True)
        if not scan.items:
            return None
        self._offer(scan, body)
        found: list[tuple[bytes, bytes | memoryview]] = []
        missing: list[bytes] = []
        for seen in scan.items:
            if not seen.is_ref:
                continue
            self.blob_refs += 1
            blob = self.store.get(seen.digest, seen.length)
            if blob is None:
                missing.append(seen.digest)
            else:
                found.append((seen.digest, blob))
        if missing:
            found += self._fetch(list(dict.fromkeys(missing)))
        return found

    def _offer(self, scan: BatchBlobs, body: memoryview) -> None:
        """The batch's cacheable inline payloads go to the store (hashed here, so
        what enters it matches its digest by construction)."""
        assert self.store is not None
        for seen in scan.items:
            if not seen.is_ref:
                data = body[seen.offset:seen.offset + seen.length]
                self.store.offer(seen.digest, data, image=seen.call_id != h2d_call_id())

    def _fetch(self, digests: list[bytes]) -> list[tuple[bytes, bytes]]:
        """Asks the client for blobs the store misses and waits for them (executor thread)."""
        assert self._resends is not None  # (a session with a store has one once serving)
        self.blob_misses += len(digests)
        return self._resends.fetch(digests, MAX_WANTED)

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
            "blob_refs": blob_refs, "blob_misses": self.blob_misses,
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

