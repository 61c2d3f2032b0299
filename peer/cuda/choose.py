"""Which agent serves a new session (a stand-in until the scheduler ranks servers).

Serving agents advertise ``"cuda": {"backend", "sessions", "gflops"}`` in
their gossip record. With no peer named, the linked peer with the best
``gflops / (1 + sessions)`` serves; without one, the local backend does.
A named peer is matched by node id prefix or name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gleam.peer.agent import Agent
    from gleam.peer.link import PeerLink

GOSSIP_FIELD = "cuda"
# A GPU whose speed nobody measured still beats any CPU.
UNMEASURED_GPU_GFLOPS = 1000.0


class NoServer(Exception):
    """No agent can serve the session; the message says why."""


@dataclass(frozen=True)
class Choice:
    link: PeerLink | None  # None: this agent serves
    name: str
    reason: str = ""  # why this server, for the status view and the demo


def advert(backend: str | None, sessions: int, gflops: float | None) -> dict[str, Any]:
    """This agent's gossip field (empty when it serves nothing)."""
    if backend is None:
        return {}
    speed = gflops if gflops else (UNMEASURED_GPU_GFLOPS if backend == "cuda" else 1.0)
    return {GOSSIP_FIELD: {"backend": backend, "sessions": sessions, "gflops": float(speed)}}


def _score(extra: Any) -> float | None:
    field = extra.get(GOSSIP_FIELD) if isinstance(extra, Mapping) else None
    if not isinstance(field, Mapping) or field.get("backend") not in ("cuda", "host"):
        return None
    try:
        return float(field.get("gflops") or 0.0) / (1 + int(field.get("sessions") or 0))
    except (TypeError, ValueError):
        return None


def choose(agent: Agent, wanted: str, local_backend: str | None,
           exclude: frozenset[str] = frozenset()) -> Choice:
    """The server for a session, never one of the nodes in ``exclude`` (a server
    being left or lost); raises NoServer."""
    if wanted:
        return _named(agent, wanted, local_backend)
    members = agent.mesh.members()
    ranked: list[tuple[float, PeerLink]] = []
    for node_id, link in agent.links.items():
        if node_id in exclude:
            continue
        member = members.get(node_id)
        score = _score(member.record.extra) if member is not None else None
        if not link.closed and score is not None:
            ranked.append((score, link))
    ranked.sort(key=lambda pair: -pair[0])
    if ranked:
        def said(link: PeerLink) -> str:
            field = members[link.node_id].record.extra[GOSSIP_FIELD]
            return (f"{link.peer.name} {float(field.get('gflops') or 0):.1f} GFLOP/s, "
                    f"{int(field.get('sessions') or 0)} sessions")

        best = ranked[0][1]
        why = f"fastest free server: {said(best)}"
        if len(ranked) > 1:
            why += "; next: " + "; ".join(said(link) for _, link in ranked[1:3])
        return Choice(best, best.peer.name, why)
    if local_backend is not None and agent.node_id not in exclude:
        return Choice(None, agent.config.name, "no serving peer: this agent's own backend")
    raise NoServer("no agent in the mesh serves CUDA (and this one has no backend)")


def _named(agent: Agent, wanted: str, local_backend: str | None) -> Choice:
    if agent.node_id.startswith(wanted) or wanted == agent.config.name:
        if local_backend is None:
            raise NoServer(f"{agent.config.name} has no CUDA backend (--backend none?)")
        return Choice(None, agent.config.name, "named with --peer")
    link = agent.link_to(wanted)
    if link is not None and not link.closed:
        return Choice(link, link.peer.name, "named with --peer")
    for node_id, member in agent.mesh.members().items():
        if node_id.startswith(wanted) or member.record.name == wanted:
            raise NoServer(f"peer {wanted} is in the mesh but not linked to this agent")
    raise NoServer(f"no peer {wanted} in the mesh")
