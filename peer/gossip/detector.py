"""SWIM's precedence between claims about a node, and its suspicion timers.

A claim is (status, incarnation). Only the node itself raises its
incarnation, to refute a suspicion or to rejoin after being declared dead,
so a higher incarnation always wins; at equal incarnation, dead beats
suspect beats alive. That one rule gives SWIM's table:

| held \\ heard   | alive(j)  | suspect(j) | dead(j)  |
|----------------|-----------|------------|----------|
| alive(i)       | j > i     | j ≥ i      | j ≥ i    |
| suspect(i)     | j > i     | j > i      | j ≥ i    |
| dead(i)        | j > i     | j > i      | j > i    |
"""

from __future__ import annotations

__all__ = ["Deadlines", "supersedes"]


def supersedes(status: int, incarnation: int, held_status: int, held_incarnation: int) -> bool:
    """Whether the claim (status, incarnation) replaces the one held."""
    if incarnation != held_incarnation:
        return incarnation > held_incarnation
    return status > held_status


class Deadlines:
    """Node -> the time something happens to it (suspect -> dead, tombstone -> forgotten)."""

    def __init__(self) -> None:
        self._at: dict[str, float] = {}

    def set(self, node_id: str, at: float) -> None:
        self._at[node_id] = at

    def cancel(self, node_id: str) -> None:
        self._at.pop(node_id, None)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._at

    def __len__(self) -> int:
        return len(self._at)

    def expired(self, now: float) -> list[str]:
        """Nodes whose deadline has passed, in deadline order; they are removed."""
        due = sorted((at, node) for node, at in self._at.items() if at <= now)
        for _, node in due:
            del self._at[node]
        return [node for _, node in due]
