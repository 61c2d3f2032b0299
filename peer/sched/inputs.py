"""The cost model's inputs from what an agent knows today: gossip records and its links.

Sources (docs/scheduler.md, "Inputs"):
- speed and sessions: the ``cuda`` gossip field a serving agent advertises;
- queue: the ``sched`` gossip field (leases granted, session not open yet)
  plus the record's ``queue_depth``;
- utilisation and free memory: the record's GPU inventory (NVML, host backend);
- sessions and queue again, fresher: the load in lease answers (``LoadBook``),
  which beats gossip for a few seconds;
- RTT and bandwidth: the link's own estimators (``PeerLink.rtt``, ``.bandwidth``),
  to become the kernel's TCP_INFO RTT when the lab branch lands.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import trio

from gleam.peer.sched.cost import Candidate, Demand, LinkEstimate, Offer
from gleam.peer.sched.lease import LoadBook
from gleam.peer.sched.leasing import service_of

if TYPE_CHECKING:
    from gleam.peer.gossip.records import PeerRecord
    from gleam.peer.link import PeerLink
    from gleam.peer.sched.view import SchedAgent

CUDA_FIELD = "cuda"
SCHED_FIELD = "sched"
BACKENDS = ("cuda", "host")
# Until a link has measured itself: a LAN round trip and a Gigabit Ethernet rate.
DEFAULT_RTT = 0.5e-3
DEFAULT_BANDWIDTH = 117e6
# What a session is guessed to need when its program has no earlier run here
# (the interposer reports nothing before it runs): a short program, the size of
# the examples, a test or a first try (a few MB of inputs, a hundred waits, a
# GFLOP: a third of a second on a host device's measured 3 GFLOP/s, a
# millisecond on a GPU). The guess was a second of a mid-range GPU (1,000
# GFLOP), which a host device's speed turned into estimates of several minutes
# for runs of half a second. After one run the learned demand replaces it.
DEFAULT_DEMAND = Demand(unique_bytes=4 << 20, waits=100, compute=1.0)

def book_of(agent: SchedAgent) -> LoadBook | None:
    """The loads this agent heard in lease answers; None without the lease service."""
    service = service_of(agent)
    return service.book if service is not None else None


def _number(value: Any, default: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return float(value) if value == value and abs(value) != float("inf") else default


def offer_of(record: PeerRecord) -> Offer | None:
    """A server's offer from its gossip record; None when it serves no CUDA."""
    extra = record.extra if isinstance(record.extra, Mapping) else {}
    cuda = extra.get(CUDA_FIELD)
    if not isinstance(cuda, Mapping) or cuda.get("backend") not in BACKENDS:
        return None
    sched = extra.get(SCHED_FIELD)
    leases = _number(sched.get("leases")) if isinstance(sched, Mapping) else 0.0
    gpus = [g for g in record.gpus if g.backend == cuda.get("backend")]
    total = sum(g.memory_total for g in gpus)
    free = sum(max(g.memory_total - g.memory_used, 0) for g in gpus) if total > 0 else None
    busy = sum(g.utilization for g in gpus) / len(gpus) / 100.0 if gpus else 0.0
    return Offer(
        speed=max(_number(cuda.get("gflops")), 0.0),
        sessions=max(int(_number(cuda.get("sessions"))), 0),
        queue=max(int(leases), 0) + max(record.queue_depth, 0),
        utilisation=min(max(busy, 0.0), 1.0),
        free_memory=free,
    )


def link_estimate(link: PeerLink) -> LinkEstimate:
    # The kernel's TCP estimate of the network's RTT (TCP_INFO, docs/gossip.md),
    # not the agents' ping, which adds their own scheduling to every sample.
    rtt_ms = link.rtt_ms
    rtt = rtt_ms / 1000 if rtt_ms else None
    rate = link.bandwidth.bytes_per_s
    return LinkEstimate(rtt=rtt if rtt else DEFAULT_RTT,
                        bandwidth=rate if rate else DEFAULT_BANDWIDTH,
                        queued=link.io.queued_bytes)


def candidates_of(agent: SchedAgent) -> list[tuple[Candidate, PeerLink]]:
    """Every linked peer that serves CUDA, as a cost-model candidate (Trio thread)."""
    members = agent.mesh.members()
    book = book_of(agent)
    now = trio.current_time()
    out = []
    for node_id, link in agent.links.items():
        member = members.get(node_id)
        offer = offer_of(member.record) if member is not None else None
        if link.closed or offer is None:
            continue
        if book is not None:
            offer = book.apply(node_id, offer, now)
        out.append((Candidate(node_id, link.name, offer, link_estimate(link)), link))
    return out
