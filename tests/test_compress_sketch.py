"""The sketch codec's aggregation protocol, run by simulated workers in lock step.

The same generator runs under torch.distributed (tests/test_compress_ddp.py);
here numpy does the reductions, so exactness, the resend of blocks that do
not peel, the planner's decisions and the statistics are checked without
processes.
"""

from __future__ import annotations

import numpy as np
import pytest

from gleam.peer.compress import (
    AggregationStats,
    CompressionStats,
    Reduction,
    SketchCodec,
    SketchConfig,
    UnknownCodec,
    available_codecs,
    make_codec,
    run_sync,
)
from gleam.peer.compress.aggregation import Done, Wait
from gleam.peer.compress.lockstep import LockstepError, run_lockstep
from gleam.peer.compress.sketch import CoverError
from gleam.peer.hookspecs import hookimpl
from gleam.peer.plugin_manager import make_plugin_manager

BLOCK = 4096


def _workers(world, n, union_density, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    union = rng.choice(n, int(n * union_density), replace=False)
    owner = rng.integers(0, world, union.size)
    xs = []
    for rank in range(world):
        held = union[(owner == rank) | (rng.random(union.size) < 0.3)]
        x = np.zeros(n, np.float32)
        x[held] = (rng.standard_normal(held.size) * scale).astype(np.float32)
        xs.append(x)
    return xs


def _exact(xs):
    return np.sum([x.astype(np.float64) for x in xs], axis=0).astype(np.float32)


def _aggregate(xs, key="k", **config):
    config.setdefault("block", BLOCK)
    config.setdefault("chunk", 4 * BLOCK)
    config.setdefault("min_coordinates", 0)
    codecs = [SketchCodec(SketchConfig(**config)) for _ in xs]
    stats = run_lockstep([c.aggregate(x, world=len(xs), key=key)
                          for c, x in zip(codecs, xs, strict=True)])
    return codecs, stats


@pytest.mark.parametrize(("world", "density"), [(2, 0.01), (3, 0.05), (4, 0.002), (8, 0.02)])
def test_every_worker_gets_the_exact_sum(world, density):
    n = 23 * BLOCK + 99  # several pipelined chunks, a short last block
    xs = _workers(world, n, density, seed=world, scale=1e-3)
    exact = _exact(xs)
    _, stats = _aggregate(xs)
    for x in xs:
        np.testing.assert_array_equal(x, exact)
    first = stats[0]
    assert first.mode == "sketch" and first.blocks_sketch > 0
    assert first.union >= np.count_nonzero(exact)  # sums that cancel stay in the union
    assert first.ratio > 2
    sent = [(s.union, s.blocks_sketch, s.bytes_sent) for s in stats]
    assert sent == [sent[0]] * world


def test_blocks_that_do_not_peel_are_resent_plainly():
    # Fewer cells than union coordinates: no block can peel, so every block
    # goes through the fallback sum, and the result is still the sum.
    xs = _workers(3, 8 * BLOCK, 0.05, seed=11)
    plain = (xs[0] + xs[1]) + xs[2]
    _, stats = _aggregate(xs, cells_per_coord=0.5)
    first = stats[0]
    assert first.blocks_failed == first.blocks_sketch == 8
    assert first.bytes_fallback == 4 * first.union
    for x in xs:
        np.testing.assert_array_equal(x, plain)


def test_non_finite_values_propagate_like_a_plain_sum():
    xs = _workers(2, 4 * BLOCK, 0.01, seed=12)
    xs[0][5] = np.nan
    xs[1][BLOCK + 1] = -np.inf
    expected = xs[0] + xs[1]
    _, stats = _aggregate(xs)
    assert stats[0].blocks_raw_nonfinite == 2
    np.testing.assert_array_equal(xs[0], expected)  # NaN == NaN for assert_array_equal


def test_small_and_dense_tensors_are_summed_plainly():
    codecs = [SketchCodec(SketchConfig(block=BLOCK, reprobe_every=2)) for _ in range(2)]
    small = [np.ones(100, np.float32), np.ones(100, np.float32)]
    stats = run_lockstep([c.aggregate(x, world=2, key="small")
                          for c, x in zip(codecs, small, strict=True)])
    assert stats[0].mode == "dense" and small[0].tolist() == [2.0] * 100

    rng = np.random.default_rng(1)
    modes = []
    for _ in range(5):
        dense = [rng.standard_normal(8 * BLOCK).astype(np.float32) for _ in range(2)]
        expected = dense[0] + dense[1]
        stats = run_lockstep([c.aggregate(x, world=2, key="dense")
                              for c, x in zip(codecs, dense, strict=True)])
        np.testing.assert_array_equal(dense[0], expected)
        modes.append(stats[0].mode)
    # Indexed once, found dense, then plain for reprobe_every aggregations, then re-indexed.
    assert modes == ["sketch", "dense", "dense", "sketch", "dense"]


def test_statistics_accumulate():
    xs = _workers(2, 8 * BLOCK, 0.01, seed=2)
    _, stats = _aggregate(xs)
    totals = CompressionStats()
    totals.add(stats[0])
    totals.add(AggregationStats(coordinates=10, bytes_dense=40))
    doc = totals.as_dict()
    assert doc["aggregations"] == 2 and doc["dense_aggregations"] == 1
    assert doc["totals"]["coordinates"] == 8 * BLOCK + 10
    assert doc["last"]["mode"] == "dense"
    assert stats[0].bytes_sent == (stats[0].bytes_index + stats[0].bytes_cells
                                   + stats[0].bytes_raw)


def test_workers_with_different_settings_are_caught():
    xs = _workers(2, 8 * BLOCK, 0.01, seed=3)
    a = SketchCodec(SketchConfig(block=BLOCK, min_coordinates=0))
    b = SketchCodec(SketchConfig(block=2 * BLOCK, min_coordinates=0))
    with pytest.raises(LockstepError):
        run_lockstep([a.aggregate(xs[0], world=2), b.aggregate(xs[1], world=2)])


def test_a_collective_that_does_not_or_is_detected():
    x = _workers(1, 4 * BLOCK, 0.01, seed=4)[0]
    codec = SketchCodec(SketchConfig(block=BLOCK, min_coordinates=0))

    def broken(request: Reduction) -> Done:
        if request.op == "or":
            request.buffer[: request.buffer.size // 2] = 0  # lost bits
        return Done()

    with pytest.raises(CoverError, match="bitwise OR"):
        run_sync(codec.aggregate(x, world=2), broken)


def test_the_driver_waits_where_the_codec_asks():
    events = []

    class Handle:
        def __init__(self, name):
            self.name = name

        def wait(self):
            events.append(f"wait {self.name}")

    def start(request):
        events.append(f"start {request.purpose}")
        return Handle(request.purpose)

    def codec_steps():
        first = Reduction("sum", np.zeros(1, np.float32), "one", wait=False)
        yield first
        yield Reduction("sum", np.zeros(1, np.float32), "two")
        yield Wait(first)
        return AggregationStats()

    run_sync(codec_steps(), start)
    assert events == ["start one", "start two", "wait two", "wait one"]


# ---------------------------------------------------------------- plugins


def test_the_builtin_plugin_provides_the_sketch_codec():
    assert "sketch" in available_codecs()
    made = make_codec("sketch", block=BLOCK)
    assert isinstance(made, SketchCodec) and made.config.block == BLOCK
    with pytest.raises(UnknownCodec, match=r"available: .*sketch"):
        make_codec("zstd")
    with pytest.raises(ValueError, match="sketch codec"):
        make_codec("sketch", blocksize=3)
    with pytest.raises(Exception, match="block length"):
        make_codec("sketch", block=100)


class PlainCodec:
    """A third-party codec: one plain sum, through the same hooks."""

    name = "plain"

    def aggregate(self, x, *, world, key=0):
        yield Reduction("sum", x, "dense")
        return AggregationStats(coordinates=x.size, bytes_dense=x.nbytes)


class PlainPlugin:
    @hookimpl
    def gleam_compress_codecs(self):
        return ["plain"]

    @hookimpl
    def gleam_compress_codec(self, name, options):
        return PlainCodec() if name == "plain" else None


def test_a_third_party_codec_plugs_in_the_same_way():
    pm = make_plugin_manager(disabled=(), extra=[("plain-codec", PlainPlugin())])
    assert available_codecs(pm) == ["plain", "sketch"]
    codecs = [make_codec("plain", pm), make_codec("plain", pm)]
    xs = [np.ones(10, np.float32), np.full(10, 2.0, np.float32)]
    run_lockstep([c.aggregate(x, world=2) for c, x in zip(codecs, xs, strict=True)])
    assert xs[0].tolist() == [3.0] * 10
