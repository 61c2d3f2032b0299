"""Our own records: the next version being drafted, and when it may be published.

The agent reports its state as often as it likes (``Membership.update_local``);
what reaches the mesh is rate-limited so that the refreshes of every origin
together fit a bandwidth budget:

* a change of identity (name, address, port), of the GPU inventory, or of
  which plugin fields exist (the keys of ``extra``) is published at once;
* any other change (memory used, utilization, measured speed, sessions, queue
  depth, the values of plugin fields) waits until ``period`` has passed since
  the last publication, so a plugin whose values churn costs no more than load;
  where ``period = max(refresh_interval, members * cost / refresh_budget)``
  and ``cost`` is what one publication costs each peer (the record, plus the
  summaries that spread it). Each origin then spends ``cost / period`` bytes
  per second per peer, and all ``members`` origins together spend the budget;
* link reports follow the same rule with their own budget; the first one is
  published at once.

Periods are stretched by a random factor (0.5..1.5) so that origins do not
refresh in lockstep, and the first one by 0..1, a random phase.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable, Mapping
from typing import Any

from gleam.peer.gossip.config import GossipConfig
from gleam.peer.gossip.records import (
    MAX_COUNTER,
    GpuInfo,
    Link,
    LinkReport,
    PeerRecord,
    encode_record,
)

__all__ = ["LOCAL_FIELDS", "LocalRecords"]

# Bytes one summary or one want entry costs on the wire, for the refresh budget.
SUMMARY_BYTES = 45
WANT_BYTES = 45

_PEER_FIELDS = ("name", "address", "port", "gpus", "sessions", "queue_depth", "extra")
LOCAL_FIELDS = frozenset((*_PEER_FIELDS, "links"))
_STRUCTURAL = ("name", "address", "port")


def _inventory_changed(old: tuple[GpuInfo, ...], new: tuple[GpuInfo, ...]) -> bool:
    return len(old) != len(new) or not all(a.same_device(b) for a, b in zip(old, new, strict=True))


def _structural(old: PeerRecord, new: PeerRecord) -> bool:
    return (
        any(getattr(old, f) != getattr(new, f) for f in _STRUCTURAL)
        or old.extra.keys() != new.extra.keys()
        or _inventory_changed(old.gpus, new.gpus)
    )


class LocalRecords:
    """The origin's side of its own records: published versions, drafts, rate limits."""

    def __init__(self, record: PeerRecord, config: GossipConfig, rng: random.Random) -> None:
        self._config = config
        self._rng = rng
        self.peer = record
        self.peer_blob = encode_record(record)
        self.links: LinkReport | None = None
        self.links_blob: bytes | None = None
        self._draft = record
        self._draft_links: tuple[Link, ...] | None = None
        self._peer_at: float | None = None
        self._links_at: float | None = None
        # The first refresh comes after a random part of a period: a random phase.
        self._stretch = rng.random()
        self._links_stretch = rng.random()

    @property
    def incarnation(self) -> int:
        return self.peer.incarnation

    @property
    def node_id(self) -> str:
        return self.peer.node_id

    def update(self, changes: Mapping[str, Any]) -> None:
        """Fold ``changes`` into the drafts; raises TypeError/ValueError and changes nothing."""
        unknown = set(changes) - LOCAL_FIELDS
        if unknown:
            raise TypeError(
                f"update_local() got unknown fields {sorted(unknown)}; "
                f"it takes {', '.join(sorted(LOCAL_FIELDS))}"
            )
        peer_changes = {k: v for k, v in changes.items() if k != "links"}
        if "gpus" in peer_changes:
            peer_changes["gpus"] = tuple(peer_changes["gpus"])
        draft = dataclasses.replace(self._draft, **peer_changes) if peer_changes else self._draft
        links = self._draft_links
        if "links" in changes:
            links = self._trim(changes["links"])
            LinkReport(self.node_id, links=links)  # validate now, not at publication
        self._draft = draft
        self._draft_links = links

    def _trim(self, links: Iterable[Link]) -> tuple[Link, ...]:
        ordered = sorted(links, key=lambda link: (link.best_rtt_ms, link.peer))
        return tuple(ordered[: self._config.max_links])

    def peer_period(self, members: int) -> float:
        cost = len(self.peer_blob) + self._spread_cost(members)
        return max(self._config.refresh_interval, members * cost / self._config.refresh_budget)

    def links_period(self, members: int) -> float:
        size = len(self.links_blob) if self.links_blob else 0
        cost = size + self._spread_cost(members)
        return max(
            self._config.links_refresh_interval, members * cost / self._config.links_budget
        )

    def _spread_cost(self, members: int) -> int:
        # With feedback a peer relays a change about redundant_relays + 1 times
        # (measured: about 6 summaries per peer per change at 1000 peers),
        # never more than the retransmit cap.
        config = self._config
        relays = min(config.redundant_relays + 1, config.retransmits(members))
        return relays * SUMMARY_BYTES + WANT_BYTES

    def publish_due(self, now: float, members: int) -> bool:
        """Publish the drafts whose time has come; True if anything was published."""
        if self._peer_at is None:
            self._peer_at = now
        published = False
        draft = self._draft
        if draft != self.peer and (
            _structural(self.peer, draft)
            or now - self._peer_at >= self.peer_period(members) * self._stretch
        ):
            self._publish_peer(draft, self.incarnation, now)
            published = True
        links = self._draft_links
        if links is not None and (self.links is None or links != self.links.links):
            if self.links is None or self._links_at is None:
                due = True
            else:
                due = now - self._links_at >= self.links_period(members) * self._links_stretch
            if due:
                self._publish_links(links, self.incarnation, now)
                published = True
        return published

    def bump(self, at_least: int, now: float) -> None:
        """Take incarnation ``at_least`` (or one more than now) and republish everything."""
        incarnation = min(max(at_least, self.incarnation + 1), MAX_COUNTER)
        self._publish_peer(self._draft, incarnation, now)
        if self._draft_links is not None:
            self._publish_links(self._draft_links, incarnation, now)

    def _publish_peer(self, draft: PeerRecord, incarnation: int, now: float) -> None:
        version = min(self.peer.version + 1, MAX_COUNTER)
        record = dataclasses.replace(draft, incarnation=incarnation, version=version)
        self.peer = self._draft = record
        self.peer_blob = encode_record(record)
        self._peer_at = now
        self._stretch = self._rng.uniform(0.5, 1.5)

    def _publish_links(self, links: tuple[Link, ...], incarnation: int, now: float) -> None:
        version = min(self.links.version + 1, MAX_COUNTER) if self.links else 0
        self.links = LinkReport(self.node_id, incarnation, version, links)
        self.links_blob = encode_record(self.links)
        if self._links_at is not None:
            self._links_stretch = self._rng.uniform(0.5, 1.5)
        self._links_at = now
