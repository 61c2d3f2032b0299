"""status keeps the last finished sessions: when, how long, where, the counters, and
why a session ended when the program did not end it."""

from __future__ import annotations

import json

from gleam.peer.cuda.finished import ENDED_BY_PROGRAM, FinishedSessions, finished_row
from gleam.peer.localmesh import wait_for
from gleam.peer.status import FINISHED_KEPT, last_finished
from gleam.peer.tui import render_text
from tests.cuda_mesh import host_mesh, start_holder

CLIENT_ROW = {"id": "ab" * 8, "role": "client", "peer": "desk", "program": "mlp_infer",
              "pid": 42, "backend": "host", "reason": "named with --peer", "started": 100.0,
              "calls": 178, "waiting": 22, "bytes_to_server": 640_000,
              "bytes_from_server": 50_000, "bytes_saved": 1_250_000}
SERVED_ROW = {"id": "cd" * 8, "role": "served", "peer": "laptop", "program": "mlp_infer",
              "started": 100.0, "calls": 178, "waiting": 22, "bytes_in": 640_000,
              "bytes_out": 50_000}


def test_a_client_row_keeps_where_how_long_and_the_counters():
    row = finished_row(CLIENT_ROW, ended=101.64, reason=ENDED_BY_PROGRAM)
    assert row["seconds"] == 1.64 and row["ended"] == 101.64
    assert (row["peer"], row["backend"], row["reason"]) == ("desk", "host", "named with --peer")
    assert (row["calls"], row["oneway"], row["waiting"], row["round_trips"]) == (178, 156, 22, 22)
    assert (row["bytes_to_server"], row["bytes_saved"]) == (640_000, 1_250_000)
    assert row["end_reason"] is None  # the program ended it: nothing to explain


def test_a_served_row_counts_what_its_client_sent_and_why_it_ended():
    row = finished_row(SERVED_ROW, ended=101.0, reason="lost the link to laptop: reset")
    assert (row["bytes_to_server"], row["bytes_from_server"]) == (640_000, 50_000)
    assert row["end_reason"] == "lost the link to laptop: reset"
    assert finished_row(SERVED_ROW, ended=101.0, reason="closed")["end_reason"] is None


def test_a_failed_session_says_why_whatever_the_words():
    row = finished_row(CLIENT_ROW, ended=101.0, reason=ENDED_BY_PROGRAM, failed=True)
    assert row["end_reason"] == ENDED_BY_PROGRAM


def test_the_list_is_bounded_and_keeps_the_last():
    kept = FinishedSessions(keep=4)
    for i in range(10):
        kept.add({"id": str(i), "ended": float(i)})
    assert [r["id"] for r in kept.rows()] == ["6", "7", "8", "9"]
    rows = [{"id": str(i), "ended": float(i)} for i in reversed(range(40))]
    assert [r["ended"] for r in last_finished(rows)] == [
        float(i) for i in range(40 - FINISHED_KEPT, 40)]


def test_status_keeps_finished_sessions_on_both_agents(tmp_path):
    with host_mesh(tmp_path) as (client, server):
        first = start_holder(client)
        json.loads(first.stdout.readline())
        first.communicate("0\n", timeout=60)
        ended = wait_for(lambda: client.status()["finished"], 20, "the finished session")
        row = ended[-1]
        assert row["role"] == "client" and row["peer"] == "server" and row["backend"] == "host"
        assert row["calls"] > 0 and row["round_trips"] > 0 and row["bytes_to_server"] > 0
        assert row["seconds"] > 0 and row["ended"] >= row["started"]
        assert row["end_reason"] is None
        served = wait_for(lambda: server.status()["finished"], 20, "the served session's end")
        assert served[-1]["role"] == "served" and served[-1]["peer"] == "client"
        assert served[-1]["id"] == row["id"] and served[-1]["end_reason"] is None
        assert "finished sessions" in render_text(client.status(), width=120)

        # A session that its server ends says why.
        second = start_holder(client)
        try:
            json.loads(second.stdout.readline())
            server.process.terminate()
            lost = wait_for(lambda: len(f := client.status()["finished"]) > 1 and f[-1], 30,
                            "the second session to end")
            assert lost["end_reason"], lost
            second.communicate("0\n", timeout=60)
        finally:
            if second.poll() is None:
                second.kill()
                second.communicate()
