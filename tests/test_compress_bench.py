"""``gleam-peer bench compression --quick``: the program runs and reports its tables."""

from __future__ import annotations

import argparse
import json

from gleam.peer.bench import compression


def _args(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    compression.add_arguments(parser)
    return parser.parse_args(argv)


def test_quick_bench_reports_speed_ratio_and_failures(capsys):
    assert compression.main(_args(["--quick", "--no-lab", "--json"])) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["bench"] == "compression"
    sims = doc["simulations"]
    assert {(s["density"], s["world"]) for s in sims} == {
        (d, w) for d in compression.DENSITIES for w in compression.WORKERS}
    assert all(s["mismatches"] == 0 for s in sims)  # sketch blocks are exact
    by_density = {s["density"]: s["ratio"] for s in sims if s["world"] == 4}
    assert by_density[0.001] > by_density[0.01] > by_density[0.05] > by_density[0.2] > 1
    assert [p["count"] for p in doc["peel"]] == list(compression.PEEL_COUNTS)
    assert doc["lab"] == {"skipped": "--no-lab"}
    measures = [r["measure"] for r in doc["results"]]
    assert any(m.startswith("encode, 1.0%") for m in measures)
    assert all(r["value"] > 0 for r in doc["results"])


def test_sparse_gradients_have_the_requested_union():
    xs = compression.sparse_gradients(100_000, 4, 0.01, seed=5)
    union = (sum(x != 0 for x in xs) > 0).sum()
    assert 900 <= union <= 1000
    again = compression.sparse_gradients(100_000, 4, 0.01, seed=5, ranks=range(2, 3))
    assert (again[0] == xs[2]).all()


def test_quick_without_json_prints_the_tables_only(capsys):
    """`--quick` without `--json`: the tables, not the JSON document after them."""
    assert compression.main(_args(["--quick", "--no-lab"])) == 0
    out = capsys.readouterr().out
    assert "compression ratio and peel failures" in out and "gleam-peer bench compression" in out
    assert '"bench"' not in out and '"simulations"' not in out
