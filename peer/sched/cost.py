"""The cost model: a session's estimated completion time on one candidate server.

    time = (uncached bytes + min(queued, uncached bytes)) / link bandwidth
         + waits x link RTT
         + compute / effective speed

    effective speed = speed x (1 - foreign utilisation) / (1 + sessions + queue)

Every input is a plain value so the model can be fed by gossip today, by the
kernel's TCP_INFO RTT when the lab's link measurements land, and by the
simulation; docs/scheduler.md names each input's source.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

# Floors that keep an estimate finite when a measurement is missing or zero.
MIN_BANDWIDTH = 1e3  # bytes/s
MIN_SPEED = 1e-3  # GFLOP/s
# A busy GPU still gives a newcomer a sliver; 1.0 would make the estimate infinite.
MAX_FOREIGN_UTILISATION = 0.95


@dataclass(frozen=True)
class Demand:
    """What a session needs, as far as the client's agent can tell before it runs.

    ``cached`` maps a server's node id to the bytes of this session's inputs
    that server likely holds already (the blob cache summary).
    """

    unique_bytes: int = 0
    waits: int = 0  # round trips the session must wait for (synchronize, DtoH, ...)
    compute: float = 0.0  # GFLOP
    memory: int = 0  # device bytes it will allocate (admission, not time)
    cached: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Offer:
    """What a server offers, from its gossip record or a fresher lease answer."""

    speed: float  # GFLOP/s measured by its backend
    sessions: int = 0
    queue: int = 0  # sessions admitted (leased) but not running yet
    utilisation: float = 0.0  # 0..1, the device's busy fraction (NVML)
    free_memory: int | None = None  # bytes; None: not reported


@dataclass(frozen=True)
class LinkEstimate:
    """The client-to-server link as measured: round trip and bandwidth."""

    rtt: float  # seconds
    bandwidth: float  # bytes/s
    # Bytes this client already has waiting to go out on the link (its other
    # sessions). Two flows share a link equally, so a session's bytes finish
    # after its own plus at most as many of theirs.
    queued: int = 0


@dataclass(frozen=True)
class Candidate:
    node_id: str
    name: str
    offer: Offer
    link: LinkEstimate


@dataclass(frozen=True)
class Estimate:
    """One candidate's completion time and its three parts (seconds)."""

    node_id: str
    name: str
    transfer: float
    waiting: float
    compute: float
    fits: bool = True  # False: the server reported too little free memory

    @property
    def total(self) -> float:
        return self.transfer + self.waiting + self.compute if self.fits else math.inf

    def as_dict(self) -> dict[str, object]:
        return {"node": self.node_id[:12], "name": self.name, "total_s": self.total,
                "transfer_s": self.transfer, "waiting_s": self.waiting,
                "compute_s": self.compute, "fits": self.fits}


def effective_speed(offer: Offer) -> float:
    """The share of a server's speed a new session can expect.

    Utilisation counts only when the server reports no sessions of its own:
    then the device is busy with someone else's work. With sessions, their
    count already says how the device is shared, and counting both would
    discount the same work twice.
    """
    foreign = min(max(offer.utilisation, 0.0), MAX_FOREIGN_UTILISATION) if offer.sessions == 0 \
        else 0.0
    share = (1.0 - foreign) / (1 + max(offer.sessions, 0) + max(offer.queue, 0))
    return max(offer.speed, MIN_SPEED) * share


def estimate(demand: Demand, candidate: Candidate) -> Estimate:
    """The estimated completion time of ``demand`` on ``candidate``."""
    link, offer = candidate.link, candidate.offer
    cached = min(max(demand.cached.get(candidate.node_id, 0), 0), demand.unique_bytes)
    unsent = demand.unique_bytes - cached
    ahead = min(max(link.queued, 0), unsent)
    fits = offer.free_memory is None or demand.memory <= offer.free_memory
    return Estimate(
        node_id=candidate.node_id, name=candidate.name,
        transfer=(unsent + ahead) / max(link.bandwidth, MIN_BANDWIDTH),
        waiting=max(demand.waits, 0) * max(link.rtt, 0.0),
        compute=max(demand.compute, 0.0) / effective_speed(offer),
        fits=fits,
    )
