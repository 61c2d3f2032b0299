"""Libraries load lazily on the host device: an image is translated when a kernel or
a global is first asked of it, never at registration (cudart registers every image of
a program at start, and most are never used)."""

from __future__ import annotations

import struct

import pytest

from .cuda_session import FUNC, MOD, mint, ptx_only_session, rec
from .test_ptx_fuzz import HEADER, STORE

INVALID_PTX = 218
BROKEN = (HEADER + ".visible .entry k() { frobnicate; }\0").encode()
GLOBAL = (HEADER + ".visible .global .align 4 .u32 counter = 7;\n"
          ".visible .entry touch() { ret; }\0").encode()


@pytest.fixture
def session():
    with ptx_only_session() as s:
        yield s


def test_a_library_never_used_is_never_translated(session, capfd):
    """Broken PTX in a registered library costs nothing until it is used."""
    session.library(BROKEN)
    assert session.sync() == (0, 0)
    assert "frobnicate" not in capfd.readouterr().err


def test_first_use_of_a_broken_library_is_invalid_ptx_once(session, capfd):
    lib = session.library(BROKEN)
    session.kernel(lib, "k")
    assert session.sync() == (0, INVALID_PTX)
    assert capfd.readouterr().err.count("unsupported PTX instruction 'frobnicate'") == 1
    session.kernel(lib, "k")  # the same answer again, without a second line
    assert session.sync() == (0, INVALID_PTX)
    assert "frobnicate" not in capfd.readouterr().err


def test_a_module_is_still_translated_at_its_load(session):
    """A module the program loads itself: bad PTX is the load's error, as before."""
    session.load(BROKEN)
    assert session.sync() == (0, INVALID_PTX)


def test_a_lazily_loaded_kernel_runs(session):
    lib = session.library(STORE.encode() + b"\0")
    kernel = session.kernel(lib, "store")
    fn = mint(FUNC)
    assert session.run(rec("cuKernelGetFunction", fn, kernel)) is None
    p = session.alloc(128)
    session.launch(fn, (1, 1, 1), (32, 1, 1), struct.pack("<QI", p, 0))
    assert session.sync() == (0, 0)
    assert session.dtoh(p, 8) == struct.pack("<II", 0, 1)


def test_a_global_of_a_lazy_library_loads_it(session):
    """cudaMemcpyToSymbol on cudart 12 and 13 reaches a library's variable through
    cuLibraryGetModule and cuModuleGetGlobal: that first use translates the image."""
    lib = session.library(GLOBAL)
    mod = mint(MOD)
    assert session.run(rec("cuLibraryGetModule", mod, lib)) is None
    result, ptr, size = session.global_(mod, "counter")
    assert (result, size) == (0, 4)
    assert session.dtoh(ptr, 4) == struct.pack("<I", 7)
