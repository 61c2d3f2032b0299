"""Python's handle on the native shelf (cffi_build/src/cache/shelf.h): the blob store's
RAM bytes, where the serving lanes resolve references without Python, and the
queue of what those lanes saw (hits, inline offers, and refusals of claimed blobs whose
bytes did not match) for the store to apply.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gleam.peer.nativelib import ffi, lib

# Offers the lanes may queue ahead of the store, in bytes: beyond this a burst
# loses cache copies (counted as dropped), never a lane's time.
QUEUE_CAP = 256 << 20


class ShelfBlob:
    """One native buffer (one reference on it): the bytes of one blob.

    ``view()`` is a memoryview that keeps the buffer alive by itself, so bytes
    handed to a caller stay valid after the store has let the blob go.
    """

    __slots__ = ("_buf", "ptr")

    def __init__(self, ptr: Any) -> None:
        """``ptr``: a ``gl_shelf_blob *`` whose reference passes to this object."""
        self.ptr = ptr
        # The data pointer owns the reference (its destructor lets go of the
        # blob), and ffi.buffer keeps the cdata it was made from alive.
        owner = ffi.gc(ffi.cast("uint8_t *", lib.gl_shelf_blob_data(ptr)),
                       lambda _data, p=ptr: lib.gl_shelf_blob_unref(p))
        self._buf = ffi.buffer(owner, lib.gl_shelf_blob_len(ptr))

    @classmethod
    def copy_of(cls, digest: bytes, data: bytes | bytearray | memoryview) -> ShelfBlob:
        src = ffi.from_buffer("uint8_t[]", data)
        ptr = lib.gl_shelf_blob_new(digest, src, len(src))
        if ptr == ffi.NULL:
            raise MemoryError("no memory for a cached blob")
        return cls(ptr)

    def __len__(self) -> int:
        return len(self._buf)

    @property
    def verified(self) -> bool:
        """Whether the bytes are known to hash to the digest (False: a client's
        claim not checked yet, docs/cache.md "Claims")."""
        return bool(lib.gl_shelf_blob_verified(self.ptr))

    def view(self) -> memoryview:
        return memoryview(self._buf)

    def write_file(self, path: str | os.PathLike[str]) -> None:
        """The bytes in a new file at ``path`` (mode 0600), on stable storage when
        this returns. Large blobs are written with O_DIRECT from their native
        buffer where the file system takes it: no copy into the page cache."""
        rc = lib.gl_shelf_blob_write_file(self.ptr, os.fsencode(path))
        if rc != 0:
            raise OSError(-rc, os.strerror(-rc), os.fspath(path))


_EVENT_KINDS = {lib.GL_SHELF_HIT: "hit", lib.GL_SHELF_OFFER: "offer",
                lib.GL_SHELF_REFUSED: "refused"}


@dataclass(frozen=True)
class ShelfEvent:
    """What a serving lane saw: a reference it resolved, or a payload it received."""

    kind: str  # "hit", "offer" or "refused" (a claimed blob that failed its check)
    digest: bytes
    length: int
    call_id: int
    blob: ShelfBlob | None  # an offer's bytes


class Shelf:
    """The native table and queue of one blob store (thread-safe, as the C is)."""

    def __init__(self, queue_cap: int = QUEUE_CAP) -> None:
        ptr = lib.gl_shelf_new(queue_cap)
        if ptr == ffi.NULL:
            raise MemoryError("no memory for the blob shelf")
        self.native = ffi.gc(ptr, lib.gl_shelf_free)
        self._event = ffi.new("gl_shelf_event *")

    def put(self, blob: ShelfBlob) -> None:
        """The lanes may resolve the blob's digest to it from now on."""
        if lib.gl_shelf_put(self.native, blob.ptr) != 0:
            raise MemoryError("no memory for the blob shelf's table")

    def drop(self, digest: bytes) -> None:
        lib.gl_shelf_drop(self.native, digest)

    def clear(self) -> None:
        lib.gl_shelf_clear(self.native)

    def wait(self, timeout: float) -> int:
        """1: events are queued; 0: none came within ``timeout``; -1: closed and empty."""
        return int(lib.gl_shelf_wait(self.native, timeout))

    def events(self) -> Iterator[ShelfEvent]:
        """Takes the queued events, oldest first (the caller serialises takers)."""
        ev = self._event
        while lib.gl_shelf_next_event(self.native, ev) == 1:
            blob = ShelfBlob(ev.blob) if ev.blob != ffi.NULL else None
            yield ShelfEvent(_EVENT_KINDS[ev.kind],
                             bytes(ffi.buffer(ev.digest, 32)), int(ev.len), int(ev.call_id),
                             blob)

    def check(self, blob: ShelfBlob) -> bool:
        """Before a claimed blob's bytes are used: whether they hash to its digest
        (hashed once). False: the blob left the table and a "refused" event is queued."""
        return bool(lib.gl_shelf_check(self.native, blob.ptr))

    def close(self) -> None:
        """Wakes the drainer for good."""
        lib.gl_shelf_close_queue(self.native)

    def counts(self) -> dict[str, int]:
        c = ffi.new("gl_shelf_counts *")
        lib.gl_shelf_counts_get(self.native, c)
        return {"shelf_entries": c.entries, "shelf_bytes": c.bytes, "shelf_queued": c.queued,
                "shelf_lane_hits": c.hits, "shelf_lane_offers": c.offers,
                "shelf_offers_dropped": c.dropped, "claims_verified": c.verified,
                "claims_verified_bytes": c.verified_bytes, "claims_refused": c.refused}


def spare_counts() -> dict[str, int]:
    """The process's spare buffers (cffi_build/src/mem/spares.h): shelf blobs and
    journal blocks alike draw on them."""
    c = ffi.new("gl_spare_counts *")
    lib.gl_spare_counts_get(c)
    return {"spare_buffers": c.count, "spare_bytes": c.bytes, "spare_buffers_reused": c.reused,
            "spare_lazy_buffers": c.lazy, "spare_lazy_bytes": c.lazy_bytes}
