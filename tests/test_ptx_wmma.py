"""Warp-level matrix multiply-accumulate (wmma) on the host device's PTX interpreter.

The kernels of tests/ptx_wmma/wmma.cu (committed as PTX; rebuilt and compared when nvcc
is present) compute D = alpha * (A B + C) for one tile with wmma, for every multiplicand
type (f16 with f32 and f16 accumulators, bf16, tf32, u8, s8, f64), row and column
layouts of A, B and C, padded strides, and an element-wise scaling of the accumulator
fragment. Each runs on host buffers through ``gl_ptx_run`` and is checked against numpy;
the refusals (a misaligned stride, a partial warp, an address outside memory) are
errors, never a wrong answer.
"""

from __future__ import annotations

import pathlib
import shutil
import struct
import subprocess
from dataclasses import dataclass

import numpy as np
import pytest

from .test_ptx_fuzz import ILLEGAL_ADDRESS, LAUNCH_FAILED, load, run

WMMA_PTX = pathlib.Path(__file__).resolve().parent / "ptx_wmma" / "wmma.ptx"
MISALIGNED = 716


@dataclass(frozen=True)
class Case:
    kernel: str
    kind: str          # f16 bf16 tf32 u8 s8 f64
    acc: str           # f32 f16 s32 f64
    shape: tuple[int, int, int]
    a_col: bool
    b_col: bool


CASES = [
    Case("f16_rr", "f16", "f32", (16, 16, 16), False, False),
    Case("f16_rc", "f16", "f32", (16, 16, 16), False, True),
    Case("f16_cr", "f16", "f32", (16, 16, 16), True, False),
    Case("f16_cc", "f16", "f32", (16, 16, 16), True, True),
    Case("f16_half_rc", "f16", "f16", (16, 16, 16), False, True),
    Case("bf16_rc", "bf16", "f32", (16, 16, 16), False, True),
    Case("bf16_cr", "bf16", "f32", (16, 16, 16), True, False),
    Case("tf32_rc", "tf32", "f32", (16, 16, 8), False, True),
    Case("tf32_cr", "tf32", "f32", (16, 16, 8), True, False),
    Case("u8_rc", "u8", "s32", (16, 16, 16), False, True),
    Case("u8_cr", "u8", "s32", (16, 16, 16), True, False),
    Case("s8_rr", "s8", "s32", (16, 16, 16), False, False),
    Case("s8_cc", "s8", "s32", (16, 16, 16), True, True),
    Case("f64_rc", "f64", "f64", (8, 8, 4), False, True),
    Case("f64_cr", "f64", "f64", (8, 8, 4), True, False),
]

# What each type is in memory, and the fragment's size in bytes (a stride in bytes
# must be a multiple of it: the PTX ISA's alignment rule).
MEMORY = {"f16": np.float16, "bf16": np.uint16, "tf32": np.float32, "u8": np.uint8,
          "s8": np.int8, "f64": np.float64, "f32": np.float32, "s32": np.int32}
FRAG_BYTES = {"f16": 32, "bf16": 16, "tf32": 16, "u8": 8, "s8": 8, "f64": 8}
ACC_FRAG_BYTES = {"f32": 32, "s32": 32, "f16": 16, "f64": 16}
ALPHA = {"f32": "<f", "f16": "<e", "s32": "<i", "f64": "<d"}


def bf16(x: np.ndarray) -> np.ndarray:
    """bf16 bits of X rounded to nearest even (numpy has no bfloat16)."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def tf32_rna(x: np.ndarray) -> np.ndarray:
    """cvt.rna.tf32.f32: 10 mantissa bits, ties away from zero."""
    bits = np.asarray(x, np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def leading(rows: int, cols: int, col: bool, frag_bytes: int, itemsize: int) -> int:
    """A padded stride: the next multiple of the alignment past the tight one."""
    step = max(1, frag_bytes // itemsize)
    tight = rows if col else cols
    return (tight // step + 1) * step


def lay_out(m: np.ndarray, col: bool, ld: int) -> np.ndarray:
    """M (logical rows x cols) in memory with stride LD, rows or columns leading."""
    t = m.T if col else m
    buf = aligned((t.shape[0], ld), m.dtype)
    buf[:, :t.shape[1]] = t
    return buf


def aligned(shape: tuple[int, int], dtype) -> np.ndarray:
    """Zeros at a 64-byte boundary (wmma wants rows at multiples of the fragment's size)."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.zeros(n + 64, np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start:start + n].view(dtype).reshape(shape)


def read_back(buf: np.ndarray, rows: int, cols: int, col: bool) -> np.ndarray:
    t = buf[:, :rows] if col else buf[:, :cols]
    return t.T if col else t


def inputs(case: Case, rng: np.random.Generator):
    m, n, k = case.shape
    if case.kind in ("u8", "s8"):
        lo, hi = (0, 256) if case.kind == "u8" else (-128, 128)
        a = rng.integers(lo, hi, (m, k)).astype(MEMORY[case.kind])
        b = rng.integers(lo, hi, (k, n)).astype(MEMORY[case.kind])
        c = rng.integers(-2**20, 2**20, (m, n)).astype(np.int32)
        return a, b, c, a.astype(np.int64), b.astype(np.int64)
    a = rng.standard_normal((m, k))
    b = rng.standard_normal((k, n))
    c = rng.standard_normal((m, n)).astype(MEMORY[case.acc])
    if case.kind == "f16":
        a, b = a.astype(np.float16), b.astype(np.float16)
        return a, b, c, a.astype(np.float64), b.astype(np.float64)
    if case.kind == "bf16":
        a, b = bf16(a), bf16(b)
        widen = lambda v: (v.astype(np.uint32) << 16).view(np.float32).astype(np.float64)  # noqa: E731
        return a, b, c, widen(a), widen(b)
    if case.kind == "tf32":
        a, b = a.astype(np.float32), b.astype(np.float32)
        return a, b, c, tf32_rna(a).astype(np.float64), tf32_rna(b).astype(np.float64)
    return a, b, c, a, b


def case_launch(case: Case, a, b, c, alpha, *, c_col: bool, sat: bool = False,
                lda: int | None = None, d_buffer: bool = True):
    """A case's kernel parameters, its buffers and the D buffer."""
    m, n, k = case.shape
    size = MEMORY[case.kind]().itemsize
    acc_size = MEMORY[case.acc]().itemsize
    lda = lda or leading(m, k, case.a_col, FRAG_BYTES[case.kind], size)
    ldb = leading(k, n, case.b_col, FRAG_BYTES[case.kind], size)
    ldc = leading(m, n, c_col, ACC_FRAG_BYTES[case.acc], acc_size)
    abuf, bbuf = lay_out(a, case.a_col, lda), lay_out(b, case.b_col, ldb)
    cbuf = lay_out(c, c_col, ldc)
    dbuf = aligned(cbuf.shape, cbuf.dtype)
    buffers = [abuf, bbuf, cbuf] + ([dbuf] if d_buffer else [])
    params = struct.pack("<Qi4xQi4xQi4xQii", abuf.ctypes.data, lda, bbuf.ctypes.data, ldb,
                         cbuf.ctypes.data, ldc, dbuf.ctypes.data, ldc,
                         int(c_col) | (2 if sat else 0))
    params += struct.pack(ALPHA[case.acc], alpha)
    return params, buffers, dbuf


def run_case(case: Case, a, b, c, alpha, *, c_col: bool, sat: bool = False,
             lda: int | None = None, block: int = 32, d_buffer: bool = True):
    params, buffers, dbuf = case_launch(case, a, b, c, alpha, c_col=c_col, sat=sat, lda=lda,
                                        d_buffer=d_buffer)
    rc, _, msg = run(load(WMMA_PTX.read_text()), case.kernel, params, buffers, block=block)
    m, n, _k = case.shape
    return rc, msg, read_back(dbuf, m, n, c_col)


def test_the_committed_ptx_is_nvccs():
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc (the CUDA toolkit) is not on PATH")
    done = subprocess.run([nvcc, "-ptx", "-arch=compute_80", "-o", "-",
                           str(WMMA_PTX.with_suffix(".cu"))], capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout == WMMA_PTX.read_bytes(), "rebuild tests/ptx_wmma/wmma.ptx"


@pytest.mark.parametrize("c_col", [False, True], ids=["c_row", "c_col"])
@pytest.mark.parametrize("case", CASES, ids=[c.kernel for c in CASES])
def test_tile_matches_numpy(case, c_col):
    rng = np.random.default_rng(len(case.kernel) * 2 + c_col)
    a, b, c, a64, b64 = inputs(case, rng)
    alpha = 3 if case.acc == "s32" else -1.5
    rc, msg, d = run_case(case, a, b, c, alpha, c_col=c_col)
    assert rc == 0, msg
    if case.acc == "s32":
        want = ((a64 @ b64 + c.astype(np.int64)) * alpha).astype(np.int64)
        assert np.array_equal(d.astype(np.int64), (want + 2**31) % 2**32 - 2**31)
        return
    want = (a64 @ b64 + c.astype(np.float64)) * alpha
    # Products are exact; sums in f32 (f16 accumulators round each result once more)
    tol = {"f32": 2e-5, "f16": 4e-3, "f64": 1e-13}[case.acc]
    scale = (np.abs(a64) @ np.abs(b64) + np.abs(c.astype(np.float64))) * abs(alpha)
    assert np.all(np.abs(d.astype(np.float64) - want) <= tol * scale + 1e-30), \
        (d.astype(np.float64) - want)


@pytest.mark.parametrize("case", CASES, ids=[c.kernel for c in CASES])
def test_every_tile_is_identical_on_both_tiers(case):
    # compiled code runs wmma by its handler, which reads and writes every lane's fragment
    # registers (the carriers after it): the scaling of the accumulator between the mma and
    # the store is compiled lane-local code around it
    from .test_ptx_compile import both_tiers

    rng = np.random.default_rng(len(case.kernel))
    a, b, c, _a64, _b64 = inputs(case, rng)
    alpha = 3 if case.acc == "s32" else -1.5
    params, buffers, _dbuf = case_launch(case, a, b, c, alpha, c_col=True)
    interp, compiled = both_tiers(WMMA_PTX.read_text(), case.kernel, (1, 1, 1), (32, 1, 1),
                                  params, buffers)
    assert interp.rc == 0, interp.err
    assert compiled == interp


def test_small_integers_are_exact_in_every_float_type():
    """Values whose sums fit f32 exactly: the result is exact, whatever the order."""
    for case in (c for c in CASES if c.kind in ("f16", "bf16", "tf32", "f64")):
        m, n, k = case.shape
        rng = np.random.default_rng(7)
        a = rng.integers(-8, 9, (m, k)).astype(np.float64)
        b = rng.integers(-8, 9, (k, n)).astype(np.float64)
        c = rng.integers(-64, 65, (m, n)).astype(MEMORY[case.acc])
        if case.kind == "bf16":
            am, bm = bf16(a), bf16(b)
        else:
            am, bm = a.astype(MEMORY[case.kind]), b.astype(MEMORY[case.kind])
        rc, msg, d = run_case(case, am, bm, c, 2.0, c_col=False)
        assert rc == 0, msg
        assert np.array_equal(d.astype(np.float64), (a @ b + c) * 2.0), case.kernel


def test_tf32_fragments_round_to_nearest_away():
    """__float_to_tf32 on fragment elements (cvt.rna.tf32.f32) before the product."""
    case = next(c for c in CASES if c.kernel == "tf32_rc")
    a = np.zeros((16, 8), np.float32)
    b = np.zeros((8, 16), np.float32)
    a[0, 0] = np.float32(1 + 2**-11)            # a tie: away from zero, 1 + 2^-10
    a[1, 0] = np.float32(1 + 2**-11 + 2**-20)   # above the tie: up
    a[2, 0] = np.float32(1 + 2**-12)            # below: down
    b[0, 0] = 1.0
    c = np.zeros((16, 16), np.float32)
    rc, msg, d = run_case(case, a, b, c, 1.0, c_col=False)
    assert rc == 0, msg
    assert d[:3, 0].tolist() == [1 + 2**-10, 1 + 2**-10, 1.0]


def test_integer_sums_wrap_or_saturate():
    case = next(c for c in CASES if c.kernel == "s8_cc")
    a = np.full((16, 16), 127, np.int8)
    b = np.full((16, 16), 127, np.int8)
    c = np.full((16, 16), 2**31 - 1000, np.int32)
    c[1] = -2**31 + 5
    b[:, 1] = -128
    exact = 16 * 127 * b[0].astype(np.int64)[None, :] + c.astype(np.int64)
    for sat in (False, True):
        rc, msg, d = run_case(case, a, b, c, 1, c_col=False, sat=sat)
        assert rc == 0, msg
        want = np.clip(exact, -2**31, 2**31 - 1) if sat else (exact + 2**31) % 2**32 - 2**31
        assert np.array_equal(d.astype(np.int64), want), sat


def test_a_stride_that_breaks_the_alignment_rule_is_misaligned():
    """f16 A rows must start at multiples of 32 bytes: a stride of 24 halves is refused."""
    case = CASES[1]
    a, b, c, _, _ = inputs(case, np.random.default_rng(1))
    rc, msg, _ = run_case(case, a, b, c, 1.0, c_col=False, lda=24)
    assert rc == MISALIGNED and "fragment" in msg


def test_a_partial_warp_is_a_launch_failure():
    case = CASES[1]
    a, b, c, _, _ = inputs(case, np.random.default_rng(2))
    rc, msg, _ = run_case(case, a, b, c, 1.0, c_col=False, block=16)
    assert rc == LAUNCH_FAILED and "32 lanes" in msg


def test_a_store_outside_memory_is_an_illegal_address():
    case = CASES[0]
    a, b, c, _, _ = inputs(case, np.random.default_rng(3))
    rc, msg, _ = run_case(case, a, b, c, 1.0, c_col=False, d_buffer=False)
    assert rc == ILLEGAL_ADDRESS, msg


CVT_TF32 = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry cvt(.param .u64 p)
{
    .reg .b32 %r<8>; .reg .f32 %f<2>; .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 16;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.f32 %f1, [%rd3];
    cvt.rna.tf32.f32 %r2, %f1;
    cvt.rn.tf32.f32 %r3, %f1;
    cvt.rz.tf32.f32 %r4, %f1;
    st.global.u32 [%rd3+4], %r2;
    st.global.u32 [%rd3+8], %r3;
    st.global.u32 [%rd3+12], %r4;
    ret;
}
"""


def test_cvt_to_tf32_rounds_as_each_mode_says():
    """rna: ties away from zero; rn: ties to even; rz: truncation. Infinities, NaN stay."""
    one = 0x3F800000
    bits = np.array([one | 0x1000, one | 0x3000, one | 0x1001, one | 0x0FFF,
                     0x80000000 | one | 0x1000, 0x7F7FFFFF, 0x7F800000, 0x7FC00001,
                     0x00001000, 0] + [one] * 22, np.uint32)
    buf = np.zeros((32, 4), np.uint32)
    buf[:, 0] = bits
    rc, _, msg = run(load(CVT_TF32), "cvt", struct.pack("<Q", buf.ctypes.data), [buf])
    assert rc == 0, msg
    rna, rn, rz = buf[:10, 1].tolist(), buf[:10, 2].tolist(), buf[:10, 3].tolist()
    assert rna == [one | 0x2000, one | 0x4000, one | 0x2000, one, 0x80000000 | one | 0x2000,
                   0x7F800000, 0x7F800000, 0x7FC00001, 0x00002000, 0]
    assert rn == [one, one | 0x4000, one | 0x2000, one, 0x80000000 | one,
                  0x7F800000, 0x7F800000, 0x7FC00001, 0, 0]
    assert rz == [one, one | 0x2000, one, one, 0x80000000 | one, 0x7F7FE000, 0x7F800000,
                  0x7FC00001, 0, 0]
