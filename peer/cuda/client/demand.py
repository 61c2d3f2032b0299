"""The client agent learns each program's demand from its finished sessions.

At a session's open the agent looks up the program's learned demand
(``peer/sched/history.py``) for ``choose()`` to rank by, and notes how many
sessions its server shared the device with; at its end it measures the
session's demand (``peer/sched/measured.py``) with that server's speed and
the link's estimates as they are then, folds it into the program's estimate
and writes the table to the state directory in a worker thread. Everything
here runs on the Trio thread (the session-end path hands over to it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from gleam.peer.cuda.client.program_key import program_of
from gleam.peer.sched.cost import Candidate, Demand
from gleam.peer.sched.history import DEFAULT_NOTE, FILE_NAME, DemandHistory
from gleam.peer.sched.inputs import DEFAULT_DEMAND, candidates_of
from gleam.peer.sched.measured import learnable, measured_demand

if TYPE_CHECKING:
    from gleam.peer.cuda.client.facts import ClientAgent

log = logging.getLogger("gleam.sched")
MAX_OPEN = 4096  # open sessions whose program is remembered


@dataclass(frozen=True)
class ProgramDemand:
    """What a session is ranked by: its program's key, demand and where it came from."""

    key: str
    demand: Demand = DEFAULT_DEMAND
    note: str = DEFAULT_NOTE


def _others(candidate: Candidate | None) -> float:
    """Sessions sharing the server besides this one (its own place is in the count)."""
    if candidate is None:
        return 0.0
    return float(max(candidate.offer.sessions + candidate.offer.queue - 1, 0))


@dataclass(frozen=True)
class _Open:
    program: ProgramDemand
    others: float  # sessions that shared its server's device when it opened


class DemandLearning:
    def __init__(self, agent: ClientAgent, spawn: Callable[..., bool]) -> None:
        self.agent = agent
        self._spawn = spawn  # runs an async function in the forwarding's nursery
        self.history = DemandHistory(Path(agent.config.state.path) / FILE_NAME)
        self.history.load()
        self._open: dict[int, _Open] = {}
        self._writing = trio.Lock()  # one write at a time, each of the table as it is then

    def for_program(self, key: str) -> ProgramDemand:
        demand, note = self.history.demand_for(key, DEFAULT_DEMAND, program_of(key))
        return ProgramDemand(key, demand, note)

    def of(self, session: int) -> ProgramDemand:
        """What an open session was ranked by (a failover or re-evaluation ranks by it too)."""
        found = self._open.get(session)
        return found.program if found is not None else ProgramDemand("")

    def _candidate(self, node_id: str) -> Candidate | None:
        for candidate, _link in candidates_of(self.agent):
            if candidate.node_id == node_id:
                return candidate
        return None

    def opened(self, session: int, program: ProgramDemand, server: str) -> None:
        """A session of ``program`` opened on ``server`` (node id)."""
        if len(self._open) < MAX_OPEN:
            self._open[session] = _Open(program, _others(self._candidate(server)))

    def ended(self, session: int, server: str | None, row: Mapping[str, Any]) -> Demand | None:
        """A session served by ``server`` (None: by this agent) ended with ``row``:
        learn its program's demand from it."""
        found = self._open.pop(session, None)
        run = learnable(row)
        candidate = self._candidate(server) if server is not None else None
        if found is None or not found.program.key or run is None or candidate is None:
            return None
        seconds, sent, waits = run
        sample = measured_demand(seconds=seconds, bytes_sent=sent, waits=waits,
                                 link=candidate.link, speed=candidate.offer.speed,
                                 sharing=1.0 + (found.others + _others(candidate)) / 2)
        key = found.program.key
        learned = self.history.record(key, sample, program_of(key))
        if learned is None:
            return None
        log.info("%s: %s (this run: %d bytes, %d waits, %.3g GFLOP)", key, learned.note(),
                 sample.unique_bytes, sample.waits, sample.compute)
        self._spawn(self._save)
        return sample

    async def _save(self) -> None:
        async with self._writing:
            await trio.to_thread.run_sync(self.history.save, self.history.document())
