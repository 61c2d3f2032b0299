"""`gleam-peer bench calls` runs end to end on small inputs (figures are not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys


def test_bench_calls_prints_each_figure_beside_its_reference():
    done = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "bench", "calls", "--json", "--calls", "2000",
         "--waits", "50", "--no-lab"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["bench"] == "calls" and doc["lab"] == "skipped (--no-lab)"
    rows = {row["measure"]: row for row in doc["results"]}
    assert set(rows) == {"one-way calls (empty launch)", "waiting call round trip (4 B DtoH)"}
    for row in rows.values():
        assert row["value"] > 0 and row["reference"] > 0 and isinstance(row["met"], bool)
