"""Gradient compression for data-parallel training across peers.

The codec is sans-I/O: a codec's ``aggregate`` is a generator that asks for
collective reductions (:class:`Reduction`, OR or SUM over all workers) and is
driven by whatever moves the bytes — torch.distributed in the DDP hook
(:mod:`gleam.peer.compress.ddp`, :mod:`gleam.peer.compress.collective`), or
W simulated workers in one process (:mod:`gleam.peer.compress.lockstep`).

Nothing here imports torch; the modules that need it import it themselves.
See docs/compression.md.
"""

from gleam.peer.compress.aggregation import GradientCodec, Reduction, run_sync
from gleam.peer.compress.registry import UnknownCodec, available_codecs, make_codec
from gleam.peer.compress.sketch import SketchCodec, SketchConfig
from gleam.peer.compress.stats import AggregationStats, CompressionStats

__all__ = [
    "AggregationStats",
    "CompressionStats",
    "GradientCodec",
    "Reduction",
    "SketchCodec",
    "SketchConfig",
    "UnknownCodec",
    "available_codecs",
    "make_codec",
    "run_sync",
]
