"""`gleam-peer bench calls` runs end to end on small inputs (figures are not asserted)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

import pytest

from gleam.peer.lab.netns import lab_unavailable_reason


def test_bench_calls_prints_each_figure_beside_its_reference_measured_in_rounds():
    done = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "bench", "calls", "--json", "--calls", "2000",
         "--waits", "50", "--rounds", "2", "--no-lab"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["bench"] == "calls" and doc["lab"] == "skipped (--no-lab)"
    rows = {row["measure"]: row for row in doc["results"]}
    chain = "waiting call round trip, beside the raw relay chain"
    assert set(rows) == {"one-way calls (empty launch)", "waiting call round trip (4 B DtoH)",
                         chain}
    for name, row in rows.items():
        assert row["value"] > 0 and row["reference"] > 0
        assert isinstance(row["met"], bool) if name != chain else row["met"] is None

    # Every figure and reference was measured in each round, turn about...
    rounds = doc["loopback"]["rounds"]
    names = ["oneway_calls_per_s", "waiting_us", "tcp_pingpong_us", "unix_pingpong_us",
             "relay_chain_us"]
    assert rounds["order"] == [names, names[::-1]]
    values = rounds["values"]
    assert all(len(values[name]) == 2 and min(values[name]) > 0 for name in names)
    # ...and the rows are the medians of those rounds.
    waiting = rows["waiting call round trip (4 B DtoH)"]
    assert waiting["value"] == statistics.median(values["waiting_us"])
    sums = [tcp + unix for tcp, unix in zip(values["tcp_pingpong_us"],
                                            values["unix_pingpong_us"], strict=True)]
    assert waiting["reference"] == statistics.median(sums)
    assert rows[chain]["reference"] == statistics.median(values["relay_chain_us"])
    assert rows["one-way calls (empty launch)"]["value"] == statistics.median(
        values["oneway_calls_per_s"])

    # The references ran as processes placed as the agents are: none pinned.
    placement = doc["loopback"]["placement"]
    assert placement["pinned"] is False
    assert set(placement["agents"]) == {"client", "server"}
    for kind in ("tcp", "unix"):
        assert set(placement["references"][kind]) == {"echo", "ping"}


@pytest.mark.skipif(lab_unavailable_reason() is not None, reason="the lab needs root")
def test_the_lab_figure_is_measured_in_rounds_beside_raw_tcp_on_the_same_link():
    done = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "bench", "calls", "--json", "--calls", "2000",
         "--waits", "20", "--rounds", "2", "--h2d-mib", "16", "--chunk-mib", "8"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    row = doc["results"][-1]
    assert row["measure"] == "host-to-device 16 MiB / 8 MiB copies (10 Gbit/s link)"
    rounds = doc["lab"]["rounds"]
    assert rounds["order"] == [["h2d_mb_s", "raw_tcp_mb_s"], ["raw_tcp_mb_s", "h2d_mb_s"]]
    assert row["value"] == statistics.median(rounds["values"]["h2d_mb_s"])
    assert row["reference"] == statistics.median(rounds["values"]["raw_tcp_mb_s"])
    assert row["reference"] > 0 and isinstance(row["met"], bool)
    # Every round sent its whole copy: none was served from the server's cache.
    assert len(doc["lab"]["bytes_to_server"]) == 2
    assert min(doc["lab"]["bytes_to_server"]) >= 16 << 20
