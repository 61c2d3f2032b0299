"""Built-in plugin: the scheduler (docs/scheduler.md).

Ranks candidate servers with the cost model (``gleam_rank_servers``), runs
each agent's lease service (the desk that admits other agents' sessions by
this agent's own capacity, and the requests this agent's sessions make),
and gossips the number of leases waiting to open as ``sched.leases``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gleam.peer.hookspecs import hookimpl
from gleam.peer.sched import leasing
from gleam.peer.sched.inputs import BACKENDS, CUDA_FIELD, SCHED_FIELD
from gleam.peer.sched.lease import Capacity
from gleam.peer.sched.messages import LeaseDeny, LeaseGrant, LeaseRelease, LeaseRequest
from gleam.peer.sched.ranking import Ranking, rank_by_cost

if TYPE_CHECKING:
    from gleam.peer.agent import Agent
    from gleam.peer.link import PeerLink
    from gleam.peer.protocol import Message
    from gleam.peer.sched.cost import Candidate, Demand


@hookimpl
def gleam_capabilities() -> list[str]:
    return [leasing.CAPABILITY]


# trylast: any other plugin's ranking replaces the built-in one.
@hookimpl(trylast=True)
def gleam_rank_servers(session: Demand, candidates: Sequence[Candidate]) -> Ranking:
    return rank_by_cost(session, candidates)


def capacity_of(agent: Agent) -> Capacity:
    """This agent's capacity from what it gossips itself (the CUDA plugin's advert)."""
    cuda: Any = {}
    for fields in agent.pm.hook.gleam_gossip_fields(agent=agent):
        if isinstance(fields, Mapping) and isinstance(fields.get(CUDA_FIELD), Mapping):
            cuda = fields[CUDA_FIELD]
    backend = cuda.get("backend")
    gpus = [g for g in agent.mesh.gpus if g.backend == backend]
    total = sum(g.memory_total for g in gpus)
    free = sum(max(g.memory_total - g.memory_used, 0) for g in gpus) if total > 0 else None
    return Capacity(sessions=int(cuda.get("sessions") or 0),
                    max_sessions=agent.config.max_sessions,
                    gflops=float(cuda.get("gflops") or 0.0),
                    free_memory=free, serves=backend in BACKENDS)


@hookimpl
def gleam_agent_component(agent: Agent) -> leasing.LeaseService:
    # Kept by the agent (agent.components): found again with leasing.service_of.
    return leasing.LeaseService(agent, lambda: capacity_of(agent))


@hookimpl
def gleam_control_message(agent: Agent, link: PeerLink, message: Message) -> bool | None:
    service = leasing.service_of(agent)
    if service is None:
        return None
    if isinstance(message, LeaseRequest):
        service.on_request(link, message)
    elif isinstance(message, LeaseGrant | LeaseDeny):
        service.on_answer(link, message)
    elif isinstance(message, LeaseRelease):
        service.on_release(link, message)
    else:
        return None
    return True


@hookimpl
def gleam_peer_lost(agent: Agent, link: PeerLink, reason: str) -> None:
    service = leasing.service_of(agent)
    if service is not None:
        service.on_peer_lost(link, reason)


@hookimpl
def gleam_gossip_fields(agent: Agent) -> dict[str, Any]:
    service = leasing.service_of(agent)
    return {SCHED_FIELD: {"leases": len(service.desk)}} if service is not None else {}
