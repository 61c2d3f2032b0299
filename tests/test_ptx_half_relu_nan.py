"""Half-precision ``fma.rn.relu`` and ``min/max.NaN`` on the host device.

numba-cuda's bf16 helpers (compiled by NVRTC into every kernel that uses bfloat16) contain
``fma.rn.relu.bf16`` and ``max.NaN.bf16``; a module that has them was refused whole. The
PTX ISA: ``.relu`` clamps a negative result to 0 and makes a NaN result the canonical NaN;
``.NaN`` makes min/max give the canonical NaN when an input is NaN (without it, the other
input). Checked on packed pairs (``.f16x2``, ``.bf16x2``) and single halves against numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

from .test_ptx_fuzz import check
from .test_ptx_video import kernel, run_kernel

CANONICAL_NAN = 0x7FFF
NAN16 = {"f16": 0x7E00, "bf16": 0x7FC0}


def to_bits(values: list[float], kind: str) -> np.ndarray:
    if kind == "f16":
        return np.array(values, np.float16).view(np.uint16)
    return (np.array(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)  # exact


def to_float(bits: np.ndarray, kind: str) -> np.ndarray:
    if kind == "f16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float32)
    return (bits.astype(np.uint32) << 16).view(np.float32)


def pairs(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return (lo.astype(np.uint32) | hi.astype(np.uint32) << 16).astype(np.uint32)


def halves(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (words & 0xFFFF).astype(np.uint16), (words >> 16).astype(np.uint16)


A = [1.5, -2.0, 3.0, 0.5, -1.0, 2.0, np.nan, 4.0]
B = [2.0, 2.0, -1.0, 0.25, 1.0, -0.5, 1.0, np.nan]
C = [0.5, 1.0, 2.0, -1.0, 0.5, -3.0, 0.0, 1.0]


def run_pairs(insn: str, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """The instruction on (A[k], A[k+4]) ... packed pairs: its low and high halves."""
    a = pairs(to_bits(A[:4], kind), to_bits(A[4:], kind))
    b = pairs(to_bits(B[:4], kind), to_bits(B[4:], kind))
    c = pairs(to_bits(C[:4], kind), to_bits(C[4:], kind))
    return halves(run_kernel(kernel(insn), a, b, c))


def joined(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return np.concatenate([lo, hi])


@pytest.mark.parametrize("kind", ["f16", "bf16"])
def test_fma_relu_clamps_negative_results_and_canonicalises_nan(kind):
    got = joined(*run_pairs(f"fma.rn.relu.{kind}x2 {{d}}, {{a}}, {{b}}, {{c}}", kind))
    a, b, c = (np.array(v, np.float32) for v in (A, B, C))
    want = a * b + c
    for k, bits in enumerate(got):
        if np.isnan(want[k]):
            assert bits == CANONICAL_NAN, (k, hex(bits))
        else:
            assert to_float(np.array([bits]), kind)[0] == max(want[k], 0.0), (k, hex(bits))


@pytest.mark.parametrize("kind", ["f16", "bf16"])
@pytest.mark.parametrize("op", ["max", "min"])
def test_min_max_nan_gives_the_canonical_nan_for_a_nan_input(kind, op):
    pick = np.fmax if op == "max" else np.fmin
    a, b = np.array(A, np.float32), np.array(B, np.float32)
    nan_got = joined(*run_pairs(f"{op}.NaN.{kind}x2 {{d}}, {{a}}, {{b}}", kind))
    plain_got = joined(*run_pairs(f"{op}.{kind}x2 {{d}}, {{a}}, {{b}}", kind))
    for k in range(len(A)):
        if np.isnan(a[k]) or np.isnan(b[k]):
            assert nan_got[k] == CANONICAL_NAN, (k, hex(nan_got[k]))
            # without .NaN the number wins over the NaN, as before
            assert to_float(plain_got[k:k + 1], kind)[0] == pick(a[k], b[k])
        else:
            assert to_float(nan_got[k:k + 1], kind)[0] == pick(a[k], b[k])


def test_single_bf16_fma_relu_in_a_b16_register():
    text = kernel(""".reg .b16 %h<5>;
        mov.b32 {{%h1, %h4}}, {a}; mov.b32 {{%h2, %h4}}, {b}; mov.b32 {{%h3, %h4}}, {c};
        fma.rn.relu.bf16 %h4, %h1, %h2, %h3; cvt.u32.u16 {d}, %h4""")
    a, b, c = to_bits(A, "bf16"), to_bits(B, "bf16"), to_bits(C, "bf16")
    got = run_kernel(text, a.astype(np.uint32), b.astype(np.uint32), c.astype(np.uint32))
    want = np.array(A, np.float32) * np.array(B, np.float32) + np.array(C, np.float32)
    for k, bits in enumerate(got):
        expect = CANONICAL_NAN if np.isnan(want[k]) else int(to_bits([max(want[k], 0.0)],
                                                                     "bf16")[0])
        assert bits == expect, (k, hex(int(bits)))


def test_relu_on_a_half_add_is_still_refused():
    rc, msg = check(kernel("add.relu.f16x2 {d}, {a}, {b}").encode())
    assert rc == -1 and "add.relu.f16x2" in msg, msg
