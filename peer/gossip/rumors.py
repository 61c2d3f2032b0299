"""Recent changes ("hot" nodes) that a peer still relays, and how many more times.

Rumor mongering with feedback (Demers et al.'s "counter" variant): a peer
that learns something new relays it in its next rounds. A relay that turns
out to be news to its receiver (the receiver asks for the record: ``useful``)
is free; one that was not costs one of ``redundant`` allowances, and the
rumor stops when they are spent, or after ``cap`` relays in all. Early on,
nearly every relay is news and the rumor spreads at full speed; once most
peers know, it dies within a few contacts instead of a fixed ``cap``. A
node is never sent to a peer known to have it (it told us, or we told it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Rumors"]


@dataclass
class _Hot:
    left: int  # relays that may still turn out redundant
    cap: int  # relays still allowed in all
    known_by: set[str] = field(default_factory=set)


class Rumors:
    def __init__(self) -> None:
        self._hot: dict[str, _Hot] = {}

    def __len__(self) -> int:
        return len(self._hot)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._hot

    def add(self, node_id: str, redundant: int, cap: int, known_by: str | None = None) -> None:
        """``node_id`` changed: relay it until ``redundant`` relays were not news, or ``cap``."""
        self._hot.pop(node_id, None)  # re-insert: dict order is our recency order
        hot = _Hot(min(redundant, cap), cap)
        if known_by is not None:
            hot.known_by.add(known_by)
        self._hot[node_id] = hot

    def known(self, node_id: str, peer: str) -> None:
        hot = self._hot.get(node_id)
        if hot is not None:
            hot.known_by.add(peer)

    def useful(self, node_id: str, peer: str) -> None:
        """``peer`` asked for the record of ``node_id`` after we relayed it: that relay was news."""
        hot = self._hot.get(node_id)
        if hot is not None and peer in hot.known_by:
            hot.left += 1

    def discard(self, node_id: str) -> None:
        self._hot.pop(node_id, None)

    def take(self, target: str, limit: int, skip: frozenset[str] = frozenset()) -> list[str]:
        """Up to ``limit`` hot nodes for ``target``, newest first; each use counts one transmit."""
        chosen: list[str] = []
        spent: list[str] = []
        for node_id in reversed(self._hot):
            if len(chosen) >= limit:
                break
            hot = self._hot[node_id]
            # Spent rumors leave only here, so that a late "useful" can still revive them.
            if hot.left <= 0 or hot.cap <= 0:
                spent.append(node_id)
                continue
            if target in hot.known_by or node_id in skip:
                continue
            chosen.append(node_id)
            hot.known_by.add(target)
            hot.left -= 1
            hot.cap -= 1
        for node_id in spent:
            del self._hot[node_id]
        return chosen
