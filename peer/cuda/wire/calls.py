"""Wire call ids by name: the API table's wire rows, as the native core numbers them."""

from __future__ import annotations

from gleam.peer.nativelib import ffi, lib


def call_ids() -> dict[str, int]:
    """Wire call ids by name, from the generated table."""
    return {ffi.string(lib.gl_call_name(i)).decode(): i for i in range(lib.gl_call_count())}
