"""Warp-wide ``.sync`` instructions whose lanes name different member masks.

Cooperative groups' ``labeled_partition`` (``match.any.sync``) gives each label
its own mask, and ``cg::reduce`` over such a group is ``redux.sync`` with that
mask on sm_80: every lane of a warp runs the same instruction, but the lanes of
each label must combine only among themselves. The interpreter once reduced
over every active lane, whatever the mask, so a per-bucket maximum took the
warp's maximum: a wrong answer (cuda-samples' warpAggregatedAtomicsCG caught
it). ``vote.sync`` and ``match.sync`` take the mask the same way. Hand-written
PTX on host buffers through ``gl_ptx_run``, checked against numpy.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from .test_ptx_fuzz import load, run

LANES = 32
# The words each lane writes, in this order.
OUTPUTS = ("add.u32", "min.s32", "max.s32", "min.u32", "max.u32", "and.b32", "or.b32",
           "xor.b32", "ballot", "all", "any", "uni", "match.all", "match.all pred", "group")

PTX_HEAD = """
.version 8.0
.target sm_80
.address_size 64
"""

GROUPS = PTX_HEAD + """

// A lane whose key is negative sits out (it branches past the warp-wide part, as
// a grid-stride loop's lanes past the end do); the others group by key.
.visible .entry groups(.param .u64 keys, .param .u64 vals, .param .u64 out)
{
    .reg .pred %p<8>; .reg .b32 %r<32>; .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [keys]; ld.param.u64 %rd2, [vals]; ld.param.u64 %rd3, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd1, %rd4; ld.global.u32 %r2, [%rd5];
    add.s64 %rd6, %rd2, %rd4; ld.global.u32 %r3, [%rd6];
    mul.wide.u32 %rd7, %r1, 60;
    add.s64 %rd8, %rd3, %rd7;
    setp.lt.s32 %p1, %r2, 0;
    @%p1 bra DONE;
    activemask.b32 %r4;
    match.any.sync.b32 %r5, %r2, %r4;
    redux.sync.add.u32 %r6, %r3, %r5;
    redux.sync.min.s32 %r7, %r3, %r5;
    redux.sync.max.s32 %r8, %r3, %r5;
    redux.sync.min.u32 %r9, %r3, %r5;
    redux.sync.max.u32 %r10, %r3, %r5;
    redux.sync.and.b32 %r11, %r3, %r5;
    redux.sync.or.b32 %r12, %r3, %r5;
    redux.sync.xor.b32 %r13, %r3, %r5;
    setp.gt.s32 %p2, %r3, 0;
    vote.sync.ballot.b32 %r14, %p2, %r5;
    vote.sync.all.pred %p3, %p2, %r5; selp.u32 %r15, 1, 0, %p3;
    vote.sync.any.pred %p4, %p2, %r5; selp.u32 %r16, 1, 0, %p4;
    vote.sync.uni.pred %p5, %p2, %r5; selp.u32 %r17, 1, 0, %p5;
    and.b32 %r18, %r3, 1;
    match.all.sync.b32 %r19|%p6, %r18, %r5; selp.u32 %r20, 1, 0, %p6;
    st.global.u32 [%rd8], %r6; st.global.u32 [%rd8+4], %r7; st.global.u32 [%rd8+8], %r8;
    st.global.u32 [%rd8+12], %r9; st.global.u32 [%rd8+16], %r10; st.global.u32 [%rd8+20], %r11;
    st.global.u32 [%rd8+24], %r12; st.global.u32 [%rd8+28], %r13; st.global.u32 [%rd8+32], %r14;
    st.global.u32 [%rd8+36], %r15; st.global.u32 [%rd8+40], %r16; st.global.u32 [%rd8+44], %r17;
    st.global.u32 [%rd8+48], %r19; st.global.u32 [%rd8+52], %r20; st.global.u32 [%rd8+56], %r5;
DONE:
    ret;
}
"""


def expected(keys: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """What each lane must write: every operation over the lanes of its own key."""
    out = np.zeros((len(keys), len(OUTPUTS)), np.uint32)
    for t, key in enumerate(keys):
        if key < 0:
            continue
        base = t - t % LANES
        lanes = [k for k in range(LANES) if keys[base + k] == key]
        v = vals[[base + k for k in lanes]]
        u, s = v.view(np.uint32), v
        mask = sum(1 << k for k in lanes)
        positive = s > 0
        ballot = sum(1 << k for k, p in zip(lanes, positive, strict=True) if p)
        same_parity = len(set((u & 1).tolist())) == 1
        out[t] = [int(u.astype(np.uint64).sum()) & 0xFFFFFFFF, s.min().view(np.uint32),
                  s.max().view(np.uint32), u.min(), u.max(),
                  np.bitwise_and.reduce(u), np.bitwise_or.reduce(u), np.bitwise_xor.reduce(u),
                  ballot, positive.all(), positive.any(), positive.all() or not positive.any(),
                  mask if same_parity else 0, same_parity, mask]
    return out


def run_groups(keys: np.ndarray, vals: np.ndarray) -> np.ndarray:
    out = np.zeros((len(keys), len(OUTPUTS)), np.uint32)
    rc, _, msg = run(load(GROUPS), "groups",
                     struct.pack("<QQQ", keys.ctypes.data, vals.ctypes.data, out.ctypes.data),
                     [keys, vals, out], block=len(keys))
    assert rc == 0, msg
    return out


def check(keys: np.ndarray, vals: np.ndarray) -> None:
    got, want = run_groups(keys, vals), expected(keys, vals)
    for column, name in enumerate(OUTPUTS):
        bad = np.nonzero(got[:, column] != want[:, column])[0]
        assert len(bad) == 0, (f"{name}: lanes {bad[:8].tolist()} wrote "
                               f"{got[bad[:8], column].tolist()}, not "
                               f"{want[bad[:8], column].tolist()}")


@pytest.mark.parametrize("seed", range(6))
def test_each_label_reduces_votes_and_matches_among_its_own_lanes(seed):
    rng = np.random.default_rng(seed)
    keys = rng.integers(-1, 1 + seed, 2 * LANES).astype(np.int32)   # -1 sits out
    vals = rng.integers(-2**31, 2**31, 2 * LANES, dtype=np.int64).astype(np.int32)
    vals[rng.random(2 * LANES) < 0.3] &= 0x7FFFFFFE  # some groups all positive, same parity
    check(keys, vals)


def test_a_bucket_maximum_is_its_own_not_the_warps():
    """The sample's pattern: four buckets, the largest value in bucket 0 only."""
    keys = (np.arange(LANES) % 4).astype(np.int32)
    vals = np.arange(LANES, dtype=np.int32) * 1000
    vals[0] = 2**31 - 1
    got = run_groups(keys, vals)
    assert got[:, OUTPUTS.index("max.s32")].tolist() == \
        [2**31 - 1 if k == 0 else 28000 + 1000 * k for k in keys]


def test_one_group_is_the_whole_active_warp():
    keys = np.zeros(LANES, np.int32)
    keys[::3] = -1
    vals = np.arange(1, LANES + 1, dtype=np.int32)
    check(keys, vals)


# A loop whose divergent region's join block comes before the region, as nvcc lays out a
# loop body's tail (cdpQuadtree's point sorting): the lanes that skip the region branch
# back to the join block, a lower pc than the lanes inside the region. Each lane of a
# .sync instruction waits there for the others of its mask (PTX ISA, vote.sync), so every
# ballot counts the 16 even lanes, 4 times; running the skipping lanes first, alone, once
# gave the odd lanes 0 and the even lanes 64 (points lost without an error).
JOIN_FIRST = PTX_HEAD + """

.visible .entry join_first(.param .u64 out)
{
    .reg .pred %p<3>; .reg .b32 %r<8>; .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %laneid;
    mov.u32 %r2, 0;
    mov.u32 %r5, 0;
    mov.u32 %r7, 0;
    bra.uni HEAD;
JOIN:
    vote.sync.ballot.b32 %r3, %p1, -1;
    popc.b32 %r4, %r3;
    add.u32 %r5, %r5, %r4;
    shfl.sync.idx.b32 %r6, %r7, 0, 31, -1;
    add.u32 %r2, %r2, 1;
HEAD:
    setp.lt.u32 %p2, %r2, 4;
    @!%p2 bra DONE;
    and.b32 %r6, %r1, 1;
    setp.eq.u32 %p1, %r6, 0;
    @!%p1 bra JOIN;
    add.u32 %r7, %r7, 1;
    bra.uni JOIN;
DONE:
    mul.wide.u32 %rd2, %r1, 8;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r5;
    st.global.u32 [%rd3+4], %r6;
    ret;
}
"""


def test_a_sync_instruction_waits_for_lanes_still_in_a_region_laid_out_after_it():
    out = np.zeros((LANES, 2), np.uint32)
    rc, _, msg = run(load(JOIN_FIRST), "join_first", struct.pack("<Q", out.ctypes.data), [out])
    assert rc == 0, msg
    assert out[:, 0].tolist() == [64] * LANES  # every ballot saw all 16 even lanes
    assert out[:, 1].tolist() == [4] * LANES   # lane 0's count after its 4th region


# __syncwarp in the same place: the lanes that skip the region reach the join's
# bar.warp.sync first and must wait there for the lanes still writing their slots, so
# every odd lane reads what its even neighbour wrote in this trip (1 + 2 + 3 + 4 = 10).
# Taken as a plain fence, the odd lanes read a slot from an earlier trip or none.
SYNCWARP_JOIN_FIRST = PTX_HEAD + """

.visible .entry syncwarp_join_first(.param .u64 out)
{
    .reg .pred %p<3>; .reg .b32 %r<10>; .reg .b64 %rd<8>;
    .shared .align 4 .b32 slots[32];
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %laneid;
    mov.u32 %r2, 0;
    mov.u32 %r5, 0;
    mov.u64 %rd4, slots;
    and.b32 %r8, %r1, -2;
    mul.wide.u32 %rd5, %r8, 4;
    add.s64 %rd5, %rd4, %rd5;
    mov.u32 %r9, 0;
    st.shared.u32 [%rd5], %r9;
    bar.warp.sync -1;
    bra.uni HEAD;
JOIN:
    bar.warp.sync -1;
    ld.shared.u32 %r6, [%rd5];
    add.u32 %r5, %r5, %r6;
    bar.warp.sync -1;
    add.u32 %r2, %r2, 1;
HEAD:
    setp.lt.u32 %p2, %r2, 4;
    @!%p2 bra DONE;
    and.b32 %r6, %r1, 1;
    setp.eq.u32 %p1, %r6, 0;
    @!%p1 bra JOIN;
    add.u32 %r7, %r2, 1;
    st.shared.u32 [%rd5], %r7;
    bra.uni JOIN;
DONE:
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r5;
    ret;
}
"""


def test_syncwarp_waits_for_lanes_still_in_a_region_laid_out_after_it():
    out = np.zeros(LANES, np.uint32)
    rc, _, msg = run(load(SYNCWARP_JOIN_FIRST), "syncwarp_join_first",
                     struct.pack("<Q", out.ctypes.data), [out])
    assert rc == 0, msg
    assert out.tolist() == [10] * LANES


def test_syncwarp_without_its_mask_is_refused():
    text = SYNCWARP_JOIN_FIRST.replace("bar.warp.sync -1;\n    bra.uni HEAD;",
                                       "bar.warp.sync;\n    bra.uni HEAD;")
    with pytest.raises(AssertionError, match=r"bar\.warp\.sync takes 1 operand"):
        load(text)
