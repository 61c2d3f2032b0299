"""Where a client session's envelopes go, and what the session helpers see of
the forwarding component.

``opening``, ``attach``, ``relocate`` and ``movable`` each do one part of a
session's life for :class:`gleam.peer.cuda.forwarding.CudaForwarding`, which
calls them. They take it as the :class:`SessionManager` below, not as the
class, so the imports point one way: the component imports its helpers, and
the helpers import only this module (docs/architecture.md, "Components and
the way their imports point").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import trio

if TYPE_CHECKING:
    from gleam.peer.cache.client import SessionBlobs
    from gleam.peer.cuda.client.demand import DemandLearning
    from gleam.peer.cuda.client.facts import ClientAgent, LocalServed
    from gleam.peer.cuda.client.session import ClientSession
    from gleam.peer.cuda.wire import dataconn
    from gleam.peer.cuda.wire.channel import Channel
    from gleam.peer.cuda.wire.messages import CudaOpened
    from gleam.peer.link import PeerLink


class ServeRefused(Exception):
    """This agent cannot serve the session; the message says why (fit for cuda_refused)."""


@dataclass
class Route:
    """Where a client session's envelopes go: a link, or this agent's own executor."""

    client: ClientSession
    link: PeerLink | None
    served: LocalServed | None


@dataclass
class PendingOpen:
    """A cuda_open sent to a peer, waiting for its answer (or the reason it failed)."""

    link: PeerLink
    done: trio.Event
    answer: CudaOpened | str | None = None


class SessionManager(Protocol):
    """The forwarding component as its session helpers use it."""

    ready: trio.Event
    routes: dict[int, Route]
    pending: dict[int, PendingOpen]
    demands: DemandLearning

    @property
    def agent(self) -> ClientAgent:
        """What the session helpers read of the agent."""
        ...

    @property
    def backend_name(self) -> str | None:
        """The opened backend's name (None while it opens, or after stopping)."""
        ...

    def new_session_id(self) -> int:
        """A fresh session id, in use by no route and no pending open."""
        ...

    def add_route(self, session: int, route: Route) -> None:
        """Send the session's envelopes along ``route`` from now on."""
        ...

    def client_ended(self, client: ClientSession, reason: str) -> None:
        """A client session is over: release the server's side."""
        ...

    def data_lost(self, client: ClientSession, reason: str) -> None:
        """A client session's data connection ended under it."""
        ...

    def session_blobs(self, link: PeerLink, session: int,
                      opened: CudaOpened) -> SessionBlobs | None:
        """The cache's side of a new client session (None: the server caches nothing)."""
        ...

    def opened(self, session: int, served: LocalServed, cached: bool = False,
               data: dataconn.DataListener | None = None) -> CudaOpened:
        """The cuda_opened answer for a served session this agent just opened."""
        ...

    async def open_served(self, session: int, channel: Channel, program: str, client: str,
                          *, cached: bool = False,
                          va: tuple[int, int] = (0, 0)) -> LocalServed:
        """Open and start a served session on this agent's backend; raises ServeRefused."""
        ...
