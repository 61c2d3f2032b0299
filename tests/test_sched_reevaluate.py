"""Re-evaluation: migrate only when another server is better by a margin that pays the move."""

from __future__ import annotations

from gleam.peer.sched.cost import Estimate, LinkEstimate
from gleam.peer.sched.reevaluate import RunningSession, move_cost, should_migrate

GBE = LinkEstimate(rtt=0.5e-3, bandwidth=100e6)
LINKS = {"here": GBE, "there": GBE}


def remaining(here: float, there: float) -> list[Estimate]:
    return [Estimate("here", "alpha", 0.0, 0.0, here), Estimate("there", "beta", 0.0, 0.0, there)]


def state(**kw) -> RunningSession:
    return RunningSession(**{"session": 1, "server": "here", "journal_bytes": 200_000_000, **kw})


def test_a_clearly_better_server_wins_after_paying_the_move():
    decision = should_migrate(state(), remaining(here=60.0, there=10.0), LINKS)
    assert decision.migrate and decision.target == "there"
    assert decision.gain == 60.0 - 10.0 - move_cost(state(), "there", GBE)
    assert "move to beta" in decision.reason


def test_a_small_gain_is_not_worth_it():
    # 20 % better is below the 25 % margin: stay (hysteresis).
    decision = should_migrate(state(journal_bytes=0), remaining(here=50.0, there=40.0), LINKS)
    assert not decision.migrate and "stay on alpha" in decision.reason


def test_the_replay_cost_can_cancel_the_gain():
    slow = {"here": GBE, "there": LinkEstimate(rtt=3e-3, bandwidth=1e6)}  # 200 s to resend
    assert not should_migrate(state(), remaining(60.0, 10.0), slow).migrate
    # Unless the target already holds the journal's blobs.
    cached = state(journal_cached={"there": 200_000_000})
    assert should_migrate(cached, remaining(60.0, 10.0), slow).migrate


def test_cooldown_and_missing_estimates():
    assert not should_migrate(state(since_move=5.0), remaining(60.0, 1.0), LINKS).migrate
    assert "no estimate" in should_migrate(state(server="gone"), remaining(60, 1), LINKS).reason
    only_here = [Estimate("here", "alpha", 0.0, 0.0, 60.0)]
    assert should_migrate(state(), only_here, LINKS).reason == "no other server"
    full = [Estimate("here", "alpha", 0, 0, 60.0), Estimate("there", "beta", 0, 0, 1.0, False)]
    assert not should_migrate(state(), full, LINKS).migrate
