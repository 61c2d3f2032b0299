"""Which agent serves a new session.

Serving agents advertise ``"cuda": {"backend", "sessions", "gflops"}`` in
their gossip record. With no peer named, the ``gleam_rank_servers`` hook ranks
the linked serving peers (the built-in scheduler plugin: the cost model of
docs/scheduler.md); without one, the local backend serves. A named peer is
matched by display name, name or node id prefix (peer/names.py) and is never
ranked; a name several nodes share is refused with the candidates.

Of the agent it reads only what ``ChoosingAgent`` names.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Protocol

from gleam.peer.names import AmbiguousPeer, PeerNotFound
from gleam.peer.sched.choice import Choice, NoServer
from gleam.peer.sched.cost import Demand
from gleam.peer.sched.history import DEFAULT_NOTE
from gleam.peer.sched.inputs import CUDA_FIELD, DEFAULT_DEMAND, candidates_of
from gleam.peer.sched.ranking import rank_by_cost
from gleam.peer.sched.view import SchedAgent

__all__ = ["Choice", "ChoosingAgent", "NoServer", "advert", "choose"]

if TYPE_CHECKING:
    import pluggy


GOSSIP_FIELD = CUDA_FIELD  # the scheduler reads what this module advertises
# A GPU whose speed nobody measured still beats any CPU.
UNMEASURED_GPU_GFLOPS = 1000.0


class _Names(Protocol):
    def of(self, node_id: str, name: str) -> str: ...
    def resolve(self, wanted: str) -> str: ...


class ChoosingAgent(SchedAgent, Protocol):
    """What choosing a server reads of the agent: what scheduling reads (its links,
    the gossip view, the components with the lease service's book of loads), and
    who it is, the names of the nodes it knows and the plugins that rank servers."""

    @property
    def node_id(self) -> str: ...
    @property
    def display_name(self) -> str: ...
    @property
    def names(self) -> _Names: ...
    @property
    def pm(self) -> pluggy.PluginManager: ...


def advert(backend: str | None, sessions: int, gflops: float | None) -> dict[str, Any]:
    """This agent's gossip field (empty when it serves nothing)."""
    if backend is None:
        return {}
    speed = gflops if gflops else (UNMEASURED_GPU_GFLOPS if backend == "cuda" else 1.0)
    return {GOSSIP_FIELD: {"backend": backend, "sessions": sessions, "gflops": float(speed)}}


def choose(agent: ChoosingAgent, wanted: str, local_backend: str | None,
           exclude: frozenset[str] = frozenset(), *, demand: Demand = DEFAULT_DEMAND,
           demand_note: str = DEFAULT_NOTE) -> Choice:
    """The server for a session, never one of the nodes in ``exclude`` (a server
    being left or lost); raises NoServer. ``demand`` is what the program is
    ranked by (its learned demand, docs/scheduler.md), and ``demand_note`` the
    words the reason ends with to say where it came from."""
    if wanted:
        return _named(agent, wanted, local_backend)
    # candidates_of still names the whole Agent (its scheduler module is not narrowed
    # yet); it reads .mesh, .links and .components, which ChoosingAgent has.
    found = candidates_of(agent)
    pairs = [(c, link) for c, link in found if c.node_id not in exclude]
    if pairs:
        candidates = [c for c, _ in pairs]
        ranking = agent.pm.hook.gleam_rank_servers(session=demand, candidates=candidates)
        if ranking is None:  # the scheduler plugin is blocked: the same model, no leases
            ranking = rank_by_cost(demand, candidates)
        if ranking.estimates:  # it ranked by a demand: say which (a plugin's own words stay)
            ranking = dataclasses.replace(ranking, reason=f"{ranking.reason} [{demand_note}]")
        links = {c.node_id: link for c, link in pairs}
        ranked = [links[n] for n in ranking.order if n in links]
        if ranked:
            return Choice(ranked[0], ranked[0].name, ranking.reason,
                          tuple(ranked[1:]), ranking)
    if local_backend is not None and agent.node_id not in exclude:
        return Choice(None, agent.display_name, "no serving peer: this agent's own backend")
    raise NoServer("no agent in the mesh serves CUDA (and this one has no backend)")


def _named(agent: ChoosingAgent, wanted: str, local_backend: str | None) -> Choice:
    try:
        node_id = agent.names.resolve(wanted)
    except AmbiguousPeer as exc:
        raise NoServer(str(exc)) from None
    except PeerNotFound:
        raise NoServer(f"no peer {wanted} in the mesh") from None
    if node_id == agent.node_id:
        if local_backend is None:
            raise NoServer(f"{agent.display_name} has no CUDA backend (--backend none?)")
        return Choice(None, agent.display_name, "named with --peer")
    link = agent.links.get(node_id)
    if link is not None and not link.closed:
        return Choice(link, link.name, "named with --peer")
    raise NoServer(f"peer {agent.names.of(node_id, wanted)} is in the mesh but not linked "
                   "to this agent")
