"""``gleam-peer bench batch --quick``: four real gloo workers, every policy, one JSON document."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("torch")

LABELS = {"static small", "static medium", "static large", "pollux-style", "ppo"}


def test_bench_batch_quick_json():
    out = subprocess.run(
        [sys.executable, "-m", "gleam.peer.bench.batch", "--quick", "--json"],
        capture_output=True, text=True, timeout=240, check=True,
    )
    doc = json.loads(out.stdout)
    assert doc["bench"] == "batch"
    assert set(doc["policies"]) == LABELS
    assert {r["label"] for r in doc["runs"]} == LABELS
    for run in doc["runs"]:
        assert run["seed"] == 0 and run["iterations"] > 0 and run["evals"]
        assert 0.0 <= run["final_accuracy"] <= 1.0
        assert len(run["final_batches"]) == 4
    statics = {r["label"]: r["final_batches"] for r in doc["runs"] if r["policy"] == "static"}
    assert statics == {"static small": [16] * 4, "static medium": [64] * 4,
                       "static large": [256] * 4}
    pollux = next(r for r in doc["runs"] if r["label"] == "pollux-style")
    assert len(set(pollux["final_batches"])) == 1  # Pollux keeps replicas uniform
    measures = [r["measure"] for r in doc["results"]]
    assert len(measures) == 3 and measures[0].startswith("time to")
    assert set(doc["targets"]) == {"time_to_accuracy", "final_accuracy", "beats_pollux"}
    assert doc["target_met"] == all(doc["targets"].values())
    assert len(doc["params"]["workers"]) == 4
    assert doc["params"]["seeds"] == [0]
