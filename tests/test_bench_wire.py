"""The wire benchmark runs end to end and reports each figure beside its reference."""

import json
import subprocess
import sys

LINK_BULK = "peer link bulk (control-plane path, AES-256-GCM)"
STREAM_BULK = "session data connection bulk (sealed, native)"
STREAM_RTT = "session data connection round trips (8 B frames)"


def test_bench_wire_json():
    out = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "bench", "wire", "--json",
         "--bytes", str(32 << 20), "--pings", "200", "--rounds", "2"],
        capture_output=True, text=True, timeout=180, check=True,
    )
    doc = json.loads(out.stdout)
    assert doc["bench"] == "wire"
    measures = {r["measure"]: r for r in doc["results"]}
    assert set(measures) == {"control round trips", STREAM_RTT, LINK_BULK, STREAM_BULK}
    for row in measures.values():
        assert row["value"] > 0 and row["reference"] > 0
        assert row["ratio"] == row["value"] / row["reference"]
    bulk = measures[LINK_BULK]
    assert bulk["met"] == (bulk["ratio"] >= 0.5) == doc["link_target_met"]
    stream = measures[STREAM_BULK]
    assert stream["met"] == (stream["ratio"] >= 0.8) == doc["target_met"]
    assert doc["params"]["bytes"] == 32 << 20
    assert len(doc["samples"]["agent_bulk_bytes_per_s"]) == 2
    assert len(doc["samples"]["stream_bulk_bytes_per_s"]) == 2
    limits = doc["limits"]
    assert limits["cipher_seal_cpu_s_per_gb"] > 0 and limits["cipher_open_cpu_s_per_gb"] > 0
    assert 0 < limits["ratio_bound_from_cipher"] <= 1
