"""The shape of a corpus case: what to allocate, what to pass, what to expect.

A case names a kernel of one of the ``.cu`` files here, its launch geometry and its
arguments in parameter order. Buffers are filled from a seeded generator, so every run
sees the same inputs; the reference is a numpy function of those inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Init = Callable[[np.random.Generator], np.ndarray]
Reference = Callable[[Mapping[str, Any]], dict[str, np.ndarray]]


@dataclass(frozen=True)
class Buf:
    """A device allocation passed as a pointer, filled with ``init`` before the launch."""

    name: str
    init: Init
    out: bool = False  # read back after the launch and checked against the reference


@dataclass(frozen=True)
class Scalar:
    name: str
    dtype: str  # numpy name: int8, uint16, int64, float32, ...
    value: int | float


@dataclass(frozen=True)
class Struct:
    """A struct passed by value, laid out as C lays it out (numpy ``align=True``)."""

    name: str
    fields: tuple[tuple[str, str, int | float], ...]

    @property
    def dtype(self) -> np.dtype[Any]:
        return np.dtype([(n, t) for n, t, _ in self.fields], align=True)


@dataclass(frozen=True)
class Symbol:
    """A module-scope ``__constant__``/``__device__`` variable, reached by cuModuleGetGlobal."""

    name: str
    init: Init
    out: bool = False


@dataclass(frozen=True)
class Tol:
    """Float tolerance as in ``numpy.allclose``; both zero means the values must be equal."""

    rtol: float = 0.0
    atol: float = 0.0


EXACT = Tol()
Arg = Buf | Scalar | Struct


@dataclass(frozen=True)
class Case:
    kernel: str
    source: str  # the .cu stem: tests/ptx_corpus/SOURCE.{cu,ptx,fatbin}
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple[Arg, ...]
    reference: Reference
    tol: Tol = EXACT
    shared: int = 0  # dynamic shared memory bytes
    symbols: tuple[Symbol, ...] = ()
    seed: int = 0
    why: str = field(default="", compare=False)  # where a tolerance comes from
    # What the interpreter lacks for this case: the test is an expected failure (strict, so
    # it reports when the gap closes and the note should go).
    gap: str = field(default="", compare=False)

    @property
    def threads(self) -> int:
        return int(np.prod(self.grid) * np.prod(self.block))


def inputs(case: Case) -> dict[str, Any]:
    """Every argument and symbol by name, buffers drawn in order from the case's seed."""
    rng = np.random.default_rng(case.seed)
    values: dict[str, Any] = {}
    for a in case.args:
        if isinstance(a, Buf):
            values[a.name] = np.ascontiguousarray(a.init(rng))
        elif isinstance(a, Scalar):
            values[a.name] = np.dtype(a.dtype).type(a.value)
        else:
            values[a.name] = {n: np.dtype(t).type(v) for n, t, v in a.fields}
    for s in case.symbols:
        values[s.name] = np.ascontiguousarray(s.init(rng))
    return values


def pack_params(case: Case, pointers: Mapping[str, int], values: Mapping[str, Any]) -> bytes:
    """The parameter block as the driver lays it out: each argument at its natural alignment."""
    out = bytearray()
    for a in case.args:
        if isinstance(a, Buf):
            raw, align = np.uint64(pointers[a.name]).tobytes(), 8
        elif isinstance(a, Scalar):
            raw = np.dtype(a.dtype).type(a.value).tobytes()
            align = len(raw)
        else:
            dt = a.dtype
            raw = np.array([tuple(v for _, _, v in a.fields)], dtype=dt).tobytes()
            align = dt.alignment
        out += b"\0" * (-len(out) % align)
        out += raw
    return bytes(out)


# Input builders, so the table reads as data.
def ints(n: int, lo: int, hi: int, dtype: str = "int32") -> Init:
    return lambda rng: rng.integers(lo, hi, n, dtype=np.dtype(dtype), endpoint=False)


def floats(n: int, lo: float, hi: float, dtype: str = "float32") -> Init:
    return lambda rng: rng.uniform(lo, hi, n).astype(dtype)


def whole_floats(n: int, lo: int, hi: int, dtype: str = "float32") -> Init:
    """Integer-valued floats: sums of them are exact in any order (atomics, shuffles)."""
    return lambda rng: rng.integers(lo, hi, n).astype(dtype)


def full(n: int, value: int | float, dtype: str) -> Init:
    return lambda rng: np.full(n, value, dtype=dtype)


def zeros(n: int, dtype: str) -> Init:
    return full(n, 0, dtype)
