"""The view of the mesh one peer holds, kept current by gossip: a sans-I/O state machine.

The agent feeds it link events and received gossip and sends what comes out;
``now`` is always passed in, nothing here reads a clock or touches a socket.
See docs/gossip.md for the protocol and the reasoning behind its numbers.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from gleam.peer.gossip import digest
from gleam.peer.gossip.config import GossipConfig
from gleam.peer.gossip.detector import Deadlines, supersedes
from gleam.peer.gossip.events import (
    Died,
    Joined,
    MembershipEvent,
    Refuted,
    Rejoined,
    Suspected,
    Updated,
)
from gleam.peer.gossip.local import LocalRecords
from gleam.peer.gossip.messages import (
    ALIVE,
    DEAD,
    KIND_LINKS,
    KIND_PEER,
    MAX_BUCKETS,
    MAX_RECORDS,
    MAX_SUMMARIES,
    STATUS_NAMES,
    SUSPECT,
    GossipDigest,
    GossipMessage,
    GossipRecords,
    GossipRumor,
    GossipSync,
    GossipWant,
    Summary,
)
from gleam.peer.gossip.records import (
    InvalidRecord,
    Link,
    LinkReport,
    PeerRecord,
    Record,
    decode_record,
)
from gleam.peer.gossip.rumors import Rumors

__all__ = ["GossipStats", "Member", "Membership", "Outgoing"]

Status = Literal["alive", "suspect", "dead"]
Outgoing = list[tuple[str, GossipMessage]]

# A peer legitimately raises its incarnation by one per refutation; a jump of
# millions is a broken or hostile record that would leave the origin no room.
MAX_INCARNATION_JUMP = 1 << 20
# Records answering one want are split into messages of about this size.
RECORDS_MESSAGE_BYTES = 64 * 1024
MAX_EVENTS = 1024
_UPDATE_FIELDS = ("name", "address", "port", "gpus", "sessions", "queue_depth", "extra")


@dataclass(frozen=True)
class Member:
    """One node of the view: its latest record and link table, and what we believe of it."""

    record: PeerRecord
    links: tuple[Link, ...]
    status: Status
    since: float
    incarnation: int

    @property
    def node_id(self) -> str:
        return self.record.node_id


@dataclass
class GossipStats:
    """Counters for the status view and for tests."""

    refused_messages: int = 0  # from a sender without an authenticated link
    invalid_records: int = 0  # did not decode
    refused_records: int = 0  # stale incarnation, dead origin, about us, absurd, view full
    accepted_records: int = 0
    refutations: int = 0  # times we raised our incarnation


class _Node:
    """Everything we hold about one node, including ourselves."""

    __slots__ = (
        "contrib", "incarnation", "key", "links", "links_blob", "node_id", "notified",
        "peer", "peer_blob", "rejoining", "since", "status", "wire",
    )

    def __init__(self, node_id: str, incarnation: int, now: float) -> None:
        self.node_id = node_id
        self.key = digest.node_key(node_id)
        self.peer: PeerRecord | None = None
        self.peer_blob: bytes | None = None
        self.links: LinkReport | None = None
        self.links_blob: bytes | None = None
        self.status = ALIVE
        self.incarnation = incarnation
        self.since = now
        self.wire: tuple[str, int, int, int, int] = (node_id, ALIVE, incarnation, -1, -1)
        self.contrib = 0  # what this node adds (XOR) to its anti-entropy bucket
        self.notified: tuple[int, int] | None = None
        self.rejoining = False

    def summary(self) -> Summary:
        return Summary(*self.wire)

    def rewire(self) -> None:
        """Recompute ``wire``, the summary as sent: versions of records at our incarnation."""
        inc = self.incarnation
        peer, links = self.peer, self.links
        pv = peer.version if peer is not None and peer.incarnation == inc else -1
        lv = links.version if links is not None and links.incarnation == inc else -1
        self.wire = (self.node_id, self.status, inc, pv, lv)



@dataclass
class _Want:
    key: tuple[int, int]
    hot: bool
    deadline: float


class Membership:
    """One peer's view of the mesh, spread by push-pull gossip, with SWIM failure detection.

    Every method takes ``now`` (seconds, any monotonic clock) and returns the
    messages to send as ``(node_id, message)`` pairs; the caller sends each
    over its authenticated link to that node. Gossip from a node without an
    authenticated link (``link_up`` not called, or ``link_down`` since) is
    refused whole.
    """

    def __init__(
        self,
        local: PeerRecord,
        *,
        config: GossipConfig = GossipConfig(),  # noqa: B008 - frozen, so one shared default is safe
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.node_id = local.node_id
        self._rng = rng if rng is not None else random.Random()
        self._local = LocalRecords(local, config, self._rng)
        self._nodes: dict[str, _Node] = {}
        self._view: dict[str, Member] = {}
        self._linked: list[str] = []
        self._linked_at: dict[str, int] = {}
        self._suspects = Deadlines()
        self._tombstones = Deadlines()
        self._rumors = Rumors()
        self._wants: dict[tuple[str, int], _Want] = {}
        self._events: deque[MembershipEvent] = deque(maxlen=MAX_EVENTS)
        self._outbox: Outgoing = []
        self._fine_hashes = [0] * MAX_BUCKETS
        self._dirty: set[_Node] = set()  # nodes whose bucket hash contribution is stale
        self._started: float | None = None
        self._next_sync: float | None = None
        self._synced = False
        self.stats = GossipStats()
        me = _Node(self.node_id, local.incarnation, 0.0)
        self._nodes[self.node_id] = me
        self._install_local(me)

    # ------------------------------------------------------------ public API

    def view(self) -> Mapping[str, Member]:
        """node_id -> Member for every alive or suspect node, ourselves included (live)."""
        return MappingProxyType(self._view)

    def dead(self) -> list[str]:
        """Nodes declared dead and still remembered (their stale records are refused)."""
        return [n.node_id for n in self._nodes.values() if n.status == DEAD]

    @property
    def incarnation(self) -> int:
        return self._local.incarnation

    def refresh_periods(self) -> tuple[float, float]:
        """Seconds between our load refreshes and between our link reports, at this mesh size."""
        members = len(self._view)
        return self._local.peer_period(members), self._local.links_period(members)

    def linked(self) -> list[str]:
        return list(self._linked)

    def drain_events(self) -> list[MembershipEvent]:
        """Events since the last call, oldest first (at most MAX_EVENTS are kept)."""
        events = list(self._events)
        self._events.clear()
        return events

    def update_local(self, now: float, **changes: Any) -> None:
        """Report our current state: name, address, port, gpus, sessions, queue_depth, extra, links.

        Identity, GPU inventory and new or removed ``extra`` keys are published
        at once (relayed from the next round); load and other value changes at
        the refresh rate the mesh size allows (see docs/gossip.md). Raises
        TypeError or InvalidRecord on a bad field and then changes nothing.
        """
        self._observe(now)
        self._local.update(changes)
        self._publish(now)

    def link_up(self, node_id: str, now: float) -> Outgoing:
        """An authenticated link to ``node_id`` is up; gossip may now flow both ways."""
        self._observe(now)
        if node_id == self.node_id:
            return []
        if node_id not in self._linked_at:
            self._linked_at[node_id] = len(self._linked)
            self._linked.append(node_id)
        node = self._nodes.get(node_id)
        if node is None:
            # Introduce ourselves; it asks for our records if it lacks them.
            self._outbox.append(
                (node_id, GossipRumor((self._nodes[self.node_id].wire,)))
            )
        else:
            self._notify(node, force=True)
        if not self._synced:  # our first link: pull the whole mesh from it
            self._synced = True
            self._outbox.append((node_id, self._sync_message()))
        return self._flush()

    def link_down(self, node_id: str, now: float) -> Outgoing:
        """The last authenticated link to ``node_id`` is gone: it becomes a suspect."""
        self._observe(now)
        index = self._linked_at.pop(node_id, None)
        if index is not None:
            last = self._linked.pop()
            if last != node_id:
                self._linked[index] = last
                self._linked_at[last] = index
        node = self._nodes.get(node_id)
        if node is not None and node_id != self.node_id and node.status == ALIVE:
            self._suspect(node, node.incarnation, now, hot=True)
        return self._flush()

    def left(self, node_id: str, now: float) -> Outgoing:
        """``node_id`` said goodbye as it shut down: dead at once, and the news spreads.

        A graceful leave needs no suspicion period; the node rejoins later
        with a higher incarnation like any node declared dead.
        """
        out = self.link_down(node_id, now)
        node = self._nodes.get(node_id)
        if node is not None and node_id != self.node_id and node.status != DEAD:
            self._declare_dead(node, node.incarnation, now, hot=True)
        return out + self._flush()

    def tick(self, now: float) -> Outgoing:
        """One gossip round; call every ``config.interval`` seconds."""
        self._observe(now)
        self._expire(now)
        self._publish(now)
        out: Outgoing = []
        if self._linked:
            targets = self._rng.sample(self._linked, min(self.config.fanout, len(self._linked)))
            for target in targets:
                summaries = self._hot_summaries(target)
                if summaries or self.config.push_pull:
                    out.append((target, GossipRumor(summaries, reply=self.config.push_pull)))
            assert self._next_sync is not None
            if now >= self._next_sync:
                self._next_sync = now + self.config.sync_interval * self._rng.uniform(0.5, 1.5)
                self._synced = True
                out.append((self._rng.choice(self._linked), self._sync_message()))
        return out + self._flush()

    def receive(self, sender: str, message: GossipMessage, now: float) -> Outgoing:
        """``message`` arrived over the authenticated link from ``sender``; returns replies."""
        if sender not in self._linked_at:
            self.stats.refused_messages += 1
            return []
        self._observe(now)
        node = self._nodes.get(sender)
        if node is not None:
            self._notify(node)  # it talks to us, yet we hold it suspect or dead
        if isinstance(message, GossipRumor):
            out = self._on_rumor(sender, message, now)
        elif isinstance(message, GossipWant):
            out = self._on_want(sender, message)
        elif isinstance(message, GossipRecords):
            out = self._on_records(sender, message, now)
        elif isinstance(message, GossipSync):
            out = self._on_sync(sender, message)
        elif isinstance(message, GossipDigest):
            out = self._on_digest(sender, message, now)
        else:
            raise TypeError(f"not a gossip message: {type(message).__name__}")
        return out + self._flush()

    # ------------------------------------------------------------ rounds

    def _observe(self, now: float) -> None:
        if self._started is None:
            self._started = now
            me = self._nodes[self.node_id]
            me.since = now
            self._refresh(me)
            self._hot_record(self.node_id)  # announce ourselves in our first rounds
            self._next_sync = now + self.config.sync_interval * self._rng.random()

    def _flush(self) -> Outgoing:
        out, self._outbox = self._outbox, []
        return out

    def _expire(self, now: float) -> None:
        for node_id in self._suspects.expired(now):
            node = self._nodes.get(node_id)
            if node is not None and node.status == SUSPECT:
                self._declare_dead(node, node.incarnation, now, hot=True)
        for node_id in self._tombstones.expired(now):
            node = self._nodes.get(node_id)
            if node is not None and node.status == DEAD:
                del self._nodes[node_id]
                self._rumors.discard(node_id)
        for key in [k for k, w in self._wants.items() if w.deadline <= now]:
            del self._wants[key]

    def _publish(self, now: float) -> None:
        if self._local.publish_due(now, len(self._view)):
            self._install_local(self._nodes[self.node_id])
            self._hot_record(self.node_id)

    def _install_local(self, me: _Node) -> None:
        local = self._local
        me.peer, me.peer_blob = local.peer, local.peer_blob
        me.links, me.links_blob = local.links, local.links_blob
        me.incarnation = local.incarnation
        self._refresh(me)

    def _hot_record(self, node_id: str) -> None:
        """A new record of ``node_id``: relay it while receivers keep asking for it."""
        cap = self.config.retransmits(len(self._view))
        self._rumors.add(node_id, self.config.redundant_relays, cap)

    def _hot_claim(self, node_id: str) -> None:
        """A suspicion, death or revival: no record follows, so no feedback; a fixed count."""
        cap = self.config.retransmits(len(self._view))
        self._rumors.add(node_id, cap, cap)

    def _hot_summaries(self, target: str, skip: frozenset[str] = frozenset()) -> tuple[Any, ...]:
        chosen = self._rumors.take(target, self.config.max_rumor_summaries, skip)
        nodes = self._nodes
        return tuple(nodes[n].wire for n in chosen if n in nodes)

    # ------------------------------------------------------------ receiving

    def _absorb_summaries(
        self, sender: str, summaries: tuple[Any, ...], now: float, *, rumor: bool
    ) -> tuple[list[tuple[str, int]], list[_Node], set[str]]:
        """Take in the summaries of one message: (wants, corrections, ids mentioned)."""
        wants: list[tuple[str, int]] = []
        corrections: list[_Node] = []
        mentioned = set()
        nodes = self._nodes
        for wire in summaries:
            node_id = wire[0]
            mentioned.add(node_id)
            if rumor:
                self._rumors.known(node_id, sender)
            node = nodes.get(node_id)
            if node is None or node.wire != wire:  # most relays are of what we hold already
                self._absorb(sender, Summary(*wire), now, rumor, wants, corrections)
        return wants, corrections, mentioned

    def _on_rumor(self, sender: str, message: GossipRumor, now: float) -> Outgoing:
        wants, corrections, mentioned = self._absorb_summaries(
            sender, message.summaries, now, rumor=True
        )
        out: Outgoing = []
        if wants:
            out.append((sender, GossipWant(tuple(wants))))
        if message.reply:
            fixes = tuple(c.wire for c in corrections)
            hot = self._hot_summaries(sender, frozenset(mentioned))
            if fixes or hot:
                out.append((sender, GossipRumor(fixes + hot)))
        return out

    def _on_want(self, sender: str, message: GossipWant) -> Outgoing:
        blobs: list[bytes] = []
        for node_id, kind in dict.fromkeys(message.wanted):  # each record once
            node = self._nodes.get(node_id)
            if node is None or node.status == DEAD:
                continue
            self._rumors.useful(node_id, sender)
            blob = node.peer_blob if kind == KIND_PEER else node.links_blob
            if blob is not None:
                blobs.append(blob)
        out: Outgoing = []
        batch: list[bytes] = []
        size = 0
        for blob in blobs:
            if batch and (size + len(blob) > RECORDS_MESSAGE_BYTES or len(batch) >= MAX_RECORDS):
                out.append((sender, GossipRecords(tuple(batch))))
                batch, size = [], 0
            batch.append(blob)
            size += len(blob)
        if batch:
            out.append((sender, GossipRecords(tuple(batch))))
        return out

    def _on_records(self, sender: str, message: GossipRecords, now: float) -> Outgoing:
        corrections: list[_Node] = []
        for blob in message.records:
            try:
                record = decode_record(blob)
            except InvalidRecord:
                self.stats.invalid_records += 1
                continue
            self._accept(record, blob, now, corrections)
        if corrections:
            return [(sender, GossipRumor(tuple(c.wire for c in corrections)))]
        return []

    def _on_sync(self, sender: str, message: GossipSync) -> Outgoing:
        buckets = message.buckets
        theirs = digest.unpack_hashes(message.hashes)
        ours = self._bucket_hashes(buckets)
        mismatched = [i for i in range(buckets) if ours[i] != theirs[i]]
        if not mismatched:
            return []
        wanted = set(mismatched)
        summaries = [
            n.wire
            for n in self._nodes.values()
            if digest.bucket_of(n.key, buckets) in wanted
        ][:MAX_SUMMARIES]
        return [(sender, GossipDigest(buckets, tuple(mismatched), tuple(summaries), reply=True))]

    def _on_digest(self, sender: str, message: GossipDigest, now: float) -> Outgoing:
        wants, corrections, mentioned = self._absorb_summaries(
            sender, message.summaries, now, rumor=False
        )
        out: Outgoing = []
        if wants:
            out.append((sender, GossipWant(tuple(wants))))
        if message.reply:
            buckets = message.buckets
            mismatched = set(message.mismatched)
            teach = [
                n.wire
                for n in self._nodes.values()
                if n.node_id not in mentioned
                and n.status != DEAD
                and digest.bucket_of(n.key, buckets) in mismatched
            ]
            fixes = [c.wire for c in corrections]
            summaries = tuple((fixes + teach)[:MAX_SUMMARIES])
            if summaries:
                out.append((sender, GossipDigest(buckets, message.mismatched, summaries)))
        return out

    def _sync_message(self) -> GossipSync:
        buckets = digest.bucket_count(len(self._view))
        return GossipSync(digest.pack_hashes(self._bucket_hashes(buckets)))

    def _bucket_hashes(self, buckets: int) -> list[int]:
        # Kept per MAX_BUCKETS buckets, updated for the nodes that changed since
        # the last time; fewer buckets fold pairs of them.
        hashes = self._fine_hashes
        for node in self._dirty:
            contrib = digest.summary_hash(node.wire) if node.status != DEAD else 0
            hashes[node.key & (MAX_BUCKETS - 1)] ^= node.contrib ^ contrib
            node.contrib = contrib
        self._dirty.clear()
        while len(hashes) > buckets:
            half = len(hashes) // 2
            hashes = [a ^ b for a, b in zip(hashes[:half], hashes[half:], strict=True)]
        return hashes

    # ------------------------------------------------------------ summaries

    def _absorb(
        self,
        sender: str,
        summary: Summary,
        now: float,
        hot: bool,
        wants: list[tuple[str, int]],
        corrections: list[_Node],
    ) -> None:
        """Apply what ``sender`` says about one node; note the records to ask it for."""
        node_id = summary.node_id
        if node_id == self.node_id:
            self._about_me(summary, now)
            return
        node = self._nodes.get(node_id)
        if node is None:
            if summary.status == DEAD:
                if hot and len(self._nodes) < self.config.max_members:
                    node = self._nodes[node_id] = _Node(node_id, summary.incarnation, now)
                    self._declare_dead(node, summary.incarnation, now, hot=True)
                return
            self._want_newer(sender, summary, None, None, now, hot, wants)
            return
        if summary.incarnation > node.incarnation + MAX_INCARNATION_JUMP:
            return
        if supersedes(summary.status, summary.incarnation, node.status, node.incarnation):
            self._claim(node, summary.status, summary.incarnation, now, hot)
        elif supersedes(node.status, node.incarnation, summary.status, summary.incarnation):
            corrections.append(node)
            return
        if node.status == DEAD:
            return
        peer_key = node.peer.key if node.peer is not None else None
        links_key = node.links.key if node.links is not None else None
        self._want_newer(sender, summary, peer_key, links_key, now, hot, wants)
        floor = (summary.incarnation, -1)
        theirs_peer = summary.peer_key() or floor
        theirs_links = summary.links_key() or floor
        if (peer_key is not None and peer_key > theirs_peer) or (
            links_key is not None and links_key > theirs_links
        ):
            corrections.append(node)

    def _want_newer(
        self,
        sender: str,
        summary: Summary,
        peer_key: tuple[int, int] | None,
        links_key: tuple[int, int] | None,
        now: float,
        hot: bool,
        wants: list[tuple[str, int]],
    ) -> None:
        for kind, theirs, ours in (
            (KIND_PEER, summary.peer_key(), peer_key),
            (KIND_LINKS, summary.links_key(), links_key),
        ):
            if theirs is None or (ours is not None and theirs <= ours):
                continue
            pending = self._wants.get((summary.node_id, kind))
            if pending is not None and pending.key >= theirs and pending.deadline > now:
                pending.hot = pending.hot or hot
                continue
            if len(self._wants) >= 2 * self.config.max_members:
                continue  # hostile flood of unknown nodes: wait for wants to expire
            self._wants[(summary.node_id, kind)] = _Want(
                theirs, hot, now + self.config.want_timeout
            )
            wants.append((summary.node_id, kind))

    def _claim(self, node: _Node, status: int, incarnation: int, now: float, hot: bool) -> None:
        if status == SUSPECT:
            self._suspect(node, incarnation, now, hot)
        elif status == DEAD:
            self._declare_dead(node, incarnation, now, hot)
        else:  # alive at a higher incarnation: a refutation, or a return from the dead
            self._revive(node, incarnation, now)
            if hot:
                self._hot_claim(node.node_id)

    def _about_me(self, summary: Summary, now: float) -> None:
        me = self._nodes[self.node_id]
        mine = me.summary()
        if summary.status != ALIVE or summary.incarnation != mine.incarnation:
            stale = summary.incarnation < mine.incarnation
        else:
            stale = (
                summary.peer_version <= mine.peer_version
                and summary.links_version <= mine.links_version
            )
        if not stale:  # suspected, declared dead, or a past life of ours is still remembered
            self._refute(summary.incarnation + 1, now)

    def _refute(self, incarnation: int, now: float) -> None:
        self._local.bump(incarnation, now)
        me = self._nodes[self.node_id]
        self._install_local(me)
        self._hot_record(self.node_id)
        self.stats.refutations += 1
        self._events.append(Refuted(self.node_id, now, self._local.incarnation))

    # ------------------------------------------------------------ status changes

    def _suspect(self, node: _Node, incarnation: int, now: float, hot: bool) -> None:
        node.status, node.incarnation, node.since = SUSPECT, incarnation, now
        self._suspects.set(node.node_id, now + self.config.suspect_timeout)
        self._refresh(node)
        self._events.append(Suspected(node.node_id, now, incarnation))
        if hot:
            self._hot_claim(node.node_id)
            self._notify(node)

    def _declare_dead(self, node: _Node, incarnation: int, now: float, hot: bool) -> None:
        was_member = node.node_id in self._view
        node.status, node.incarnation, node.since = DEAD, incarnation, now
        node.peer = node.peer_blob = node.links = node.links_blob = None
        node.rejoining = False
        self._suspects.cancel(node.node_id)
        self._tombstones.set(node.node_id, now + self.config.dead_retention)
        self._refresh(node)
        if was_member:
            self._events.append(Died(node.node_id, now, incarnation))
        if hot:
            self._hot_claim(node.node_id)
            self._notify(node)

    def _revive(self, node: _Node, incarnation: int, now: float) -> None:
        previous = node.status
        node.status, node.incarnation, node.since = ALIVE, incarnation, now
        self._suspects.cancel(node.node_id)
        self._tombstones.cancel(node.node_id)
        if previous == SUSPECT:
            self._events.append(Refuted(node.node_id, now, incarnation))
        elif previous == DEAD:
            node.rejoining = True  # announced when its records arrive
        self._refresh(node)

    def _notify(self, node: _Node, *, force: bool = False) -> None:
        """Tell a node we can reach that it is suspected or dead, so that it refutes at once."""
        if node.status == ALIVE or node.node_id not in self._linked_at:
            return
        claim = (node.status, node.incarnation)
        if node.notified == claim and not force:
            return
        node.notified = claim
        self._outbox.append((node.node_id, GossipRumor((node.wire,))))

    # ------------------------------------------------------------ records

    def _accept(self, record: Record, blob: bytes, now: float, corrections: list[_Node]) -> None:
        node_id = record.node_id
        kind = KIND_PEER if isinstance(record, PeerRecord) else KIND_LINKS
        if node_id == self.node_id:
            mine = self._local.peer if kind == KIND_PEER else self._local.links
            if mine is None or record.key > mine.key:
                self._refute(record.incarnation + 1, now)  # a past life of ours
            self.stats.refused_records += 1
            return
        pending = self._wants.get((node_id, kind))
        hot = False
        if pending is not None and record.key >= pending.key:
            del self._wants[(node_id, kind)]
            hot = pending.hot
        node = self._nodes.get(node_id)
        if node is None:
            if len(self._nodes) >= self.config.max_members:
                self.stats.refused_records += 1
                return
            node = self._nodes[node_id] = _Node(node_id, record.incarnation, now)
        elif node.status == DEAD and record.incarnation <= node.incarnation:
            self.stats.refused_records += 1
            corrections.append(node)
            return
        elif record.incarnation > node.incarnation + MAX_INCARNATION_JUMP:
            self.stats.refused_records += 1
            return
        held: Record | None = node.peer if kind == KIND_PEER else node.links
        if held is not None and record.key <= held.key:
            return
        if record.incarnation > node.incarnation:  # the record is itself an alive claim
            self._revive(node, record.incarnation, now)
            hot = True
        was_member = node_id in self._view
        if isinstance(record, PeerRecord):
            old = node.peer
            node.peer, node.peer_blob = record, blob
        else:
            node.links, node.links_blob = record, blob
            old = None
        self._refresh(node)
        self.stats.accepted_records += 1
        if node_id in self._view and not was_member:
            if node.rejoining:
                node.rejoining = False
                self._events.append(Rejoined(node_id, now, node.incarnation))
            else:
                self._events.append(Joined(node_id, now))
        elif was_member:
            if isinstance(record, PeerRecord):
                fields = tuple(f for f in _UPDATE_FIELDS if getattr(old, f) != getattr(record, f))
            else:
                fields = ("links",)
            if fields:
                self._events.append(Updated(node_id, now, fields))
        if hot:
            self._hot_record(node_id)

    def _refresh(self, node: _Node) -> None:
        """Recompute what others see of ``node``: summary, bucket hash, place in the view."""
        node.rewire()
        self._dirty.add(node)
        if node.peer is None or node.status == DEAD:
            self._view.pop(node.node_id, None)
            return
        links = node.links.links if node.links is not None else ()
        self._view[node.node_id] = Member(
            node.peer, links, STATUS_NAMES[node.status], node.since, node.incarnation  # type: ignore[arg-type]
        )
