"""The gossip benchmark's simulation: structure of its report, and that the mesh converged."""

from __future__ import annotations

import dataclasses
import json

import pytest

from gleam.peer.bench.gossip import run_gossip_bench, simulate


def test_bench_reports_convergence_and_bandwidth(capsys: pytest.CaptureFixture[str]) -> None:
    code = run_gossip_bench(sizes=(10, 50), seed=3, as_json=True)
    doc = json.loads(capsys.readouterr().out)
    assert doc["bench"] == "gossip" and doc["sizes"] == [10, 50] and doc["seed"] == 3
    assert len(doc["results"]) == 2 * 5
    for row in doc["results"]:
        assert set(row) >= {"measure", "value", "reference_name", "reference", "unit", "met"}
        assert row["value"] >= 0 and row["reference"] >= 0
    for size in ("10", "50"):
        result = doc["per_size"][size]
        assert result["converge_rounds"] <= 10
        assert result["kill_removed_seconds"] <= 5
        assert 0 < result["bytes_per_peer_s"] <= 10_000
        assert result["naive_bytes_per_peer_s"] > result["bytes_per_peer_s"]
        assert set(result["bytes_by_type"]) >= {"gossip-rumor", "gossip-want", "gossip-records"}
    assert code == 0


def test_simulation_is_deterministic_under_its_seed() -> None:
    def run(seed: int) -> dict[str, object]:
        result = dataclasses.asdict(simulate(20, seed=seed))
        del result["wall_seconds"]
        return result

    assert run(5) == run(5)
    assert run(5) != run(6)
