"""Timers, fan-out and bandwidth budgets of the gossip layer."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["GossipConfig"]


@dataclass(frozen=True)
class GossipConfig:
    """How often and how widely a peer gossips, and how fast it gives up on a silent one.

    Times are in seconds of whatever clock the caller passes as ``now``.

    interval: call ``Membership.tick`` this often; one gossip round.
    fanout: members each round's rumor goes to.
    redundant_relays: a peer stops relaying a change once this many of its relays
        were not news to their receivers (see rumors.py).
    retransmit_mult: and in any case after ``ceil(retransmit_mult * ln(members + 1))``
        relays; suspicions and deaths, which get no feedback, use this count.
    push_pull: a rumor asks its receiver for the receiver's own news.
    max_rumor_summaries: most summaries one rumor carries (newest news first).
    suspect_timeout: a suspect that has not refuted is declared dead after this.
    dead_retention: a dead node is remembered (its stale records refused) this long.
    sync_interval: anti-entropy with one random member this often.
    want_timeout: a record asked for and not received may be asked again after this.
    refresh_interval: fewest seconds between two load-only refreshes of our record.
    refresh_budget: bytes per second per peer that the whole mesh's load refreshes
        may cost; as the mesh grows each origin refreshes less often to stay in it.
    links_refresh_interval, links_budget: the same for link reports.
    max_links: link entries we publish (the lowest-RTT ones).
    max_members: nodes a view may hold; more are refused.
    """

    interval: float = 1.0
    fanout: int = 3
    redundant_relays: int = 5
    retransmit_mult: float = 1.5
    push_pull: bool = True
    max_rumor_summaries: int = 64
    suspect_timeout: float = 3.0
    dead_retention: float = 60.0
    sync_interval: float = 10.0
    want_timeout: float = 2.0
    refresh_interval: float = 2.0
    refresh_budget: float = 3000.0
    links_refresh_interval: float = 10.0
    links_budget: float = 1000.0
    max_links: int = 16
    max_members: int = 4096

    def __post_init__(self) -> None:
        for name in (
            "interval", "suspect_timeout", "dead_retention", "sync_interval", "want_timeout",
            "refresh_budget", "links_budget", "retransmit_mult",
        ):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"GossipConfig.{name} must be a positive number")
        for name in ("refresh_interval", "links_refresh_interval"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                raise ValueError(f"GossipConfig.{name} must be zero or more")
        if min(self.fanout, self.max_rumor_summaries, self.redundant_relays) < 1:
            raise ValueError("fanout, max_rumor_summaries and redundant_relays must be ≥ 1")
        if self.max_members < 2:
            raise ValueError("max_members must be ≥ 2")
        if not 0 <= self.max_links <= 64:
            raise ValueError("max_links must be in 0..64")

    def retransmits(self, members: int) -> int:
        """How many times each peer relays one change in a mesh of ``members``."""
        return max(1, math.ceil(self.retransmit_mult * math.log(members + 1)))
