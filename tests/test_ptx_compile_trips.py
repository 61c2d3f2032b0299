"""The compile tier's grid-stride loops against the interpreter (docs/ptx-execution.md,
"Trips with one index"): a loop block that ends ``add x, x, u; setp.lt p, x, n; @p bra``
runs its trips with one index for the warp while the warp is whole and its lanes' indices
are consecutive, and a histogram's load, bin address and ``atom.shared`` run as one lane
loop (a gather). Every case compares memory, faults and thread-instruction counts with the
interpreter's, including trips whose 32 indices wrap past the top of their type (where
"the last lane is below n" no longer says every lane is), warps that are not whole, lanes
that are not consecutive, yields, the time limit, and faults inside the gather."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from peer.bench.ptx import PTX

from .test_ptx_compile import (
    COMPILED,
    LAUNCH_TIMEOUT,
    RAN_COMPILED,
    both_tiers,
    kernel_c,
    launch,
    load,
)

# Thread g: x = start + g; while x < n (s32 or u32): trips += 1, x += stride. Out: per
# thread, the trips and the last x.
TRIPS = """
.version 7.0
.target sm_70
.address_size 64
.visible .entry trips(.param .u64 out, .param .u32 start, .param .u32 n, .param .u32 stride)
{{
    .reg .pred %p<3>; .reg .b32 %r<12>; .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [start];
    ld.param.u32 %r2, [n];
    ld.param.u32 %r3, [stride];
    mov.u32 %r4, %tid.x;
    mov.u32 %r5, %ctaid.x;
    mov.u32 %r6, %ntid.x;
    mad.lo.s32 %r7, %r5, %r6, %r4;
    add.s32 %r8, %r1, %r7;
    mov.u32 %r9, 0;
    setp.ge.{t} %p1, %r8, %r2;
    @%p1 bra DONE;
LOOP:
    add.s32 %r9, %r9, 1;
    add.s32 %r8, %r8, %r3;
    setp.lt.{t} %p2, %r8, %r2;
    @%p2 bra LOOP;
DONE:
    mul.wide.u32 %rd2, %r7, 8;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r9;
    st.global.u32 [%rd3+4], %r8;
    ret;
}}
"""

M32 = 1 << 32


def expected_trips(start: int, n: int, stride: int, signed: bool, threads: int) -> np.ndarray:
    def value(v: int) -> int:
        return v - M32 if signed and v >= 1 << 31 else v
    rows = []
    for g in range(threads):
        x, trips = (start + g) % M32, 0
        while value(x) < value(n):
            trips, x = trips + 1, (x + stride) % M32
        rows.append((trips, x))
    return np.array(rows, np.uint32)


# (start, n, stride, type): a plain loop with a last trip that only some lanes take; one
# long enough that warps yield inside it; and one of each type whose trip after a step
# holds indices that wrap past the type's top (lanes 0-15 leave, lanes 16-31 wrapped to
# small or negative numbers go on, while the last lane's index is below n).
CASES = [
    (0, 1000, 64, "s32"),
    (0x10, 0x20000, 96, "u32"),
    (0x6FFFFFF0, 0x80000000, 0x90000000, "u32"),
    (0x2FFFFFF0, 0x40000000, 0x50000000, "s32"),
]


@pytest.mark.parametrize("case", CASES, ids=["partial_last", "long_yields", "u32_wraps",
                                             "s32_wraps"])
def test_a_grid_stride_loop_runs_the_same_trips_on_both_tiers(case):
    start, n, stride, ty = case
    text = TRIPS.format(t=ty)
    source, why = kernel_c(load(text), "trips")
    assert source is not None, why
    assert "/* the trips of" in source
    threads = 64 if case[0] != 0x10 else 96
    out = np.zeros(threads * 2, np.uint32)
    params = struct.pack("<QIII", out.ctypes.data, start, n, stride)
    interp, compiled = both_tiers(text, "trips", (1, 1, 1), (threads, 1, 1), params, [out])
    assert interp.rc == 0 and compiled == interp
    got = np.frombuffer(compiled.memory["0"], np.uint32).reshape(threads, 2)
    assert (got == expected_trips(start, n, stride, ty == "s32", threads)).all()


@pytest.mark.parametrize("block", [(48, 1, 1), (16, 2, 1)], ids=["warp_not_whole",
                                                                  "lanes_not_consecutive"])
def test_trips_of_warps_the_fast_form_does_not_fit_are_the_same(block):
    # 48 threads: the second warp has 16 lanes; (16, 2): lanes 16-31 repeat tid.x 0-15
    text = TRIPS.format(t="s32")
    threads = block[0] * block[1]
    out = np.zeros(threads * 2, np.uint32)
    params = struct.pack("<QIII", out.ctypes.data, 0, 500, 32)
    interp, compiled = both_tiers(text, "trips", (1, 1, 1), block, params, [out])
    assert interp.rc == 0 and compiled == interp


def test_a_trip_loop_that_never_ends_reaches_the_time_limit(monkeypatch):
    monkeypatch.setenv("GLEAM_PTX_TIMEOUT_S", "0.3")
    out = np.zeros(64, np.uint32)
    params = struct.pack("<QIII", out.ctypes.data, 0, 1000, 0)  # a stride of 0
    rc, ran, _, err = launch(load(TRIPS.format(t="s32")), "trips", (1, 1, 1), (32, 1, 1),
                             params, [out], COMPILED)
    assert (rc, ran) == (LAUNCH_TIMEOUT, RAN_COMPILED) and "time limit" in err


def test_the_benchmark_histogram_runs_its_trips_as_one_gather():
    source, why = kernel_c(load(PTX.read_text()), "bench_histogram")
    assert source is not None, why
    assert "a gather */" in source and "/* the trips of" in source


@pytest.mark.parametrize("n,block", [(40_000, (256, 1, 1)), (1001, (64, 1, 1)),
                                     (5000, (48, 1, 1)), (5000, (16, 2, 1))],
                         ids=["long", "partial_last", "warp_not_whole", "not_consecutive"])
def test_the_histogram_counts_the_same_on_both_tiers(n, block):
    data = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)
    bins = np.zeros(256, np.uint32)
    params = struct.pack("<QQi", data.ctypes.data, bins.ctypes.data, n)
    interp, compiled = both_tiers(PTX.read_text(), "bench_histogram", (2, 1, 1), block,
                                  params, [data, bins])
    assert interp.rc == 0 and compiled == interp
    got = np.frombuffer(compiled.memory["1"], np.uint32)
    # in a (16, 2) block both rows of threads count the same elements and both merge the
    # block's bins (the kernel uses tid.x only)
    assert (got == np.bincount(data, minlength=256) * block[1] ** 2).all()


# The histogram's trip with 8-byte bins: a byte of 128 or more names a bin past the block's
# 1 KiB of shared memory, so the gather's atom faults at that lane.
WIDE_BINS = """
.version 7.0
.target sm_70
.address_size 64
.visible .entry wide_bins(.param .u64 data, .param .u32 n)
{
    .reg .pred %p<3>; .reg .b16 %rs<2>; .reg .b32 %r<12>; .reg .b64 %rd<6>;
    .shared .align 4 .b8 bins[1024];
    ld.param.u64 %rd1, [data];
    ld.param.u32 %r1, [n];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mad.lo.s32 %r5, %r3, %r4, %r2;
    mov.u32 %r6, %nctaid.x;
    mul.lo.s32 %r7, %r6, %r4;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra DONE;
LOOP:
    cvt.s64.s32 %rd2, %r5;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u8 %rs1, [%rd3];
    mul.wide.u16 %r8, %rs1, 8;
    mov.u32 %r9, bins;
    add.s32 %r10, %r9, %r8;
    atom.shared.add.u32 %r11, [%r10], 1;
    add.s32 %r5, %r5, %r7;
    setp.lt.s32 %p2, %r5, %r1;
    @%p2 bra LOOP;
DONE:
    ret;
}
"""


@pytest.mark.parametrize("where", ["atom", "load"])
def test_a_fault_inside_the_gather_is_the_interpreters(where):
    source, why = kernel_c(load(WIDE_BINS), "wide_bins")
    assert source is not None, why
    assert "a gather */" in source
    data = np.zeros(4096, np.uint8)
    if where == "atom":
        data[1000 + 13] = 200  # lane 13 of a trip well inside the loop: bin 1600
        n = data.size
    else:
        n = data.size + 40  # the last trips read past the buffer
    params = struct.pack("<Qi", data.ctypes.data, n)
    interp, compiled = both_tiers(WIDE_BINS, "wide_bins", (1, 1, 1), (64, 1, 1), params, [data])
    assert interp.rc != 0 and compiled == interp
