"""Gossip messages, registered as peer-protocol control messages.

A *summary* says what its sender knows about one node, in five positional
items (kept as a plain array on the wire because summaries are most of the
gossip traffic):

    (node_id, status, incarnation, peer_version, links_version)

``status`` is ALIVE, SUSPECT or DEAD at ``incarnation``; the versions are
those of the records the sender holds *at that incarnation*, or -1 when it
holds none. Summaries are enough to apply a suspicion or a death; records
themselves move only when asked for (``GossipWant`` -> ``GossipRecords``).

- ``gossip-rumor`` (summaries, reply): each round to ``fanout`` members, the
  recent ("hot") changes; ``reply`` asks for the receiver's own (push-pull).
- ``gossip-want`` (wanted: (node_id, kind) pairs): to the sender of a newer summary.
- ``gossip-records`` (records: encoded records): the answer to a want.
- ``gossip-sync`` (hashes: 8 bytes per bucket): anti-entropy, now and then to one member.
- ``gossip-digest`` (buckets, mismatched, summaries, reply): the summaries of
  the buckets whose hashes differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from gleam.peer.gossip.records import MAX_COUNTER, MAX_RECORD_BYTES, InvalidRecord, check_node_id
from gleam.peer.protocol import Message, register_message

__all__ = [
    "ALIVE",
    "DEAD",
    "KIND_LINKS",
    "KIND_PEER",
    "MAX_BUCKETS",
    "MAX_RECORDS",
    "MAX_SUMMARIES",
    "STATUS_NAMES",
    "SUSPECT",
    "GossipDigest",
    "GossipMessage",
    "GossipRecords",
    "GossipRumor",
    "GossipSync",
    "GossipWant",
    "Summary",
]

ALIVE, SUSPECT, DEAD = 0, 1, 2
STATUS_NAMES = ("alive", "suspect", "dead")
KIND_PEER, KIND_LINKS = 0, 1

MAX_SUMMARIES = 4096
MAX_WANTED = 2 * MAX_SUMMARIES
MAX_RECORDS = 256
MAX_BUCKETS = 1024
HASH_SIZE = 8

SummaryWire = tuple[str, int, int, int, int]
WantWire = tuple[str, int]


class Summary(NamedTuple):
    """One node as its sender knows it; ``tuple(summary)`` is its wire form."""

    node_id: str
    status: int
    incarnation: int
    peer_version: int
    links_version: int

    def peer_key(self) -> tuple[int, int] | None:
        return None if self.peer_version < 0 else (self.incarnation, self.peer_version)

    def links_key(self) -> tuple[int, int] | None:
        return None if self.links_version < 0 else (self.incarnation, self.links_version)


def _check_summaries(summaries: tuple[SummaryWire, ...]) -> None:
    if len(summaries) > MAX_SUMMARIES:
        raise ValueError(f"at most {MAX_SUMMARIES} summaries in a message")
    for node_id, status, incarnation, peer_version, links_version in summaries:
        _check_node(node_id)
        if not ALIVE <= status <= DEAD:
            raise ValueError("summary status must be 0 (alive), 1 (suspect) or 2 (dead)")
        if not 0 <= incarnation <= MAX_COUNTER:
            raise ValueError("summary incarnation out of range")
        if not -1 <= peer_version <= MAX_COUNTER or not -1 <= links_version <= MAX_COUNTER:
            raise ValueError("summary versions must be -1 (none) or a counter")


def _check_node(node_id: str) -> None:
    try:
        check_node_id(node_id)
    except InvalidRecord as exc:
        raise ValueError(str(exc)) from None


@register_message("gossip-rumor")
@dataclass(frozen=True)
class GossipRumor(Message):
    """Recent changes, pushed each round; with ``reply`` the receiver answers with its own."""

    summaries: tuple[SummaryWire, ...]
    reply: bool = False

    def __post_init__(self) -> None:
        _check_summaries(self.summaries)


@register_message("gossip-want")
@dataclass(frozen=True)
class GossipWant(Message):
    """Records the sender asks for: (node_id, KIND_PEER or KIND_LINKS)."""

    wanted: tuple[WantWire, ...]

    def __post_init__(self) -> None:
        if len(self.wanted) > MAX_WANTED:
            raise ValueError(f"at most {MAX_WANTED} wanted records in a message")
        for node_id, kind in self.wanted:
            _check_node(node_id)
            if kind not in (KIND_PEER, KIND_LINKS):
                raise ValueError("wanted kind must be 0 (peer) or 1 (links)")


@register_message("gossip-records")
@dataclass(frozen=True)
class GossipRecords(Message):
    """Encoded records (``encode_record``); each is decoded and judged on its own."""

    records: tuple[bytes, ...]

    def __post_init__(self) -> None:
        if len(self.records) > MAX_RECORDS:
            raise ValueError(f"at most {MAX_RECORDS} records in a message")
        for blob in self.records:
            if len(blob) > MAX_RECORD_BYTES:
                raise ValueError(f"a record takes at most {MAX_RECORD_BYTES} bytes")


@register_message("gossip-sync")
@dataclass(frozen=True)
class GossipSync(Message):
    """Anti-entropy: one 8-byte hash per bucket of the sender's view (a power of two)."""

    hashes: bytes

    def __post_init__(self) -> None:
        buckets, rest = divmod(len(self.hashes), HASH_SIZE)
        if rest or not 1 <= buckets <= MAX_BUCKETS or buckets & (buckets - 1):
            raise ValueError(
                f"hashes must be {HASH_SIZE} bytes per bucket, a power of two "
                f"from 1 to {MAX_BUCKETS} buckets"
            )

    @property
    def buckets(self) -> int:
        return len(self.hashes) // HASH_SIZE


@register_message("gossip-digest")
@dataclass(frozen=True)
class GossipDigest(Message):
    """The sender's summaries of the ``mismatched`` buckets (out of ``buckets``).

    ``reply`` asks the receiver to answer with its summaries that the sender
    lacks or holds older, for the same buckets.
    """

    buckets: int
    mismatched: tuple[int, ...]
    summaries: tuple[SummaryWire, ...]
    reply: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.buckets <= MAX_BUCKETS or self.buckets & (self.buckets - 1):
            raise ValueError(f"buckets must be a power of two from 1 to {MAX_BUCKETS}")
        if len(self.mismatched) > self.buckets:
            raise ValueError("more mismatched buckets than buckets")
        if any(not 0 <= b < self.buckets for b in self.mismatched):
            raise ValueError("mismatched bucket out of range")
        _check_summaries(self.summaries)


GossipMessage = GossipRumor | GossipWant | GossipRecords | GossipSync | GossipDigest
