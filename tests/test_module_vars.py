"""Module variables across a checkpoint (docs/consistency.md): glModuleVarsRead gives
the contents of a module's or library's `__device__` variables, glModuleVarsWrite puts
them back, in-process through the executor (tests/cuda_session.py)."""

from __future__ import annotations

import shutil
import struct

import pytest

from gleam.peer.cuda.client import checkpoint
from gleam.peer.cuda.client.journal import Entry, Journal
from gleam.peer.cuda.server import native
from gleam.peer.records import CallRecord

from .cuda_session import CTX, FUNC, LIB, MOD, Session, mint, rec
from .stand_in_driver import build_stand_in
from .test_consistency import _envelope
from .test_ptx_fuzz import HEADER

INVALID_VALUE, INVALID_HANDLE, NOT_SUPPORTED = 1, 400, 801
# counter starts at 7; bump() adds one to it; other is a second variable after it
# (the host device places each variable 16-aligned: the storage is 20 bytes).
COUNTER = (HEADER + ".visible .global .align 4 .u32 counter = 7;\n"
           ".visible .global .align 4 .u32 other = 9;\n"
           ".visible .entry bump()\n{\n    .reg .b32 %r<3>;\n"
           "    ld.global.u32 %r1, [counter];\n    add.s32 %r2, %r1, 1;\n"
           "    st.global.u32 [counter], %r2;\n    ret;\n}\n\0").encode()
PLAIN = (HEADER + ".visible .entry nothing() { ret; }\n\0").encode()


@pytest.fixture
def backend():
    be = native.HostBackend({}, memory_limit=1 << 26)  # nothing registered: PTX only
    yield be
    be.close()


@pytest.fixture
def session(backend):
    s = Session(backend, 1 << 24)
    s.context()
    yield s
    s.close()


def read(s: Session, handle: int, offset: int, n: int) -> tuple[int, int, bytes]:
    """(result, whole storage size, bytes)."""
    r = s.run(rec("glModuleVarsRead", handle, offset, n))
    assert r is not None
    return r[0], (r[2] + [0])[0], r[3]


def write(s: Session, handle: int, offset: int, data: bytes) -> None:
    assert s.run(rec("glModuleVarsWrite", handle, offset, len(data), payload=data)) is None


def bump(s: Session, mod: int, times: int = 1) -> None:
    fn = s.function(mod, "bump")
    for _ in range(times):
        s.launch(fn, (1, 1, 1), (1, 1, 1), b"")
    assert s.sync() == (0, 0)


def test_a_modules_variables_read_back_and_write_again(session):
    mod = session.load(COUNTER)
    result, size, data = read(session, mod, 0, 32)
    assert result == 0 and size == 20
    assert data == struct.pack("<I12xI", 7, 9) + bytes(12)  # past the storage: zeros
    bump(session, mod, 3)
    assert read(session, mod, 0, 20)[2] == struct.pack("<I12xI", 10, 9)
    assert read(session, mod, 16, 4)[2] == struct.pack("<I", 9)
    write(session, mod, 0, struct.pack("<I", 41))
    bump(session, mod)
    assert read(session, mod, 0, 4)[2] == struct.pack("<I", 42)


def test_contents_restored_on_another_session_go_on_there(backend, session):
    """The move: a fresh session loads the same image (its variables elsewhere, at
    their initial values); the kept contents written back make the kernels go on."""
    mod = session.load(COUNTER)
    bump(session, mod, 5)
    _r, size, kept = read(session, mod, 0, checkpoint.VARS_FIRST)
    other = Session(backend, 1 << 24)
    try:
        other.context()
        again = other.load(COUNTER)
        write(other, again, 0, kept[:size])
        bump(other, again)
        assert read(other, again, 0, 4)[2] == struct.pack("<I", 13)
    finally:
        other.close()


def test_a_library_not_yet_translated_has_nothing_to_keep(session):
    lib = session.library(COUNTER)
    assert read(session, lib, 0, 8) == (0, 0, bytes(8))
    kernel = session.kernel(lib, "bump")  # the first use translates it
    fn = mint(FUNC)
    assert session.run(rec("cuKernelGetFunction", fn, kernel)) is None
    session.launch(fn, (1, 1, 1), (1, 1, 1), b"")
    assert session.sync() == (0, 0)
    assert read(session, lib, 0, 20) == (0, 20, struct.pack("<I12xI", 8, 9))
    # The library's module (cuLibraryGetModule) is the same storage.
    mod = mint(MOD)
    assert session.run(rec("cuLibraryGetModule", mod, lib)) is None
    assert read(session, mod, 0, 4)[2] == struct.pack("<I", 8)


def test_a_module_without_variables_has_none(session):
    assert read(session, session.load(PLAIN), 0, 4) == (0, 0, bytes(4))


def test_bad_handles_offsets_and_sizes_are_errors(session):
    mod = session.load(COUNTER)
    assert read(session, mint(MOD), 0, 4)[0] == INVALID_HANDLE
    assert read(session, mint(CTX), 0, 4)[0] == INVALID_HANDLE
    assert read(session, 0, 0, 4)[0] == INVALID_HANDLE
    assert read(session, mod, 21, 4)[0] == INVALID_VALUE  # past the storage
    assert read(session, mod, 20, 4) == (0, 20, bytes(4))  # at its end: nothing
    assert read(session, mod, 1 << 63, 4)[0] == INVALID_VALUE
    assert read(session, mod, 0, native.REPLY_CAPACITY)[0] == INVALID_VALUE  # too big a reply
    for offset, data in ((18, b"abcd"), (21, b""), ((1 << 64) - 2, b"abcd")):
        write(session, mod, offset, data)
        assert session.sync() == (0, INVALID_VALUE)
    bad = rec("glModuleVarsWrite", mod, 0, 8, payload=b"abcd")  # payload shorter than n
    assert session.run(bad) is None
    assert session.sync() == (0, INVALID_VALUE)
    write(session, mint(LIB), 0, b"abcd")
    assert session.sync() == (0, INVALID_HANDLE)
    assert session.run(rec("cuModuleUnload", mod)) is None
    assert read(session, mod, 0, 4)[0] == INVALID_HANDLE
    assert read(session, session.load(COUNTER), 0, 4)[:2] == (0, 20)  # it serves on


def test_the_compaction_lists_the_loaded_modules_and_libraries():
    ids = native.call_ids()
    mod, lib, gone = mint(MOD), mint(LIB), mint(MOD)
    load = [CallRecord(ids["glModuleLoad"], (mod, 4), payload=b"abcd", oneway=True),
            CallRecord(ids["glLibraryLoadStaged"], (lib,), oneway=True),
            CallRecord(ids["glModuleLoad"], (gone, 4), payload=b"abcd", oneway=True)]
    unload = [CallRecord(ids["cuModuleUnload"], (gone,), oneway=True)]
    built = checkpoint.compact([Entry(_envelope(load), False), Entry(_envelope(unload), False)])
    assert built.code == [mod, lib] and built.live == {}
    # The variables go back after the state and the memory, one write per piece.
    folded, _answered = checkpoint.fold(built.state, [], [(mod, b"x" * 8)])
    assert len(folded) == len(built.state) + 2 and not folded[-1].waits


def test_a_session_that_cannot_move_stays_so_after_a_checkpoint():
    """cuModuleGetGlobal breaks the journal at once; a checkpoint folding the
    journal later (or a server that cannot keep variables) leaves it unmovable."""
    ids = native.call_ids()
    journal = Journal(limit=1 << 20)
    journal.add(_envelope([CallRecord(ids["cuModuleGetGlobal"], (mint(MOD),),
                                      payload=b"g\0")]), 16)
    why = journal.broken
    assert why is not None and "cuModuleGetGlobal" in why
    journal.replace([Entry(_envelope([CallRecord(ids["cuCtxSynchronize"], ())]), True)],
                    1, 0, 0.0, 1)
    assert journal.broken == why and journal.entries == [] and not journal.row()["movable"]
    fresh = Journal(limit=1 << 20)
    with pytest.raises(checkpoint.NotMovable) as refused:
        checkpoint.vars_first(mint(MOD), NOT_SUPPORTED, None, ())
    fresh.cannot_move(str(refused.value))
    assert fresh.row()["not_movable_because"] and "module variables" in fresh.broken


# The stand-in driver of test_cuda_executor, with modules: the cuda backend cannot keep
# variables yet, so a module that may have some is NOT_SUPPORTED (never silently wrong).
MODULES = r"""
CUresult cuModuleLoadData(void **m, const void *img) { *m = malloc(16); return 0; }
CUresult cuModuleUnload(void *m) { free(m); return 0; }
"""


def test_the_cuda_backend_refuses_to_keep_variables_it_cannot(tmp_path):
    if shutil.which("gcc") is None:
        pytest.fail("gcc is needed to build the stand-in driver")
    so, _ = build_stand_in(tmp_path, MODULES, "")
    be = native.CudaBackend(str(so))
    s = Session(be)
    try:
        s.context()
        with_vars, without = s.load(COUNTER), s.load(PLAIN)
        assert s.sync() == (0, 0)
        assert read(s, with_vars, 0, 4)[0] == NOT_SUPPORTED
        assert read(s, without, 0, 4) == (0, 0, bytes(4))
        write(s, with_vars, 0, b"abcd")
        assert s.sync() == (0, NOT_SUPPORTED)
        # Instructions and pointer parameters in the global space are no variables.
        uses = (HEADER + ".visible .entry k(.param .u64 .ptr .global .align 4 p)\n{\n"
                "    .reg .b64 %rd<2>;\n    ld.param.u64 %rd1, [p];\n"
                "    st.global.u32 [%rd1], 0;\n    ret;\n}\n\0").encode()
        assert read(s, s.load(uses), 0, 4)[:2] == (0, 0)
        extern = (HEADER + "  .extern .global .align 8 .b8 table[];\n\0").encode()
        assert read(s, s.load(extern), 0, 4)[0] == NOT_SUPPORTED
    finally:
        s.close()
        be.close()
