"""The client agent's side of the blob cache: what each server holds, and one
session's references that the server has not yet confirmed.

Both live in native memory (``cffi_build/src/cache/blobref.c``), because the
session's native uplink (``pump.c``) does the per-batch work itself: it hashes
each cacheable payload, sends the ones the server is known to hold as
references, and keeps their bytes (a reference on the envelope's block, the one
the journal keeps) until a later reply proves the server ran the batch; the
native downlink confirms on each reply. Python keeps the control plane:
``ServerKnowledge`` (one per serving node, shared by every session to it)
starts from the summary the server sends at session open; a server that misses
a reference asks for it (``cuda_blob_want``) and ``SessionBlobs.resend`` sends
the bytes back in a BLOB envelope (the program never sees it). Sessions whose
envelopes go through Python (no data connection, a replay) call the same
native function through ``SessionBlobs.outgoing``, once per envelope.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from gleam.peer.cache.blobs import DIGEST_SIZE, CachePolicy
from gleam.peer.cuda.wire import envelope
from gleam.peer.cuda.wire.blocks import block_view, new_block
from gleam.peer.nativelib import ffi, lib

PENDING_CAP = 256 << 20  # bytes held for unconfirmed references, per session

# A fault knob for tests (docs/cache.md): the first N resends of this agent
# carry one flipped byte, which the server must refuse.
_corrupt_left = [int(os.environ.get("GLEAM_FAULT_CORRUPT_RESENDS", "0") or 0)]
_corrupt_lock = threading.Lock()


def _digest(digest: bytes) -> bytes:
    """A digest for the native tables: anything shorter is padded, never read past."""
    return bytes(digest[:DIGEST_SIZE]).ljust(DIGEST_SIZE, b"\0")


class ServerKnowledge:
    """Digest prefixes one server is believed to hold (native, thread-safe)."""

    def __init__(self) -> None:
        known = lib.gl_blobknow_new()
        if known == ffi.NULL:
            raise MemoryError("no memory for a server's blob knowledge")
        self._k = ffi.gc(known, lib.gl_blobknow_unref)

    @property
    def native(self) -> Any:
        """The ``gl_blobknow *`` the sessions' native uplinks look digests up in."""
        return self._k

    def reset(self, summary: bytes) -> None:
        if lib.gl_blobknow_reset(self._k, summary, len(summary)) != 0:
            raise MemoryError("no memory for a server's cache summary")

    def knows(self, digest: bytes) -> bool:
        return bool(lib.gl_blobknow_knows(self._k, _digest(digest)))

    def add(self, digest: bytes) -> None:
        lib.gl_blobknow_add(self._k, _digest(digest))

    def forget(self, digest: bytes) -> None:
        lib.gl_blobknow_forget(self._k, _digest(digest))

    def __len__(self) -> int:
        return int(lib.gl_blobknow_count(self._k))


class _Count:
    """A counter of a SessionBlobs, read from its native ``gl_blobref_counts``."""

    def __init__(self, field: str) -> None:
        self.field = field

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        return self if obj is None else obj._count(self.field)


class SessionBlobs:
    """One client session's references: substitution, confirmation, resends
    (the native ``gl_blobref``; its counters are read here)."""

    h2d_sent = _Count("h2d_sent")  # host-to-device payload bytes that went as bytes
    candidate_bytes = _Count("candidate_bytes")
    saved = _Count("saved")        # payload bytes replaced by references
    refs = _Count("refs")
    misses = _Count("misses")
    resent = _Count("resent")

    def __init__(self, session: int, knowledge: ServerKnowledge, policy: CachePolicy,
                 pending_cap: int = PENDING_CAP) -> None:
        self.session = session
        self.knowledge = knowledge  # (kept alive: the native state borrows it too)
        self.policy = policy
        self.pending_cap = pending_cap
        state = lib.gl_blobref_new(knowledge.native, policy.h2d_min, policy.image_min,
                                   pending_cap)
        if state == ffi.NULL:
            raise MemoryError("no memory for a session's blob references")
        self._r = ffi.gc(state, lib.gl_blobref_free)
        self._counts = ffi.new("gl_blobref_counts *")
        self._lock = threading.Lock()  # guards _counts
        self._out = ffi.new("gl_jblock **")
        self._off = ffi.new("uint64_t *")
        self._len = ffi.new("uint64_t *")

    @property
    def native(self) -> Any:
        """The ``gl_blobref *`` the session's native lanes work on."""
        return self._r

    def outgoing(self, buf: memoryview | bytes | bytearray, block: Any = None
                 ) -> memoryview:
        """The envelope to forward in place of ``buf`` (one thread at a time):
        ``block`` is the native block ``buf`` views (None: ``buf`` is copied into
        one, which the held references then keep)."""
        own = block is None
        if own:
            block = new_block(buf)
        try:
            if lib.gl_blobref_outgoing(self._r, block, self._out, ffi.NULL, ffi.NULL) != 0:
                raise MemoryError("no memory for a batch's blob references")
            if self._out[0] == block and not own:
                lib.gl_jblock_unref(self._out[0])
                return buf if isinstance(buf, memoryview) else memoryview(buf)
            return block_view(self._out[0])
        finally:
            if own:
                lib.gl_jblock_unref(block)

    def _count(self, field: str) -> int:
        with self._lock:
            lib.gl_blobref_get(self._r, self._counts)
            return int(getattr(self._counts, field))

    def awaiting_reply(self) -> bool:
        """Whether a waiting batch sent has no reply yet."""
        return self._count("waiting") > 0

    def replied(self) -> None:
        """A reply came back (through Python): the server ran every batch up to
        the oldest waiting one. The native downlink does the same on its own."""
        lib.gl_blobref_replied(self._r)

    def resend(self, digest: bytes) -> bytes | None:
        """A BLOB envelope with the bytes of a reference the server missed."""
        digest = _digest(digest)
        block = lib.gl_blobref_resend_of(self._r, digest, self._off, self._len)
        if block == ffi.NULL:
            return None
        start = int(self._off[0])
        data: bytes | memoryview = block_view(block)[start:start + int(self._len[0])]
        with _corrupt_lock:
            corrupt = _corrupt_left[0] > 0
            if corrupt:
                _corrupt_left[0] -= 1
        if corrupt and len(data):
            data = bytes([data[0] ^ 0xFF]) + bytes(data[1:])
        self.knowledge.add(digest)
        return blob_envelope(self.session, digest, data)

    def row(self) -> dict[str, Any]:
        with self._lock:
            lib.gl_blobref_get(self._r, self._counts)
            c = self._counts
            candidate, saved = int(c.candidate_bytes), int(c.saved)
            return {
                "h2d_sent": int(c.h2d_sent), "bytes_saved": saved, "refs": int(c.refs),
                "ref_misses": int(c.misses), "bytes_resent": int(c.resent),
                "hit_rate": saved / candidate if candidate else None,
            }


def blob_envelope(session: int, digest: bytes, data: bytes | memoryview) -> bytes:
    """BLOB: ``digest(32) | bytes``, data plane, client agent to server."""
    body_len = len(digest) + len(data)
    return envelope.pack_header(envelope.BLOB, session, body_len) + digest + bytes(data)

