"""The wire benchmark runs end to end and reports each figure beside its reference."""

import json
import subprocess
import sys


def test_bench_wire_json():
    out = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "bench", "wire", "--json",
         "--bytes", str(32 << 20), "--pings", "200", "--rounds", "2"],
        capture_output=True, text=True, timeout=180, check=True,
    )
    doc = json.loads(out.stdout)
    assert doc["bench"] == "wire"
    measures = {r["measure"]: r for r in doc["results"]}
    assert set(measures) == {"control round trips", "bulk data plane (AES-256-GCM)"}
    for row in measures.values():
        assert row["value"] > 0 and row["reference"] > 0
        assert row["ratio"] == row["value"] / row["reference"]
    bulk = measures["bulk data plane (AES-256-GCM)"]
    assert bulk["met"] == (bulk["ratio"] >= 0.5) == doc["target_met"]
    assert doc["params"]["bytes"] == 32 << 20
    assert len(doc["samples"]["agent_bulk_bytes_per_s"]) == 2
