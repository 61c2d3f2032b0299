"""The demand a finished session turned out to have, in the cost model's units.

The cost model estimates ``bytes / bandwidth + waits x rtt + compute / speed``;
a finished session gives the left side (its time) and the counters of the
first two terms (bytes it sent, round trips it waited for). What the link does
not explain is compute: that time times the device speed the session had, its
server's speed divided by the sessions sharing it, is its GFLOP, comparable
across servers of any speed (docs/scheduler.md, "Learned demand").

The sharing is an approximation: the server's session count when the session
opened and when it ended, averaged; the device's share in between is not seen.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gleam.peer.sched.cost import MIN_BANDWIDTH, MIN_SPEED, Demand, LinkEstimate


def measured_demand(*, seconds: float, bytes_sent: int, waits: int, link: LinkEstimate,
                    speed: float, sharing: float) -> Demand:
    """The demand of a session that ran ``seconds`` on a server of ``speed`` GFLOP/s
    shared by ``sharing`` sessions (itself included) on average."""
    bytes_sent, waits = max(int(bytes_sent), 0), max(int(waits), 0)
    link_time = bytes_sent / max(link.bandwidth, MIN_BANDWIDTH) + waits * max(link.rtt, 0.0)
    seconds = seconds if math.isfinite(seconds) else 0.0
    compute_s = max(seconds - link_time, 0.0)
    share = max(speed, MIN_SPEED) / max(sharing, 1.0) if math.isfinite(sharing) else MIN_SPEED
    return Demand(unique_bytes=bytes_sent, waits=waits, compute=compute_s * share)


def _count(row: Mapping[str, Any], key: str) -> int | None:
    value = row.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
        else None


def learnable(row: Mapping[str, Any]) -> tuple[float, int, int] | None:
    """(seconds, bytes sent, waits) of a finished session's row, or None when the run
    says nothing reliable about its program: it failed, or it moved between servers
    (its time then holds replays and more than one server's speed)."""
    started, ended = row.get("started"), row.get("ended")
    sent, waits = _count(row, "bytes_to_server"), _count(row, "waiting")
    if not isinstance(started, float | int) or not isinstance(ended, float | int) \
            or sent is None or waits is None:
        return None
    if row.get("failed") or row.get("migrations") or row.get("failovers"):
        return None
    return max(float(ended) - float(started), 0.0), sent, waits


def remaining_demand(demand: Demand, sent: int, waited: int) -> Demand:
    """What is left of a running session's ``demand`` after it sent ``sent`` bytes and
    waited ``waited`` round trips. Compute is not counted as it happens; the share
    of waits done stands for the share of compute done (a program waits as it
    steps: a synchronize per step), or the share of bytes for a program that
    learned no waits."""
    waits_left = max(demand.waits - max(waited, 0), 0)
    bytes_left = max(demand.unique_bytes - max(sent, 0), 0)
    if demand.waits > 0:
        left = waits_left / demand.waits
    else:
        left = bytes_left / demand.unique_bytes if demand.unique_bytes > 0 else 1.0
    return Demand(unique_bytes=bytes_left, waits=waits_left, compute=demand.compute * left,
                  memory=demand.memory, cached=demand.cached)
