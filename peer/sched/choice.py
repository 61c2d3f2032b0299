"""What choosing a server gives: the server (or this agent) and why, or why none.

Apart from ``choose.py`` so that the lease service (peer/sched/leasing.py),
which takes a choice and may fall back from it, does not import the chooser
that reads the lease service's loads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gleam.peer.link import PeerLink
    from gleam.peer.sched.ranking import Ranking


class NoServer(Exception):
    """No agent can serve the session; the message says why."""


@dataclass(frozen=True)
class Choice:
    link: PeerLink | None  # None: this agent serves
    name: str
    reason: str = ""  # why this server, for the status view and the demo
    # The next-best servers, in order: where a denied lease falls back to.
    fallbacks: tuple[PeerLink, ...] = field(default=())
    ranking: Ranking | None = None
