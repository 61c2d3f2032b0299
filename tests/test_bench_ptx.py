"""`gleam-peer bench ptx` runs end to end on small inputs (figures are not asserted).

The benchmark checks every kernel's result against numpy itself, so a wrong
interpreter fails it; what is pinned here is the report's shape."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("numpy")


def test_bench_ptx_reports_each_kernel_beside_c_and_numpy():
    done = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "bench", "ptx", "--json", "--quick",
         "--workers", "2"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert doc["bench"] == "ptx" and doc["workers"] == 2
    assert set(doc["kernels"]) == {"saxpy", "reduce", "sgemm", "histogram"}
    for figures in doc["kernels"].values():
        assert figures["thread_instructions"] > 0
        assert figures["c_O2_seconds"] > 0 and figures["numpy_seconds"] > 0
    references = {row["reference_name"] for row in doc["results"]}
    assert {"target", "C -O2, 1 thread", "cores"} <= references
    targeted = [r for r in doc["results"] if r["target"] == "≥ 200 M/s"]
    assert {r["measure"].split(":")[0] for r in targeted} == {"saxpy", "sgemm"}
