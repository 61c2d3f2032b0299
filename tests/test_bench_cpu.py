"""`gleam-peer bench cpu` runs end to end on tiny sizes (figures and targets are not asserted)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

AGENT_ROWS = ("client agent, cache off", "serving agent, cache off",
              "client agent, cache on (first sightings)",
              "serving agent, cache on (first sightings)")
REFERENCES = ("raw_tcp_sender", "raw_tcp_receiver", "cipher_seal", "cipher_open",
              "cipher_digest", "cipher_sha256", "cipher_memcpy", "tcp_pingpong_cpu_us_per_side",
              "tcp_pingpong_us", "unix_pingpong_us")


def test_bench_cpu_reports_each_agents_cost_beside_references_measured_in_rounds():
    done = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "bench", "cpu", "--json", "--rounds", "2",
         "--mib", "8", "--chunk-mib", "2", "--calls", "2000", "--waits", "200"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["bench"] == "cpu" and doc["rounds"] == 2
    rows = {row["measure"]: row for row in doc["results"]}
    copy = "H2D 8 MiB in 2 MiB copies"
    for name in AGENT_ROWS:
        row = rows[f"{name}, {copy}"]
        assert row["unit"] == "CPU-s/GB" and isinstance(row["met"], bool)
    calls = [f"{agent} agent per {kind} call" for kind in ("one-way", "waiting")
             for agent in ("client", "serving")]
    for name in calls:
        assert rows[name]["unit"] == "CPU-µs"
    assert isinstance(rows["one-way calls (empty launch)"]["met"], bool)
    assert isinstance(rows["waiting call round trip (4 B DtoH)"]["met"], bool)
    less = "serving agent, cache off, less the memcpy reference"
    for name, row in rows.items():
        if name != less:  # a difference of two measures: its sign is not the bench's to keep
            assert row["value"] > 0, name
        assert row["reference"] > 0, name

    # Every figure and reference was measured in each round, turn about, and each row
    # is the median of its rounds.
    detail = doc["rounds_detail"]
    assert detail["order"][1] == detail["order"][0][::-1]
    values = detail["values"]
    for key in ("h2d_nocache_client", "h2d_nocache_server", "h2d_cache_client",
                "h2d_cache_server", "oneway_client", "oneway_server", "waiting_client",
                "waiting_server", "oneway_calls_per_s", "waiting_us", *REFERENCES):
        assert len(values[key]) == 2 and min(values[key]) > 0, key
    assert rows[f"client agent, cache off, {copy}"]["value"] == statistics.median(
        values["h2d_nocache_client"])
    assert rows[less]["value"] == statistics.median(values["h2d_nocache_server"]) - \
        statistics.median(values["cipher_memcpy"])
    assert rows["serving agent per waiting call"]["reference"] == statistics.median(
        values["tcp_pingpong_cpu_us_per_side"])
    # The program's own CPU (its interposer) is read at the same marks, and the rate
    # with a core per process is set by the busiest of the three.
    for kind in ("one-way", "waiting"):
        assert rows[f"program (interposer) per {kind} call"]["unit"] == "CPU-µs"
    for key in ("h2d_nocache_program", "oneway_program", "waiting_program"):
        assert len(values[key]) == 2 and min(values[key]) > 0, key
    slowest = max(statistics.median(values[f"oneway_{side}"])
                  for side in ("program", "client", "server"))
    assert rows["one-way calls, each process on a core of its own"]["value"] == \
        1e6 / slowest
    # The end of every run was read once both agents were quiet.
    assert all(values[f"{run}_settled"] == [1.0, 1.0]
               for run in ("h2d_nocache", "h2d_cache", "oneway", "waiting"))
