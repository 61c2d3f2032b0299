"""Should a running session move? Hysteresis that counts the cost of moving.

A session is re-evaluated with fresh estimates of its *remaining* work on
every candidate (the cost model on what is left: bytes still to send, waits
and compute still to come). Moving pays the journal's replay on the new
server: the bytes of the session's live state that server does not hold
(sent again, or pulled from its blob cache) and the replay's round trips.
A move is advised only when the best other server, plus that cost, beats
staying by ``margin`` of the remaining time and by ``min_gain`` seconds, and
not within ``cooldown`` seconds of the last move: estimates are noisy, and a
session that flaps between two near-equal servers pays the move every time.

The mechanism is ``gleam-peer migrate`` (the session journal and failover of
the consistency work): ``Migrator`` is the seam it plugs into.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gleam.peer.sched.cost import Demand, Estimate, LinkEstimate
from gleam.peer.sched.history import DEFAULT_NOTE

MARGIN = 0.25  # the move must save a quarter of the remaining time...
MIN_GAIN = 2.0  # ...and at least this many seconds
COOLDOWN = 30.0  # seconds between two moves of one session


@dataclass(frozen=True)
class RunningSession:
    """What the client's agent knows of one live session."""

    session: int
    server: str  # node id serving it now
    journal_bytes: int  # bytes of live state (device memory, modules) replay must restore
    journal_waits: int = 2  # round trips of the replay (pipelined: open + final sync)
    # Bytes of that state each server already holds (the blob cache summary).
    journal_cached: Mapping[str, int] = field(default_factory=dict)
    since_move: float = float("inf")  # seconds since the session last moved (or opened)
    # The work it has left, from its program's learned demand (None: not known,
    # the caller's default), and the words that say where that came from.
    remaining: Demand | None = None
    demand_note: str = DEFAULT_NOTE


@dataclass(frozen=True)
class Decision:
    migrate: bool
    target: str | None
    gain: float  # seconds saved after paying the move (negative: moving loses)
    reason: str


def move_cost(state: RunningSession, target: str, link: LinkEstimate) -> float:
    """Seconds the replay takes on ``target`` over ``link``."""
    held = min(max(state.journal_cached.get(target, 0), 0), state.journal_bytes)
    return ((state.journal_bytes - held) / max(link.bandwidth, 1.0)
            + max(state.journal_waits, 0) * max(link.rtt, 0.0))


def should_migrate(state: RunningSession, remaining: Sequence[Estimate],
                   links: Mapping[str, LinkEstimate], *, margin: float = MARGIN,
                   min_gain: float = MIN_GAIN, cooldown: float = COOLDOWN) -> Decision:
    """Advise moving ``state`` when another server is clearly better (see the module)."""
    here = next((e for e in remaining if e.node_id == state.server), None)
    if here is None:
        return Decision(False, None, 0.0, "no estimate for the current server")
    if state.since_move < cooldown:
        return Decision(False, None, 0.0,
                        f"moved {state.since_move:.0f} s ago (cooldown {cooldown:.0f} s)")
    best: tuple[float, Estimate] | None = None
    for e in remaining:
        if e.node_id == state.server or e.node_id not in links or not e.fits:
            continue
        total = e.total + move_cost(state, e.node_id, links[e.node_id])
        if best is None or total < best[0]:
            best = (total, e)
    if best is None:
        return Decision(False, None, 0.0, "no other server")
    total, e = best
    gain = here.total - total
    needed = max(margin * here.total, min_gain)
    if gain < needed:
        return Decision(False, None, gain,
                        f"stay on {here.name}: {e.name} would save {gain:.1f} s "
                        f"(needs {needed:.1f} s)")
    return Decision(True, e.node_id, gain,
                    f"move to {e.name}: {total:.1f} s with the move against "
                    f"{here.total:.1f} s on {here.name}")


class Migrator(Protocol):
    """Moves a live session to another server (``gleam-peer migrate``, the consistency work)."""

    async def migrate(self, session: int, target: str) -> None: ...
