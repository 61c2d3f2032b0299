"""The compile tier's memory paths that exist for speed, against the interpreter: the
stride prefetch of a warp's load in a grid-stride loop (up and down, with strides whose
prefetch lands far outside every buffer), an ``atom.shared`` whose old value nothing reads
(not stored) beside one whose old value is stored, and a warp's call frames, cleared for
the next block only where a call moved them."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from .test_ptx_compile import INTERP, RAN_INTERP, both_tiers, kernel_c, launch, load

# Thread t sums data[t], data[t + stride], ... (or from the end down when %r9 is 1) and
# stores the sum: each warp reads 32 consecutive bytes a trip, moving by STRIDE bytes.
STRIDED = """
.version 7.0
.target sm_70
.address_size 64
.visible .entry strided(.param .u64 data, .param .u64 out, .param .u32 n,
                        .param .u32 stride, .param .u32 down)
{
    .reg .pred %p<3>; .reg .b32 %r<12>; .reg .b64 %rd<8>; .reg .b16 %rs<2>;
    ld.param.u64 %rd1, [data];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [n];
    ld.param.u32 %r2, [stride];
    ld.param.u32 %r9, [down];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ntid.x;
    mad.lo.s32 %r6, %r4, %r5, %r3;
    mov.u32 %r7, %r6;
    mov.u32 %r8, 0;
    setp.ne.u32 %p2, %r9, 0;
LOOP:
    setp.ge.u32 %p1, %r7, %r1;
    @%p1 bra DONE;
    mov.u32 %r10, %r7;
    @%p2 sub.s32 %r10, %r1, %r7;
    @%p2 sub.s32 %r10, %r10, 1;
    cvt.u64.u32 %rd3, %r10;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u8 %rs1, [%rd4];
    cvt.u32.u16 %r11, %rs1;
    add.s32 %r8, %r8, %r11;
    add.s32 %r7, %r7, %r2;
    bra.uni LOOP;
DONE:
    mul.wide.u32 %rd5, %r6, 4;
    add.s64 %rd6, %rd2, %rd5;
    st.global.u32 [%rd6], %r8;
    ret;
}
"""


@pytest.mark.parametrize("down", [0, 1], ids=["up", "down"])
@pytest.mark.parametrize("stride", [64, 1 << 20], ids=["64B", "1MiB"])
def test_a_strided_warp_load_is_prefetched_and_reads_the_same_on_both_tiers(stride, down):
    source, why = kernel_c(load(STRIDED), "strided")
    assert source is not None, why
    assert "ptxc_prefetch(&PF_[0]" in source
    threads = 64
    # a stride of 1 MiB over 3 MiB: eight trips ahead is 8 MiB past either end of the data
    n = 3 << 20 if stride > 64 else 1 << 16
    data = np.random.default_rng(stride + down).integers(0, 256, n, dtype=np.uint8)
    out = np.zeros(threads, np.uint32)
    params = struct.pack("<QQIII", data.ctypes.data, out.ctypes.data, n, stride, down)
    interp, compiled = both_tiers(STRIDED, "strided", (2, 1, 1), (32, 1, 1), params,
                                  [data, out])
    assert interp.rc == 0 and compiled == interp
    offsets = np.arange(threads)[:, None] + stride * np.arange(n // stride + 1)[None, :]
    expect = np.where(offsets < n, data[np.minimum(offsets, n - 1)].astype(np.uint32), 0)
    if down:
        expect = np.where(offsets < n, data[n - 1 - np.minimum(offsets, n - 1)], 0)
    got = np.frombuffer(compiled.memory["1"], np.uint32)
    assert (got == expect.sum(axis=1)).all()


# Every lane adds 1 to bin tid % 8 of a shared array (and, in atom_kept, stores the old
# value it got); then lane 0..7 copies the bins out.
ATOMS = """
.version 7.0
.target sm_70
.address_size 64
.visible .entry atom_{name}(.param .u64 out)
{{
    .shared .align 4 .b8 bins[32];
    .reg .pred %p<2>; .reg .b32 %r<8>; .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 8;
    mov.u32 %r6, bins;
    shl.b32 %r7, %r1, 2;
    add.s32 %r7, %r6, %r7;
    mov.u32 %r5, 0;
    @%p1 st.shared.u32 [%r7], %r5;
    bar.sync 0;
    and.b32 %r2, %r1, 7;
    shl.b32 %r2, %r2, 2;
    add.s32 %r3, %r6, %r2;
    atom.shared.add.u32 %r4, [%r3], 1;
    {keep}
    bar.sync 0;
    @!%p1 bra END;
    ld.shared.u32 %r5, [%r7];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r5;
END:
    ret;
}}
"""
KEEP = """mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd1, %rd4;
    st.global.u32 [%rd5+32], %r4;"""


@pytest.mark.parametrize("kept", [False, True], ids=["old_unused", "old_stored"])
def test_atom_shared_with_and_without_its_old_value_is_the_same_on_both_tiers(kept):
    name = "kept" if kept else "dropped"
    text = ATOMS.format(name=name, keep=KEEP if kept else "")
    source, why = kernel_c(load(text), f"atom_{name}")
    assert source is not None, why
    # the old value goes to the register file only where something reads it
    assert ("= old;" in source) == kept
    out = np.zeros(8 + 64, np.uint32)
    interp, compiled = both_tiers(text, f"atom_{name}", (1, 1, 1), (64, 1, 1),
                                  struct.pack("<Q", out.ctypes.data), [out])
    assert interp.rc == 0 and compiled == interp
    got = np.frombuffer(compiled.memory["0"], np.uint32)
    assert (got[:8] == 8).all()
    if kept:  # lanes update in lane order: lane t got the bin's count of lanes before it
        assert (got[8:] == np.arange(64) // 8).all()


# Odd lanes exit inside a call whose frame holds 4 KiB of local memory (the call a function
# makes to itself: out of line); even lanes return.
# One worker runs every block with the same warps: a frame pointer left where the exit
# left it would stack each block's frame on the last until local memory ran out.
FRAMES = """
.version 7.0
.target sm_70
.address_size 64
.func (.param .b32 ret) deep(.param .b32 x)
{
    .local .align 4 .b8 buf[4096];
    .reg .pred %p<2>; .reg .b32 %r<5>; .reg .b64 %rd<3>;
    ld.param.b32 %r1, [x];
    and.b32 %r4, %r1, 0x80000000;
    setp.ne.u32 %p1, %r4, 0;
    @%p1 bra INNER;
    or.b32 %r4, %r1, 0x80000000; // the kernel's call, inlined, calls itself out of line
    {
        .param .b32 a; .param .b32 r;
        st.param.b32 [a], %r4;
        call.uni (r), deep, (a);
        ld.param.b32 %r3, [r];
    }
    st.param.b32 [ret], %r3;
    ret;
INNER:
    and.b32 %r1, %r1, 0x7fffffff;
    mov.u64 %rd1, buf;
    st.local.u32 [%rd1+4092], %r1;
    and.b32 %r2, %r1, 1;
    setp.ne.u32 %p1, %r2, 0;
    @%p1 exit;
    ld.local.u32 %r3, [%rd1+4092];
    st.param.b32 [ret], %r3;
    ret;
}
.visible .entry frames(.param .u64 out)
{
    .reg .b32 %r<6>; .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    {
        .param .b32 a; .param .b32 r;
        st.param.b32 [a], %r4;
        call.uni (r), deep, (a);
        ld.param.b32 %r5, [r];
    }
    mul.wide.u32 %rd2, %r4, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r5;
    ret;
}
"""


def test_frames_left_by_lanes_that_exit_in_a_call_do_not_reach_the_next_block():
    blocks, threads = 64, 32
    out = np.zeros(blocks * threads, np.uint32)
    module = load(FRAMES)
    rc, ran, _insns, err = launch(module, "frames", (blocks, 1, 1), (threads, 1, 1),
                                  struct.pack("<Q", out.ctypes.data), [out], INTERP,
                                  threads=1)
    assert (rc, ran) == (0, RAN_INTERP), err
    t = np.arange(blocks * threads)
    assert (out[t % 2 == 0] == t[t % 2 == 0]).all()
    assert (out[t % 2 == 1] == 0).all()
