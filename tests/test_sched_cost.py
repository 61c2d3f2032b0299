"""The cost model: each term of the estimate, the contention discount, and the explained ranking."""

from __future__ import annotations

import math

import pytest

from gleam.peer.sched.cost import (
    MAX_FOREIGN_UTILISATION,
    Candidate,
    Demand,
    LinkEstimate,
    Offer,
    effective_speed,
    estimate,
)
from gleam.peer.sched.ranking import rank_by_cost

LAN = LinkEstimate(rtt=1e-3, bandwidth=100e6)


def cand(node: str, speed: float = 100.0, link: LinkEstimate = LAN, **offer) -> Candidate:
    return Candidate(node, f"name-{node}", Offer(speed=speed, **offer), link)


def test_each_term_is_the_documented_formula():
    demand = Demand(unique_bytes=300_000_000, waits=500, compute=1000.0,
                    cached={"a": 100_000_000})
    e = estimate(demand, cand("a", speed=400.0, sessions=1, queue=1))
    assert e.transfer == pytest.approx(200_000_000 / 100e6)  # the cached part is not sent
    assert e.waiting == pytest.approx(500 * 1e-3)
    assert e.compute == pytest.approx(1000.0 / (400.0 / 3))  # 1 + sessions + queue
    assert e.total == pytest.approx(e.transfer + e.waiting + e.compute)


def test_bytes_queued_on_the_link_delay_at_most_as_many_of_ours():
    demand = Demand(unique_bytes=10_000_000)
    alone = estimate(demand, cand("a"))
    behind_little = estimate(demand, cand("a", link=LinkEstimate(1e-3, 100e6, queued=2_000_000)))
    behind_lots = estimate(demand, cand("a", link=LinkEstimate(1e-3, 100e6, queued=10**12)))
    assert behind_little.transfer == pytest.approx(alone.transfer * 1.2)
    assert behind_lots.transfer == pytest.approx(alone.transfer * 2)


def test_utilisation_counts_only_without_sessions():
    idle = effective_speed(Offer(speed=100.0))
    foreign = effective_speed(Offer(speed=100.0, utilisation=0.5))
    shared = effective_speed(Offer(speed=100.0, sessions=1, utilisation=0.5))
    assert (idle, foreign, shared) == pytest.approx((100.0, 50.0, 50.0))
    pegged = effective_speed(Offer(speed=100.0, utilisation=1.0))
    assert pegged == pytest.approx(100.0 * (1 - MAX_FOREIGN_UTILISATION))


def test_hostile_inputs_stay_finite():
    demand = Demand(unique_bytes=5, waits=-3, compute=-1.0, cached={"a": 10**18})
    e = estimate(demand, cand("a", speed=0.0, sessions=-4, link=LinkEstimate(-1.0, 0.0)))
    assert (e.transfer, e.waiting, e.compute) == (0.0, 0.0, 0.0)
    e = estimate(Demand(unique_bytes=10**9, compute=1.0), cand("a", speed=0.0,
                                                              link=LinkEstimate(0.0, 0.0)))
    assert math.isfinite(e.total) and e.total > 0


def test_a_server_without_the_memory_is_last():
    demand = Demand(compute=1.0, memory=8 << 30)
    small = cand("small", speed=1000.0, free_memory=1 << 30)
    big = cand("big", speed=1.0, free_memory=16 << 30)
    ranking = rank_by_cost(demand, [small, big])
    assert ranking.order == ("big", "small")
    assert math.isinf(ranking.estimates[1].total)
    assert "too little free memory" in ranking.reason


def test_the_ranking_weighs_network_against_speed_and_explains_it():
    # 256 MB of weights: a fast GPU behind Wi-Fi loses to a slower one on Gigabit
    # Ethernet, unless the fast one already holds the weights.
    wifi = LinkEstimate(rtt=3e-3, bandwidth=11.7e6)
    gbe = LinkEstimate(rtt=0.5e-3, bandwidth=117e6)
    weights = 256 << 20
    fast_far = cand("far", speed=1000.0, link=wifi)
    slow_near = cand("near", speed=250.0, link=gbe)
    cold = Demand(unique_bytes=weights, waits=150, compute=400.0)
    assert rank_by_cost(cold, [fast_far, slow_near]).order == ("near", "far")
    warm = Demand(unique_bytes=weights, waits=150, compute=400.0, cached={"far": weights})
    ranking = rank_by_cost(warm, [fast_far, slow_near])
    assert ranking.order == ("far", "near")
    assert ranking.reason.startswith("soonest estimated completion: name-far")
    assert "next: name-near" in ranking.reason
    doc = ranking.as_dict()
    assert [e["name"] for e in doc["estimates"]] == ["name-far", "name-near"]


def test_contention_moves_the_choice():
    demand = Demand(compute=1000.0)
    busy = cand("busy", speed=400.0, sessions=3)
    idle = cand("idle", speed=200.0)
    assert rank_by_cost(demand, [busy, idle]).order == ("idle", "busy")
    assert rank_by_cost(demand, [cand("busy", speed=400.0), idle]).order == ("busy", "idle")


def test_no_candidates():
    assert rank_by_cost(Demand(), []).order == ()


def test_a_program_with_no_earlier_run_is_guessed_short():
    """The guess for a program that has not run here is a short program: on a host
    device of 3 GFLOP/s (this machine's measured speed) over loopback it comes to
    a fraction of a second, the size of the demo's mlp_infer run (half a second).
    It was a second of a mid-range GPU (1,000 GFLOP): 350 s on that device."""
    from gleam.peer.sched.inputs import DEFAULT_DEMAND

    host = cand("desk", speed=3.0, link=LinkEstimate(rtt=35e-6, bandwidth=117e6))
    e = estimate(DEFAULT_DEMAND, host)
    assert 0.1 < e.total < 2.0
    assert e.compute > e.transfer > e.waiting  # a host device's time is its compute
    # A GPU (1,000 GFLOP/s unmeasured) is still chosen over the host device.
    gpu = cand("gpu", speed=1000.0, link=LinkEstimate(rtt=1e-3, bandwidth=117e6))
    assert rank_by_cost(DEFAULT_DEMAND, [host, gpu]).order[0] == "gpu"
