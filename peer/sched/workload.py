"""The scheduler benchmark's workloads: servers, client hosts, links and sessions.

One definition feeds both modes of ``gleam-peer bench scheduler``: the
discrete-event simulation (``sim``) and real agents on shaped links in the
LAN lab (``bench.sched_lab``). Speeds are GFLOP/s (the host
backend's speed factor in the lab), links are (RTT s, bandwidth B/s).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from gleam.peer.sched.cost import Demand, LinkEstimate

MB = 1 << 20
GBE = LinkEstimate(rtt=0.5e-3, bandwidth=117e6)  # 1 Gbit/s, 0.5 ms
WIFI = LinkEstimate(rtt=3e-3, bandwidth=11.7e6)  # 100 Mbit/s, 3 ms (the links)
SLOW_WIFI = LinkEstimate(rtt=8e-3, bandwidth=4.7e6)  # 40 Mbit/s, 8 ms: a far room
BASE_GFLOPS = 250.0  # speed factor 1


@dataclass(frozen=True)
class ServerSpec:
    name: str
    speed: float  # GFLOP/s
    max_sessions: int = 8  # the agent's default --max-sessions


@dataclass(frozen=True)
class SessionSpec:
    name: str
    host: str
    kind: str
    demand: Demand  # ``cached`` is keyed by server name


@dataclass(frozen=True)
class Scenario:
    servers: tuple[ServerSpec, ...]
    hosts: tuple[str, ...]
    links: dict[tuple[str, str], LinkEstimate] = field(hash=False)  # (host, server)
    sessions: tuple[SessionSpec, ...]

    def link(self, host: str, server: str) -> LinkEstimate:
        return self.links[(host, server)]


# The session kinds, after the remoting workloads: (unique bytes,
# waits, GFLOP). infer: an MLP's 256 MB of weights and 50 requests; storm:
# launch-storm, 10,000 launches with a synchronize every 100; train: a
# compute-heavy loop; transfer: bulk copies.
KINDS: dict[str, tuple[int, int, float]] = {
    "infer": (256 * MB, 150, 400.0),
    "storm": (1 * MB, 100, 150.0),
    "train": (64 * MB, 600, 6000.0),
    "transfer": (512 * MB, 20, 10.0),
}


def _session(rng: random.Random, name: str, host: str, servers: tuple[ServerSpec, ...]
             ) -> SessionSpec:
    kind = rng.choice(sorted(KINDS))
    unique, waits, gflop = KINDS[kind]
    scale = rng.uniform(0.7, 1.3)
    cached: dict[str, int] = {}
    if kind in ("infer", "train") and rng.random() < 0.5:
        # Weights left by an earlier run on one server (the blob cache summary).
        cached[rng.choice(servers).name] = int(unique * scale)
    demand = Demand(unique_bytes=int(unique * scale), waits=int(waits * scale),
                    compute=gflop * scale, cached=cached)
    return SessionSpec(name, host, kind, demand)


def small_scenario(seed: int) -> Scenario:
    """8 sessions from 2 client hosts onto 3 servers of different speed and link."""
    rng = random.Random(seed)
    servers = (ServerSpec("fast", 4 * BASE_GFLOPS), ServerSpec("mid", 2 * BASE_GFLOPS),
               ServerSpec("slow", 1 * BASE_GFLOPS))
    hosts = ("desk", "laptop")
    links = {
        # The desk is wired to the fast and the slow server; the mid one sits on Wi-Fi.
        ("desk", "fast"): GBE, ("desk", "mid"): WIFI, ("desk", "slow"): GBE,
        # The laptop reaches everything over Wi-Fi, the fast server from a far room.
        ("laptop", "fast"): SLOW_WIFI, ("laptop", "mid"): WIFI, ("laptop", "slow"): WIFI,
    }
    sessions = tuple(_session(rng, f"s{i}", hosts[i % 2], servers) for i in range(8))
    return Scenario(servers, hosts, links, sessions)


def scaled_scenario(seed: int, clients: int = 100, n_servers: int = 30,
                    n_hosts: int = 10) -> Scenario:
    """``clients`` sessions from ``n_hosts`` hosts onto ``n_servers`` mixed servers."""
    rng = random.Random(10_000 + seed)
    servers = tuple(ServerSpec(f"gpu{j}", rng.choice((1, 2, 4, 8)) * BASE_GFLOPS)
                    for j in range(n_servers))
    hosts = tuple(f"host{h}" for h in range(n_hosts))
    kinds = (GBE, GBE, WIFI, WIFI, SLOW_WIFI)
    links = {(h, s.name): rng.choice(kinds) for h in hosts for s in servers}
    sessions = tuple(_session(rng, f"s{i}", hosts[i % n_hosts], servers)
                     for i in range(clients))
    return Scenario(servers, hosts, links, sessions)
