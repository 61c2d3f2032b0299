"""The forwarding side of re-evaluation: which client sessions can move, and moving one.

The scheduler's ``Rebalancer`` (peer/sched/rebalance.py) sees sessions only as
``RunningSession`` values and moves them through a ``Migrator``; this module gives
it both from the forwarding state, so the scheduler never reaches into sessions.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from gleam.peer.cuda.client.relocate import migrate
from gleam.peer.sched.history import DEFAULT_NOTE
from gleam.peer.sched.measured import remaining_demand
from gleam.peer.sched.reevaluate import RunningSession

if TYPE_CHECKING:
    from gleam.peer.cuda.client.route import SessionManager


def movable_sessions(fw: SessionManager) -> list[RunningSession]:
    """Client sessions served by a peer that could move now (Trio thread)."""
    now = time.time()
    out = []
    for route in list(fw.routes.values()):
        client, link = route.client, route.link
        if (link is None or link.closed or client.pinned or client.moving
                or client.failed is not None
                or client.journal.broken is not None):
            continue
        last = client.moves[-1]["at"] if client.moves else client.started
        program = fw.demands.of(client.session)
        # A learned demand less what the session did already; else the default.
        left = (remaining_demand(program.demand, client.bytes_to_server, client.replies)
                if program.key and program.note != DEFAULT_NOTE else None)
        out.append(RunningSession(session=client.session, server=link.node_id,
                                  journal_bytes=client.journal.bytes,
                                  since_move=max(now - last, 0.0), remaining=left,
                                  demand_note=program.note))
    return out


class ForwardingMigrator:
    """``reevaluate.Migrator`` over ``gleam-peer migrate``'s mechanism."""

    def __init__(self, fw: SessionManager) -> None:
        self.fw = fw

    async def migrate(self, session: int, target: str) -> None:
        # A refusal leaves the session where it was; the move's record and the
        # refusal's reason are in the session's row and the agent's log.
        await migrate(self.fw, f"{session:016x}", target)
