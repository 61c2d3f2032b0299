"""Built-in plugin: CUDA forwarding (docs/cuda-forwarding.md).

Wires ``gleam.peer.cuda`` into the agent through the same hooks a
third-party plugin would use: the ``cuda_attach``, ``cuda_sessions``,
``cuda_migrate`` and ``cuda_run`` control operations, the session control
messages between agents, link loss, gossip (the ``cuda`` field servers advertise) and the
status document. Its state is one ``CudaForwarding`` component per agent
(``gleam_agent_component``), which the agent runs as a service.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gleam.peer.cuda.client.attach import Attach
from gleam.peer.cuda.client.movable import ForwardingMigrator, movable_sessions
from gleam.peer.cuda.client.relocate import migrate
from gleam.peer.cuda.client.runs import run_args
from gleam.peer.cuda.forwarding import CudaForwarding
from gleam.peer.cuda.wire import messages as _messages  # noqa: F401 - registers the messages
from gleam.peer.hookspecs import hookimpl
from gleam.peer.sched.rebalance import Rebalancer, settings_from_env

if TYPE_CHECKING:
    from gleam.peer.agent import Agent
    from gleam.peer.link import PeerLink
    from gleam.peer.protocol import Message


def _of(agent: Agent) -> CudaForwarding | None:
    return agent.components.get(CudaForwarding)


@hookimpl
def gleam_capabilities() -> list[str]:
    return ["cuda-forwarding/1"]


@hookimpl
def gleam_agent_component(agent: Agent) -> CudaForwarding:
    # The agent runs it (CudaForwarding.run): backend, openings, failovers and
    # the rebalancer live in its nursery, and end when the agent stops.
    fw = CudaForwarding(agent)
    # Running sessions are re-evaluated and moved when another server is clearly
    # better (docs/scheduler.md, "Re-evaluation"); GLEAM_REEVALUATE_S=0 turns it off.
    interval, cooldown = settings_from_env()
    fw.rebalancer = Rebalancer(agent, lambda: movable_sessions(fw), ForwardingMigrator(fw),
                               interval=interval, cooldown=cooldown)
    return fw


@hookimpl
def gleam_control_request(agent: Agent, op: str, args: dict[str, Any]) -> Any:
    fw = _of(agent)
    if fw is None or op not in ("cuda_attach", "cuda_sessions", "cache", "cache_clear",
                                "cuda_migrate", "cuda_run"):
        return None
    if op == "cuda_attach":
        return Attach(fw, args)
    if op == "cuda_run":
        return fw.run_report(*run_args(args))
    if op == "cuda_migrate":
        return migrate(fw, str(args.get("session", "")), str(args.get("to", "")))
    if op == "cache":
        return fw.cache_status(entries=bool(args.get("entries")))
    if op == "cache_clear":
        cleared = fw.store.clear() if fw.store is not None else 0
        for known in fw.knowledge.values():
            known.reset(b"")
        return {"cleared": cleared}
    rows = fw.rows()
    return {
        **fw.status(),
        "client": [r for r in rows if r["role"] == "client"],
        "served": [r for r in rows if r["role"] == "served"],
        "finished": list(fw.finished),
    }


@hookimpl
def gleam_control_message(agent: Agent, link: PeerLink, message: Message) -> bool | None:
    fw = _of(agent)
    return fw.on_message(link, message) if fw is not None else None


@hookimpl
def gleam_peer_lost(agent: Agent, link: PeerLink, reason: str) -> None:
    fw = _of(agent)
    if fw is not None:
        fw.on_peer_lost(link, reason)


@hookimpl
def gleam_gossip_fields(agent: Agent) -> dict[str, Any]:
    fw = _of(agent)
    return fw.gossip() if fw is not None else {}


@hookimpl
def gleam_session_rows(agent: Agent) -> list[dict[str, Any]]:
    fw = _of(agent)
    return fw.rows() if fw is not None else []


@hookimpl
def gleam_finished_sessions(agent: Agent) -> list[dict[str, Any]]:
    fw = _of(agent)
    return fw.ended.rows() if fw is not None else []


@hookimpl
def gleam_status(agent: Agent) -> dict[str, Any]:
    fw = _of(agent)
    return {"cuda": fw.status()} if fw is not None else {}
