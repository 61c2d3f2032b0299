"""The demand history: running estimates per program, their bounds, the file, and
the measured demand of a finished session in the cost model's units."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gleam.peer.cuda.client.program_key import peer_pid, program_key, program_of
from gleam.peer.sched.cost import Candidate, Demand, LinkEstimate, Offer
from gleam.peer.sched.history import DEFAULT_NOTE, MAX_FILE, DemandHistory
from gleam.peer.sched.measured import learnable, measured_demand, remaining_demand
from gleam.peer.sched.ranking import rank_by_cost

DEFAULT = Demand(unique_bytes=64 << 20, waits=2000, compute=1000.0)


def test_the_first_run_sets_the_estimate_and_later_ones_move_it_halfway():
    h = DemandHistory()
    assert h.demand_for("prog", DEFAULT) == (DEFAULT, DEFAULT_NOTE)
    h.record("prog", Demand(unique_bytes=1000, waits=10, compute=100.0))
    demand, note = h.demand_for("prog", DEFAULT)
    assert demand == Demand(unique_bytes=1000, waits=10, compute=100.0)
    assert note == "demand learned from 1 run"
    h.record("prog", Demand(unique_bytes=3000, waits=30, compute=300.0))
    demand, note = h.demand_for("prog", DEFAULT)
    assert demand == Demand(unique_bytes=2000, waits=20, compute=200.0)
    assert note == "demand learned from 2 runs"


def test_other_arguments_fall_back_to_the_programs_runs():
    h = DemandHistory()
    h.record("/bin/x aaaa", Demand(unique_bytes=500, waits=5, compute=5.0), program="/bin/x")
    exact = h.demand_for("/bin/x aaaa", DEFAULT, program="/bin/x")
    assert exact[1] == "demand learned from 1 run"
    other = h.demand_for("/bin/x bbbb", DEFAULT, program="/bin/x")
    assert other == (Demand(unique_bytes=500, waits=5, compute=5.0),
                     "demand learned from 1 run of the program with other arguments")
    assert h.demand_for("/bin/y cccc", DEFAULT, program="/bin/y") == (DEFAULT, DEFAULT_NOTE)


def test_the_table_is_bounded_and_keeps_the_recently_updated():
    h = DemandHistory(max_entries=3)
    for name in "abcd":
        h.record(name, Demand(waits=1))
    assert len(h) == 3 and h.get("a") is None
    h.record("b", Demand(waits=1))  # b is the newest now: c goes next
    h.record("e", Demand(waits=1))
    assert h.get("c") is None and h.get("b") is not None
    # Nonsense is not kept: an endless key, an impossible figure.
    assert h.record("k" * 10_000, Demand(waits=1)) is None
    assert h.record("nan", Demand(compute=float("nan"))) is None
    assert h.record("neg", Demand(unique_bytes=-1)) is None
    assert h.record("", Demand(waits=1)) is None
    assert len(h) == 3


def test_the_file_round_trips_and_is_replaced_whole(tmp_path: Path):
    path = tmp_path / "demand.json"
    h = DemandHistory(path)
    h.record("prog one", Demand(unique_bytes=7, waits=3, compute=1.5))
    h.record("prog one", Demand(unique_bytes=9, waits=5, compute=2.5))
    h.record("other", Demand(unique_bytes=1, waits=1, compute=0.0))
    h.save()
    assert [p.name for p in tmp_path.iterdir()] == ["demand.json"]  # no temporary left
    again = DemandHistory(path)
    again.load()
    assert again.document() == h.document()
    assert again.demand_for("prog one", DEFAULT)[1] == "demand learned from 2 runs"


@pytest.mark.parametrize("content", [
    b"\xff\xfe not json", b"[1, 2]", b'{"format": 99, "programs": []}',
    b'{"format": 1, "programs": {}}', b"{" * 100_000,
])
def test_a_corrupt_file_starts_empty_with_one_log_line(tmp_path: Path, caplog, content):
    path = tmp_path / "demand.json"
    path.write_bytes(content)
    h = DemandHistory(path)
    with caplog.at_level(logging.WARNING, logger="gleam.sched"):
        h.load()
    assert len(h) == 0
    assert len([r for r in caplog.records if "demand history" in r.getMessage()]) == 1
    h.record("prog", Demand(waits=1))  # and it is written over cleanly
    h.save()
    assert json.loads(path.read_text())["programs"][0]["key"] == "prog"


def test_an_oversized_file_is_not_read(tmp_path: Path):
    path = tmp_path / "demand.json"
    path.write_bytes(b" " * (MAX_FILE + 1))
    h = DemandHistory(path)
    h.load()
    assert len(h) == 0


def test_bad_entries_are_dropped_and_good_ones_kept(tmp_path: Path):
    path = tmp_path / "demand.json"
    good = {"key": "good", "unique_bytes": 10, "waits": 2, "compute": 1.0, "runs": 4}
    path.write_text(json.dumps({"format": 1, "programs": [
        good, "text", {"key": 5, "unique_bytes": 1, "waits": 1, "compute": 1, "runs": 1},
        {**good, "key": "neg", "waits": -1}, {**good, "key": "huge", "compute": 1e300},
        {**good, "key": "runs", "runs": 0}, {**good, "key": "bool", "runs": True},
        {**good, "key": "nokey"} | {"key": ""}, {**good, "key": "str", "waits": "2"},
    ]}))
    h = DemandHistory(path)
    h.load()
    assert len(h) == 1
    assert h.demand_for("good", DEFAULT) == (Demand(unique_bytes=10, waits=2, compute=1.0),
                                             "demand learned from 4 runs")


def test_compute_is_what_the_link_does_not_explain_in_gflop():
    link = LinkEstimate(rtt=1e-3, bandwidth=1e6)
    # 2 s of sending, 1 s of waits, 3 s on a 10 GFLOP/s device shared by 2: 15 GFLOP.
    d = measured_demand(seconds=6.0, bytes_sent=2_000_000, waits=1000, link=link,
                        speed=10.0, sharing=2.0)
    assert (d.unique_bytes, d.waits) == (2_000_000, 1000)
    assert d.compute == pytest.approx(15.0)
    # The same program on a device twice as fast, alone, measures the same GFLOP.
    e = measured_demand(seconds=3.0 + 0.75, bytes_sent=2_000_000, waits=1000, link=link,
                        speed=20.0, sharing=1.0)
    assert e.compute == pytest.approx(15.0)
    # A session all link, or nonsense, computes nothing and stays finite.
    assert measured_demand(seconds=1.0, bytes_sent=10**9, waits=0, link=link, speed=5.0,
                           sharing=1.0).compute == 0.0
    odd = measured_demand(seconds=float("nan"), bytes_sent=-5, waits=-1, link=link,
                          speed=0.0, sharing=float("inf"))
    assert (odd.unique_bytes, odd.waits, odd.compute) == (0, 0, 0.0)


def test_only_clean_runs_are_learned_from():
    row = {"started": 100.0, "ended": 103.5, "bytes_to_server": 4096, "waiting": 12,
           "failed": False, "migrations": 0, "failovers": 0}
    assert learnable(row) == (3.5, 4096, 12)
    for spoilt in ({"failed": True}, {"migrations": 1}, {"failovers": 1},
                   {"waiting": -1}, {"bytes_to_server": "x"}, {"ended": None}):
        assert learnable({**row, **spoilt}) is None


def test_what_is_left_of_a_running_session():
    d = Demand(unique_bytes=1000, waits=100, compute=50.0)
    left = remaining_demand(d, sent=400, waited=25)
    assert (left.unique_bytes, left.waits) == (600, 75)
    assert left.compute == pytest.approx(37.5)
    done = remaining_demand(d, sent=5000, waited=500)
    assert (done.unique_bytes, done.waits, done.compute) == (0, 0, 0.0)
    no_waits = remaining_demand(Demand(unique_bytes=1000, compute=10.0), sent=750, waited=0)
    assert no_waits.compute == pytest.approx(2.5)


def test_learned_demand_ranks_a_transfer_and_a_compute_job_differently():
    # A fast server far away (Wi-Fi) and a slow one near (Gigabit).
    far = Candidate("far", "fast-far", Offer(speed=1000.0),
                    LinkEstimate(rtt=3e-3, bandwidth=5e6))
    near = Candidate("near", "slow-near", Offer(speed=100.0),
                     LinkEstimate(rtt=0.5e-3, bandwidth=117e6))
    h = DemandHistory()
    # What the two programs measured on their last runs (on near, alone).
    h.record("transfer", measured_demand(seconds=0.9, bytes_sent=100_000_000, waits=20,
                                         link=near.link, speed=100.0, sharing=1.0))
    h.record("train", measured_demand(seconds=30.0, bytes_sent=1_000_000, waits=600,
                                      link=near.link, speed=100.0, sharing=1.0))
    transfer, note = h.demand_for("transfer", DEFAULT)
    train, _ = h.demand_for("train", DEFAULT)
    assert note == "demand learned from 1 run"
    # One default for both would send both to the same server.
    assert rank_by_cost(DEFAULT, [far, near]).order == ("near", "far")
    assert rank_by_cost(transfer, [far, near]).order == ("near", "far")
    assert rank_by_cost(train, [far, near]).order == ("far", "near")


def test_a_program_is_keyed_by_its_executable_and_arguments():
    # Each says it is up: right after exec the kernel may not show the new cmdline yet
    # (the interposer connects from a running program, never in that window).
    script = "import time; print('up', flush=True); time.sleep(30)"
    procs = [subprocess.Popen([sys.executable, "-c", script, arg], stdout=subprocess.PIPE,
                              text=True) for arg in ("a", "a", "b")]
    try:
        assert [p.stdout.readline() for p in procs] == ["up\n"] * 3
        keys = [program_key(p.pid, "python") for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.communicate()
    assert keys[0] == keys[1] != keys[2]
    assert program_of(keys[0]) == program_of(keys[2]) == os.path.realpath(sys.executable)
    # A process that is gone (or no /proc): the name the interposer gave.
    assert program_key(procs[0].pid, "python") == "comm:python"
    assert program_key(0, "x" * 100) == "comm:" + "x" * 64
    assert program_of("comm:python") == "comm:python"


def test_the_kernel_names_the_connecting_process():
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        assert peer_pid(a) == os.getpid()
    tcp = socket.socket()
    with tcp:
        assert peer_pid(tcp) is None


def test_re_evaluation_weighs_what_is_left_of_the_learned_demand():
    from gleam.peer.sched.rebalance import decide
    from gleam.peer.sched.reevaluate import RunningSession

    here = Candidate("here", "slow-near", Offer(speed=10.0, sessions=1),
                     LinkEstimate(rtt=0.5e-3, bandwidth=117e6))
    there = Candidate("there", "fast", Offer(speed=1000.0),
                      LinkEstimate(rtt=0.5e-3, bandwidth=117e6))
    base = RunningSession(session=1, server="here", journal_bytes=0)
    # A program nearly done with its 1,000 GFLOP stays; one with all of it left moves.
    almost = decide(dataclasses.replace(
        base, remaining=remaining_demand(Demand(waits=100, compute=1000.0), 0, 99),
        demand_note="demand learned from 3 runs"), [here, there])
    assert not almost.migrate and almost.reason.endswith("[demand learned from 3 runs]")
    fresh = decide(dataclasses.replace(base, remaining=Demand(waits=100, compute=1000.0),
                                       demand_note="demand learned from 3 runs"), [here, there])
    assert fresh.migrate and fresh.target == "there"
    assert decide(base, [here, there]).reason.endswith(
        "[demand guessed: no earlier run of this program]")

