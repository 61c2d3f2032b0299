"""An explained ranking of candidate servers: the answer of ``gleam_rank_servers``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gleam.peer.sched.cost import Candidate, Demand, Estimate, estimate


@dataclass(frozen=True)
class Ranking:
    """Candidates best first, and why.

    ``order`` holds node ids (a plugin may leave some out: those are not
    tried). ``estimates`` is the per-candidate figure the reason quotes
    (empty when a plugin ranks by something else).
    """

    order: tuple[str, ...]
    reason: str
    estimates: tuple[Estimate, ...] = field(default=())

    def estimate_of(self, node_id: str) -> Estimate | None:
        """The estimate the ranking made for ``node_id`` (None: it made none)."""
        return next((e for e in self.estimates if e.node_id == node_id), None)

    def as_dict(self) -> dict[str, Any]:
        return {"order": [n[:12] for n in self.order], "reason": self.reason,
                "estimates": [e.as_dict() for e in self.estimates]}


def duration(seconds: float) -> str:
    """An estimated time in the words of every reason: ``1.27 s``, ``345.6 ms``."""
    return f"{seconds:.2f} s" if seconds >= 1.0 else f"{seconds * 1e3:.1f} ms"


def parts(transfer: float, waiting: float, compute: float) -> str:
    """An estimate's three terms: ``send 5.5 ms + waits 0.2 ms + compute 339.9 ms``."""
    return f"send {duration(transfer)} + waits {duration(waiting)} + compute {duration(compute)}"


def _said(e: Estimate) -> str:
    if not e.fits:
        return f"{e.name} too little free memory"
    return f"{e.name} {duration(e.total)} ({parts(e.transfer, e.waiting, e.compute)})"


def rank_by_cost(demand: Demand, candidates: Sequence[Candidate]) -> Ranking:
    """The built-in ranking: soonest estimated completion first (ties by name)."""
    estimates = sorted((estimate(demand, c) for c in candidates),
                       key=lambda e: (e.total, e.name, e.node_id))
    if not estimates:
        return Ranking((), "no candidate server")
    best = estimates[0]
    reason = f"soonest estimated completion: {_said(best)}"
    if len(estimates) > 1:
        reason += "; next: " + "; ".join(_said(e) for e in estimates[1:3])
    return Ranking(tuple(e.node_id for e in estimates), reason, tuple(estimates))
