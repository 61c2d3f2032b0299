"""The host device's compile tier against its reference, the interpreter.

Every kernel of the PTX corpus runs under both tiers on host buffers (``gl_ptx_run_tier``)
and everything is compared exactly: every buffer's bytes (inputs too), module variables,
the result, the fault message and the thread-instruction count. Mutated corpus kernels and
random kernels from a generator (hypothesis) are compared the same way, as are faults,
traps and the time limit. The tier's own rules are checked here too: which kernels stay
interpreted, that generated C holds no text of the PTX, the cache (hits, a corrupted entry,
a directory others may write), no compiler, and a compile that lands while a launch runs.
"""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gleam.peer.nativelib import ffi, lib

from .ptx_corpus.cases import CASES
from .ptx_corpus.spec import Buf, Case, inputs, pack_params
from .test_ptx_fuzz import STORE

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "ptx_corpus"
AUTO, INTERP, COMPILED = 0, 1, 2
RAN_INTERP, RAN_COMPILED = 1, 2
ILLEGAL_ADDRESS, LAUNCH_TIMEOUT, MISALIGNED, LAUNCH_FAILED = 700, 702, 716, 719


def load(text: str) -> Any:
    err = ffi.new("char[512]")
    m = lib.gl_ptx_load(text.encode(), len(text), err, 512)
    assert m != ffi.NULL, ffi.string(err).decode()
    return ffi.gc(m, lib.gl_ptx_unload)


def kernel_c(module: Any, entry: str) -> tuple[str | None, str]:
    """The compile tier's C for a kernel, or None and why it stays interpreted."""
    size, why = ffi.new("size_t *"), ffi.new("char[256]")
    if lib.gl_ptx_kernel_c(module, entry.encode(), ffi.NULL, 0, size, why, 256) != 0:
        return None, ffi.string(why).decode()
    out = ffi.new("char[]", size[0] + 1)
    assert lib.gl_ptx_kernel_c(module, entry.encode(), out, size[0] + 1, size, why, 256) == 0
    return ffi.string(out).decode(), ""


def stats() -> dict[str, int]:
    s = ffi.new("gl_ptx_tier_stats *")
    lib.gl_ptx_tier_get_stats(s)
    return {f: int(getattr(s, f)) for f in
            ("compiled", "cache_hits", "failed", "blocks_compiled", "blocks_interpreted")}


@dataclasses.dataclass
class Outcome:
    rc: int
    err: str
    insns: int | None  # None for a launch that failed: counts of a fault are not compared
    memory: dict[str, bytes]
    ran: int = dataclasses.field(default=0, compare=False)


def launch(module: Any, entry: str, grid: tuple[int, int, int], block: tuple[int, int, int],
           params: bytes, buffers: list[np.ndarray], tier: int, shared: int = 0,
           threads: int = 1) -> tuple[int, int, int, str]:
    """One launch on host buffers: (result, tiers that ran, thread-instructions, error)."""
    spans = [v for b in buffers if b.nbytes for v in (b.ctypes.data, b.nbytes)]
    ranges = ffi.new("uint64_t[]", spans or [0])
    ran, insns, err = ffi.new("int *"), ffi.new("uint64_t *"), ffi.new("char[1024]")
    rc = lib.gl_ptx_run_tier(module, entry.encode(), ffi.new("unsigned[3]", list(grid)),
                             ffi.new("unsigned[3]", list(block)), shared, params, len(params),
                             ranges, len(spans) // 2, threads, tier, ran, insns, err, 1024)
    return rc, ran[0], insns[0], ffi.string(err).decode()


def run_case(case: Case, tier: int, text: str | None = None,
             grid: tuple[int, int, int] | None = None) -> Outcome:
    """A corpus case from fresh inputs on one tier, in a module of its own."""
    module = load(text if text is not None else (CORPUS / f"{case.source}.ptx").read_text())
    values = inputs(case)
    buffers = {a.name: values[a.name].copy() for a in case.args if isinstance(a, Buf)}
    for sym in case.symbols:
        addr, size = ffi.new("uint64_t *"), ffi.new("uint64_t *")
        assert lib.gl_ptx_global(module, sym.name.encode(), addr, size) == 0
        data = values[sym.name].tobytes()
        ffi.memmove(ffi.cast("void *", addr[0]), data, min(len(data), size[0]))
    pointers = {name: b.ctypes.data for name, b in buffers.items()}
    params = pack_params(case, pointers, values)
    rc, ran, insns, err = launch(module, case.kernel, grid or case.grid, case.block, params,
                                 list(buffers.values()), tier, case.shared)
    memory = {name: b.tobytes() for name, b in buffers.items()}
    for sym in case.symbols:
        addr, size = ffi.new("uint64_t *"), ffi.new("uint64_t *")
        lib.gl_ptx_global(module, sym.name.encode(), addr, size)
        memory[sym.name] = bytes(ffi.buffer(ffi.cast("char *", addr[0]), size[0]))
    return Outcome(rc, err, insns if rc == 0 else None, memory, ran)


# ----------------------------------------------------------- the corpus, both tiers

@pytest.mark.parametrize("case", CASES, ids=lambda c: c.kernel)
def test_corpus_kernel_is_identical_on_both_tiers(case):
    module = load((CORPUS / f"{case.source}.ptx").read_text())
    source, why = kernel_c(module, case.kernel)
    interp, compiled = run_case(case, INTERP), run_case(case, COMPILED)
    assert interp.ran == RAN_INTERP
    if source is None:
        # what stays interpreted, and why: only out-of-line (recursive, indirect) calls
        assert "out-of-line calls" in why, why
        assert compiled.ran == RAN_INTERP
    else:
        assert compiled.ran == RAN_COMPILED
    assert compiled == interp


def test_most_of_the_corpus_compiles():
    refused = [c.kernel for c in CASES
               if kernel_c(load((CORPUS / f"{c.source}.ptx").read_text()), c.kernel)[0] is None]
    assert len(refused) <= 4, refused


# ------------------------------------------------------------------ faults and limits

KERNELS = STORE + """
.visible .entry misaligned(.param .u64 p)
{
    .reg .b64 %rd<3>; .reg .b32 %r<3>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, %tid.x;
    cvt.u64.u32 %rd2, %r1;
    add.s64 %rd2, %rd2, %rd1;
    st.global.u32 [%rd2], %r1;
    ret;
}
.visible .entry lane_trap(.param .u64 p)
{
    .reg .pred %p<2>; .reg .b32 %r<2>;
    mov.u32 %r1, %tid.x;
    setp.eq.u32 %p1, %r1, 7;
    @%p1 trap;
    ret;
}
"""


def both(text: str, entry: str, params: bytes, make: Any, block: int = 32,
         grid: int = 1) -> tuple[Outcome, Outcome]:
    outcomes, buf = [], make()
    first = buf.copy()
    for tier in (INTERP, COMPILED):  # one buffer, so that fault addresses compare too
        module = load(text)
        buf[...] = first
        rc, ran, insns, err = launch(module, entry, (grid, 1, 1), (block, 1, 1),
                                     params(buf), [buf], tier)
        assert ran == (RAN_INTERP if tier == INTERP else RAN_COMPILED)
        outcomes.append(Outcome(rc, err, insns if rc == 0 else None, {"buf": buf.tobytes()}))
    return outcomes[0], outcomes[1]


def test_out_of_bounds_store_faults_at_the_same_lane_with_the_same_message():
    interp, compiled = both(STORE, "store", lambda b: struct.pack("<QI", b.ctypes.data, 5),
                            lambda: np.zeros(32, np.uint32))
    assert interp.rc == ILLEGAL_ADDRESS and "illegal address (PTX line 14" in interp.err
    assert compiled == interp  # lanes 0..26 stored, the message names lane 27's address


def test_misaligned_store_is_the_same_fault():
    interp, compiled = both(KERNELS, "misaligned", lambda b: struct.pack("<Q", b.ctypes.data),
                            lambda: np.zeros(64, np.uint32))
    assert interp.rc == MISALIGNED
    assert compiled == interp


def test_trap_in_one_lane_is_the_same_failure():
    interp, compiled = both(KERNELS, "lane_trap", lambda b: struct.pack("<Q", b.ctypes.data),
                            lambda: np.zeros(1, np.uint32))
    assert interp.rc == LAUNCH_FAILED and "trap" in interp.err
    assert compiled == interp


def test_compiled_endless_kernel_reaches_the_time_limit(monkeypatch):
    monkeypatch.setenv("GLEAM_PTX_TIMEOUT_S", "0.3")
    rc, ran, _, err = launch(load(STORE), "spin", (1, 1, 1), (32, 1, 1), b"", [], COMPILED)
    assert (rc, ran) == (LAUNCH_TIMEOUT, RAN_COMPILED) and "time limit" in err
