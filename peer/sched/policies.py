"""Placement policies the scheduler benchmark compares, and the offline best.

Sessions arrive one after another (all at time 0, in the scenario's order);
each policy names servers in its order of preference and the session takes
the first that admits it (a lease: a server takes at most ``max_sessions``).
Every policy sees the placements made before it, as the lease answers give
an agent fresh load.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence

from gleam.peer.sched.cost import Candidate, LinkEstimate, Offer
from gleam.peer.sched.ranking import rank_by_cost
from gleam.peer.sched.sim import SimResult, simulate
from gleam.peer.sched.workload import Scenario

# (scenario, session index, sessions per server so far, assignment so far, rng) -> order
Preference = Callable[[Scenario, int, list[int], list[int], random.Random], list[int]]


def _builtin(sc: Scenario, i: int, load: list[int], placed: list[int],
             _rng: random.Random) -> list[int]:
    spec = sc.sessions[i]
    candidates = []
    for j, server in enumerate(sc.servers):
        link = sc.link(spec.host, server.name)
        # What this host's agent has queued on the link: its earlier sessions' bytes.
        queued = sum(_unsent(sc, k, j) for k, s in enumerate(placed)
                     if s == j and sc.sessions[k].host == spec.host)
        candidates.append(Candidate(server.name, server.name,
                                    Offer(speed=server.speed, sessions=load[j]),
                                    LinkEstimate(link.rtt, link.bandwidth, queued=queued)))
    order = rank_by_cost(spec.demand, candidates).order
    index = {s.name: j for j, s in enumerate(sc.servers)}
    return [index[name] for name in order]


def _unsent(sc: Scenario, session: int, server: int) -> int:
    d = sc.sessions[session].demand
    return max(d.unique_bytes - d.cached.get(sc.servers[server].name, 0), 0)


def _random(sc: Scenario, _i: int, _load: list[int], _placed: list[int],
            rng: random.Random) -> list[int]:
    order = list(range(len(sc.servers)))
    rng.shuffle(order)
    return order


def _round_robin(sc: Scenario, i: int, _load: list[int], _placed: list[int],
                 _rng: random.Random) -> list[int]:
    m = len(sc.servers)
    return [(i + k) % m for k in range(m)]


def _least_loaded(sc: Scenario, _i: int, load: list[int], _placed: list[int],
                  _rng: random.Random) -> list[int]:
    return sorted(range(len(sc.servers)), key=lambda j: (load[j], j))


def _nearest_rtt(sc: Scenario, i: int, _load: list[int], _placed: list[int],
                 _rng: random.Random) -> list[int]:
    host = sc.sessions[i].host
    return sorted(range(len(sc.servers)),
                  key=lambda j: (sc.link(host, sc.servers[j].name).rtt, j))


POLICIES: dict[str, Preference] = {
    "scheduler": _builtin,
    "random": _random,
    "round-robin": _round_robin,
    "least-loaded": _least_loaded,
    "nearest-rtt": _nearest_rtt,
}
SIMPLE = ("random", "round-robin", "least-loaded", "nearest-rtt")


def place(sc: Scenario, prefer: Preference, seed: int) -> list[int]:
    """Each session on the first server of its preference that has room."""
    rng = random.Random(seed)
    load = [0] * len(sc.servers)
    placed: list[int] = []
    for i in range(len(sc.sessions)):
        order = prefer(sc, i, load, placed, rng)
        chosen = next((j for j in order if load[j] < sc.servers[j].max_sessions), None)
        if chosen is None:
            raise ValueError(f"no server has room for session {sc.sessions[i].name}")
        load[chosen] += 1
        placed.append(chosen)
    return placed


def offline_best(sc: Scenario) -> tuple[list[int], SimResult]:
    """The assignment with the highest throughput (then the lowest mean), by trying all."""
    m = len(sc.servers)
    best: tuple[float, float] | None = None
    found: tuple[list[int], SimResult] | None = None
    for combo in itertools.product(range(m), repeat=len(sc.sessions)):
        if any(combo.count(j) > sc.servers[j].max_sessions for j in range(m)):
            continue
        result = simulate(sc, combo)
        key = (result.makespan, result.mean_completion)
        if best is None or key < best:
            best, found = key, (list(combo), result)
    assert found is not None
    return found


def run_policy(sc: Scenario, name: str, seed: int) -> SimResult:
    return simulate(sc, place(sc, POLICIES[name], seed))


def results(sc: Scenario, seed: int, names: Sequence[str] = tuple(POLICIES)
            ) -> dict[str, SimResult]:
    return {name: run_policy(sc, name, seed) for name in names}
