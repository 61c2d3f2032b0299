"""The built-in codec: a nonzero index by OR, then count sketches by SUM, peeled.

One aggregation, as every worker runs it (docs/compression.md). The tensor
is cut into chunks of whole blocks that go through these steps as a
pipeline: while one chunk's reduction travels, the next is worked on.

1. mark this worker's nonzeros: a bitmap plus the exponents present per
   block; OR across workers gives the union support U and every block's
   exponent range;
2. plan each block from the union alone, identically on every worker;
3. encode and SUM the sketch cells (int64) and the raw blocks (fp32);
4. peel each sketch block; blocks that do not peel send their union
   coordinates again in one plain SUM, so the result is always the sum.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections import defaultdict
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field

import numpy as np

from gleam.peer.compress import codec
from gleam.peer.compress.aggregation import Aggregation, Reduction, Wait
from gleam.peer.compress.planner import DensityMemory
from gleam.peer.compress.stats import AggregationStats

DEFAULT_BLOCK = 1 << 20
DEFAULT_CHUNK = 1 << 23  # coordinates per pipelined chunk (whole blocks)


class CoverError(RuntimeError):
    """The OR of the indexes lost this worker's own nonzeros: the collective is broken."""


@dataclass(frozen=True)
class SketchConfig:
    """Parameters every worker of a job must share.

    ``block`` coordinates per block (multiple of 64); ``chunk`` coordinates
    per pipelined chunk (rounded down to whole blocks); ``cells_per_coord``
    0 uses the measured table (about 1.3 for large blocks, more for small
    ones); ``seed`` varies the hash functions per job, and they change per
    aggregation as well.
    """

    block: int = DEFAULT_BLOCK
    chunk: int = DEFAULT_CHUNK
    cells_per_coord: float = 0.0
    seed: int = 0x5EED
    min_coordinates: int = 16384
    min_saving: float = 0.1
    reprobe_every: int = 16

    def __post_init__(self) -> None:
        codec.geometry(0, self.block)  # validates the block length
        if self.min_coordinates < 0 or not 0.0 <= self.min_saving <= 1.0 \
                or self.reprobe_every < 0:
            raise ValueError("min_coordinates and reprobe_every must be >= 0, "
                             "min_saving in [0, 1]")
        if not 0.0 <= self.cells_per_coord <= 64.0:
            raise ValueError("cells_per_coord must be in [0, 64] (0: the measured default)")


def stable_key(key: Hashable) -> int:
    """A 64-bit number for ``key`` that is the same in every process (unlike hash())."""
    digest = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


@dataclass
class SketchCodec:
    """Lossless homomorphic compression of sparse gradients (codec ``"sketch"``)."""

    config: SketchConfig = field(default_factory=SketchConfig)
    name: str = "sketch"

    def __post_init__(self) -> None:
        self._memory = DensityMemory(self.config.min_coordinates, self.config.min_saving,
                                     self.config.reprobe_every)
        self._steps: defaultdict[Hashable, int] = defaultdict(int)

    def _seed(self, key: Hashable) -> int:
        step = self._steps[key]
        self._steps[key] = step + 1
        material = f"{self.config.seed}:{stable_key(key)}:{step}".encode()
        return int.from_bytes(hashlib.blake2b(material, digest_size=8).digest(), "little")

    def aggregate(self, x: np.ndarray, *, world: int, key: Hashable = 0) -> Aggregation:
        if x.dtype != np.float32 or x.ndim != 1 or not x.flags.c_contiguous:
            raise TypeError("the sketch codec aggregates 1-D C-contiguous float32 arrays")
        seed = self._seed(key)
        stats = AggregationStats(coordinates=x.size)
        if self._memory.send_dense(key, x.size):
            stats.bytes_dense = x.nbytes
            stats.reductions = 1
            yield Reduction("sum", x, "dense")
            return stats
        stats.mode = "sketch"
        # Chunks pipeline the work: while one chunk's bytes travel, the next
        # is indexed, encoded or decoded.
        block = self.config.block
        chunk = max(block, self.config.chunk // block * block)
        chunks = [_Chunk(x[start:start + chunk], block, (seed + i * _GOLDEN) % 2**64)
                  for i, start in enumerate(range(0, x.size, chunk))]
        for part in chunks:
            with _timer(stats, "encode_s"):
                part.index_it()
            stats.bytes_index += part.index.nbytes
            yield part.or_request
        for part in chunks:
            yield Wait(part.or_request)
            with _timer(stats, "encode_s"):
                part.encode(world, self.config.cells_per_coord)
            _count_blocks(stats, part.plan)
            stats.bytes_cells += part.cells.nbytes
            stats.bytes_raw += part.raw.nbytes
            for request in part.sum_requests:
                yield request
        for part in chunks:
            for request in part.sum_requests:
                yield Wait(request)
            with _timer(stats, "decode_s"):
                part.decode()
            stats.blocks_failed += int(np.count_nonzero(part.failed))
        stats.reductions = len(chunks) + sum(len(p.sum_requests) for p in chunks)
        if stats.blocks_failed:
            # Failed blocks still hold this worker's own values: resend their
            # union coordinates, all chunks in one plain sum.
            with _timer(stats, "decode_s"):
                values = np.concatenate([p.gather_failed() for p in chunks])
            stats.bytes_fallback = values.nbytes
            stats.reductions += 1
            yield Reduction("sum", values, "fallback")
            with _timer(stats, "decode_s"):
                at = 0
                for part in chunks:
                    at = part.scatter_failed(values, at)
        self._memory.observe(key, stats.bytes_uncompressed, stats.bytes_sent)
        return stats


_GOLDEN = 0x9E3779B97F4A7C15


@contextlib.contextmanager
def _timer(stats: AggregationStats, name: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        setattr(stats, name, getattr(stats, name) + time.perf_counter() - started)


class _Chunk:
    """One contiguous run of whole blocks, aggregated as a unit."""

    def __init__(self, x: np.ndarray, block: int, seed: int) -> None:
        self.x = x
        self.seed = seed
        self.geo = codec.geometry(x.size, block)

    def index_it(self) -> None:
        self.own = codec.mark(self.x, self.geo)
        self.index = self.own.index.copy()  # reduced in place; own stays this worker's
        self.or_request = Reduction("or", self.index, "index", wait=False)

    def encode(self, world: int, cells_per_coord: float) -> None:
        bitmap = slice(0, self.geo.bitmap_len)
        if self.own.values is None and np.any(self.own.index[bitmap] & ~self.index[bitmap]):
            raise CoverError("the OR-reduced index lacks this worker's nonzeros; "
                             "the collective does not compute a bitwise OR")
        self.plan = codec.plan(self.index, self.geo, world, cells_per_coord)
        try:
            self.cells, self.raw = codec.encode(self.x, self.index, self.plan, self.seed, self.own)
        except codec.SketchError as exc:
            if exc.code == codec.E_COVER:
                raise CoverError(f"{exc}: the collective does not compute a bitwise OR") from None
            raise
        self.sum_requests = [Reduction("sum", buffer, purpose, wait=False)
                             for buffer, purpose in ((self.cells, "cells"), (self.raw, "raw"))
                             if buffer.size]

    def decode(self) -> None:
        self.failed = codec.decode(self.cells, self.raw, self.index, self.plan, self.seed, self.x)

    def gather_failed(self) -> np.ndarray:
        if not self.failed.any():
            return np.empty(0, np.float32)
        return codec.gather(self.x, self.index, self.geo, self.failed)

    def scatter_failed(self, values: np.ndarray, at: int) -> int:
        if not self.failed.any():
            return at
        count = codec.selected_count(self.index, self.geo, self.failed)
        codec.scatter(values[at:at + count], self.index, self.geo, self.failed, self.x)
        return at + count


def _count_blocks(stats: AggregationStats, plan: codec.Plan) -> None:
    stats.union += plan.union_count
    stats.blocks_empty += plan.count_of(codec.EMPTY)
    stats.blocks_sketch += plan.count_of(codec.CELLS)
    stats.blocks_raw_dense += plan.count_of(codec.RAW, codec.RAW_DENSE)
    stats.blocks_raw_nonfinite += plan.count_of(codec.RAW, codec.RAW_NONFINITE)
    stats.blocks_raw_spread += plan.count_of(codec.RAW, codec.RAW_SPREAD)
