"""The PTX corpus: one row per kernel, with its inputs and a numpy reference.

Integers are checked exactly. Float tolerances follow what CUDA documents for each
function (CUDA C Programming Guide, "Mathematical Functions", and the PTX ISA for the
``.approx`` instructions behind the fast intrinsics); sums are made order-independent
by using integer-valued floats wherever atomics or shuffles reorder them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from .spec import (
    Buf,
    Case,
    Scalar,
    Struct,
    Symbol,
    Tol,
    floats,
    full,
    ints,
    whole_floats,
    zeros,
)

V = Mapping[str, Any]
I32_MIN, I32_MAX, U32_MAX = -(2**31), 2**31 - 1, 2**32 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def _trunc_div(a: int, b: int) -> tuple[int, int]:
    """C's division: the quotient rounds toward zero, the remainder takes a's sign."""
    q = abs(a) // abs(b)
    q = q if (a < 0) == (b < 0) else -q
    return q, a - q * b


def _s32(v: int) -> int:
    v &= U32_MAX
    return v - 2**32 if v >= 2**31 else v


# ---------------------------------------------------------------- reductions
def _block_sums(v: V) -> dict[str, np.ndarray]:
    x = np.zeros(16 * 256, np.int32)
    x[: len(v["in"])] = v["in"]
    return {"out": x.reshape(16, 256).sum(1, dtype=np.int32)}


def _warp_sums(v: V) -> dict[str, np.ndarray]:
    return {"out": v["in"].reshape(-1, 32).sum(1, dtype=np.float32)}


def _warp_max(v: V) -> dict[str, np.ndarray]:
    return {"out": np.repeat(v["in"].reshape(-1, 32).max(1), 32)}


def _dyn_sums(v: V) -> dict[str, np.ndarray]:
    x = np.zeros(8 * 128)
    x[: len(v["in"])] = v["in"]
    return {"out": x.reshape(8, 128).sum(1)}


def _grid_stride(v: V) -> dict[str, np.ndarray]:
    return {"total": np.array([int(v["in"].astype(np.uint64).sum())], np.uint64)}


# --------------------------------------------------------------------- scans
def _inclusive(block: int):
    def ref(v: V) -> dict[str, np.ndarray]:
        x = v["in"].reshape(-1, block)
        return {"out": np.cumsum(x, axis=1, dtype=x.dtype).ravel()}

    return ref


def _exclusive(v: V) -> dict[str, np.ndarray]:
    x = v["in"].reshape(-1, 256)
    inc = np.cumsum(x, axis=1, dtype=np.uint32)
    return {"out": (inc - x).ravel()}


# ------------------------------------------------------------------- atomics
def _hist_shared(v: V) -> dict[str, np.ndarray]:
    return {"bins": np.bincount(v["in"] & 63, minlength=64).astype(np.uint32)}


def _hist_global(v: V) -> dict[str, np.ndarray]:
    return {"bins": np.bincount(v["in"] & 15, minlength=16).astype(np.int32)}


def _float_adds(v: V) -> dict[str, np.ndarray]:
    x = v["in"]
    i = np.arange(len(x))
    f = np.array([x[i % 8 == k].sum() for k in range(8)], np.float32)
    d = np.array([(x[i % 4 == k].astype(np.float64) * 0.5).sum() for k in range(4)])
    return {"fsum": f, "dsum": d}


def _cas_max(v: V) -> dict[str, np.ndarray]:
    x = v["in"]
    out = np.zeros(4, np.float32)
    out[0] = max(float(x.max()), -1e30)
    out[2:].view(np.uint64)[0] = int((x.astype(np.int64) ** 2).sum())
    return {"out": out}


def _min_max(v: V) -> dict[str, np.ndarray]:
    x = v["in"]
    return {
        "s32": np.array([x.min(), x.max()], np.int32),
        "u32": np.array([x.view(np.uint32).min(), x.view(np.uint32).max()], np.uint32),
        "u64": np.array([x.astype(np.int64).view(np.uint64).max()], np.uint64),
        "s64": np.array([(x.astype(np.int64) * 1000003).min()], np.int64),
    }


def _inc_dec(v: V) -> dict[str, np.ndarray]:
    n = 3 * 96  # every thread of the grid once
    return {"counters": np.array([n % 7, (10 - n % 10) % 10, n], np.uint32)}


def _bitwise(v: V) -> dict[str, np.ndarray]:
    x = v["in"]
    and_, or_, xor, or64, xor64 = U32_MAX, 0, 0, 0, 0
    for i, a in enumerate(int(a) for a in x):
        and_ &= a | 0x80000001
        or_ |= a & 0x0F0F0F0F
        xor ^= a
        or64 |= a << (i & 31)
        xor64 ^= (a * 0x100000001) % 2**64
    return {
        "acc": np.array([and_, or_, xor], np.uint32),
        "slots": x.copy(),
        "olds": v["slots"].copy(),
        "acc64": np.array([or64, xor64], np.uint64),
    }


# -------------------------------------------------------------------- matmul
M, N, K = 37, 29, 45
ROWS, COLS = 45, 70


def _matmul(v: V) -> dict[str, np.ndarray]:
    a = v["A"].reshape(M, K).astype(np.float64)
    b = v["B"].reshape(K, N).astype(np.float64)
    return {"C": (a @ b).astype(np.float32).ravel()}


def _transpose(v: V) -> dict[str, np.ndarray]:
    return {"out": v["in"].reshape(ROWS, COLS).T.ravel().copy()}


# -------------------------------------------------------------------- memory
def _poly(v: V) -> dict[str, np.ndarray]:
    c = v["poly_coeffs"].astype(np.float64)
    x = v["x"].astype(np.float64)
    acc = np.full_like(x, c[7])
    for k in range(6, -1, -1):
        acc = acc * x + c[k]
    return {"y": acc.astype(np.float32)}


def _scale(v: V) -> dict[str, np.ndarray]:
    return {
        "out": v["in"] * v["device_scale"][0],
        "launch_counter": np.array([128], np.int32),
    }


def _local_array(v: V) -> dict[str, np.ndarray]:
    idx = v["idx"]
    out = np.zeros(128, np.int32)
    for i in range(128):
        local = [i * k - k * k for k in range(16)]
        acc = 0
        for k in range(8):
            j = int(idx[i * 8 + k]) & 15
            acc = _s32(acc + local[j])
            local[(j + 3) & 15] = _s32(local[(j + 3) & 15] ^ acc)
        out[i] = _s32(acc + local[i & 15])
    return {"out": out}


def _vectors(v: V) -> dict[str, np.ndarray]:
    x = v["in"].reshape(-1, 4)
    out = np.stack([x[:, 3] * 2, x[:, 2] + 1, x[:, 1] - x[:, 0], x[:, 0]], 1)
    p = v["pairs"].reshape(-1, 2)
    return {"out": out.astype(np.float32).ravel(), "sums": p[:, 0] * 3 - p[:, 1]}


def _many_params(v: V) -> dict[str, np.ndarray]:
    m = v["m"]
    base = float(v["c"]) + int(v["s"]) + int(v["i"]) + float(v["ll"]) + float(v["f"])
    base += float(v["d"]) + int(v["uc"]) + int(v["us"])
    base += float(np.float32(int(m["a"]) + float(m["b"]))) + float(m["c"]) + int(m["tag"])
    t = np.arange(64, dtype=np.float64)
    return {"out": base * (t + 1) + v["extra"]}


# ---------------------------------------------------------------------- math
def _f64(v: V) -> dict[str, np.ndarray]:
    a, b = v["x"], v["y"]
    fma = [float(Fraction(x) * Fraction(y) - Fraction(x)) for x, y in zip(a, b, strict=True)]
    cols = [np.sqrt(a), np.exp(b), np.log(a), np.sin(b), np.cos(b), np.power(a, b),
            np.array(fma), a / b]
    return {"out": np.stack(cols, 1).ravel()}


def _f32(v: V) -> dict[str, np.ndarray]:
    a, b = v["x"].astype(np.float64), v["y"].astype(np.float64)
    cols = [np.sqrt(a), np.exp(b), np.log(a), np.sin(b), np.cos(b), np.exp(b), np.sin(b),
            np.cos(b), 1 / np.sqrt(a), b / a, a / b, np.log(a)]
    return {"out": np.stack(cols, 1).astype(np.float32).ravel()}


def _bf16(x: np.ndarray) -> np.ndarray:
    """float32 to bfloat16 and back, rounding to nearest even as __float2bfloat16 does."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32)


def _half(v: V) -> dict[str, np.ndarray]:
    hx, hy = v["x"].astype(np.float16), v["y"].astype(np.float16)
    cols = [hx, hx + hy, hx * hy, _bf16(v["x"]), np.where(hx < hy, hx, hy)]
    return {"out": np.stack([c.astype(np.float32) for c in cols], 1).ravel()}


def _nan_inputs(rng: np.random.Generator) -> np.ndarray:
    x = rng.uniform(-5, 5, 64).astype(np.float32)
    x[::5] = np.nan
    x[12] = 1.0  # equal to y[12]
    return x


def _nan_other(rng: np.random.Generator) -> np.ndarray:
    y = rng.uniform(-5, 5, 64).astype(np.float32)
    y[::7] = np.nan
    y[3], y[11], y[13] = np.inf, -np.inf, np.inf
    y[12] = 1.0
    return y


def _nan_compare(v: V) -> dict[str, np.ndarray]:
    a, b = v["x"], v["y"]
    with np.errstate(invalid="ignore"):
        bits = [np.isnan(a), a < b, a <= b, a == b, a != b, a >= b, a > b, ~(a < b), np.isinf(b)]
    flags = sum(f.astype(np.int32) << k for k, f in enumerate(bits))
    return {
        "fout": np.stack([np.fmin(a, b), np.fmax(a, b)], 1).ravel(),
        "flags": flags.astype(np.int32),
        "dout": np.fmax(a.astype(np.float64), b.astype(np.float64) * 2.0),
    }


ROUNDING_PROBES = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 3e9, -3e9, np.inf, -np.inf,
                   np.nan, 1e-40, -0.0, 2147483520.0, -2147483648.0, 4294967040.0, 0.9999999]


def _rounding_inputs(rng: np.random.Generator) -> np.ndarray:
    x = rng.uniform(-1000, 1000, 64).astype(np.float32)
    x[: len(ROUNDING_PROBES)] = ROUNDING_PROBES
    return x


def _to_int(x: np.ndarray, rnd: Any, lo: int, hi: int, dtype: str) -> np.ndarray:
    """PTX cvt to an integer: round, clamp to the destination range, NaN becomes 0."""
    r = rnd(x.astype(np.float64))
    return np.array([0 if math.isnan(e) else lo if e <= lo else hi if e >= hi else int(e)
                     for e in r], dtype=dtype)


def _float_to_int(v: V) -> dict[str, np.ndarray]:
    x = v["x"]
    modes = [np.rint, np.trunc, np.ceil, np.floor, np.trunc]
    iout = np.stack([_to_int(x, r, I32_MIN, I32_MAX, "int32") for r in modes], 1).ravel()
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = x * np.float32(1e6)
    return {
        "iout": iout,
        "uout": _to_int(x, np.rint, 0, U32_MAX, "uint32"),
        "sat": np.where(np.isnan(x), 0, np.clip(x, 0, 1)).astype(np.float32),
        "lout": _to_int(scaled, np.trunc, I64_MIN, I64_MAX, "int64"),
    }


# ------------------------------------------------------------------ integers
def _div_inputs32(rng: np.random.Generator) -> np.ndarray:
    b = rng.integers(-1000, 1000, 256).astype(np.int32)
    b[b == 0] = 7
    b[::9] = rng.integers(I32_MIN, I32_MAX, len(b[::9]))
    b[b == 0] = -3
    return b


def _div_inputs64(rng: np.random.Generator) -> np.ndarray:
    b = rng.integers(-(2**40), 2**40, 256, dtype=np.int64)
    b[::3] = rng.integers(-100, 100, len(b[::3]))
    b[b == 0] = 11
    return b


def _div_rem(v: V) -> dict[str, np.ndarray]:
    out: dict[str, list[int]] = {"s32": [], "u32": [], "s64": [], "u64": []}
    for a, b, c, d in zip(v["a32"], v["b32"], v["a64"], v["b64"], strict=True):
        a, b, c, d = int(a), int(b), int(c), int(d)
        out["s32"] += _trunc_div(a, b)
        out["u32"] += divmod(a % 2**32, b % 2**32)
        out["s64"] += _trunc_div(c, d)
        out["u64"] += divmod(c % 2**64, d % 2**64)
    dtypes = {"s32": "int32", "u32": "uint32", "s64": "int64", "u64": "uint64"}
    return {k: np.array(x, dtypes[k]) for k, x in out.items()}


def _div_const(v: V) -> dict[str, np.ndarray]:
    out = []
    for a in (int(a) for a in v["a"]):
        out += [_trunc_div(a, 7)[0], _trunc_div(a, 10)[1], (a % 2**32) // 3,
                _trunc_div(a, -16)[0]]
    return {"out": np.array([_s32(x) for x in out], np.int32)}


def _ffs(x: int) -> int:
    return (x & -x).bit_length()


def _clz(x: int, bits: int) -> int:
    return bits - x.bit_length()


def _brev(x: int, bits: int) -> int:
    return int(f"{x:0{bits}b}"[::-1], 2)


def _byte_perm(a: int, b: int, s: int) -> int:
    src = (b << 32 | a).to_bytes(8, "little")
    return int.from_bytes(bytes(src[(s >> (4 * k)) & 7] for k in range(4)), "little")


def _bit_inputs(rng: np.random.Generator) -> np.ndarray:
    x = rng.integers(0, 2**32, 128, dtype=np.uint32)
    x[0], x[1], x[2] = 0, U32_MAX, 0x80000000
    return x


def _bit_words(rng: np.random.Generator) -> np.ndarray:
    w = rng.integers(0, 2**64, 128, dtype=np.uint64) >> rng.integers(0, 64, 128, np.uint64)
    w[0] = 0
    return w


def _bits(v: V) -> dict[str, np.ndarray]:
    out = []
    for a, b, c in zip(v["x"], v["y"], v["w"], strict=True):
        a, b, c = int(a), int(b), int(c)
        pair = b << 32 | a
        sh = b & 63
        field = (a >> (b & 15)) & ((1 << ((b >> 4) & 15)) - 1)
        signed = _s32(a << (b & 7)) >> ((b >> 8) & 15)
        out += [bin(a).count("1"), _clz(a, 32), _brev(a, 32), _byte_perm(a, b, b & 0x7777),
                (pair << (sh & 31)) >> 32, pair >> (sh & 31), (pair << min(sh, 32)) >> 32,
                _ffs(a), field, signed, bin(c).count("1"), _clz(c, 64), _ffs(c),
                _brev(c, 64) >> 17]
    return {"out": np.array([x % 2**32 for x in out], np.uint32)}


def _mul_hi(v: V) -> dict[str, np.ndarray]:
    n = len(v["x"])
    w = [int(e) for e in v["w"]]
    out = []
    for i, (a, b) in enumerate(zip(v["x"], v["y"], strict=True)):
        a, b, c, d = int(a), int(b), w[i], w[i + n]
        sa, sb = _s32(a), _s32(b)
        sc, sd = c - 2**64 * (c >> 63), d - 2**64 * (d >> 63)
        out += [(a * b) >> 32, ((sa * sb) >> 32) % 2**32, a * b, sa * sb, (c * d) >> 64,
                (sc * sd) >> 64]
    return {"out": np.array([x % 2**64 for x in out], np.uint64)}


# ------------------------------------------------------------------- control
def _calls(v: V) -> dict[str, np.ndarray]:
    a, b = v["a"].astype(np.int64), v["b"].astype(np.int64)
    g = np.array([math.gcd(int(x), int(y)) for x, y in zip(a, b, strict=True)], np.int32)
    fa, fb = a.astype(np.float32), b.astype(np.float32)
    f = np.stack([fa + np.float32(0.25) * (fb - fa), fa - fb], 1).ravel()
    prod = a * b
    m = (prod << (np.arange(128) & 15)) ^ (prod >> 3)
    return {"g": g, "f": f.astype(np.float32), "m": m}


def _collatz(v: V) -> dict[str, np.ndarray]:
    out = v["steps"].copy()
    for i, x in enumerate(int(x) for x in v["in"]):
        if x <= 0:
            out[i] = -1
            continue
        s = 0
        while x != 1 and s <= 500:
            s += 1
            x = 3 * x + 1 if x & 1 else x >> 1
        if s % 3:
            out[i] = s
    return {"steps": out}


def _vote_inputs(rng: np.random.Generator) -> np.ndarray:
    x = rng.integers(-100, 100, 128).astype(np.int32)
    x[32:64] = rng.integers(-49, 90, 32)  # a warp where all() holds and any() does not
    return x


def _votes(v: V) -> dict[str, np.ndarray]:
    out = []
    for w in v["in"].reshape(-1, 32):
        ballot = sum(1 << k for k in range(32) if w[k] > 0)
        odd = sum(1 << k for k in range(32) if w[k] & 1)
        for k in range(32):
            out += [ballot, int((w > -50).all()), int((w > 90).any()), odd if w[k] & 1 else 0]
    return {"out": np.array(out, np.uint32)}


GRID3, BLOCK3 = (2, 3, 2), (4, 2, 3)


def _grid3(v: V) -> dict[str, np.ndarray]:
    gx, gy, gz = GRID3
    bx_, by_, bz_ = BLOCK3
    out = np.zeros(gx * gy * gz * bx_ * by_ * bz_, np.uint32)
    for bz in range(gz):
        for by in range(gy):
            for bx in range(gx):
                block = (bz * gy + by) * gx + bx
                for tz in range(bz_):
                    for ty in range(by_):
                        for tx in range(bx_):
                            local = (tz * by_ + ty) * bx_ + tx
                            out[block * bx_ * by_ * bz_ + local] = (
                                tx | ty << 4 | tz << 8 | bx << 12 | by << 16 | bz << 20
                                | (gx * gy * gz) << 24)
    return {"out": out}


def _switch_inputs(rng: np.random.Generator) -> np.ndarray:
    x = rng.integers(-200, 200, 128).astype(np.int32)
    x[5], x[17], x[40] = 1000, -77, 123456
    return x


def _switch(v: V) -> dict[str, np.ndarray]:
    cases = [lambda x: x + 11, lambda x: x * 3, lambda x: x - 100, lambda x: x ^ 0x55,
             lambda x: -x, lambda x: x << 2, lambda x: x >> 1, lambda x: 7]
    extra = {1000: 1, -77: 2, 123456: 3}
    out = [_s32(cases[x & 7](x) + extra.get(x, 0)) for x in (int(e) for e in v["in"])]
    return {"out": np.array(out, np.int32)}


def _lanes(v: V) -> dict[str, np.ndarray]:
    i = np.arange(128, dtype=np.uint32)
    lane = i % 32
    return {"out": np.stack([lane, i - lane + 31 - lane], 1).ravel(),
            "ordered": np.ones(128, np.uint64)}


# ------------------------------------------------------------ second wave
def _shared_mixed(v: V) -> dict[str, np.ndarray]:
    x = v["in"].reshape(2, 128).astype(np.float64)
    words = np.array([[int((x[b] + 1000).sum()), 128] for b in range(2)], np.uint64).ravel()
    return {"fsum": x.sum(1).astype(np.float32), "dsum": (x * 0.25).sum(1), "words": words}


def _sync_inputs(rng: np.random.Generator) -> np.ndarray:
    x = rng.integers(-100, 100, 384).astype(np.int32)
    x[96:192] = rng.integers(-89, 95, 96)  # a block where and() holds and or() does not
    return x


def _sync_counts(v: V) -> dict[str, np.ndarray]:
    out = [[int((b > 0).sum()), int((b > -90).all()), int((b > 95).any())]
           for b in v["in"].reshape(4, 96)]
    return {"out": np.array(out, np.int32).ravel()}


def _match_shuffle(v: V) -> dict[str, np.ndarray]:
    x, d = v["in"], v["d"]
    groups, bcast = [], []
    for i in range(len(x)):
        base, lane = i - i % 32, i % 32
        key = x[i] & 7
        groups.append(sum(1 << k for k in range(32) if x[base + k] & 7 == key))
        bcast.append(d[base + (lane * 7) % 32])
    return {"groups": np.array(groups, np.uint32), "bcast": np.array(bcast),
            "folded": x.reshape(-1, 32).sum(1).astype(np.int32)}


def _fib(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def _recursion(v: V) -> dict[str, np.ndarray]:
    return {"out": np.array([_fib(int(x) & 11) for x in v["in"]], np.int32)}


def _indirect(v: V) -> dict[str, np.ndarray]:
    ops = [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, max]
    out = [_s32(ops[x & 3](x, i)) for i, x in enumerate(int(e) for e in v["in"])]
    return {"out": np.array(out, np.int32)}


def _generic(v: V) -> dict[str, np.ndarray]:
    g = v["g"].astype(np.int64).reshape(128, 4)
    t = np.arange(128)
    b = np.where(t % 4 == 0, 12 * t + 18, 0)
    sh = np.where(t % 4 == 0, 7, 3 * t)
    out = np.stack([g.sum(1), b, (4 * t + 6) + 5, sh], 1).astype(np.int32).ravel()
    marked = v["g"].copy()
    marked[::4] = -1
    return {"g": marked, "out": out}


ROUNDING_FLOATS = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.0, -0.0, 0.49999997, -7.25, 3.75,
                   1e30, -1e30, 0.75, -0.75, 2.25]


def _rounding_floats(rng: np.random.Generator) -> np.ndarray:
    x = rng.uniform(-100, 100, 64).astype(np.float32)
    x[: len(ROUNDING_FLOATS)] = ROUNDING_FLOATS
    return x


def _wide_doubles(rng: np.random.Generator) -> np.ndarray:
    return rng.uniform(-1, 1, 64) * 10.0 ** rng.uniform(0, 40, 64)


def _double_to_float(b: np.ndarray) -> list[np.ndarray]:
    """__double2float_rn/rz/ru/rd: round to nearest, then step toward the mode's side."""
    with np.errstate(over="ignore"):
        rn = b.astype(np.float32)
    wide = rn.astype(np.float64)
    down = np.where(wide > b, np.nextafter(rn, np.float32(-np.inf)), rn)
    up = np.where(wide < b, np.nextafter(rn, np.float32(np.inf)), rn)
    return [rn, np.where(b >= 0, down, up), up, down]


def _rounding_exact(v: V) -> dict[str, np.ndarray]:
    a, b = v["x"], v["w"]
    f64 = a.astype(np.float64)
    mant, exp = np.frexp(a)
    i1 = _to_int(b * 1e-30, np.rint, I32_MIN, I32_MAX, "int32").astype(np.float32)
    l2 = _to_int(b * 1e-29, np.floor, I64_MIN, I64_MAX, "int64").astype(np.float32)
    cols = [np.floor(a), np.ceil(a), np.trunc(a),
            (np.sign(f64) * np.floor(np.abs(f64) + 0.5)).astype(np.float32), np.rint(a),
            np.fmod(a, np.float32(0.75)),
            np.ldexp(a, (np.arange(64) % 9 - 4)).astype(np.float32),
            mant + exp.astype(np.float32) * np.float32(16),
            np.copysign(np.float32(1.5), a) + np.abs(a), *_double_to_float(b), i1 + l2]
    return {"out": np.stack([np.asarray(c, np.float32) for c in cols], 1).ravel()}


def _special(v: V) -> dict[str, np.ndarray]:
    a, b = v["x"].astype(np.float64), v["y"].astype(np.float64)
    erf = np.array([math.erf(e) for e in b])
    cols = [np.tanh(b), np.arctan2(b, a), erf, np.cbrt(b), np.log1p(a), np.expm1(b),
            np.hypot(a, b), np.power(a, b)]
    return {"out": np.stack(cols, 1).astype(np.float32).ravel()}


def _bfe(a: int, pos: int, length: int, signed: bool) -> int:
    bits = [(a >> k) & 1 for k in range(32)]
    sbit = bits[min(pos + length - 1, 31)] if signed and length else 0
    return sum((bits[pos + k] if k < length and pos + k <= 31 else sbit) << k for k in range(32))


def _bfi(field: int, base: int, pos: int, length: int) -> int:
    for k in range(length):
        if pos + k <= 31:
            base = base & ~(1 << (pos + k)) | ((field >> k) & 1) << (pos + k)
    return base


def _s24(v: int) -> int:
    v &= 0xFFFFFF
    return v - 2**24 if v >= 2**23 else v


def _bitfield(v: V) -> dict[str, np.ndarray]:
    n = len(v["x"])
    w = [int(e) for e in v["w"]]
    out, out64 = [], []
    for i, (a, b) in enumerate(zip(v["x"], v["y"], strict=True)):
        a, b = int(a), int(b)
        pos, length = b & 31, (b >> 8) & 31
        out += [_bfe(a, pos, length, False), _bfe(a, pos, length, True),
                _bfi(b, a, pos, length), (a + b) >> 1, (_s32(a) + _s32(b) + 1) >> 1,
                abs(a - b) + 7, _s24(a) * _s24(b), (a & 0xFFFFFF) * (b & 0xFFFFFF)]
        c, d = w[i], w[i + n]
        out64 += [abs(c) ^ int(c < d), max(c % 2**64, d % 2**64), min(c, d)]
    return {"out": np.array([x % 2**32 for x in out], np.uint32),
            "out64": np.array([(x + 2**63) % 2**64 - 2**63 for x in out64], np.int64)}


# --------------------------------------------------------------------- edges
SHIFT_PROBES = [0, 1, 31, 32, 33, 63, 64, 65, 200, 255, 259, 0xFFFFFFFF, 0x2010, 0x1F1F,
                0x280A28, 0xFF00FF, 0x3F3F3F3F]


def _shift_amounts(rng: np.random.Generator) -> np.ndarray:
    s = rng.integers(0, 2**32, 64, dtype=np.uint32)
    s[32:] = rng.integers(0, 70, 32)
    s[: len(SHIFT_PROBES)] = SHIFT_PROBES
    return s


def _shift_edges(v: V) -> dict[str, np.ndarray]:
    """PTX clamps shift amounts to the width (C leaves them undefined)."""
    out, out64 = [], []
    for a, s, c in zip(v["x"], v["amount"], v["w"], strict=True):
        a, s, c = int(a), int(s), int(c)
        k, k64 = min(s, 32), min(s, 64)
        sc = c - 2**64 if c >> 63 else c
        out += [(a << k) % 2**32, a >> k, _s32(a) >> k,
                _bfe(a, s & 0xFF, (s >> 8) & 0xFF, False),
                _bfe(a, s & 63, (s >> 16) & 0xFF, True),
                _bfi(s, a, (s >> 4) & 0xFF, (s >> 12) & 0xFF)]
        out64 += [(c << k64) % 2**64, c >> k64, (sc >> k64) % 2**64]
    return {"out": np.array([x % 2**32 for x in out], np.uint32),
            "out64": np.array(out64, np.uint64)}


EDGE_X = [1e-40, -1e-40, 1.4e-45, 3.4e38, -3.4e38, 0.0, -0.0, np.inf, -np.inf, np.nan, 1.0,
          2.0, -4.0, 1e-38, 1.17549435e-38, 5e-39]
EDGE_Y = [2.0, 1e-40, -0.0, 10.0, 3.4e38, 0.0, np.inf, np.inf, 1.0, 1.0, 3.0, 0.5, 1e-40,
          1e-38, 0.5, 2.0]


def _edge_floats(probes: list[float]) -> Any:
    def init(rng: np.random.Generator) -> np.ndarray:
        x = (rng.uniform(-1, 1, 64) * 10.0 ** rng.uniform(-44, 38, 64)).astype(np.float32)
        x[: len(probes)] = probes
        return x

    return init


def _float_edges(v: V) -> dict[str, np.ndarray]:
    a, b = v["x"], v["y"]
    tiny = np.arange(64).astype(np.float32) * np.float32(1e-45)
    with np.errstate(all="ignore"):
        cols = [a + b, a * b, a / b, np.sqrt(a), np.float32(1) / b, a - b, tiny + a]
        wide = a.astype(np.float64)
        dout = np.stack([wide * b.astype(np.float64), wide + 1e-310], 1).ravel()
    return {"out": np.stack(cols, 1).astype(np.float32).ravel(), "dout": dout}


# --------------------------------------------------------------------- table
ONE = (1, 1, 1)

CASES: list[Case] = [
    Case("reduce_shared_sum", "reductions", (16, 1, 1), (256, 1, 1),
         (Buf("in", ints(4000, -1000, 1000)), Buf("out", zeros(16, "int32"), out=True),
          Scalar("n", "int32", 4000)), _block_sums),
    Case("reduce_warp_shfl_down", "reductions", (4, 1, 1), (128, 1, 1),
         (Buf("in", whole_floats(512, -100, 100)), Buf("out", zeros(16, "float32"), out=True)),
         _warp_sums),
    Case("reduce_warp_xor_max", "reductions", (2, 1, 1), (64, 1, 1),
         (Buf("in", ints(128, -10**6, 10**6)), Buf("out", zeros(128, "int32"), out=True)),
         _warp_max),
    Case("reduce_dynamic_shared", "reductions", (8, 1, 1), (128, 1, 1),
         (Buf("in", whole_floats(1000, -4000, 4000, "float64")),
          Buf("out", zeros(8, "float64"), out=True), Scalar("n", "int32", 1000)),
         _dyn_sums, shared=128 * 8),
    Case("grid_stride_sum", "reductions", (4, 1, 1), (64, 1, 1),
         (Buf("in", ints(10000, 0, 2**32, "uint32")), Buf("total", zeros(1, "uint64"), out=True),
          Scalar("n", "int32", 10000)), _grid_stride),
    Case("scan_inclusive_hillis", "scans", (4, 1, 1), (256, 1, 1),
         (Buf("in", ints(1024, -50, 50)), Buf("out", zeros(1024, "int32"), out=True)),
         _inclusive(256)),
    Case("scan_warp_shfl_up", "scans", (2, 1, 1), (256, 1, 1),
         (Buf("in", ints(512, -1000, 1000)), Buf("out", zeros(512, "int32"), out=True)),
         _inclusive(256)),
    Case("scan_exclusive_blelloch", "scans", (3, 1, 1), (128, 1, 1),
         (Buf("in", ints(768, 0, 1000, "uint32")), Buf("out", zeros(768, "uint32"), out=True)),
         _exclusive),
    Case("histogram_shared", "atomics", (4, 1, 1), (128, 1, 1),
         (Buf("in", ints(5000, 0, 256, "uint8")), Buf("bins", zeros(64, "uint32"), out=True),
          Scalar("n", "int32", 5000)), _hist_shared),
    Case("histogram_global", "atomics", (12, 1, 1), (256, 1, 1),
         (Buf("in", ints(3000, -1000, 1000)), Buf("bins", zeros(16, "int32"), out=True),
          Scalar("n", "int32", 3000)), _hist_global),
    Case("atomic_add_float_double", "atomics", (4, 1, 1), (64, 1, 1),
         (Buf("in", whole_floats(256, -64, 64)), Buf("fsum", zeros(8, "float32"), out=True),
          Buf("dsum", zeros(4, "float64"), out=True)), _float_adds),
    Case("atomic_cas_float_max", "atomics", (2, 1, 1), (128, 1, 1),
         (Buf("in", whole_floats(256, -1000, 1000)),
          Buf("out", lambda rng: np.array([-1e30, 0, 0, 0], np.float32), out=True)), _cas_max),
    Case("atomic_min_max", "atomics", (2, 1, 1), (128, 1, 1),
         (Buf("in", ints(256, -10**6, 10**6)),
          Buf("s32", lambda rng: np.array([I32_MAX, I32_MIN], np.int32), out=True),
          Buf("u32", lambda rng: np.array([U32_MAX, 0], np.uint32), out=True),
          Buf("u64", zeros(1, "uint64"), out=True),
          Buf("s64", full(1, I64_MAX, "int64"), out=True)), _min_max),
    Case("atomic_inc_dec", "atomics", (3, 1, 1), (96, 1, 1),
         (Buf("counters", zeros(3, "uint32"), out=True),), _inc_dec),
    Case("atomic_bitwise_exch", "atomics", (2, 1, 1), (64, 1, 1),
         (Buf("in", ints(128, 0, 2**32, "uint32")),
          Buf("acc", lambda rng: np.array([U32_MAX, 0, 0], np.uint32), out=True),
          Buf("slots", ints(128, 0, 2**32, "uint32"), out=True),
          Buf("olds", zeros(128, "uint32"), out=True),
          Buf("acc64", zeros(2, "uint64"), out=True)), _bitwise),
    Case("matmul_tiled", "matmul", ((N + 15) // 16, (M + 15) // 16, 1), (16, 16, 1),
         (Buf("A", floats(M * K, -1, 1)), Buf("B", floats(K * N, -1, 1)),
          Buf("C", zeros(M * N, "float32"), out=True), Scalar("M", "int32", M),
          Scalar("N", "int32", N), Scalar("K", "int32", K)), _matmul,
         tol=Tol(1e-5, 1e-5), why="float32 accumulation of 45 products (order and fma)"),
    Case("transpose_padded", "matmul", ((COLS + 31) // 32, (ROWS + 31) // 32, 1), (32, 8, 1),
         (Buf("in", ints(ROWS * COLS, -(10**9), 10**9)),
          Buf("out", zeros(ROWS * COLS, "int32"), out=True), Scalar("rows", "int32", ROWS),
          Scalar("cols", "int32", COLS)), _transpose),
    Case("constant_poly", "memory", (3, 1, 1), (128, 1, 1),
         (Buf("x", floats(300, -1, 1)), Buf("y", zeros(300, "float32"), out=True),
          Scalar("n", "int32", 300)), _poly,
         symbols=(Symbol("poly_coeffs", floats(8, -2, 2)),),
         tol=Tol(1e-5, 1e-5), why="float32 Horner steps (nvcc contracts them into fma)"),
    Case("device_global_scale", "memory", (2, 1, 1), (64, 1, 1),
         (Buf("in", floats(128, -10, 10)), Buf("out", zeros(128, "float32"), out=True)), _scale,
         symbols=(Symbol("device_scale", full(1, 2.5, "float32")),
                  Symbol("launch_counter", zeros(1, "int32"), out=True))),
    Case("local_array_dynamic", "memory", ONE, (128, 1, 1),
         (Buf("idx", ints(128 * 8, 0, 100)), Buf("out", zeros(128, "int32"), out=True)),
         _local_array),
    Case("vector_float4", "memory", ONE, (64, 1, 1),
         (Buf("in", floats(256, -100, 100)), Buf("out", zeros(256, "float32"), out=True),
          Buf("pairs", ints(128, -10**6, 10**6)), Buf("sums", zeros(64, "int32"), out=True)),
         _vectors),
    Case("many_params", "memory", ONE, (64, 1, 1),
         (Scalar("c", "int8", -5), Scalar("s", "int16", -1234), Scalar("i", "int32", 100000),
          Scalar("ll", "int64", -(2**40) + 7), Scalar("f", "float32", 1.5),
          Scalar("d", "float64", -0.125), Buf("out", zeros(64, "float64"), out=True),
          Scalar("uc", "uint8", 200),
          Struct("m", (("a", "int32", -3), ("b", "float32", 0.75), ("c", "float64", 1e10),
                       ("tag", "int8", 9))),
          Scalar("us", "uint16", 65000), Buf("extra", ints(64, -1000, 1000))), _many_params),
    Case("f64_math", "math", (2, 1, 1), (128, 1, 1),
         (Buf("x", floats(200, 0.1, 10, "float64")), Buf("y", floats(200, -3, 3, "float64")),
          Buf("out", zeros(1600, "float64"), out=True), Scalar("n", "int32", 200)), _f64,
         tol=Tol(1e-15, 1e-16),
         why="CUDA's exp/log 1 ulp, sin/cos/pow 2 ulp; sqrt, div and fma are exact (the "
             "reference computes the fma with fractions)"),
    Case("f32_math", "math", (2, 1, 1), (128, 1, 1),
         (Buf("x", floats(200, 0.1, 10)), Buf("y", floats(200, -3, 3)),
          Buf("out", zeros(2400, "float32"), out=True), Scalar("n", "int32", 200)), _f32,
         tol=Tol(2e-6, 1e-6),
         why="expf/sinf/cosf 2 ulp, logf 1 ulp, rsqrtf and __fdividef 2 ulp, __expf "
             "2+floor(|1.16x|) ulp, __sinf/__cosf/__logf 2^-21.41 absolute on these ranges"),
    Case("half_bf16", "math", (2, 1, 1), (128, 1, 1),
         (Buf("x", lambda rng: (np.round(rng.uniform(-4, 4, 256) * 256) / 256).astype("f4")),
          Buf("y", lambda rng: (rng.choice([-1, 1], 256) * rng.uniform(0.25, 4, 256))
              .astype("f4")),
          Buf("out", zeros(1280, "float32"), out=True), Scalar("n", "int32", 256)), _half),
    Case("nan_compare", "math", ONE, (64, 1, 1),
         (Buf("x", _nan_inputs), Buf("y", _nan_other),
          Buf("fout", zeros(128, "float32"), out=True), Buf("flags", zeros(64, "int32"), out=True),
          Buf("dout", zeros(64, "float64"), out=True), Scalar("n", "int32", 64)), _nan_compare),
    Case("float_to_int", "math", ONE, (64, 1, 1),
         (Buf("x", _rounding_inputs), Buf("iout", zeros(320, "int32"), out=True),
          Buf("uout", zeros(64, "uint32"), out=True), Buf("sat", zeros(64, "float32"), out=True),
          Buf("lout", zeros(64, "int64"), out=True), Scalar("n", "int32", 64)), _float_to_int),
    Case("int_div_rem", "integers", (2, 1, 1), (128, 1, 1),
         (Buf("a32", ints(256, I32_MIN + 1, I32_MAX)), Buf("b32", _div_inputs32),
          Buf("a64", ints(256, -(2**62), 2**62, "int64")), Buf("b64", _div_inputs64),
          Buf("s32", zeros(512, "int32"), out=True), Buf("u32", zeros(512, "uint32"), out=True),
          Buf("s64", zeros(512, "int64"), out=True), Buf("u64", zeros(512, "uint64"), out=True),
          Scalar("n", "int32", 256)), _div_rem),
    Case("int_div_const", "integers", (2, 1, 1), (128, 1, 1),
         (Buf("a", ints(256, I32_MIN, I32_MAX)), Buf("out", zeros(1024, "int32"), out=True),
          Scalar("n", "int32", 256)), _div_const),
    Case("bit_tricks", "integers", ONE, (128, 1, 1),
         (Buf("x", _bit_inputs), Buf("y", ints(128, 0, 2**32, "uint32")),
          Buf("w", _bit_words),
          Buf("out", zeros(128 * 14, "uint32"), out=True), Scalar("n", "int32", 128)), _bits),
    Case("mul_hi_wide", "integers", ONE, (128, 1, 1),
         (Buf("x", _bit_inputs), Buf("y", ints(128, 0, 2**32, "uint32")),
          Buf("w", ints(256, 0, 2**64, "uint64")),
          Buf("out", zeros(128 * 6, "uint64"), out=True), Scalar("n", "int32", 128)), _mul_hi),
    Case("noinline_calls", "control", ONE, (128, 1, 1),
         (Buf("a", ints(128, 1, 10000)), Buf("b", ints(128, 0, 10000)),
          Buf("g", zeros(128, "int32"), out=True), Buf("f", zeros(256, "float32"), out=True),
          Buf("m", zeros(128, "int64"), out=True)), _calls),
    Case("divergent_collatz", "control", (2, 1, 1), (128, 1, 1),
         (Buf("in", ints(200, -20, 2000)), Buf("steps", full(200, -7, "int32"), out=True),
          Scalar("n", "int32", 200)), _collatz),
    Case("warp_votes", "control", (2, 1, 1), (64, 1, 1),
         (Buf("in", _vote_inputs), Buf("out", zeros(512, "uint32"), out=True)), _votes),
    Case("grid_3d", "control", GRID3, BLOCK3,
         (Buf("out", zeros(288, "uint32"), out=True),), _grid3),
    Case("lane_shuffle_fences", "control", (2, 1, 1), (64, 1, 1),
         (Buf("out", zeros(256, "uint32"), out=True),
          Buf("ordered", zeros(128, "uint64"), out=True)), _lanes),
    Case("switch_dispatch", "control", ONE, (128, 1, 1),
         (Buf("in", _switch_inputs), Buf("out", zeros(128, "int32"), out=True)), _switch),
    Case("atomic_shared_mixed", "atomics", (2, 1, 1), (128, 1, 1),
         (Buf("in", whole_floats(256, -100, 100)), Buf("fsum", zeros(2, "float32"), out=True),
          Buf("dsum", zeros(2, "float64"), out=True),
          Buf("words", zeros(4, "uint64"), out=True)), _shared_mixed),
    Case("block_sync_counts", "warp_sync", (4, 1, 1), (96, 1, 1),
         (Buf("in", _sync_inputs), Buf("out", zeros(12, "int32"), out=True)), _sync_counts),
    Case("warp_match_shuffle", "warp_sync", ONE, (64, 1, 1),
         (Buf("in", ints(64, 0, 1000)), Buf("d", floats(64, -1e3, 1e3, "float64")),
          Buf("groups", zeros(64, "uint32"), out=True),
          Buf("bcast", zeros(64, "float64"), out=True),
          Buf("folded", zeros(2, "int32"), out=True)), _match_shuffle),
    Case("recursive_fib", "recursion", ONE, (64, 1, 1),
         (Buf("in", ints(64, -1000, 1000)), Buf("out", zeros(64, "int32"), out=True)),
         _recursion),
    Case("indirect_calls", "calls", ONE, (64, 1, 1),
         (Buf("in", ints(64, -1000, 1000)), Buf("out", zeros(64, "int32"), out=True)),
         _indirect),
    Case("generic_pointers", "memory", ONE, (128, 1, 1),
         (Buf("g", ints(512, -1000, 1000), out=True), Buf("out", zeros(512, "int32"), out=True)),
         _generic),
    Case("float_rounding_exact", "math", ONE, (64, 1, 1),
         (Buf("x", _rounding_floats), Buf("w", _wide_doubles),
          Buf("out", zeros(64 * 14, "float32"), out=True), Scalar("n", "int32", 64)),
         _rounding_exact),
    Case("f32_special", "math", (2, 1, 1), (128, 1, 1),
         (Buf("x", floats(200, 0.1, 10)), Buf("y", floats(200, -3, 3)),
          Buf("out", zeros(1600, "float32"), out=True), Scalar("n", "int32", 200)), _special,
         tol=Tol(1e-6, 1e-7),
         why="tanhf/erff 2 ulp, atan2f/hypotf 3 ulp, powf 4 ulp, cbrtf/log1pf/expm1f 1 ulp"),
    Case("bitfield_and_misc", "integers", ONE, (128, 1, 1),
         (Buf("x", _bit_inputs), Buf("y", ints(128, 0, 2**32, "uint32")),
          Buf("w", ints(256, I64_MIN + 1, I64_MAX, "int64")),
          Buf("out", zeros(1024, "uint32"), out=True), Buf("out64", zeros(384, "int64"), out=True),
          Scalar("n", "int32", 128)), _bitfield),
    Case("shift_edges", "edges", ONE, (64, 1, 1),
         (Buf("x", lambda rng: _bit_inputs(rng)[:64]), Buf("amount", _shift_amounts),
          Buf("w", ints(64, 0, 2**64, "uint64")),
          Buf("out", zeros(384, "uint32"), out=True), Buf("out64", zeros(192, "uint64"), out=True),
          Scalar("n", "int32", 64)), _shift_edges),
    Case("float_edges", "edges", ONE, (64, 1, 1),
         (Buf("x", _edge_floats(EDGE_X)), Buf("y", _edge_floats(EDGE_Y)),
          Buf("out", zeros(448, "float32"), out=True), Buf("dout", zeros(128, "float64"), out=True),
          Scalar("n", "int32", 64)), _float_edges),
]
