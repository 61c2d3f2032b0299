"""The native sketch codec (cffi_build/src/train/sketch.c) through its numpy wrapper.

Round trips, adversarial inputs, exactness against float64, and fuzzing of
everything that can arrive from the network (union index, summed cells and
raw values): whatever they hold, the codec never touches memory outside the
buffers it was given (each output array is checked against canaries
around it) and never writes outside the union.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gleam.peer.compress import codec
from gleam.peer.nativelib import ffi, lib

B = 256  # a small block, so that tests hold many blocks


def _sum_workers(xs, geo, world=None, ratio=0.0, seed=99, resend=False):
    """Run the codec for several workers by hand; returns (result, plan, failed, union).

    With ``resend`` the failed blocks' union coordinates are summed plainly
    and written back, as the codec's caller does.
    """
    world = world or len(xs)
    marks = [codec.mark(x, geo) for x in xs]
    union = np.bitwise_or.reduce([m.index for m in marks])
    plan = codec.plan(union, geo, world, ratio)
    encoded = [codec.encode(x, union, plan, seed, m) for x, m in zip(xs, marks, strict=True)]
    cells = np.sum([e[0] for e in encoded], axis=0, dtype=np.int64)
    raw = np.zeros(plan.raw_len, np.float32)
    for e in encoded:
        raw += e[1]
    out = xs[0].copy()
    failed = codec.decode(cells, raw, union, plan, seed, out)
    if resend and failed.any():
        values = np.zeros(codec.selected_count(union, geo, failed), np.float32)
        for x in xs:
            values += codec.gather(x, union, geo, failed)
        codec.scatter(values, union, geo, failed, out)
    return out, plan, failed, union


def _peeled(plan, failed, n):
    """Coordinates in sketch blocks that peeled."""
    return np.repeat((plan.blocks["kind"] == codec.CELLS) & (failed == 0),
                     plan.geometry.block_len)[:n]


def _sparse(rng, n, count, scale=1.0):
    x = np.zeros(n, np.float32)
    where = rng.choice(n, count, replace=False)
    x[where] = (rng.standard_normal(count) * scale).astype(np.float32)
    return x


def _exact(xs):
    return np.sum([x.astype(np.float64) for x in xs], axis=0).astype(np.float32)


# ---------------------------------------------------------------- geometry


def test_geometry_and_block_limits():
    geo = codec.geometry(1000, 128)
    assert geo.n_blocks == 8
    assert geo.bitmap_len == 8 * 16  # 16 words of 64 bits
    assert geo.index_len == geo.bitmap_len + 8 * lib.GL_SKETCH_MASK_BYTES
    assert codec.geometry(0, 64).index_len == 0
    for bad in (0, 63, 100, codec.MAX_BLOCK + 64):
        with pytest.raises(codec.SketchError, match="block length"):
            codec.geometry(10, bad)
    with pytest.raises(codec.SketchError):
        codec.geometry(lib.GL_SKETCH_MAX_N + 1, 64)  # huge gradients are refused


def test_error_codes_have_messages():
    for code in range(-109, -100):
        assert ffi.string(lib.gl_sketch_strerror(code)) != b"unknown sketch error"
    assert ffi.string(lib.gl_sketch_strerror(-1)) == b"unknown sketch error"


def test_default_ratio_is_larger_for_small_blocks():
    ratios = [codec.default_ratio(c) for c in (10, 150, 500, 2000, 10000, 100000)]
    assert ratios == sorted(ratios, reverse=True)
    assert 1.25 <= ratios[-1] <= 1.35
    assert codec.sub_size(0) == 0 and codec.sub_size(1) >= 1
    assert codec.sub_size(300, 3.0) == 300


# ---------------------------------------------------------------- mark


def test_mark_bits_exponents_and_packed_values():
    x = np.zeros(200, np.float32)
    x[[0, 63, 64, 199]] = [1.0, -2.0, 0.5, 3.0]
    x[5] = -0.0  # a zero
    geo = codec.geometry(x.size, 128)
    marked = codec.mark(x, geo)
    bits = np.unpackbits(marked.index[: geo.bitmap_len], bitorder="little")
    assert np.flatnonzero(bits).tolist() == [0, 63, 64, 199]
    assert marked.nonzeros == 4
    assert marked.values.tolist() == [1.0, -2.0, 0.5, 3.0]
    masks = marked.index[geo.bitmap_len:].reshape(2, 32)
    exponents = [np.flatnonzero(np.unpackbits(m, bitorder="little")).tolist() for m in masks]
    assert exponents == [[126, 127, 128], [128]]  # 0.5 and 1.0/-2.0; 3.0


def test_mark_nan_and_inf_are_nonzero_with_exponent_255():
    x = np.zeros(64, np.float32)
    x[3], x[9] = np.nan, -np.inf
    geo = codec.geometry(64, 64)
    marked = codec.mark(x, geo)
    assert np.flatnonzero(np.unpackbits(marked.index[:8], bitorder="little")).tolist() == [3, 9]
    assert np.unpackbits(marked.index[8:], bitorder="little")[255] == 1


def test_mark_packs_only_up_to_capacity():
    x = np.ones(1024, np.float32)
    marked = codec.mark(x, codec.geometry(1024, 256), pack_fraction=0.25)
    assert marked.nonzeros == 1024 and marked.values is None


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("world", [1, 2, 3, 4, 8])
def test_sums_are_exactly_rounded(world):
    rng = np.random.default_rng(world)
    n = 40 * 1024 + 17
    xs = [_sparse(rng, n, 1500 // world, scale=10.0 ** rng.uniform(-8, 8))
          for _ in range(world)]
    out, plan, failed, _ = _sum_workers(xs, codec.geometry(n, 1024), resend=True)
    assert plan.count_of(codec.CELLS) > 30
    assert failed.sum() <= 2  # small blocks (~40 nonzeros) fail now and then
    exact = _exact(xs)
    peeled = _peeled(plan, failed, n)
    np.testing.assert_array_equal(out[peeled], exact[peeled])
    # Resent blocks are plain fp32 sums: within rounding of the exact sum.
    np.testing.assert_allclose(out, exact, rtol=1e-6 * world, atol=0)


def test_cancelling_values_stay_in_the_union_as_zeros():
    n = 4 * B
    a = np.zeros(n, np.float32)
    a[[1, 100, 700]] = [1.5, -2.0, 3.0]
    b = -a
    b[5] = 7.0
    out, _, failed, _ = _sum_workers([a, b], codec.geometry(n, B))
    assert not failed.any()
    expected = np.zeros(n, np.float32)
    expected[5] = 7.0
    np.testing.assert_array_equal(out, expected)


def test_empty_gradient_sends_nothing():
    geo = codec.geometry(3 * B, B)
    x = np.zeros(3 * B, np.float32)
    out, plan, failed, _ = _sum_workers([x, x.copy()], geo)
    assert plan.count_of(codec.EMPTY) == 3 and plan.cells_len == 0 and plan.raw_len == 0
    assert not out.any() and not failed.any()
    empty = codec.geometry(0, B)
    assert codec.plan(codec.mark(np.zeros(0, np.float32), empty).index, empty, 2).cells_len == 0


def test_dense_blocks_go_raw_and_sum_in_fp32():
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(4 * B).astype(np.float32) for _ in range(3)]
    out, plan, _, _ = _sum_workers(xs, codec.geometry(4 * B, B))
    assert plan.count_of(codec.RAW, codec.RAW_DENSE) == 4
    np.testing.assert_array_equal(out, (xs[0] + xs[1]) + xs[2])


def test_non_finite_values_send_their_block_raw():
    rng = np.random.default_rng(4)
    xs = [_sparse(rng, 4 * B, 20) for _ in range(2)]
    xs[0][B + 7] = np.nan
    xs[1][2 * B + 9] = np.inf
    out, plan, _, _ = _sum_workers(xs, codec.geometry(4 * B, B))
    kinds = plan.blocks["kind"].tolist()
    assert kinds[1] == kinds[2] == codec.RAW
    assert plan.blocks["reason"][1] == codec.RAW_NONFINITE
    assert np.isnan(out[B + 7]) and out[2 * B + 9] == np.inf
    finite = np.isfinite(out)
    np.testing.assert_array_equal(out[finite], _exact(xs)[finite])


def test_wide_exponent_ranges_use_two_limbs_and_stay_exact():
    n = 2 * B
    a = np.zeros(n, np.float32)
    b = np.zeros(n, np.float32)
    a[[3, 4, 40]] = [1e-20, 3e8, -7.25]  # 94 binades apart
    b[[3, 41, 42]] = [2e-20, 1e-15, 5e7]
    out, plan, failed, _ = _sum_workers([a, b], codec.geometry(n, B))
    assert plan.blocks["limbs"][0] == 2 and plan.blocks["kind"][0] == codec.CELLS
    assert not failed.any()
    np.testing.assert_array_equal(out, _exact([a, b]))


def test_extreme_exponent_ranges_go_raw():
    n = B
    a = np.zeros(n, np.float32)
    a[[1, 2]] = [1e-45, 3e38]  # a subnormal and nearly the largest float
    with np.errstate(over="ignore"):
        out, plan, _, _ = _sum_workers([a, a.copy()], codec.geometry(n, B))
    assert plan.blocks["reason"][0] == codec.RAW_SPREAD
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, a + a)


def test_overflowing_sums_fail_the_block_instead_of_wrapping():
    a = np.zeros(B, np.float32)
    a[[1, 2]] = [3e38, 2e38]
    with np.errstate(over="ignore"):
        out, plan, failed, _ = _sum_workers([a, a.copy()], codec.geometry(B, B))
    assert plan.blocks["kind"][0] == codec.CELLS
    assert failed.tolist() == [1]
    assert out[1] == 3e38  # untouched: the caller resends this block plainly


def test_coordinates_sharing_all_cells_never_peel():
    # One cell per sub-table: every coordinate lands in the same three cells.
    a = np.zeros(B, np.float32)
    a[[10, 20]] = [1.0, 2.0]
    out, plan, failed, _ = _sum_workers([a], codec.geometry(B, B), ratio=0.01)
    assert plan.blocks["sub"][0] == 1
    assert failed.tolist() == [1] and out[10] == 1.0  # left for the resend
    # Fewer cells than coordinates can never peel either.
    rng = np.random.default_rng(5)
    x = _sparse(rng, 8 * B, 400)
    _, plan, failed, _ = _sum_workers([x], codec.geometry(8 * B, B), ratio=0.9)
    assert failed[plan.blocks["kind"] == codec.CELLS].all()


def test_gather_and_scatter_move_the_failed_blocks_union():
    rng = np.random.default_rng(6)
    geo = codec.geometry(4 * B, B)
    x = _sparse(rng, 4 * B, 60)
    union = codec.mark(x, geo).index
    select = np.array([1, 0, 1, 0], np.uint8)
    values = codec.gather(x, union, geo, select)
    in_selected = np.zeros(4 * B, bool)
    in_selected[:B] = in_selected[2 * B:3 * B] = True
    assert values.tolist() == x[(x != 0) & in_selected].tolist()
    y = np.zeros_like(x)
    codec.scatter(values * 2, union, geo, select, y)
    np.testing.assert_array_equal(y, np.where(in_selected, 2 * x, 0))
    with pytest.raises(codec.SketchError, match="gather/scatter length"):
        codec.scatter(values[:-1], union, geo, select, y)


# ---------------------------------------------------------------- misuse


def test_encode_refuses_a_union_that_lost_own_values():
    rng = np.random.default_rng(7)
    geo = codec.geometry(2 * B, B)
    x = _sparse(rng, 2 * B, 30)
    own = codec.mark(x, geo)
    union = own.index.copy()
    union[0] = 0  # a broken "OR" dropped some of this worker's bits
    plan = codec.plan(union, geo, 2)
    with pytest.raises(codec.SketchError) as caught:
        codec.encode(x, union, plan, 1, own)
    assert caught.value.code == codec.E_COVER
    union = own.index.copy()
    union[geo.bitmap_len:] = 0
    union[geo.bitmap_len + 15] = 0x80  # only exponent 127 present in block 0
    plan = codec.plan(union, geo, 2)
    with pytest.raises(codec.SketchError):
        codec.encode(x, union, plan, 1, own)


def test_plans_that_disagree_with_the_index_are_refused():
    rng = np.random.default_rng(8)
    geo = codec.geometry(2 * B, B)
    x = _sparse(rng, 2 * B, 30)
    own = codec.mark(x, geo)
    plan = codec.plan(own.index, geo, 1)
    cells, raw = codec.encode(x, own.index, plan, 1, own)
    for field, value in (("count", 1), ("offset", 3), ("sub", 10**8), ("kind", 9),
                         ("limbs", 3), ("bits", 63), ("shift", -400)):
        bad = codec.Plan(geo, 1, plan.blocks.copy(), plan.cells_len, plan.raw_len, 0.0)
        bad.blocks[field][0] = value
        with pytest.raises(codec.SketchError):
            codec.decode(cells, raw, own.index, bad, 1, x.copy())
    with pytest.raises(codec.SketchError, match="payload length"):
        codec.decode(cells[:-1], raw, own.index, plan, 1, x.copy())
    with pytest.raises(codec.SketchError, match="index length"):
        codec.plan(own.index[:-1], geo, 1)
    with pytest.raises(codec.SketchError, match="world size"):
        codec.plan(own.index, geo, 0)
    with pytest.raises(codec.SketchError, match="cells per coordinate"):
        codec.plan(own.index, geo, 1, 65.0)


# ---------------------------------------------------------------- fuzzing


def _guarded(size, dtype, fill):
    """An array with canaries on both sides, to catch writes outside it."""
    whole = np.full(size + 32, fill, dtype)
    return whole, whole[16:-16]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(0, 5 * B),
    index_bytes=st.binary(min_size=0, max_size=5 * (B // 8 + 32)),
    cell_seed=st.integers(0, 2**32 - 1),
    world=st.integers(1, 9),
    ratio=st.sampled_from([0.0, 0.02, 1.0, 1.3, 5.0]),
)
def test_decode_of_hostile_inputs_stays_in_bounds(n, index_bytes, cell_seed, world, ratio):
    geo = codec.geometry(n, B)
    index = np.frombuffer(index_bytes.ljust(geo.index_len, b"\x00")[: geo.index_len],
                          np.uint8).copy()
    plan = codec.plan(index, geo, world, ratio)
    rng = np.random.default_rng(cell_seed)
    cells = rng.integers(-(2**63), 2**63 - 1, plan.cells_len, dtype=np.int64, endpoint=True)
    raw = rng.standard_normal(plan.raw_len).astype(np.float32)
    whole, x = _guarded(n, np.float32, 12345.0)
    failed = codec.decode(cells, raw, index, plan, cell_seed, x)
    assert (whole[:16] == 12345.0).all() and (whole[-16:] == 12345.0).all()
    union = np.unpackbits(index[: geo.bitmap_len], bitorder="little")[:n].astype(bool)
    raw_block = np.repeat(plan.blocks["kind"] == codec.RAW, B)[:n]
    assert (x[~union & ~raw_block] == 12345.0).all()  # raw blocks are rewritten whole
    assert set(np.unique(failed).tolist()) <= {0, 1}
    # A hostile index is still a valid plan for an honest encoder: zeros encode.
    if plan.cells_len:
        zero_cells, _ = codec.encode(np.zeros(n, np.float32), index, plan, 7)
        assert not zero_cells.any()


@settings(max_examples=100, deadline=None)
@given(
    data=st.binary(min_size=0, max_size=200),
    others=st.lists(st.binary(min_size=0, max_size=200), min_size=0, max_size=6),
)
def test_or_through_sums_equals_bitwise_or(data, others):
    length = len(data)
    workers = [np.frombuffer(data, np.uint8)] + [
        np.frombuffer(o.ljust(length, b"\x00")[:length], np.uint8) for o in others
    ]
    width = len(workers).bit_length()
    total = np.sum([codec.widen(w, width).astype(np.int64) for w in workers], axis=0)
    out = np.empty(length, np.uint8)
    codec.narrow(total.astype(np.int32), width, out)
    np.testing.assert_array_equal(out, np.bitwise_or.reduce(workers) if length else out)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=1,
                    max_size=40),
    world=st.integers(1, 5),
    seed=st.integers(0, 1000),
)
def test_any_finite_values_sum_exactly_or_are_resent(values, world, seed):
    rng = np.random.default_rng(seed)
    n = 2 * B
    xs = []
    for _ in range(world):
        x = np.zeros(n, np.float32)
        where = rng.choice(n, len(values), replace=False)
        x[where] = rng.permutation(np.array(values, np.float32))
        xs.append(x)
    out, plan, failed, _ = _sum_workers(xs, codec.geometry(n, B))
    peeled = _peeled(plan, failed, n)
    np.testing.assert_array_equal(out[peeled], _exact(xs)[peeled])
