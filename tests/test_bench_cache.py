"""`gleam-peer bench cache` runs end to end on small inputs (timings are not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys


def test_bench_cache_warm_run_sends_no_weights():
    done = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "bench", "cache", "--json", "--mib", "8",
         "--chunk-mib", "4", "--ram-mb", "32", "--no-lab"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["bench"] == "cache" and doc["lab"] == "skipped (--no-lab)"
    rows = {row["measure"]: row for row in doc["results"]}
    sent = rows["warm run: host-to-device bytes sent (loopback)"]
    assert sent["reference"] == 8 << 20 and sent["met"] is True  # cold sent it all, warm < 1%
    assert rows["warm run: bytes saved by references (loopback)"]["value"] == 8 << 20
    digest = [row for name, row in rows.items() if name.startswith("BLAKE3, the content digest")]
    assert len(digest) == 1 and digest[0]["value"] > 0
    kept = rows["weights after 40 MiB of one-off uploads: bytes sent"]
    assert kept["met"] is True and kept["value"] == 0
