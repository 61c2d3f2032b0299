"""Python's handle on the native half of the blob cache (cffi_build/src/cache/blobcache.c).

Hashing and batch walking run in C; Python calls once per envelope, never per byte.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass

from gleam.peer.nativelib import ffi, lib

DIGEST_SIZE: int = lib.GL_REF_DIGEST_SIZE  # a BLAKE3 digest (records.h, digest.h)
MAX_SEEN = lib.GL_BLOB_MAX_SEEN  # cacheable payloads looked at per batch (blobcache.h)
KIB = 1024

def _digest_kinds() -> tuple[str, ...]:
    kinds: list[str] = []
    while (name := lib.gl_content_digest_kind_at(len(kinds))) != ffi.NULL:
        kinds.append(ffi.string(name).decode())
    return tuple(kinds)


# digest.c's implementations, widest first: the first this CPU runs is the default.
DIGEST_KINDS: tuple[str, ...] = _digest_kinds()


@dataclass(frozen=True)
class CachePolicy:
    """What is content-addressed: copies of at least ``h2d_min`` bytes, images of ``image_min``."""

    h2d_min: int = 64 * KIB
    image_min: int = 4 * KIB

    @classmethod
    def from_env(cls) -> CachePolicy:
        """``GLEAM_CACHE_MIN_BYTES`` sets the copy threshold (docs/cache.md)."""
        raw = os.environ.get("GLEAM_CACHE_MIN_BYTES", "")
        h2d = int(raw) if raw.strip().isdigit() and int(raw) > 0 else cls.h2d_min
        return cls(h2d_min=h2d, image_min=min(cls.image_min, h2d))


@functools.cache
def h2d_call_id() -> int:
    """The call id of a host-to-device copy: every other cacheable payload is an image."""
    from gleam.peer.cuda.wire.calls import call_ids

    return call_ids()["glMemcpyHtoD"]


@dataclass(frozen=True)
class Seen:
    """One cacheable payload of a batch (``offset`` into the batch, 0 for a reference)."""

    digest: bytes
    offset: int
    length: int
    call_id: int
    is_ref: bool


class BatchBlobs:
    """The cacheable payloads of one batch, and whether it ends with a waiting call."""

    def __init__(self, batch: bytes | bytearray | memoryview, policy: CachePolicy,
                 hash_inline: bool) -> None:
        self._src = ffi.from_buffer("uint8_t[]", batch)
        self._seen = ffi.new("gl_blob_seen[]", MAX_SEEN)
        n = ffi.new("uint32_t *")
        waits = ffi.new("int *")
        h2d = ffi.new("uint64_t *")
        pol = ffi.new("gl_cache_policy *", (policy.h2d_min, policy.image_min))
        self.rc = lib.gl_batch_blobs(self._src, len(self._src), pol, int(hash_inline),
                                     self._seen, MAX_SEEN, n, waits, h2d)
        self.count = n[0] if self.rc == 0 else 0
        self.waits = bool(waits[0]) if self.rc == 0 else False
        self.h2d_inline = h2d[0] if self.rc == 0 else 0
        self.items = [
            Seen(bytes(ffi.buffer(s.digest, DIGEST_SIZE)), s.offset, s.len, s.call_id,
                 bool(s.is_ref))
            for s in (self._seen[i] for i in range(self.count))
        ]

    def rewrite(self, substitute: list[int], headroom: int = 0) -> bytearray:
        """The batch with items ``substitute`` (indexes) sent as references,
        behind ``headroom`` bytes left for the caller (an envelope header)."""
        for i in range(self.count):
            self._seen[i].substitute = 0
        for i in substitute:
            self._seen[i].substitute = 1
        # Each substituted payload (padded to 8) gives way to a 40-byte reference.
        removed = sum(self._seen[i].len for i in substitute)
        out = bytearray(headroom + len(self._src) - removed + 48 * len(substitute))
        dst = ffi.from_buffer("uint8_t[]", out, require_writable=True)
        out_len = ffi.new("size_t *")
        rc = lib.gl_batch_rewrite_refs(self._src, len(self._src), self._seen, self.count,
                                       dst + headroom, len(out) - headroom, out_len)
        ffi.release(dst)
        if rc != 0:
            why = ffi.string(lib.gl_strerror(rc)).decode()
            raise ValueError(f"cannot rewrite the batch: {why}")
        del out[headroom + out_len[0]:]
        return out


def content_digest(data: bytes | bytearray | memoryview) -> bytes:
    """A blob's content address: BLAKE3 in the native core (digest.h), the GIL released."""
    out = ffi.new("uint8_t[32]")
    src = ffi.from_buffer("uint8_t[]", data)
    lib.gl_content_digest(src, len(src), out)
    return bytes(ffi.buffer(out, DIGEST_SIZE))


def digest_kind() -> str:
    """The content digest's implementation in use: one of ``DIGEST_KINDS``."""
    return str(ffi.string(lib.gl_content_digest_kind()).decode())


@contextlib.contextmanager
def digest_using(kind: str) -> Iterator[bool]:
    """Within: the content digest runs as ``kind`` if this CPU can (yields whether it does),
    process-wide; for tests and benchmarks. Every kind gives the same digests."""
    before = digest_kind()
    pinned = lib.gl_content_digest_use(kind.encode()) == 0
    try:
        yield pinned
    finally:
        lib.gl_content_digest_use(before.encode())


def hash_speed(size: int = 64 << 20, reps: int = 5) -> tuple[float, float]:
    """(content digest GB/s, memcpy GB/s) over one ``size``-byte buffer, best of ``reps``."""
    sha = ffi.new("double *")
    cpy = ffi.new("double *")
    lib.gl_hash_speed(size, reps, sha, cpy)
    return sha[0], cpy[0]
