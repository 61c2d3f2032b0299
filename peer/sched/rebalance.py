"""Re-evaluating running sessions: move one when another server is clearly better.

Every ``interval`` seconds the client's agent looks at each of its sessions served
by a peer, estimates the work left on every candidate with the cost model, and asks
``should_migrate`` (hysteresis: margin, minimum gain, cooldown, the cost of the
move). A yes calls the migrator: ``gleam-peer migrate``'s mechanism
(peer/cuda/client/relocate.py), which refuses at no cost to the session when the move
cannot be done. docs/scheduler.md, "Re-evaluation".

The session itself counts in its server's gossiped load: the current server's
offer is taken with one session less, so a session is never chased away by its
own weight.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import trio

from gleam.peer.sched.cost import Candidate, Demand, effective_speed, estimate
from gleam.peer.sched.inputs import DEFAULT_DEMAND, candidates_of
from gleam.peer.sched.reevaluate import COOLDOWN, Decision, Migrator, RunningSession, should_migrate

if TYPE_CHECKING:
    from gleam.peer.sched.view import SchedAgent

log = logging.getLogger("gleam.sched")

INTERVAL = 10.0  # seconds between two looks at the running sessions


def settings_from_env() -> tuple[float, float]:
    """(interval, cooldown) from ``GLEAM_REEVALUATE_S`` (0 turns re-evaluation off)
    and ``GLEAM_REEVALUATE_COOLDOWN_S``; a value that is not a number keeps the default."""
    def read(name: str, default: float) -> float:
        try:
            value = float(os.environ.get(name, "") or default)
        except ValueError:
            return default
        return value if value >= 0 else default

    return read("GLEAM_REEVALUATE_S", INTERVAL), read("GLEAM_REEVALUATE_COOLDOWN_S", COOLDOWN)


def decide(state: RunningSession, candidates: Sequence[Candidate], *,
           demand: Demand = DEFAULT_DEMAND, cooldown: float = COOLDOWN) -> Decision:
    """The advice for one session, from candidates as ``candidates_of`` gives them."""
    fair = [dataclasses.replace(c, offer=dataclasses.replace(
                c.offer, sessions=max(c.offer.sessions - 1, 0)))
            if c.node_id == state.server else c for c in candidates]
    here = next((c for c in fair if c.node_id == state.server), None)
    left, note = state.remaining, state.demand_note
    if left is None:
        left, note = _guess_left(state, here, demand)
    remaining = [estimate(left, c) for c in fair]
    links = {c.node_id: c.link for c in fair}
    decision = should_migrate(state, remaining, links, cooldown=cooldown)
    return dataclasses.replace(decision, reason=f"{decision.reason} [{note}]")


def _guess_left(state: RunningSession, here: Candidate | None,
                demand: Demand) -> tuple[Demand, str]:
    """What a session of a program with no earlier run has left: as much compute
    again as it has done on its server so far (a program that ran a minute is
    likelier to run another than to stop now), and at least ``demand``, the
    guess for a new one. Without it a long first run would never look worth
    moving: the new program's guess is a short program."""
    if here is None or not math.isfinite(state.since_move) or state.since_move <= 0:
        return demand, state.demand_note
    done = state.since_move * effective_speed(here.offer)
    if done <= demand.compute:
        return demand, state.demand_note
    return (dataclasses.replace(demand, compute=done),
            f"{state.demand_note}; as much again as its {state.since_move:.0f} s so far")


class Rebalancer:
    """The periodic look (Trio task); ``sessions`` lists what can move now."""

    def __init__(self, agent: SchedAgent, sessions: Callable[[], list[RunningSession]],
                 migrator: Migrator, *, interval: float, cooldown: float) -> None:
        self.agent = agent
        self.sessions = sessions
        self.migrator = migrator
        self.interval = interval
        self.cooldown = cooldown
        self.last: dict[int, Decision] = {}  # the latest advice per session (status)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        task_status.started()
        if self.interval <= 0:
            return
        while True:
            await trio.sleep(self.interval)
            await self.once()

    async def once(self) -> list[tuple[int, Decision]]:
        """One look at every movable session; moves those the model says to move."""
        candidates = [c for c, _ in candidates_of(self.agent)]
        advice = []
        live = self.sessions()
        self.last = {s.session: self.last[s.session] for s in live if s.session in self.last}
        for state in live:
            decision = decide(state, candidates, cooldown=self.cooldown)
            self.last[state.session] = decision
            advice.append((state.session, decision))
            if decision.migrate and decision.target is not None:
                log.info("session %016x: %s", state.session, decision.reason)
                await self.migrator.migrate(state.session, decision.target)
        return advice
