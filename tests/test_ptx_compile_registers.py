"""Where the compile tier keeps a register (docs/ptx-execution.md, "Registers in compiled
code"), against the interpreter: a register that only one block's compiled code writes and
reads lives in a private array of the compiled function, 32-bit where every write yields a
32-bit value (``XN<reg>``), else 64-bit (``XW<reg>``); a register with one value in every lane
that reads it is read once per lane loop (``UR<reg>``). The kernels here make each rule matter:
32-bit sums that wrap, a sign-extending byte load, a handler that reads a register the block's
lane loop wrote, and a register written on one path only, read after the paths join."""
from __future__ import annotations

import re
import struct

import numpy as np

from peer.bench.ptx import PTX

from .test_ptx_compile import both_tiers, kernel_c, load

# Each thread: a 32-bit sum that wraps (%r3), a byte loaded sign-extended (%r4) from an
# address only this block uses (%rd4), a bit field of %r3 taken by bfe (run by its
# interpreter handler, which reads the register file) and a 64-bit sign extension of %r4.
# Then %r8, written only by lanes below 8 (from uniform sources), read by every lane after
# the paths join: the lanes that skipped the write read what their own register holds.
NARROW = """
.version 7.0
.target sm_70
.address_size 64
.visible .entry narrow(.param .u64 out, .param .u64 inp, .param .u32 big)
{
    .reg .pred %p<3>; .reg .b32 %r<12>; .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [inp];
    ld.param.u32 %r1, [big];
    mov.u32 %r2, %tid.x;
    add.u32 %r3, %r1, %r2;
    mul.lo.u32 %r3, %r3, 3;
    cvt.u64.u32 %rd3, %r3;
    and.b64 %rd3, %rd3, 63;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.s8 %r4, [%rd4];
    bfe.u32 %r6, %r3, 4, 8;
    add.u32 %r7, %r4, %r6;
    mul.wide.u32 %rd5, %r2, 16;
    add.s64 %rd6, %rd1, %rd5;
    st.global.u32 [%rd6], %r7;
    st.global.u32 [%rd6+4], %r3;
    cvt.s64.s32 %rd7, %r4;
    st.global.u64 [%rd6+8], %rd7;
    setp.lt.u32 %p1, %r2, 8;
    @!%p1 bra JOIN;
    add.u32 %r8, %r1, 7;
JOIN:
    add.u32 %r9, %r8, %r2;
    mul.wide.u32 %rd8, %r2, 4;
    add.s64 %rd9, %rd1, %rd8;
    st.global.u32 [%rd9+1024], %r9;
    ret;
}
"""


def test_narrow_and_wide_private_registers_give_the_interpreters_results():
    source, why = kernel_c(load(NARROW), "narrow")
    assert source is not None, why
    # the wrapping sum's products live in 32-bit arrays, the byte address in a 64-bit one
    assert re.search(r"uint32_t XN\d+\[32\];", source)
    assert re.search(r"uint64_t XW\d+\[32\];", source)
    threads = 64
    out = np.zeros(threads * 16 // 4 + threads, np.uint32)
    inp = np.random.default_rng(26).integers(0, 256, 64, dtype=np.uint8)
    params = struct.pack("<QQI", out.ctypes.data, inp.ctypes.data, 0xFFFFFFF0)
    interp, compiled = both_tiers(NARROW, "narrow", (1, 1, 1), (threads, 1, 1), params,
                                  [out, inp])
    assert interp.rc == 0 and compiled == interp
    got = np.frombuffer(compiled.memory["0"], np.uint32)
    t = np.arange(threads, dtype=np.uint64)
    r3 = ((0xFFFFFFF0 + t) * 3) & 0xFFFFFFFF
    r4 = inp[(r3 & 63).astype(np.int64)].view(np.int8).astype(np.int64)
    rows = got[:threads * 4].reshape(threads, 4)
    assert (rows[:, 1] == r3).all()
    assert (rows[:, 0] == ((r4 + ((r3 >> 4) & 0xFF).astype(np.int64)) & 0xFFFFFFFF)).all()
    assert (rows[:, 2:].copy().view(np.int64)[:, 0] == r4).all()
    # the lanes that wrote %r8 read it; the others their own register, as interpreted
    assert (got[threads * 4:threads * 4 + 8] == (0xFFFFFFF0 + 7 + np.arange(8)) & 0xFFFFFFFF).all()


def test_the_histograms_loop_keeps_its_narrow_registers_private_and_reads_uniform_ones_once():
    source, why = kernel_c(load(PTX.read_text()), "bench_histogram")
    assert source is not None, why
    # the bin's address, computed by the loop's lane loop and read by the atom's own step
    # (where the warp's bytes are not one gather), at 32 bits
    atom_address = re.search(r"uint64_t a = XN(\d+)\[l\] \+ UINT64_C\(0x0\); if \(.*?\} "
                             r"uint8_t \*p_ = SHP \+ a; uint32_t old", source)
    assert atom_address is not None
    assert f"uint32_t XN{atom_address.group(1)}[32];" in source
    # the loop's stride and bound: one read each per lane loop
    assert re.search(r"const uint64_t UR\d+ = R\[\d+\]\[__builtin_ctz\(m \| 0x80000000u\)\];",
                     source)
