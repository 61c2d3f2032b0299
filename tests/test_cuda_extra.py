"""The cuda backend's extra driver entry points stand in one table (cffi_build/cuda_extra.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BUILD = Path(__file__).resolve().parents[1] / "cffi_build"
sys.path.insert(0, str(BUILD))
import gen_cuda_extra  # noqa: E402
from cuda_extra import EXTRAS  # noqa: E402


def test_the_struct_python_sees_has_one_field_per_row_in_order():
    from gleam.peer._native import ffi
    from gleam.peer.cuda.server.native import _extra_symbols

    assert _extra_symbols() == [e.symbol for e in EXTRAS]
    assert [name for name, _ in ffi.typeof("gl_cuda_extra").fields] == [e.symbol for e in EXTRAS]


def test_the_required_list_is_the_rows_marked_required():
    text = gen_cuda_extra.header_text(EXTRAS)
    macro = text[text.index("#define GL_CUDA_EXTRA_REQUIRED"):].split("\n\n")[0]
    named = [part.split(")")[0] for part in macro.split("X(")[1:]]
    assert named == [e.symbol for e in EXTRAS if e.required]
    assert any(not e.required for e in EXTRAS)


def backend_with(missing: set[str]):
    from gleam.peer._native import ffi, lib

    fns = ffi.new("void *[]", lib.gl_call_count())
    extra = ffi.new("gl_cuda_extra *")
    for e in EXTRAS:
        if e.symbol not in missing:
            # Never called: gl_backend_cuda_new only checks for presence.
            setattr(extra, e.symbol, ffi.cast("void *", 0x1000))
    return lib.gl_backend_cuda_new(fns, extra, 0)


@pytest.mark.parametrize("symbol", [e.symbol for e in EXTRAS if e.required])
def test_the_backend_refuses_to_start_without_a_required_entry(symbol):
    from gleam.peer._native import ffi

    assert backend_with({symbol}) == ffi.NULL


def test_the_backend_starts_without_the_optional_entries():
    from gleam.peer._native import ffi, lib

    be = backend_with({e.symbol for e in EXTRAS if not e.required})
    assert be != ffi.NULL
    lib.gl_backend_free(be)
