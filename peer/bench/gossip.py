"""``gleam-peer bench gossip``: N peers gossiping in one process, on a virtual clock.

Each peer is a real ``Membership``; a simulated network between them carries
every message with a small latency. In the measured window each message is
encoded with the real encoder to count it (the CBOR body plus the sealed
frame's 21 bytes of length, kind and GCM tag; TCP/IP headers are not
counted); the receiver gets the message object, which is what decoding those
bytes gives back. Every pair
of peers has a link, as in gleam, and a killed peer's links drop at once, as
TCP connections of a SIGKILLed process do. Nothing sleeps and nothing reads a
clock: the run is deterministic under its seed.

For each N:

1. every peer starts with the full view (handed over as a join sync would,
   not counted) and the mesh runs for a warm-up: every peer reports a new GPU
   utilization each second and new link RTTs every five seconds, as the agent
   does, so steady-state refresh traffic flows;
2. in a measured window, one peer changes its plugin fields; we record when
   every view holds the change (seconds, and rounds of ``interval``), and the
   bytes each peer sent per second over the whole window;
3. one peer is killed; we record when every other view has removed it, beside
   the earliest this configuration allows: when every peer suspected it (its
   links dropped) plus ``suspect_timeout``.

References measured in the same run: a naive full-state push-pull (each round
every peer sends all its records to ``fanout`` members and gets theirs back):
its rounds to spread one change are simulated with the same fan-out, and its
bytes are the encoded size of a full-state message at that N.
"""

from __future__ import annotations

import argparse
import heapq
import math
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from gleam.peer.bench.report import Row, positive_int, print_report
from gleam.peer.gossip import (
    GossipConfig,
    GossipMessage,
    GossipRecords,
    GossipWant,
    GpuInfo,
    Link,
    Membership,
    PeerRecord,
)
from gleam.peer.gossip.messages import KIND_LINKS, KIND_PEER
from gleam.peer.protocol import encode_message

__all__ = ["SizeResult", "run_gossip_bench", "simulate"]

FRAME_OVERHEAD = 4 + 1 + 16  # length, kind byte, AES-GCM tag of a sealed frame
BYTES_TARGET = 10_000.0  # bytes per second per peer
ROUNDS_TARGET = 10
KILL_TARGET = 5.0

WARMUP = 5.0
WINDOW = 15.0
CHANGE_AT = 4.0  # into the window
KILL_WAIT = 30.0


@dataclass
class SizeResult:
    """What one simulated mesh of ``peers`` measured."""

    peers: int
    converge_seconds: float
    converge_rounds: float
    bytes_per_peer_s: float
    bytes_worst_peer_s: float
    kill_removed_seconds: float
    kill_suspected_seconds: float
    naive_rounds: int
    naive_bytes_per_peer_s: float
    messages_per_peer_s: float
    bytes_by_type: dict[str, float] = field(default_factory=dict)
    spread_seconds: dict[str, float] = field(default_factory=dict)
    load_refresh_period_s: float = 0.0
    links_refresh_period_s: float = 0.0
    wall_seconds: float = 0.0


_TICK, _LOAD, _LINKS, _DELIVER, _LINK_DOWN = range(5)


class _Network:
    """The simulated mesh: peers, a virtual clock, and messages in flight."""

    def __init__(self, peers: int, seed: int, config: GossipConfig, latency: float) -> None:
        self.config = config
        self.latency = latency
        self.rng = random.Random(seed)
        self.ids = [f"{self.rng.getrandbits(128):032x}" for _ in range(peers)]
        self.index = {node_id: i for i, node_id in enumerate(self.ids)}
        self.members: dict[str, Membership] = {}
        self.alive: set[str] = set(self.ids)
        self.queue: list[tuple[float, int, int, str, str, Any]] = []
        self.seq = 0
        self.now = 0.0
        self.counting = False
        self.sent: Counter[str] = Counter()
        self.by_type: Counter[str] = Counter()
        self.messages = 0
        self.on_deliver: Any = None
        self.link_tables: dict[str, list[list[Link]]] = {}
        for index, node_id in enumerate(self.ids):
            record = PeerRecord(
                node_id, name=f"peer-{index}", address=f"10.0.{index // 250}.{index % 250 + 1}",
                port=7420, gpus=self._gpus(index),
            )
            rng = random.Random(self.rng.getrandbits(64))
            self.members[node_id] = Membership(record, config=config, rng=rng)

    def _gpus(self, index: int, utilization: float = 0.0) -> tuple[GpuInfo, ...]:
        if index % 3 == 2:
            return (GpuInfo("host", "host", None, 16 << 30, 2 << 30, utilization, 180.0),)
        return (
            GpuInfo("NVIDIA GeForce RTX 4090", "cuda", (8, 9), 24 << 30, 3 << 30, utilization),
        )

    def _links(self, node_id: str) -> list[Link]:
        # A few measured tables per peer, cycled: the RTTs move as real ones do,
        # without building thousands of Link objects every simulated second.
        tables = self.link_tables.get(node_id)
        if tables is None:
            count = min(len(self.ids) - 1, self.config.max_links)
            peers = [p for p in self.rng.sample(self.ids, count + 1) if p != node_id][:count]
            tables = self.link_tables[node_id] = [
                [
                    Link(p, round(self.rng.uniform(0.2, 2.0), 3), 0.5, 1.5, 1.1e8, 1.7e9)
                    for p in peers
                ]
                for _ in range(3)
            ]
        tables.append(tables.pop(0))
        return tables[0]

    # ------------------------------------------------------------ clock

    def schedule(self, at: float, kind: int, a: str, b: str = "", payload: Any = None) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (at, self.seq, kind, a, b, payload))

    def bootstrap(self) -> None:
        """Every peer holds every record and links to every peer; no bytes counted."""
        blobs: list[bytes] = []
        for node_id, member in self.members.items():
            member.update_local(0.0, links=self._links(node_id))
            other = self.ids[1] if node_id == self.ids[0] else self.ids[0]
            member.link_up(other, 0.0)
            want = GossipWant(((node_id, KIND_PEER), (node_id, KIND_LINKS)))
            for _, reply in member.receive(other, want, 0.0):
                assert isinstance(reply, GossipRecords)
                blobs.extend(reply.records)
        for node_id, member in self.members.items():
            first = self.ids[1] if node_id == self.ids[0] else self.ids[0]
            for start in range(0, len(blobs), 200):
                member.receive(first, GossipRecords(tuple(blobs[start : start + 200])), 0.0)
            for other in self.ids:
                member.link_up(other, 0.0)
            member.drain_events()
        for node_id in self.ids:
            phase = self.rng.uniform(0, self.config.interval)
            self.schedule(phase, _TICK, node_id)
            self.schedule(self.rng.uniform(0, 1.0), _LOAD, node_id)
            self.schedule(self.rng.uniform(0, 5.0), _LINKS, node_id)

    def run_until(self, end: float, after: Any = None) -> None:
        """Process events up to ``end``; ``after(node_id)`` follows each, True stops."""
        while self.queue and self.queue[0][0] <= end:
            at, _, kind, a, b, payload = heapq.heappop(self.queue)
            self.now = at
            if a not in self.alive:
                continue
            member = self.members[a]
            if kind == _TICK:
                self.send(a, member.tick(at))
                self.schedule(at + self.config.interval, _TICK, a)
            elif kind == _LOAD:
                utilization = round(self.rng.uniform(0, 100))
                member.update_local(at, gpus=self._gpus(self.index[a], utilization))
                self.schedule(at + 1.0, _LOAD, a)
            elif kind == _LINKS:
                member.update_local(at, links=self._links(a))
                self.schedule(at + 5.0, _LINKS, a)
            elif kind == _DELIVER:
                self.send(a, member.receive(b, payload, at))
                if self.on_deliver is not None:
                    self.on_deliver(a, payload)
            elif kind == _LINK_DOWN:
                self.send(a, member.link_down(b, at))
            if after is not None and after(a):
                return

    def send(self, source: str, out: Sequence[tuple[str, GossipMessage]]) -> None:
        for target, message in out:
            if self.counting:
                size = len(encode_message(message)) + FRAME_OVERHEAD
                self.sent[source] += size
                self.by_type[message.type_name] += size
                self.messages += 1
            if target in self.alive:
                delay = self.latency * (1.0 + self.rng.random())
                self.schedule(self.now + delay, _DELIVER, target, source, message)

    def kill(self, node_id: str) -> None:
        self.alive.discard(node_id)
        for other in self.alive:
            self.schedule(self.now + self.latency, _LINK_DOWN, other, node_id)


def _naive_rounds(peers: int, fanout: int, rng: random.Random) -> int:
    """Rounds for one change to reach every peer by full-state push-pull with ``fanout``."""
    informed = [False] * peers
    informed[0] = True
    count, rounds = 1, 0
    while count < peers:
        rounds += 1
        now = informed[:]
        for node in range(peers):
            for target in rng.sample(range(peers - 1), min(fanout, peers - 1)):
                target += target >= node
                if informed[node] or informed[target]:
                    now[node] = now[target] = True
        informed = now
        count = sum(informed)
    return rounds


def simulate(
    peers: int, *, seed: int = 1, config: GossipConfig | None = None, latency: float = 0.0005
) -> SizeResult:
    """Run the three phases for one mesh size; see the module docstring."""
    config = config or GossipConfig()
    started = time.perf_counter()
    net = _Network(peers, seed, config, latency)
    net.bootstrap()
    net.run_until(WARMUP)
    net.counting = True
    window_start = WARMUP
    net.run_until(window_start + CHANGE_AT)

    origin = net.ids[0]
    change_at = net.now
    net.members[origin].update_local(change_at, extra={"bench": "changed"})
    waiting = {n for n in net.ids if n != origin}
    converged_at: list[float] = []
    informed_at: list[float] = []

    def check(node_id: str, message: GossipMessage) -> None:
        if node_id in waiting and isinstance(message, GossipRecords):
            member = net.members[node_id].view().get(origin)
            if member is not None and member.record.extra.get("bench") == "changed":
                waiting.discard(node_id)
                informed_at.append(net.now - change_at)
                if not waiting:
                    converged_at.append(net.now)

    net.on_deliver = check
    net.run_until(window_start + WINDOW)
    net.on_deliver = None
    net.counting = False
    converge = converged_at[0] - change_at if converged_at else math.inf
    spread = {
        f"{q}%": informed_at[min(len(informed_at) - 1, (len(informed_at) * q) // 100)]
        for q in (50, 90, 99)
    } if informed_at else {}

    sent = [net.sent[n] / WINDOW for n in net.ids]
    load_period, links_period = net.members[origin].refresh_periods()
    by_type = {k: v / WINDOW / peers for k, v in sorted(net.by_type.items())}
    messages = net.messages / WINDOW / peers

    victim = net.ids[-1]
    kill_at = net.now
    net.kill(victim)
    unsuspecting = {n for n in net.ids if n != victim}
    holding = set(unsuspecting)
    suspected: list[float] = []

    def removed(node_id: str) -> bool:
        member = net.members[node_id].view().get(victim)
        if member is None or member.status != "alive":
            unsuspecting.discard(node_id)
            if not unsuspecting and not suspected:
                suspected.append(net.now)
        if member is None:
            holding.discard(node_id)
        return not holding

    net.run_until(kill_at + KILL_WAIT, removed)
    kill_removed = net.now - kill_at if not holding else math.inf
    kill_suspected = suspected[0] - kill_at if suspected else math.inf

    full_state = _full_state_bytes(net)
    return SizeResult(
        peers=peers,
        converge_seconds=converge,
        converge_rounds=converge / config.interval,
        bytes_per_peer_s=sum(sent) / peers,
        bytes_worst_peer_s=max(sent),
        kill_removed_seconds=kill_removed,
        kill_suspected_seconds=kill_suspected,
        naive_rounds=_naive_rounds(peers, config.fanout, random.Random(seed)),
        naive_bytes_per_peer_s=2 * config.fanout * full_state / config.interval,
        messages_per_peer_s=messages,
        bytes_by_type=by_type,
        spread_seconds=spread,
        load_refresh_period_s=load_period,
        links_refresh_period_s=links_period,
        wall_seconds=time.perf_counter() - started,
    )


def _full_state_bytes(net: _Network) -> int:
    """Encoded size of one message carrying every record of the mesh."""
    member = net.members[net.ids[0]]
    wanted = tuple((n, k) for n in net.ids for k in (KIND_PEER, KIND_LINKS))
    blobs: list[bytes] = []
    for _, reply in member.receive(net.ids[1], GossipWant(wanted), net.now):
        assert isinstance(reply, GossipRecords)
        blobs.extend(reply.records)
    return sum(len(b) for b in blobs) + len(encode_message(GossipRecords(()))) + FRAME_OVERHEAD


def _rows(result: SizeResult, config: GossipConfig) -> list[Row]:
    n = result.peers
    naive = "naive full-state push-pull"
    return [
        Row(
            f"N={n}: rounds until every view holds a change", result.converge_rounds,
            naive, result.naive_rounds, "rounds", f"≤ {ROUNDS_TARGET}",
            result.converge_rounds <= ROUNDS_TARGET,
        ),
        Row(
            f"N={n}: seconds until every view holds a change", result.converge_seconds,
            naive, result.naive_rounds * config.interval, "s",
        ),
        Row(
            f"N={n}: bytes sent per peer (mean)", result.bytes_per_peer_s / 1000,
            naive, result.naive_bytes_per_peer_s / 1000, "KB/s", f"≤ {BYTES_TARGET / 1000:g}",
            result.bytes_per_peer_s <= BYTES_TARGET,
        ),
        Row(
            f"N={n}: bytes sent by the busiest peer", result.bytes_worst_peer_s / 1000,
            naive, result.naive_bytes_per_peer_s / 1000, "KB/s",
        ),
        Row(
            f"N={n}: kill -> removed from every view", result.kill_removed_seconds,
            "all suspect it + suspect_timeout",
            result.kill_suspected_seconds + config.suspect_timeout, "s",
            f"≤ {KILL_TARGET:g}", result.kill_removed_seconds <= KILL_TARGET,
        ),
    ]


def run_gossip_bench(
    *, sizes: Sequence[int] = (10, 100, 1000), seed: int = 1, as_json: bool
) -> int:
    """Simulate each mesh size and print the report; 0 if every target was met."""
    from rich.console import Console

    progress = Console(stderr=True)
    config = GossipConfig()
    results = []
    for n in sizes:
        progress.log(f"simulating {n} peers (seed {seed})")
        results.append(simulate(n, seed=seed, config=config))
    rows = [row for r in results for row in _rows(r, config)]
    meta = {
        "seed": seed,
        "sizes": list(sizes),
        "config": asdict(config),
        "window_seconds": WINDOW,
        "frame_overhead_bytes": FRAME_OVERHEAD,
        "per_size": {str(r.peers): asdict(r) for r in results},
    }
    print_report("gossip", rows, meta, as_json=as_json)
    return 0 if all(row.met is not False for row in rows) else 1


HELP = "gossip convergence, bandwidth and failure detection, simulated"
DESCRIPTION = (
    "Simulate meshes of 10, 100 and 1000 peers with a virtual clock (real message "
    "encoding, no sockets): rounds and seconds until every view holds one change, bytes "
    "sent per peer per second, and seconds until a killed peer leaves every view, each "
    "beside a naive full-state push-pull measured in the same run."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", type=positive_int, nargs="+", default=[10, 100, 1000],
                        metavar="N", help="mesh sizes to simulate (default 10 100 1000)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")


def main(args: argparse.Namespace) -> int:
    return run_gossip_bench(sizes=tuple(args.sizes), seed=args.seed, as_json=args.json)
