"""The simulation's physics, the policies and `gleam-peer bench scheduler --sim`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gleam.peer.sched.cost import Demand, LinkEstimate
from gleam.peer.sched.policies import POLICIES, offline_best, place, results
from gleam.peer.sched.sim import simulate
from gleam.peer.sched.workload import Scenario, ServerSpec, SessionSpec, small_scenario

LINK = LinkEstimate(rtt=0.01, bandwidth=1000.0)


def scenario(*demands: Demand, speeds=(10.0, 10.0), cap: int = 8) -> Scenario:
    servers = tuple(ServerSpec(f"g{j}", s, cap) for j, s in enumerate(speeds))
    links = {("h", s.name): LINK for s in servers}
    return Scenario(servers, ("h",), links,
                    tuple(SessionSpec(f"s{i}", "h", "x", d) for i, d in enumerate(demands)))


def test_phases_add_up_and_a_shared_server_halves_the_speed():
    d = Demand(unique_bytes=2000, waits=100, compute=30.0)
    alone = simulate(scenario(d), [0])
    assert alone.finish[0] == pytest.approx(2.0 + 1.0 + 3.0)
    together = simulate(scenario(d, d), [0, 0])
    # Both send at half rate (4 s), wait 1 s, compute at half speed (6 s).
    assert together.finish == pytest.approx((11.0, 11.0))
    apart = simulate(scenario(d, d), [0, 1])
    assert apart.finish == pytest.approx((6.0, 6.0))


def test_cached_bytes_are_not_sent():
    d = Demand(unique_bytes=2000, compute=10.0, cached={"g1": 2000})
    sc = scenario(d)
    assert simulate(sc, [1]).finish[0] == pytest.approx(1.0)
    assert simulate(sc, [0]).finish[0] == pytest.approx(3.0)


def test_placement_respects_capacity_and_the_scheduler_spreads_compute():
    d = Demand(compute=100.0)
    sc = scenario(d, d, d, d, speeds=(10.0, 10.0), cap=2)
    for name in POLICIES:
        placed = place(sc, POLICIES[name], seed=0)
        assert max(placed.count(j) for j in range(2)) <= 2, name
    assert sorted(place(scenario(d, d, d, d), POLICIES["scheduler"], 0)) == [0, 0, 1, 1]
    with pytest.raises(ValueError, match="no server has room"):
        place(scenario(d, d, d, speeds=(10.0,), cap=2), POLICIES["random"], 0)


def test_the_offline_best_is_never_beaten():
    sc = small_scenario(2)
    _, best = offline_best(sc)
    for name, result in results(sc, seed=2).items():
        assert result.makespan >= best.makespan - 1e-9, name


def test_bench_scheduler_sim_prints_every_policy_beside_its_reference(tmp_path):
    svg = tmp_path / "plot.svg"
    done = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "bench", "scheduler", "--sim", "--json",
         "--seeds", "1", "--clients", "20", "--servers", "6", "--svg", str(svg)],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["bench"] == "scheduler" and doc["mode"] == "sim" and doc["seeds"] == 1
    rows = {row["measure"]: row for row in doc["results"]}
    for case, reference in (("8x3", "offline best"), ("20x6", "random")):
        for policy in POLICIES:
            for what in ("throughput", "mean completion"):
                row = rows[f"{case}: {policy} {what}"]
                assert row["reference_name"] == reference and row["value"] > 0
        assert isinstance(rows[f"{case}: scheduler throughput / random"]["met"], bool)
    assert isinstance(rows["8x3: scheduler throughput / offline best"]["met"], bool)
    assert set(doc["small"]["per_seed"]) == {*POLICIES, "offline best"}
    image = svg.read_text()
    assert image.startswith("<svg") and image.rstrip().endswith("</svg>")
    assert all(f">{name}<" in image for name in (*POLICIES, "offline best"))
