"""`gleam-peer bench remoting --quick` end to end, and the physical-limit arithmetic.

The quick run builds the lab as root (two links, a client and a server host each) and runs
every workload in every mode; the checks are on the report's structure, on the programs
having verified their results and on the byte accounting, never on timings.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gleam.peer.bench.remoting import QUICK
from gleam.peer.bench.remoting_model import LINKS, MODES, WORKLOADS, Cell, limit_terms, summarize
from gleam.peer.lab.netns import lab_unavailable_reason


def _program(static: int, dynamic: int, d2h: int, waits: int, seconds: float) -> dict:
    return {"ok": True, "seconds": seconds, "waits": waits, "static_h2d": static,
            "dynamic_h2d": dynamic, "d2h": d2h}


def test_limit_counts_compute_unique_bytes_and_waits():
    cold = Cell("mlp-infer", "wifi", "gleam-cold", _program(10**6, 2000, 500, 50, 1.0))
    terms = limit_terms(cold, 0.25)
    rate, rtt = LINKS["wifi"]
    assert terms["bytes"] == 10**6 + 2500
    assert terms["limit_s"] == pytest.approx(0.25 + (10**6 + 2500) * 8 / (rate * 1e6)
                                             + 50 * rtt / 1000)
    warm = Cell("mlp-infer", "wifi", "gleam-warm", cold.result)
    assert limit_terms(warm, 0.25)["bytes"] == 2500  # the weights are on the server already


def test_targets_compare_with_sync_and_the_limit():
    local = Cell("mlp-infer", None, "local", _program(0, 0, 0, 0, 0.1))
    sync = Cell("mlp-infer", "wifi", "sync", _program(10**6, 0, 0, 50, 10.0))
    warm = Cell("mlp-infer", "wifi", "gleam-warm", _program(10**6, 0, 0, 50, 1.0))
    rows, records = summarize([local, sync, warm])
    by_mode = {r["mode"]: r for r in records}
    assert by_mode["gleam-warm"]["speedup_vs_sync"] == pytest.approx(10.0)
    assert by_mode["gleam-warm"]["speedup_met"] is False  # 10x < 24.2x
    assert "local compute" in by_mode["gleam-warm"]["limited_by"]
    speedup = next(r for r in rows if r.measure.endswith("gleam-warm speedup over sync"))
    assert speedup.met is False and speedup.reference_name.startswith("sync")


def test_bench_remoting_quick_runs_every_cell_verified():
    done = subprocess.run([sys.executable, "-m", "gleam.peer", "bench", "remoting", "--quick",
                           "--json"], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["bench"] == "remoting" and doc["quick"] is True and doc["verified"] is True
    cells = {(c["workload"], c["link"], c["mode"]): c for c in doc["cells"]}
    assert all(c["verified"] and c["program"]["ok"] for c in cells.values())
    assert {(w, None, "local") for w in WORKLOADS} <= set(cells)
    if lab_unavailable_reason() is not None:  # not root: only the local cells, said so
        assert doc["lab"].startswith("skipped") and len(cells) == len(WORKLOADS)
        return
    expected = {(w, link, m) for w in WORKLOADS for link in LINKS for m in MODES[1:]}
    assert expected <= set(cells)
    for link in LINKS:
        # The cache: the warm transfer sends no host-to-device byte, the cold one all of them.
        assert cells[("transfer", link, "gleam-warm")]["session"]["h2d_sent"] == 0
        assert cells[("transfer", link, "gleam-cold")]["session"]["h2d_sent"] == QUICK.transfer
        # sync: nothing cached, and every launch is followed by a wait of its own.
        assert cells[("transfer", link, "sync")]["session"]["bytes_saved"] == 0
        assert cells[("launch-storm", link, "sync")]["session"]["calls"] >= 2 * QUICK.launches
        for mode in ("gleam-cold", "gleam-warm"):
            cell = cells[("mlp-infer", link, mode)]
            assert cell["limit"]["limit_s"] > 0 and isinstance(cell["limit_met"], bool)
            assert cell["speedup_vs_sync"] > 0
    measures = {r["measure"] for r in doc["results"]}
    assert "mlp-infer / wifi: gleam-warm speedup over sync" in measures
    target = next(r for r in doc["results"]
                  if r["measure"] == "launch-storm / gbe: gleam-warm speedup over sync")
    assert target["target"] == ">= 6.0x" and isinstance(target["met"], bool)
