"""The sketch codec of the native core (``cffi_build/src/train/sketch.c``), over numpy arrays.

Each function is one C call on whole arrays: Python never loops over
coordinates or blocks here. Arrays must be C-contiguous; ``x`` and raw
values are float32, cells int64, indexes uint8. Errors of the native core
become :class:`SketchError`. The algorithm, the index layout and the
numerical guarantee are in docs/compression.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gleam.peer.nativelib import ffi, lib

__all__ = [
    "BLOCK_DTYPE",
    "CELLS",
    "EMPTY",
    "MAX_BLOCK",
    "RAW",
    "RAW_DENSE",
    "RAW_NONFINITE",
    "RAW_SPREAD",
    "Geometry",
    "Marked",
    "Plan",
    "SketchError",
    "decode",
    "default_ratio",
    "encode",
    "gather",
    "geometry",
    "mark",
    "narrow",
    "plan",
    "scatter",
    "selected_count",
    "sub_size",
    "widen",
]

EMPTY: int = lib.GL_SKETCH_EMPTY
CELLS: int = lib.GL_SKETCH_CELLS
RAW: int = lib.GL_SKETCH_RAW
RAW_DENSE: int = lib.GL_SKETCH_RAW_DENSE
RAW_NONFINITE: int = lib.GL_SKETCH_RAW_NONFINITE
RAW_SPREAD: int = lib.GL_SKETCH_RAW_SPREAD
E_COVER: int = lib.GL_SKETCH_E_COVER
MAX_WORLD: int = lib.GL_SKETCH_MAX_WORLD
MAX_BLOCK: int = lib.GL_SKETCH_MAX_BLOCK
WORD_BITS: int = lib.GL_SKETCH_WORD_BITS
MASK_BYTES: int = lib.GL_SKETCH_MASK_BYTES

# Mirrors gl_sketch_block (checked against the C size at import).
BLOCK_DTYPE = np.dtype([
    ("kind", "<u4"), ("count", "<u4"), ("sub", "<u4"), ("len", "<u4"),
    ("offset", "<u8"), ("length", "<u8"), ("shift", "<i4"), ("bits", "<u2"), ("limbs", "<u2"),
    ("shift_lo", "<i4"), ("bits_lo", "<u2"), ("reason", "<u2"),
])
if ffi.sizeof("gl_sketch_block") != BLOCK_DTYPE.itemsize:  # pragma: no cover - build mismatch
    raise ImportError("gl_sketch_block does not match BLOCK_DTYPE; rebuild the native core")


class SketchError(ValueError):
    """The native codec refused its arguments; ``code`` is the ``GL_SKETCH_E_*`` value."""

    def __init__(self, code: int) -> None:
        self.code = code
        super().__init__(ffi.string(lib.gl_sketch_strerror(code)).decode())


def _check(rc: int) -> None:
    if rc != lib.GL_SKETCH_OK:
        raise SketchError(rc)


def _ptr(cdecl: str, array: np.ndarray, dtype: np.dtype[Any] | type, *, writable: bool) -> Any:
    if array.dtype != dtype:
        raise TypeError(f"expected a {np.dtype(dtype)} array, got {array.dtype}")
    if not array.flags.c_contiguous:
        raise ValueError("arrays passed to the codec must be C-contiguous")
    if writable and not array.flags.writeable:
        raise ValueError("the codec writes to this array; pass a writable one")
    return ffi.from_buffer(cdecl, array, require_writable=writable)


@dataclass(frozen=True)
class Geometry:
    """How ``n`` coordinates split into blocks and how large their index is."""

    n: int
    block_len: int
    index_len: int
    n_blocks: int

    @property
    def bitmap_len(self) -> int:
        return self.index_len - self.n_blocks * MASK_BYTES


def geometry(n: int, block_len: int) -> Geometry:
    index_len = ffi.new("uint64_t *")
    n_blocks = ffi.new("uint64_t *")
    _check(lib.gl_sketch_geometry(n, block_len, index_len, n_blocks))
    return Geometry(n, block_len, int(index_len[0]), int(n_blocks[0]))


def default_ratio(count: int) -> float:
    """Cells per union nonzero used for a block holding ``count`` of them."""
    return float(lib.gl_sketch_default_ratio(count))


def sub_size(count: int, cells_per_coord: float = 0.0) -> int:
    return int(lib.gl_sketch_sub_size(count, cells_per_coord))


@dataclass(frozen=True)
class Marked:
    """A worker's own index, and its nonzero values packed in coordinate order.

    ``values`` is None when there were more nonzeros than the packing
    capacity; encoding then reads them from ``x``.
    """

    index: np.ndarray
    nonzeros: int
    values: np.ndarray | None


def mark(x: np.ndarray, geo: Geometry, *, pack_fraction: float = 0.25) -> Marked:
    """Index ``x``: its nonzero bitmap and the exponents present per block.

    Up to ``pack_fraction * x.size`` nonzero values are packed on the way
    (dense tensors are not worth packing: their blocks go raw anyway).
    """
    if x.size != geo.n:
        raise ValueError(f"x holds {x.size} coordinates, the geometry {geo.n}")
    index = np.empty(geo.index_len, np.uint8)
    values = np.empty(int(x.size * pack_fraction), np.float32)
    nonzeros = ffi.new("uint64_t *")
    _check(lib.gl_sketch_mark(
        _ptr("float[]", x, np.float32, writable=False), geo.n, geo.block_len,
        _ptr("uint8_t[]", index, np.uint8, writable=True), index.size,
        _ptr("float[]", values, np.float32, writable=True), values.size, nonzeros,
    ))
    count = int(nonzeros[0])
    return Marked(index, count, values[:count] if count <= values.size else None)


@dataclass(frozen=True)
class Plan:
    """What every worker sends for each block, derived from the union index alone."""

    geometry: Geometry
    world: int
    blocks: np.ndarray  # BLOCK_DTYPE, one row per block
    cells_len: int  # int64 cells of the sketch blocks
    raw_len: int  # float32 values of the raw blocks
    cells_per_coord: float

    @property
    def union_count(self) -> int:
        return int(self.blocks["count"].sum())

    def count_of(self, kind: int, reason: int | None = None) -> int:
        chosen = self.blocks["kind"] == kind
        if reason is not None:
            chosen &= self.blocks["reason"] == reason
        return int(np.count_nonzero(chosen))


def _blocks_ptr(blocks: np.ndarray, *, writable: bool) -> Any:
    return _ptr("gl_sketch_block[]", blocks, BLOCK_DTYPE, writable=writable)


def plan(index: np.ndarray, geo: Geometry, world: int, cells_per_coord: float = 0.0) -> Plan:
    """Plan every block from the union index of ``world`` workers.

    ``cells_per_coord`` 0 selects the measured default table.
    """
    blocks = np.zeros(geo.n_blocks, BLOCK_DTYPE)
    cells_len = ffi.new("uint64_t *")
    raw_len = ffi.new("uint64_t *")
    _check(lib.gl_sketch_plan(
        _ptr("uint8_t[]", index, np.uint8, writable=False), index.size, geo.n, geo.block_len,
        world, cells_per_coord, _blocks_ptr(blocks, writable=True), geo.n_blocks, cells_len,
        raw_len,
    ))
    return Plan(geo, world, blocks, int(cells_len[0]), int(raw_len[0]), cells_per_coord)


def encode(
    x: np.ndarray, index: np.ndarray, the_plan: Plan, seed: int, own: Marked | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """This worker's sketch cells (int64) and raw values (float32), laid out by the plan.

    ``index`` is the union index; ``own`` this worker's :func:`mark` result
    (its index must not be the array that was reduced in place). With packed
    values, sketch blocks never read ``x``, and the union is checked to cover
    every own nonzero.
    """
    geo = the_plan.geometry
    cells = np.empty(the_plan.cells_len, np.int64)
    raw = np.empty(the_plan.raw_len, np.float32)
    if own is not None and own.values is not None:
        own_ptr = _ptr("uint8_t[]", own.index, np.uint8, writable=False)
        values_ptr = _ptr("float[]", own.values, np.float32, writable=False)
        values_len = own.values.size
    else:
        own_ptr, values_ptr, values_len = ffi.NULL, ffi.NULL, 0
    _check(lib.gl_sketch_encode(
        _ptr("float[]", x, np.float32, writable=False), geo.n, geo.block_len,
        _ptr("uint8_t[]", index, np.uint8, writable=False), index.size,
        _blocks_ptr(the_plan.blocks, writable=False), geo.n_blocks, seed,
        own_ptr, values_ptr, values_len,
        _ptr("int64_t[]", cells, np.int64, writable=True), cells.size,
        _ptr("float[]", raw, np.float32, writable=True), raw.size,
    ))
    return cells, raw


def decode(
    cells: np.ndarray, raw: np.ndarray, index: np.ndarray, the_plan: Plan, seed: int,
    x: np.ndarray,
) -> np.ndarray:
    """Write the summed cells and raw values into ``x``; returns per-block failure flags."""
    geo = the_plan.geometry
    failed = np.zeros(geo.n_blocks, np.uint8)
    n_failed = ffi.new("uint64_t *")
    _check(lib.gl_sketch_decode(
        _ptr("int64_t[]", cells, np.int64, writable=False), cells.size,
        _ptr("float[]", raw, np.float32, writable=False), raw.size,
        _ptr("uint8_t[]", index, np.uint8, writable=False), index.size,
        _blocks_ptr(the_plan.blocks, writable=False), geo.n_blocks, seed,
        _ptr("float[]", x, np.float32, writable=True), geo.n, geo.block_len,
        _ptr("uint8_t[]", failed, np.uint8, writable=True), n_failed,
    ))
    return failed


def selected_count(index: np.ndarray, geo: Geometry, select: np.ndarray) -> int:
    count = ffi.new("uint64_t *")
    _check(lib.gl_sketch_selected_count(
        _ptr("uint8_t[]", index, np.uint8, writable=False), index.size, geo.n, geo.block_len,
        _ptr("uint8_t[]", select, np.uint8, writable=False), select.size, count,
    ))
    return int(count[0])


def gather(x: np.ndarray, index: np.ndarray, geo: Geometry, select: np.ndarray) -> np.ndarray:
    """The union coordinates of the selected blocks, packed in coordinate order."""
    out = np.empty(selected_count(index, geo, select), np.float32)
    _check(lib.gl_sketch_gather(
        _ptr("float[]", x, np.float32, writable=False), geo.n, geo.block_len,
        _ptr("uint8_t[]", index, np.uint8, writable=False), index.size,
        _ptr("uint8_t[]", select, np.uint8, writable=False), select.size,
        _ptr("float[]", out, np.float32, writable=True), out.size,
    ))
    return out


def scatter(
    values: np.ndarray, index: np.ndarray, geo: Geometry, select: np.ndarray, x: np.ndarray
) -> None:
    """The inverse of :func:`gather`: write the packed values back into ``x``."""
    _check(lib.gl_sketch_scatter(
        _ptr("float[]", values, np.float32, writable=False), values.size, geo.n, geo.block_len,
        _ptr("uint8_t[]", index, np.uint8, writable=False), index.size,
        _ptr("uint8_t[]", select, np.uint8, writable=False), select.size,
        _ptr("float[]", x, np.float32, writable=True),
    ))


def widen(data: np.ndarray, width: int) -> np.ndarray:
    """Spread every bit of ``data`` into a ``width``-bit field of int32 words (OR by SUM)."""
    words = np.empty(int(lib.gl_sketch_widened_words(data.size, width)), np.int32)
    _check(lib.gl_sketch_widen(
        _ptr("uint8_t[]", data, np.uint8, writable=False), data.size, width,
        _ptr("uint32_t[]", words.view(np.uint32), np.uint32, writable=True), words.size,
    ))
    return words


def narrow(words: np.ndarray, width: int, out: np.ndarray) -> None:
    """Back from summed fields to bits: a bit is set where its field is nonzero."""
    _check(lib.gl_sketch_narrow(
        _ptr("uint32_t[]", words.view(np.uint32), np.uint32, writable=False), words.size, width,
        _ptr("uint8_t[]", out, np.uint8, writable=True), out.size,
    ))
