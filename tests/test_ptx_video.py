"""The SIMD video instructions (PTX ISA "SIMD Video Instructions") on the host device.

``vadd2/4``, ``vsub2/4``, ``vavrg2/4``, ``vabsdiff2/4``, ``vmin2/4``, ``vmax2/4`` and
``vset2/4`` with ``.sat``, the secondary accumulate (``.add``) and merge, masks on ``d``
and selectors on ``a`` and ``b``, against a model written from the ISA's semantics;
and the CUDA intrinsics nvcc turns into them (``__vabsdiffu4``, ``__vsadu4`` ...:
stereoDisparity's ``vabsdiff4.u32.u32.u32.add``) built by nvcc and checked against
numpy.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .test_ptx_fuzz import check, load, run

HEADER = ".version 8.0\n.target sm_75\n.address_size 64\n"
OPS = ["vadd", "vsub", "vavrg", "vabsdiff", "vmin", "vmax"]
CMPS = ["eq", "ne", "lt", "le", "gt", "ge"]


def kernel(insn: str) -> str:
    """out[tid] = insn(a[tid], b[tid], c[tid]); INSN holds the operands' suffixes."""
    return HEADER + f"""
.visible .entry k(.param .u64 a, .param .u64 b, .param .u64 c, .param .u64 out)
{{
    .reg .b32 %r<6>; .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [a]; ld.param.u64 %rd2, [b]; ld.param.u64 %rd3, [c];
    ld.param.u64 %rd4, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd6, %rd1, %rd5; add.s64 %rd7, %rd2, %rd5; add.s64 %rd8, %rd3, %rd5;
    add.s64 %rd9, %rd4, %rd5;
    ld.global.u32 %r2, [%rd6]; ld.global.u32 %r3, [%rd7]; ld.global.u32 %r4, [%rd8];
    {insn.format(d="%r5", a="%r2", b="%r3", c="%r4")};
    st.global.u32 [%rd9], %r5;
    ret;
}}
"""


def run_kernel(text: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    out = np.zeros(len(a), np.uint32)
    params = struct.pack("<QQQQ", a.ctypes.data, b.ctypes.data, c.ctypes.data, out.ctypes.data)
    rc, _, msg = run(load(text), "k", params, [a, b, c, out], block=len(a))
    assert rc == 0, msg
    return out


# ---- the model: the PTX ISA's semantics, one lane at a time


def elements(a: int, b: int, sel: list[int], width: int, signed: bool) -> list[int]:
    """extractAndSignExt: element i is part sel[i] of {b, a}, extended."""
    ba, lim = b << 32 | a, 1 << width
    out = []
    for k in sel:
        v = ba >> (k * width) & (lim - 1)
        out.append(v - lim if signed and v >= lim >> 1 else v)
    return out


def model(op: str, four: bool, dsigned: bool, asigned: bool, bsigned: bool, sat: bool,
          add: bool, mask: list[int], asel: list[int], bsel: list[int], a: int, b: int,
          c: int) -> int:
    n, width = (4, 8) if four else (2, 16)
    va, vb = elements(a, b, asel, width, asigned), elements(a, b, bsel, width, bsigned)
    t = []
    for x, y in zip(va, vb, strict=True):
        if op in CMPS:
            v = int({"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y,
                     "ge": x >= y}[op])
        else:
            s = x + y
            v = {"vadd": s, "vsub": x - y, "vavrg": (s + 1) >> 1 if s >= 0 else s >> 1,
                 "vabsdiff": abs(x - y), "vmin": min(x, y), "vmax": max(x, y)}[op]
        if sat:
            half = 1 << (width - 1)
            lo, hi = (-half, half - 1) if dsigned else (0, 2 * half - 1)
            v = min(max(v, lo), hi)
        t.append(v)
    if add:
        return (c + sum(t[i] for i in range(n) if i in mask)) & 0xFFFFFFFF
    d = 0
    for i in range(n):
        part = t[i] if i in mask else c >> (i * width)
        d |= (part & ((1 << width) - 1)) << (i * width)
    return d


def suffix(kind: str, parts: list[int]) -> str:
    """A selector or mask suffix, element n-1 first (.b3210, .h10)."""
    return "." + kind + "".join(str(p) for p in reversed(parts))


RNG = np.random.default_rng(25)


def words(n: int = 64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a, b, c = (RNG.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32) for _ in range(3))
    # the extremes of each element against each other
    extremes = [(0, 0xFFFFFFFF), (0x80808080, 0x7F7F7F7F), (0x80008000, 0x7FFF7FFF),
                (0xFFFFFFFF, 0x01010101), (0x7F7F7F7F, 0x80808080)]
    for k, (x, y) in enumerate(extremes):
        a[k], b[k] = x, y
    return a, b, c


def check_form(op: str, four: bool, types: str, sat: bool, add: bool, mask: list[int] | None,
               asel: list[int] | None, bsel: list[int] | None) -> None:
    kind = "b" if four else "h"
    n = 4 if four else 2
    is_set = op in CMPS
    name = f"vset{n}.{types}.{op}" if is_set else f"{op}{n}.{types}"
    name += ".sat" * sat + ".add" * add
    d = "{d}" + (suffix(kind, sorted(mask, reverse=True)[::-1]) if mask is not None else "")
    aop = "{a}" + (suffix(kind, asel) if asel is not None else "")
    bop = "{b}" + (suffix(kind, bsel) if bsel is not None else "")
    insn = f"{name} {d}, {aop}, {bop}, {{c}}"
    tys = types.split(".")
    if is_set:
        tys = ["u32", *tys]
    a, b, c = words()
    got = run_kernel(kernel(insn), a, b, c)
    want = [model(op, four, tys[0] == "s32", tys[1] == "s32", tys[2] == "s32", sat, add,
                  list(range(n)) if mask is None else mask,
                  list(range(n)) if asel is None else asel,
                  list(range(n, 2 * n)) if bsel is None else bsel, int(x), int(y), int(z))
            for x, y, z in zip(a, b, c, strict=True)]
    assert got.tolist() == want, insn


@pytest.mark.parametrize("four", [False, True])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("types", ["u32.u32.u32", "s32.s32.s32", "s32.u32.s32", "u32.s32.u32"])
@pytest.mark.parametrize("second", ["merge", "sat", "add"])
def test_each_operation_matches_the_isa(four, op, types, second):
    check_form(op, four, types, second == "sat", second == "add", None, None, None)


@pytest.mark.parametrize("four", [False, True])
@pytest.mark.parametrize("cmp", CMPS)
@pytest.mark.parametrize("types", ["u32.u32", "s32.s32", "s32.u32"])
@pytest.mark.parametrize("add", [False, True])
def test_each_comparison_matches_the_isa(four, cmp, types, add):
    check_form(cmp, four, types, False, add, None, None, None)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_masks_and_selectors_match_the_isa(data):
    four = data.draw(st.booleans())
    n = 4 if four else 2
    op = data.draw(st.sampled_from(OPS + CMPS))
    types = data.draw(st.sampled_from(["u32", "s32"]))
    tys = ".".join([types] * (2 if op in CMPS else 3))
    second = data.draw(st.sampled_from(["merge", "add"] + ([] if op in CMPS else ["sat"])))
    mask = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    sel = st.lists(st.integers(0, 2 * n - 1), min_size=n, max_size=n)
    check_form(op, four, tys, second == "sat", second == "add", sorted(mask), data.draw(sel),
               data.draw(sel))


@pytest.mark.parametrize("insn", [
    "vadd4.u32.u32.u32.sat.add {d}, {a}, {b}, {c}",   # the ISA forbids .sat with .add
    "vset4.u32.u32.lt.sat {d}, {a}, {b}, {c}",
    "vadd4.u32.u32.u64 {d}, {a}, {b}, {c}",
    "vadd4.u32.u32.u32 {d}.b01, {a}, {b}, {c}",       # a mask names elements in falling order
    "vadd4.u32.u32.u32 {d}, {a}.b321, {b}, {c}",      # four selectors
    "vadd4.u32.u32.u32 {d}, {a}.b8765, {b}, {c}",
    "vadd2.u32.u32.u32 {d}, {a}.h41, {b}, {c}",
    "vadd2.u32.u32.u32 {d}.b10, {a}, {b}, {c}",
    "vadd2.u32.u32.u32 {d}, {a}, {b}, {c}.h10",
    "vset2.u32.u32 {d}, {a}, {b}, {c}",                # no comparison
    "vshl.u32.u32.u32.clamp {d}, {a}, {b}",            # the scalar video instructions
])
def test_forms_outside_the_isa_are_refused(insn):
    rc, msg = check(kernel(insn).encode())
    assert rc == -1 and msg, insn


SAMPLE = r"""
extern "C" __global__ void v(unsigned *o, const unsigned *a, const unsigned *b) {
    int t = threadIdx.x, n = blockDim.x;
    o[0 * n + t] = __vabsdiffu4(a[t], b[t]);
    o[1 * n + t] = __vabsdiffs4(a[t], b[t]);
    o[2 * n + t] = __vsadu4(a[t], b[t]);
    o[3 * n + t] = __vsads4(a[t], b[t]);
    o[4 * n + t] = __vsadu2(a[t], b[t]);
    o[5 * n + t] = __vabs4(a[t]);
    o[6 * n + t] = __vabsss4(a[t]);
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc builds the intrinsics' PTX")
def test_cuda_intrinsics_that_nvcc_makes_video_instructions(tmp_path: Path):
    (tmp_path / "v.cu").write_text(SAMPLE)
    subprocess.run(["nvcc", "-arch=sm_75", "-ptx", "-O3", "v.cu", "-o", "v.ptx"], cwd=tmp_path,
                   check=True, capture_output=True)
    text = (tmp_path / "v.ptx").read_text()
    assert "vabsdiff4.u32.u32.u32.add" in text and "vabsdiff2.u32.u32.u32.add" in text
    a, b, _ = words()
    n = len(a)
    out = np.zeros(7 * n, np.uint32)
    rc, _, msg = run(load(text), "v", struct.pack("<QQQ", out.ctypes.data, a.ctypes.data,
                                                  b.ctypes.data), [out, a, b], block=n)
    assert rc == 0, msg

    def parts(w: np.ndarray, dtype: type) -> np.ndarray:
        return w.view(dtype).reshape(n, -1).astype(int)

    ua, ub, sa, sb = parts(a, np.uint8), parts(b, np.uint8), parts(a, np.int8), parts(b, np.int8)
    ha, hb = parts(a, np.uint16), parts(b, np.uint16)

    def pack(bytes_: np.ndarray) -> np.ndarray:
        return bytes_.astype(np.uint8).reshape(-1).view(np.uint32)

    want = [pack(abs(ua - ub)), pack(abs(sa - sb)), abs(ua - ub).sum(1), abs(sa - sb).sum(1),
            abs(ha - hb).sum(1), pack(abs(sa)), pack(np.minimum(abs(sa), 127))]
    for k, w in enumerate(want):
        assert out[k * n:(k + 1) * n].tolist() == np.asarray(w, np.uint32).tolist(), k
