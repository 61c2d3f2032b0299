"""A served session waiting for the blobs it missed, on its own data connection.

When the blob store misses a reference, the executor asks the client for the
bytes (``cuda_blob_want``, a control message on the link) and reads its data
connection itself until they come (docs/cache.md, "Misses are resent"). The
client's uplink never stops for a miss, so the batches it sent after the one
that waits arrive first: they are kept, in order, and the executor runs them
after that batch (they may miss blobs too, and wait in turn). BLOB envelopes
are verified into the store. Nothing but the executor thread reads the
connection, so no lock and no hook lie between a batch and its reply.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from typing import Any

from gleam.peer.cache.store import BlobMismatch, BlobStore
from gleam.peer.cuda.wire import envelope

log = logging.getLogger("gleam.cuda.server")

# How long the executor waits for the client to resend what it missed, and how
# many bad resends (bytes that do not match the digest) of one blob it asks again for.
RESEND_WAIT = 30.0
RESEND_TRIES = 3
# What the executor keeps of the batches that come while it waits: past this,
# the session fails rather than the server's memory growing with the client's pace.
KEEP_AT_MOST = 64 << 20
_DIGEST = 32
_MIB = 1 << 20


class ResendFailed(Exception):
    """The blobs a batch needs did not come; the message says why (the session ends)."""


class BlobResends:
    """The executor's side of resends for one session (executor thread only,
    but for the timer that ends a wait gone on too long)."""

    def __init__(self, session: int, data: Any, store: BlobStore,
                 ask: Callable[[tuple[bytes, ...]], None]) -> None:
        """``data``: the session's DataConnection; ``ask``: sends one cuda_blob_want."""
        self.session = session
        self.data = data
        self.store = store
        self._ask = ask
        self.refused = 0  # resent blobs that did not match their digest
        self._kept: collections.deque[memoryview] = collections.deque()
        self._kept_bytes = 0
        self._lock = threading.Lock()
        self._waiting = False
        self._overdue = False

    def fetch(self, digests: list[bytes], max_wanted: int) -> list[tuple[bytes, bytes]]:
        """(digest, bytes) of each of ``digests`` (distinct), asked of the client in
        messages of at most ``max_wanted``, read off the data connection; raises
        ResendFailed."""
        for i in range(0, len(digests), max_wanted):
            self._ask(tuple(digests[i:i + max_wanted]))
        tries = dict.fromkeys(digests, 0)
        got: dict[bytes, bytes] = {}
        timer = threading.Timer(RESEND_WAIT, self._end_overdue_wait)
        timer.daemon = True
        with self._lock:
            self._waiting, self._overdue = True, False
        timer.start()
        try:
            while len(got) < len(digests):
                self._take(self._next_frame(len(digests) - len(got)), tries, got)
        finally:
            with self._lock:
                self._waiting = False
            timer.cancel()
        return [(d, got[d]) for d in digests]

    def next_kept(self) -> memoryview | None:
        """The oldest batch body kept during a wait (None: none left)."""
        if not self._kept:
            return None
        body = self._kept.popleft()
        self._kept_bytes -= len(body)
        return body

    def _end_overdue_wait(self) -> None:
        # The timer's thread: waking the executor's read ends the connection, which
        # is right, since the session fails without the blobs.
        with self._lock:
            if not self._waiting:
                return
            self._overdue = True
        self.data.shutdown()

    def _next_frame(self, missing: int) -> bytes:
        failure: OSError | None = None
        try:
            frame = self.data.recv()
        except OSError as exc:
            failure = exc
        else:
            if frame:
                return frame
        if self._overdue:  # (the timer's shutdown reads as an end, or as a failure)
            raise ResendFailed(f"the client did not resend {missing} blob(s) the server "
                               f"missed within {RESEND_WAIT:g} s")
        if failure is not None:
            raise ResendFailed(f"the data connection failed while the server waited for "
                               f"{missing} resent blob(s): {failure}")
        raise ResendFailed(f"the client closed the data connection before it resent "
                           f"{missing} blob(s)")

    def _take(self, frame: bytes, tries: dict[bytes, int], got: dict[bytes, bytes]) -> None:
        """One frame read during a wait: a batch to keep, or a blob to verify."""
        if self._ours(frame, envelope.BATCH):
            body = memoryview(frame)[envelope.HEADER_SIZE:]
            self._kept.append(body)
            self._kept_bytes += len(body)
            if self._kept_bytes > KEEP_AT_MOST:
                raise ResendFailed(f"the client sent more than {KEEP_AT_MOST / _MIB:g} MiB of "
                                   f"batches while the server waited for a resent blob")
            return
        if not self._ours(frame, envelope.BLOB) or len(frame) < envelope.HEADER_SIZE + _DIGEST:
            raise ResendFailed("not a batch or blob of this session on its data connection")
        body = memoryview(frame)[envelope.HEADER_SIZE:]
        digest, data = bytes(body[:_DIGEST]), bytes(body[_DIGEST:])
        if digest not in tries or digest in got:
            return  # an answer to an earlier want: nothing waits for it now
        try:
            self.store.put_verified(digest, data)
        except BlobMismatch as exc:
            self.refused += 1
            tries[digest] += 1
            log.warning("session %016x: refused a resent blob: %s", self.session, exc)
            if tries[digest] >= RESEND_TRIES:
                raise ResendFailed(f"the client resent a blob {RESEND_TRIES} times with bytes "
                                   f"that do not match its digest") from None
            self._ask((digest,))
            return
        got[digest] = data

    def _ours(self, frame: bytes, kind: int) -> bool:
        return (envelope.is_session_envelope(frame, (kind,))
                and envelope.session_of(frame) == self.session)
