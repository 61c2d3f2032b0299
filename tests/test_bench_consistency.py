"""`gleam-peer bench consistency` runs end to end on small inputs (timings are not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys


def test_bench_consistency_moves_keep_the_results_and_checkpoints_bound_the_journal():
    done = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "bench", "consistency", "--json", "--mib", "1",
         "--steps", "8"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["bench"] == "consistency" and doc["journal_mb"] == 8.0
    rows = {row["measure"]: row for row in doc["results"]}
    for kind in ("failover after SIGKILL", "migration"):
        assert rows[f"{kind}: step checksums equal the undisturbed run's"]["met"] is True
        replayed = rows[f"{kind}: batches replayed"]
        assert 0 < replayed["value"] < replayed["reference"]  # checkpoints folded the rest
    assert rows["checkpoints in the undisturbed run"]["value"] >= 1
    assert rows["checkpoint: live memory read back"]["value"] == 2 << 20
    assert rows["journal at the end of the undisturbed run"]["met"] is True
