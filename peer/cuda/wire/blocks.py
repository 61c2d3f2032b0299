"""Native blocks: reference-counted buffers an envelope is read into once.

The client's lanes read each envelope into a block; the journal keeps it and the
blob cache holds its payload by the same block, so neither copies it. Here so
that both sides' code and the cache reach them without importing each other.
"""

from __future__ import annotations

from typing import Any

from gleam.peer.nativelib import ffi, lib


def block_view(block: Any) -> memoryview:
    """The bytes of a native block, kept alive while the view lives (``block`` is
    a reference the caller owns, released when the view's owner is collected)."""
    size = int(block.len)
    # The buffer keeps the cdata it was made from alive, and that cdata owns the
    # reference: the block lives exactly as long as a view of it.
    owned = ffi.gc(ffi.cast("uint8_t *", block.data), lib.gl_jblock_unref_data)
    return memoryview(ffi.buffer(owned, size))


def new_block(data: bytes | bytearray | memoryview) -> Any:
    """A native block holding a copy of ``data`` (one reference, the caller's)."""
    block = lib.gl_jblock_new(len(data))
    if block == ffi.NULL:
        raise MemoryError("no memory for a journal entry")
    ffi.memmove(block.data, data, len(data))
    return block
