"""What the prebuilt kernels of CUB and Thrust (inside CuPy) need of the interpreter.

Their only PTX is ``compute_100``: packed 16-bit ``min``/``max`` (``.s16x2``,
``.u16x2``, ``.relu``), ``set`` into ``.f16`` with every comparison including
``nan``/``num``, and ``griddepcontrol`` (programmatic dependent launch). CUB
sizes its tiles on the host by the kernel's ``PTX_VERSION`` attribute, which
must be the PTX's own ``.target`` (tests/test_cupy.py runs CUB and Thrust
through CuPy). Thrust's module declares megabytes of ``.shared`` over
thousands of kernels: each kernel gets the module's variables and its own.
Each case is hand-written PTX run on host buffers through ``gl_ptx_run``,
checked against numpy.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from gleam.peer.nativelib import ffi, lib

from .cuda_session import ptx_only_session, rec
from .test_ptx_fuzz import check, load, run

HEADER = ".version 8.8\n.target sm_100\n.address_size 64\n"


def binop_kernel(insn: str) -> str:
    """out[tid] = insn(a[tid], b[tid]) on 32-bit words."""
    return HEADER + f"""
.visible .entry k(.param .u64 a, .param .u64 b, .param .u64 out)
{{
    .reg .b32 %r<5>; .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [a]; ld.param.u64 %rd2, [b]; ld.param.u64 %rd3, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd1, %rd4; add.s64 %rd6, %rd2, %rd4; add.s64 %rd7, %rd3, %rd4;
    ld.global.u32 %r2, [%rd5]; ld.global.u32 %r3, [%rd6];
    {insn} %r4, %r2, %r3;
    st.global.u32 [%rd7], %r4;
    ret;
}}
"""


def run_words(text: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.zeros(len(a), np.uint32)
    rc, _, msg = run(load(text), "k", struct.pack("<QQQ", a.ctypes.data, b.ctypes.data,
                                                  out.ctypes.data), [a, b, out], block=len(a))
    assert rc == 0, msg
    return out


@pytest.mark.parametrize(("insn", "dtype", "fn"), [
    ("min.s16x2", np.int16, np.minimum), ("max.s16x2", np.int16, np.maximum),
    ("min.u16x2", np.uint16, np.minimum), ("max.u16x2", np.uint16, np.maximum),
    ("min.relu.s16x2", np.int16, lambda x, y: np.maximum(np.minimum(x, y), 0)),
    ("max.relu.s16x2", np.int16, lambda x, y: np.maximum(np.maximum(x, y), 0)),
])
def test_packed_16_bit_min_max_work_on_each_half(insn, dtype, fn):
    rng = np.random.default_rng(3)
    halves = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, (2, 64), endpoint=True)
    halves[:, :4] = [[np.iinfo(dtype).min, np.iinfo(dtype).max, 0, -1 if dtype == np.int16
                      else 1]] * 2  # the extremes against each other
    halves[1, :4] = halves[1, :4][::-1]
    a, b = (h.astype(dtype).view(np.uint32) for h in halves)
    got = run_words(binop_kernel(insn), a, b).view(dtype)
    want = fn(halves[0].astype(dtype), halves[1].astype(dtype)).astype(dtype)
    assert np.array_equal(got, want)


def test_relu_is_refused_where_ptx_has_none():
    rc, msg = check(binop_kernel("min.relu.u16x2").encode())
    assert rc == -1 and "unsupported PTX instruction 'min.relu.u16x2'" in msg


SET_F16 = HEADER + """
.visible .entry k(.param .u64 a, .param .u64 b, .param .u64 out)
{
    .reg .b16 %rs<4>; .reg .b32 %r<3>; .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [a]; ld.param.u64 %rd2, [b]; ld.param.u64 %rd3, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 2;
    add.s64 %rd5, %rd1, %rd4; add.s64 %rd6, %rd2, %rd4;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd7, %rd3, %rd4;
    ld.global.u16 %rs1, [%rd5]; ld.global.u16 %rs2, [%rd6];
    set.CMP.DT.f16 DEST, %rs1, %rs2;
    STORE
    ret;
}
"""

CMPS = {
    "eq": np.equal, "ne": lambda a, b: (a != b) & ~np.isnan(a) & ~np.isnan(b),
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "equ": lambda a, b: (a == b) | np.isnan(a) | np.isnan(b), "neu": np.not_equal,
    "ltu": lambda a, b: ~(a >= b), "leu": lambda a, b: ~(a > b),
    "gtu": lambda a, b: ~(a <= b), "geu": lambda a, b: ~(a < b),
    "num": lambda a, b: ~np.isnan(a) & ~np.isnan(b), "nan": lambda a, b: np.isnan(a) | np.isnan(b),
}


def set_f16(cmp: str, dtype: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    dest, store = (("%rs3", "cvt.u32.u16 %r2, %rs3; st.global.u32 [%rd7], %r2;")
                   if dtype == "f16" else ("%r2", "st.global.u32 [%rd7], %r2;"))
    text = (SET_F16.replace("CMP", cmp).replace("DT", dtype).replace("DEST", dest)
            .replace("STORE", store))
    out = np.zeros(len(a), np.uint32)
    rc, _, msg = run(load(text), "k", struct.pack("<QQQ", a.ctypes.data, b.ctypes.data,
                                                  out.ctypes.data), [a, b, out], block=len(a))
    assert rc == 0, msg
    return out


@pytest.mark.parametrize("cmp", sorted(CMPS))
def test_set_into_f16_gives_one_or_zero_in_half_precision(cmp):
    vals = np.array([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 65504.0], np.float16)
    a, b = (np.repeat(vals, 8), np.tile(vals, 8))
    want = CMPS[cmp](a.astype(np.float32), b.astype(np.float32))
    got = set_f16(cmp, "f16", a.copy(), b.copy())
    assert np.array_equal(got, np.where(want, 0x3C00, 0))  # 1.0 and 0.0 as f16 bits
    got32 = set_f16(cmp, "u32", a.copy(), b.copy())
    assert np.array_equal(got32, np.where(want, 0xFFFFFFFF, 0))


def test_griddepcontrol_runs_as_a_no_op():
    text = HEADER + """
.visible .entry k(.param .u64 out)
{
    .reg .b32 %r<2>; .reg .b64 %rd<2>;
    griddepcontrol.wait;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, 7;
    st.global.u32 [%rd1], %r1;
    griddepcontrol.launch_dependents;
    ret;
}
"""
    out = np.zeros(1, np.uint32)
    rc, _, msg = run(load(text), "k", struct.pack("<Q", out.ctypes.data), [out], block=1)
    assert rc == 0 and out[0] == 7, msg
    rc, msg = check(text.replace("griddepcontrol.wait;", "griddepcontrol.frob;").encode())
    assert rc == -1 and "griddepcontrol.frob" in msg


# out[tid] = %r4, the end of both kernels below.
STORE_R4 = """    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r4;
    ret;"""
BIG = 700 * 1024  # two kernels' own shared memory: more than a block's 1 MiB together

SHARED = HEADER + f"""
.shared .align 4 .b32 early[1];
.visible .entry a(.param .u64 out)
{{
    .reg .b32 %r<6>; .reg .b64 %rd<4>;
    .shared .align 4 .b8 big_a[{BIG}];
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 14;
    mov.u32 %r3, big_a;
    add.s32 %r3, %r3, %r2;
    add.s32 %r4, %r1, 100;
    st.shared.u32 [%r3], %r4;
    mov.u32 %r5, 1000;
    st.shared.u32 [early], %r5;
    bar.sync 0;
    ld.shared.u32 %r4, [%r3];
    ld.shared.u32 %r5, [early];
    add.s32 %r4, %r4, %r5;
{STORE_R4}
}}
.shared .align 4 .b32 late[1];
.visible .entry b(.param .u64 out)
{{
    .reg .b32 %r<6>; .reg .b64 %rd<4>;
    .shared .align 4 .b8 big_b[{BIG}];
    mov.u32 %r1, %tid.x;
    mov.u32 %r3, big_b;
    shl.b32 %r2, %r1, 2;
    add.s32 %r3, %r3, %r2;
    st.shared.u32 [%r3], %r1;
    mov.u32 %r5, 50;
    st.shared.u32 [late], %r5;
    st.shared.u32 [early], %r5;
    bar.sync 0;
    ld.shared.u32 %r4, [%r3];
    ld.shared.u32 %r5, [late];
    add.s32 %r4, %r4, %r5;
    ld.shared.u32 %r5, [early];
    add.s32 %r4, %r4, %r5;
{STORE_R4}
}}
"""


def test_each_kernel_holds_the_modules_shared_memory_and_its_own():
    m = load(SHARED)
    for entry, want in (("a", np.arange(32) + 1100), ("b", np.arange(32) + 100)):
        out = np.zeros(32, np.uint32)
        rc, _, msg = run(m, entry, struct.pack("<Q", out.ctypes.data), [out])
        assert rc == 0, msg
        assert np.array_equal(out, want), entry


def test_one_kernel_over_the_limit_is_still_refused():
    text = SHARED.replace(f"big_b[{BIG}]", f"big_b[{2 * BIG}]")
    rc, msg = check(text.encode())
    assert rc == -1 and "too much shared memory" in msg


@pytest.mark.parametrize(("target", "want"), [("sm_100", 100), ("sm_90a", 90), ("sm_75", 75)])
def test_ptx_version_attribute_is_the_ptx_target(target, want):
    """CUB's host code picks a tuning policy by cudaFuncGetAttributes().ptxVersion;
    the device code was compiled for its .target, so the two must agree."""
    text = HEADER.replace("sm_100", target) + ".visible .entry k() { ret; }\n\0"
    with ptx_only_session() as s:
        fn = s.function(s.load(text.encode()), "k")
        got = []
        for attribute in (5, 6):  # PTX_VERSION, BINARY_VERSION
            r = s.run(rec("cuFuncGetAttribute", attribute, fn))
            assert r is not None and r[0] == 0
            got.append(r[2][0])
    assert got == [want, 80]  # the PTX's target, and the host device's capability


def test_align_after_ptr_is_the_pointees_not_the_parameters():
    """Thrust's kernels declare `.param .u64 .ptr .align 1 p` after a u32 and a u8:
    the parameter still lies on 8 bytes (offset 8 here, as the interposer packs it);
    reading it at offset 5 was a misaligned address."""
    text = HEADER + """
.visible .entry k(.param .u32 n, .param .u8 flag, .param .u64 .ptr .global .align 1 p)
{
    .reg .b32 %r<2>; .reg .b64 %rd<2>;
    ld.param.u32 %r1, [n];
    ld.param.u64 %rd1, [p];
    st.global.u32 [%rd1], %r1;
    ret;
}
"""
    out = np.zeros(1, np.uint32)
    params = struct.pack("<IB3xQ", 1234, 1, out.ctypes.data)
    rc, _, msg = run(load(text), "k", params, [out], block=1)
    assert rc == 0 and out[0] == 1234, msg


def test_cp_async_with_a_negative_displacement_and_dynamic_shared_alignment():
    """cp.async's shared displacement is signed ([%r-16]); an extern .shared
    declared .align 128 starts on 128 bytes after the kernel's own variables."""
    text = HEADER + """
.extern .shared .align 128 .b8 dyn[];
.visible .entry k(.param .u64 src, .param .u64 out)
{
    .reg .b32 %r<6>; .reg .b64 %rd<4>;
    .shared .align 4 .b32 own[1];
    ld.param.u64 %rd1, [src]; ld.param.u64 %rd2, [out];
    mov.u32 %r1, dyn;
    add.s32 %r2, %r1, 16;
    cp.async.ca.shared.global [%r2+-16], [%rd1], 4;
    cp.async.wait_all;
    ld.shared.u32 %r3, [dyn];
    mov.u32 %r4, own;
    st.global.u32 [%rd2], %r3;
    st.global.u32 [%rd2+4], %r1;
    st.global.u32 [%rd2+8], %r4;
    ret;
}
"""
    src = np.array([0xC0FFEE], np.uint32)
    out = np.zeros(3, np.uint32)
    bufs = sorted([src, out], key=lambda b: b.ctypes.data)
    ranges = ffi.new("uint64_t[]", [v for b in bufs for v in (b.ctypes.data, b.nbytes)])
    params = struct.pack("<QQ", src.ctypes.data, out.ctypes.data)
    insns, err = ffi.new("uint64_t *"), ffi.new("char[256]")
    rc = lib.gl_ptx_run(load(text), b"k", ffi.new("unsigned[3]", [1, 1, 1]),
                        ffi.new("unsigned[3]", [1, 1, 1]), 64, params, len(params), ranges, 2, 1,
                        insns, err, 256)  # 64 bytes of dynamic shared memory
    assert rc == 0, ffi.string(err).decode()
    assert out[0] == 0xC0FFEE and out[1] % 128 == 0 and out[1] > out[2]


def _bmsk(a: int, b: int, clamp: bool) -> int:
    """bmsk as the PTX ISA's pseudo-code states it (section "bmsk")."""
    a1, b1 = a & 0x1F, b & 0x1F
    mask0 = (0xFFFFFFFF << a1) & 0xFFFFFFFF
    total = a1 + b1
    mask1 = (0xFFFFFFFF << total) & 0xFFFFFFFF if total < 32 else 0
    position_overflow = width_overflow = False
    if clamp:
        if a >= 32:
            position_overflow, mask0 = True, 0
        width_overflow = b >= 32
    if total >= 32 or position_overflow or width_overflow:
        mask1 = 0
    elif b1 == 0:
        mask1 = 0xFFFFFFFF
    return mask0 & ~mask1 & 0xFFFFFFFF


@pytest.mark.parametrize("mode", ["wrap", "clamp"])
def test_bmsk_the_bit_masks_of_thrusts_radix_sort(mode):
    # Thrust's radix sort (cuda-samples' radixSortThrust, segmentationTreeThrust)
    # builds its digit masks with bmsk.clamp; the PTX was refused without it.
    values = [0, 1, 2, 5, 16, 31, 32, 33, 40, 63, 64, 0xFFFFFFFF]
    a = np.array([x for x in values for _ in values], np.uint32)
    b = np.array([y for _ in values for y in values], np.uint32)
    got = run_words(binop_kernel(f"bmsk.{mode}.b32"), a, b)
    want = np.array([_bmsk(int(x), int(y), mode == "clamp")
                     for x, y in zip(a, b, strict=True)], np.uint32)
    assert np.array_equal(got, want)
    assert _bmsk(1, 2, clamp=False) == 0x6   # the ISA's own example
