"""A served session's answers to its lane's blob requests.

When a batch references blobs the shelf does not hold, the native lane
(``cffi_build/src/lanes/serve.c``) keeps the batch, nothing of it run, and asks
(``GL_SERVE_MISS``, the digests in ``wants``). The store answers from its disk
tier; what it lacks is asked of the client (``cuda_blob_want``, a control
message on the link) and resent on the session's data connection (docs/cache.md,
"Misses are resent"). The lane reads on meanwhile: the batches that come are
kept there, in order, and each resent blob comes back as ``GL_SERVE_RESENT`` for
the store to verify. Every blob found is handed to the lane
(``gl_serve_provide``), which runs the batch once it has them all. Python sees
digests and blob bytes, never an envelope.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from gleam.peer.cache.store import BlobMismatch, BlobStore
from gleam.peer.cuda.wire import envelope
from gleam.peer.nativelib import ffi, lib

log = logging.getLogger("gleam.cuda.server")

# How long the executor waits for the client to resend what it missed, and how
# many bad resends (bytes that do not match the digest) of one blob it asks again for.
RESEND_WAIT = 30.0
RESEND_TRIES = 3
# What the lane keeps of the batches that come while it waits: past this,
# the session fails rather than the server's memory growing with the client's pace.
KEEP_AT_MOST = 64 << 20
_DIGEST = 32
_MIB = 1 << 20


def lane_limits() -> Any:
    """The lane's bounds (``gl_serve_limits``): what it keeps while a batch waits,
    and the longest blob one BLOB envelope (digest, then bytes) can resend."""
    return ffi.new("gl_serve_limits *", (KEEP_AT_MOST, envelope.MAX_BODY - _DIGEST))


class ResendFailed(Exception):
    """The blobs a batch needs did not come; the message says why (the session ends)."""


class BlobResends:
    """The executor's answers for one session (executor thread only, but for
    the timer that ends a wait gone on too long)."""

    def __init__(self, session: int, serve: Any, data: Any, store: BlobStore,
                 ask: Callable[[tuple[bytes, ...]], None], max_wanted: int) -> None:
        """``serve``: the session's ``gl_serve``; ``data``: its DataConnection
        (shut down when a wait is overdue); ``ask``: sends one cuda_blob_want of
        at most ``max_wanted`` digests."""
        self.session = session
        self.serve = serve
        self.data = data
        self.store = store
        self._ask = ask
        self._max_wanted = max_wanted
        self.misses = 0  # blobs asked of the client
        self.refused = 0  # resent blobs that did not match their digest
        self._tries: dict[bytes, int] = {}  # asked of the client, not yet provided
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._overdue = False

    @property
    def waiting(self) -> bool:
        """Whether the lane waits for blobs the client was asked to resend."""
        return bool(self._tries)

    def answer_miss(self) -> None:
        """GL_SERVE_MISS: the store's blobs go to the lane, the rest are asked for."""
        missing: list[bytes] = []
        for i in range(self.serve.nwants):
            want = self.serve.wants[i]
            if want.provided:
                continue
            digest = bytes(want.digest)
            blob = self.store.get(digest, want.len)
            if blob is None:
                missing.append(digest)
            else:
                self._provide(digest, blob)
        if not missing:
            return
        self.misses += len(missing)
        for i in range(0, len(missing), self._max_wanted):
            self._ask(tuple(missing[i:i + self._max_wanted]))
        if not self._tries:
            self._start_timer()
        self._tries.update(dict.fromkeys(missing, 0))

    def answer_resent(self) -> None:
        """GL_SERVE_RESENT: the store verifies the blob; a bad one is asked again."""
        digest = bytes(ffi.buffer(self.serve.resent_digest, _DIGEST))
        data = bytes(ffi.buffer(self.serve.resent, self.serve.resent_len))
        if digest not in self._tries:
            return  # (a want of the store's own answers: not asked of the client)
        try:
            self.store.put_verified(digest, data)
        except BlobMismatch as exc:
            self.refused += 1
            self._tries[digest] += 1
            log.warning("session %016x: refused a resent blob: %s", self.session, exc)
            if self._tries[digest] >= RESEND_TRIES:
                raise ResendFailed(f"the client resent a blob {RESEND_TRIES} times with bytes "
                                   f"that do not match its digest") from None
            self._ask((digest,))
            return
        self._provide(digest, data)
        del self._tries[digest]
        if not self._tries:
            self._stop_timer()

    def failed(self, rc: int, why: str) -> ResendFailed:
        """Why the wait ended, for the lane's end (``rc``) while it waited; ``why``
        describes a failed connection."""
        missing = len(self._tries)
        if self._overdue:  # (the timer's shutdown reads as an end, or as a failure)
            return ResendFailed(f"the client did not resend {missing} blob(s) the server "
                                f"missed within {RESEND_WAIT:g} s")
        if rc == lib.GL_SERVE_E_KEPT:
            return ResendFailed(f"the client sent more than {KEEP_AT_MOST / _MIB:g} MiB of "
                                f"batches while the server waited for a resent blob")
        if rc == lib.GL_SERVE_E_STREAM:
            return ResendFailed(f"the data connection failed while the server waited for "
                                f"{missing} resent blob(s): {why}")
        return ResendFailed(f"the client closed the data connection before it resent "
                            f"{missing} blob(s)")

    def close(self) -> None:
        self._stop_timer()

    def _provide(self, digest: bytes, data: bytes | memoryview) -> None:
        src = ffi.from_buffer("uint8_t[]", data)
        rc = lib.gl_serve_provide(self.serve, digest, src, len(src))
        if rc == lib.GL_SERVE_E_NOMEM:
            raise MemoryError("no memory for a blob the session's lane waits for")
        if rc != 0:
            raise ResendFailed(f"blob {digest.hex()[:16]} is not the length the batch "
                               f"referenced it with")

    def _start_timer(self) -> None:
        timer = threading.Timer(RESEND_WAIT, self._end_overdue_wait)
        timer.daemon = True
        with self._lock:
            self._timer, self._overdue = timer, False
        timer.start()

    def _stop_timer(self) -> None:
        with self._lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _end_overdue_wait(self) -> None:
        # The timer's thread: waking the executor's read ends the connection, which
        # is right, since the session fails without the blobs.
        with self._lock:
            if self._timer is None:
                return
            self._overdue = True
        self.data.shutdown()
