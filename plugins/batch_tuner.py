"""Built-in plugin: reinforcement-learned batch-size tuning.

Two halves, in two processes:

* in the training process, ``gleam_tune_batch`` answers for
  :class:`gleam.peer.tuning.BatchTuner` with the policy the tuner was built
  with (PPO by default, ``policy="pollux"`` for the goodput heuristic). It
  is ``trylast``, so any other plugin that answers replaces it.
* in the agent, the ``batch_tuner.report`` control operation takes the
  state a training process posts (see
  :class:`gleam.peer.tuning.reporting.AgentReporter`) and answers with the
  agent's measured links, which the tuner then observes; ``gleam_status``
  shows the state in the status view and ``gleam_gossip_fields`` shares a
  compact summary with the mesh.

Nothing here imports numpy or torch: an agent without the ``train`` extra
loads this plugin like any other.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gleam.peer.control import RequestError
from gleam.peer.hookspecs import hookimpl

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gleam.peer.agent import Agent
    from gleam.peer.tuning.observation import Observation
    from gleam.peer.tuning.view import TunerView

REPORT_OP = "batch_tuner.report"
MAX_WORKERS = 256
MAX_TEXT = 64
MAX_ACTIONS_TEXT = 4096
GOSSIP_FRESH_S = 120.0


@dataclass
class _Report:
    job: str
    worker: int
    state: dict[str, Any]
    at: float


class TuningReports:
    """One agent's reports from training processes, by (job, worker), most recent last
    (the plugin's component: docs/plugins.md, "Per-agent state")."""

    def __init__(self) -> None:
        self.by_worker: dict[tuple[str, int], _Report] = {}


# ------------------------------------------------------------------ validation


def _text(value: Any, key: str, limit: int = MAX_TEXT, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= limit or not value.isprintable():
        raise RequestError(f"{REPORT_OP}: {key!r} must be 1..{limit} printable characters")
    return value


def _int(value: Any, key: str, lo: int = 0, hi: int = 2**53) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise RequestError(f"{REPORT_OP}: {key!r} must be an integer in {lo}..{hi}")
    return value


def _number(value: Any, key: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RequestError(f"{REPORT_OP}: {key!r} must be a finite number or null")
    return float(value)


def _validated_state(state: Any, worker: int) -> dict[str, Any]:
    if not isinstance(state, dict):
        raise RequestError(f"{REPORT_OP}: 'state' must be a map (BatchTuner.status())")
    batches = state.get("batches")
    if (not isinstance(batches, list) or not 0 < len(batches) <= MAX_WORKERS
            or worker >= len(batches)):
        raise RequestError(f"{REPORT_OP}: 'batches' must list 1..{MAX_WORKERS} batch sizes "
                           "and include this worker's")
    clean = {
        "policy": _text(state.get("policy"), "policy"),
        "iteration": _int(state.get("iteration", 0), "iteration"),
        "batches": [_int(b, "batches", 1) for b in batches],
        "noise_scale": _number(state.get("noise_scale"), "noise_scale"),
        "lr_gain": _number(state.get("lr_gain"), "lr_gain"),
        "decisions": _int(state.get("decisions", 0), "decisions"),
        "last_action": _text(state.get("last_action"), "last_action", MAX_ACTIONS_TEXT,
                             optional=True),
        "reward": _number(state.get("reward"), "reward"),
        "samples_per_s": _number(state.get("samples_per_s"), "samples_per_s"),
        "updates": _int(state.get("updates", 0), "updates"),
    }
    return clean


# ---------------------------------------------------------------- agent side


def _links(agent: Agent, peers: Sequence[str] | None) -> dict[str, Any]:
    """Mean RTT and slowest bandwidth of this node's links (to ``peers`` if given)."""
    rtts: list[float] = []
    bandwidths: list[float] = []
    for link in agent.links.values():
        if peers and link.node_id not in peers and link.peer.name not in peers:
            continue
        rtt = link.rtt_ms  # the kernel's estimate (docs/gossip.md, "Link estimates")
        if rtt is not None:
            rtts.append(rtt)
        if link.bandwidth.bytes_per_s is not None:
            bandwidths.append(link.bandwidth.bytes_per_s * 8)
    return {
        "peers": len(rtts),
        "rtt_ms": sum(rtts) / len(rtts) if rtts else None,
        "bandwidth_bps": min(bandwidths) if bandwidths else None,
    }


def _report(agent: Agent, args: dict[str, Any]) -> dict[str, Any]:
    job = _text(args.get("job"), "job")
    assert job is not None
    worker = _int(args.get("worker", 0), "worker", 0, MAX_WORKERS - 1)
    state = _validated_state(args.get("state"), worker)
    peers = args.get("peers")
    if peers is not None and (not isinstance(peers, list)
                              or not all(isinstance(p, str) for p in peers)):
        raise RequestError(f"{REPORT_OP}: 'peers' must be a list of node ids or names")
    kept = agent.components.get(TuningReports)
    if kept is None:
        raise RequestError(f"{REPORT_OP}: the agent is not running")
    reports = kept.by_worker
    reports.pop((job, worker), None)  # re-insert: the dict keeps most recent last
    reports[(job, worker)] = _Report(job, worker, state, time.time())
    return {"accepted": True, "links": _links(agent, peers)}


def _latest(agent: Agent) -> _Report | None:
    kept = agent.components.get(TuningReports)
    reports = kept.by_worker if kept is not None else None
    if not reports:
        return None
    return next(reversed(reports.values()))


@hookimpl
def gleam_agent_component(agent: Agent) -> TuningReports:
    return TuningReports()


@hookimpl
def gleam_control_request(agent: Agent, op: str, args: dict[str, Any]) -> dict[str, Any] | None:
    if op == REPORT_OP:
        return _report(agent, args)
    return None


@hookimpl
def gleam_status(agent: Agent) -> dict[str, Any]:
    report = _latest(agent)
    if report is None:
        return {}
    s = report.state
    batches = s["batches"]
    actions = (s["last_action"] or "").split(",")
    mine = actions[report.worker] if report.worker < len(actions) and actions[0] else None
    return {"batch_tuner": {
        "job": report.job,
        "policy": s["policy"],
        "worker": f"{report.worker} of {len(batches)}",
        "batch": batches[report.worker],
        "global_batch": sum(batches),
        "batches": batches,
        "last_action": mine,
        "noise_scale": s["noise_scale"],
        "lr_gain": s["lr_gain"],
        "decisions": s["decisions"],
        "reward": s["reward"],
        "age_s": round(time.time() - report.at, 1),
    }}


@hookimpl
def gleam_gossip_fields(agent: Agent) -> dict[str, Any]:
    report = _latest(agent)
    if report is None or time.time() - report.at > GOSSIP_FRESH_S:
        return {}
    batches = report.state["batches"]
    return {"batch_tuner": {
        "job": report.job[:32],
        "worker": report.worker,
        "batch": batches[report.worker],
        "global_batch": sum(batches),
        "policy": report.state["policy"][:16],
    }}


# ------------------------------------------------------------- training side


@hookimpl(trylast=True)
def gleam_tune_batch(tuner: TunerView, observation: Observation) -> list[int] | None:
    return tuner.builtin_decide(observation)
