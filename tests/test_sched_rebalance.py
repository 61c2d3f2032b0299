"""Re-evaluation of running sessions (docs/scheduler.md, "Re-evaluation"): a session
moves, through the consistency mechanism, when a clearly better server appears; a
pinned session never does. Real agents on loopback, the accumulate example gated
on stdin between its steps."""

from __future__ import annotations

import time

import pytest

from gleam.peer.bench.gated import verdict
from gleam.peer.localmesh import LocalMesh, wait_for
from gleam.peer.sched.cost import Candidate, LinkEstimate, Offer
from gleam.peer.sched.rebalance import decide, settings_from_env
from gleam.peer.sched.reevaluate import RunningSession

from .test_consistency import KILL_AFTER, GatedRun, _client, _servers, _session

FAST_LOOK = {"GLEAM_REEVALUATE_S": "0.3", "GLEAM_REEVALUATE_COOLDOWN_S": "0"}
LAN = LinkEstimate(rtt=0.5e-3, bandwidth=100e6)


def _candidate(node: str, speed: float, sessions: int = 0) -> Candidate:
    return Candidate(node, node, Offer(speed=speed, sessions=sessions), LAN)


def test_a_session_is_not_chased_away_by_its_own_load():
    """Two equal servers: the session's own place on its server is not counted
    against it, so it stays."""
    state = RunningSession(session=1, server="a", journal_bytes=1 << 20)
    decision = decide(state, [_candidate("a", 10.0, sessions=1), _candidate("b", 10.0)],
                      cooldown=0)
    assert not decision.migrate


def test_a_much_faster_server_is_worth_the_move_and_the_cooldown_holds_it():
    state = RunningSession(session=1, server="a", journal_bytes=1 << 20, since_move=60)
    fast = [_candidate("a", 1.0, sessions=1), _candidate("b", 100.0)]
    decision = decide(state, fast)
    assert decision.migrate and decision.target == "b"
    recent = RunningSession(session=1, server="a", journal_bytes=1 << 20, since_move=1)
    assert not decide(recent, fast).migrate


def test_a_long_first_run_is_guessed_to_have_as_much_again_left():
    """A program with no earlier run is guessed short when it starts; once it has
    run a minute on a slow server, it is guessed to need as long again, which a
    100x faster server is worth moving for. A few seconds in, it is not."""
    fast = [_candidate("a", 1.0, sessions=1), _candidate("b", 100.0)]
    early = RunningSession(session=1, server="a", journal_bytes=1 << 20, since_move=1)
    assert not decide(early, fast, cooldown=0).migrate
    late = RunningSession(session=1, server="a", journal_bytes=1 << 20, since_move=60)
    decision = decide(late, fast, cooldown=0)
    assert decision.migrate and decision.target == "b"
    assert decision.reason.endswith(
        "[demand guessed: no earlier run of this program; as much again as its 60 s so far]")


def test_settings_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("GLEAM_REEVALUATE_S", "0")
    monkeypatch.setenv("GLEAM_REEVALUATE_COOLDOWN_S", "not a number")
    assert settings_from_env() == (0.0, 30.0)


def _reference(root, binary) -> list[str]:
    """The run's lines without any move, on a server of its own."""
    mesh = LocalMesh(root)
    try:
        client = _client(mesh, _servers(mesh, "solo"))
        run = GatedRun(client, binary, "solo")
        lines = run.steps(KILL_AFTER + 1)
        rc, rest, err = run.finish()
        assert rc == 0, err
        return lines + rest
    finally:
        mesh.close()


@pytest.mark.parametrize("pinned", [False, True], ids=["moves", "pinned-stays"])
def test_a_clearly_better_server_takes_the_running_session(tmp_path, accumulate, pinned):
    reference = _reference(tmp_path / "reference", accumulate)
    mesh = LocalMesh(tmp_path / "mesh")
    try:
        # A slow server is the only one when the program starts...
        slow = mesh.start("slow", extra=["--backend", "host", "--host-slowdown", "200"])
        client = _client(mesh, [slow], env=FAST_LOOK)
        run = GatedRun(client, accumulate, "slow" if pinned else "")
        lines = run.steps(KILL_AFTER + 1)
        assert _session(client)["peer"] == "slow"
        # ...then a fast one joins the mesh (it dials the client).
        fast = mesh.start("fast", mesh_key=slow.state.mesh_key(),
                          peers=[f"127.0.0.1:{client.port}"], extra=["--backend", "host"])
        wait_for(lambda: fast.node_id in client.authenticated_peers(), 20, "the new link")
        if pinned:
            # Several looks pass; a pinned session is never a candidate.
            wait_for(lambda: any((p.get("extra") or {}).get("cuda")
                                 for p in client.status()["peers"] if p["id"] == fast.node_id),
                     20, "the fast server's advert")
            for _ in range(5):
                row = _session(client)
                assert row["peer"] == "slow" and row["reevaluated"] is None
                time.sleep(1)
        else:
            row = wait_for(lambda: next((r for r in client.request("cuda_sessions")["client"]
                                         if r["migrations"] == 1), None), 30, "the move")
            assert row["peer"] == "fast" and row["moves"][0]["kind"] == "migration"
            assert "move to fast" in row["moves"][0]["why"] or row["reevaluated"]
        rc, rest, err = run.finish()
        assert rc == 0, err
        assert lines + rest == reference
        assert verdict(rest)["ok"]
    finally:
        mesh.close()
