"""A discrete-event simulation of sessions sharing servers and links (processor sharing).

Each session runs three phases on its server: sending the bytes the server
does not hold yet (the host-to-server link is shared equally by the
sessions sending on it), its waiting round trips (waits x RTT, shared by
nobody), and its compute (the server's speed is shared equally by the
sessions computing on it). Between events every phase progresses at a
constant rate, so the next event is exact: the simulation jumps from one
phase end to the next. The physics is the cost model's, with the sharing
that the model can only estimate made exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gleam.peer.sched.workload import Scenario

_EPS = 1e-12


@dataclass(frozen=True)
class SimResult:
    finish: tuple[float, ...]  # per session, seconds from the common start

    @property
    def makespan(self) -> float:
        return max(self.finish, default=0.0)

    @property
    def throughput(self) -> float:
        """Sessions completed per minute over the whole run."""
        return 60.0 * len(self.finish) / self.makespan if self.makespan > 0 else 0.0

    @property
    def mean_completion(self) -> float:
        return sum(self.finish) / len(self.finish) if self.finish else 0.0


def phases(scenario: Scenario, session: int, server: int) -> list[tuple[object, float, float]]:
    """(resource, amount, capacity) per phase; resource None: a delay nobody shares."""
    spec = scenario.sessions[session]
    srv = scenario.servers[server]
    link = scenario.link(spec.host, srv.name)
    d = spec.demand
    unsent = max(d.unique_bytes - min(d.cached.get(srv.name, 0), d.unique_bytes), 0)
    out: list[tuple[object, float, float]] = [
        (("link", spec.host, server), float(unsent), link.bandwidth),
        (None, d.waits * link.rtt, 1.0),
        (("gpu", server), d.compute, srv.speed),
    ]
    return [p for p in out if p[1] > 0]


def simulate(scenario: Scenario, assignment: Sequence[int]) -> SimResult:
    """Run every session (all start at 0) on its assigned server; the finish times."""
    plans = [phases(scenario, i, s) for i, s in enumerate(assignment)]
    step = [0] * len(plans)
    left = [plan[0][1] if plan else 0.0 for plan in plans]
    finish = [0.0] * len(plans)
    active = {i for i, plan in enumerate(plans) if plan}
    now = 0.0
    while active:
        sharing: dict[object, int] = {}
        for i in active:
            resource = plans[i][step[i]][0]
            if resource is not None:
                sharing[resource] = sharing.get(resource, 0) + 1
        rate = {}
        for i in active:
            resource, _, capacity = plans[i][step[i]]
            rate[i] = capacity / (sharing[resource] if resource is not None else 1)
        dt = min(left[i] / rate[i] for i in active)
        now += dt
        for i in list(active):
            left[i] -= rate[i] * dt
            if left[i] <= _EPS * max(1.0, plans[i][step[i]][1]):
                step[i] += 1
                if step[i] == len(plans[i]):
                    active.discard(i)
                    finish[i] = now
                else:
                    left[i] = plans[i][step[i]][1]
    return SimResult(tuple(finish))
