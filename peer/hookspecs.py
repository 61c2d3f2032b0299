"""Hook specifications of gleam (pluggy project ``gleam``).

Plugins are found through the ``gleam`` entry-point group; gleam's own
features are registered the same way (see ``pyproject.toml``). Every hook
name starts with ``gleam_``. Hooks marked *firstresult* stop at the first
implementation that returns something other than ``None``.

Arguments are passed by keyword; an implementation may accept any subset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from gleam.peer.agent import Agent
    from gleam.peer.link import PeerLink
    from gleam.peer.protocol import Message

hookspec = pluggy.HookspecMarker("gleam")
hookimpl = pluggy.HookimplMarker("gleam")


@hookspec
def gleam_capabilities() -> list[str]:
    """Capabilities this node announces in its hello.

    Returns a list of short strings (at most 64 characters each, 32 in all
    across plugins). All results are concatenated. Added in 0.1.
    """


@hookspec
def gleam_agent_started(agent: Agent) -> None:
    """Called once the agent's sockets listen and its control socket is open, before
    the first connection or request is accepted (so plugin state exists for both).

    :param agent: the running agent; plugins may keep a reference to it.
    Added in 0.1.
    """


@hookspec
def gleam_agent_component(agent: Agent) -> object | None:
    """This plugin's state for one agent: the agent keeps it and hands it back.

    Called once per agent as it starts, before ``gleam_agent_started`` and
    before the first connection or request is accepted. Return any object
    (``None``: no state). The agent keeps it in ``agent.components`` for its
    lifetime, keyed by the object's type: every later hook finds it with
    ``agent.components.get(MyState)``, which is ``None`` for an agent that
    never started it. Never keep per-agent state in a module global: one
    process may run several agents, and a global outlives them.

    A component with ``async def run(self, *, task_status=trio.TASK_STATUS_IGNORED)``
    is a service: the agent starts it in its nursery (``nursery.start``, so it
    waits for ``task_status.started()``) and cancels it when the agent stops.
    The service owns a nursery for its own tasks; its cleanup runs in a
    shielded ``finally`` and must not block the Trio thread (blocking work goes
    to ``trio.to_thread.run_sync``).

    All results are kept; a second component of one type is ignored and
    logged. Runs on the Trio thread. Added in 0.4.
    """


@hookspec
def gleam_agent_stopping(agent: Agent) -> None:
    """Called once when the agent begins shutting down. Added in 0.1."""


@hookspec
def gleam_peer_authenticated(agent: Agent, link: PeerLink) -> None:
    """A peer passed the mesh-key handshake and its link is now in service.

    :param link: the live link; ``link.peer`` is the peer's hello.
    Added in 0.1.
    """


@hookspec
def gleam_peer_lost(agent: Agent, link: PeerLink, reason: str) -> None:
    """An authenticated link closed. ``reason`` says why. Added in 0.1."""


@hookspec(firstresult=True)
def gleam_control_message(agent: Agent, link: PeerLink, message: Message) -> bool | None:
    """Handle a control message from an authenticated peer that the core
    does not handle itself (the core answers ping, pong, error and goodbye).

    *firstresult*: return ``True`` when handled. A message nobody handles is
    logged and dropped. Runs on the Trio thread: do not block.
    Added in 0.1.
    """


@hookspec(firstresult=True)
def gleam_data_batch(agent: Agent, link: PeerLink, payload: bytes) -> bool | None:
    """Consume an opaque data-plane batch received from an authenticated peer.

    *firstresult*: return ``True`` when consumed. This is the hot path and,
    unlike every other hook, it runs on the link's reader thread, not on the
    Trio thread: implementations must be thread-safe, must not touch Trio
    objects (use ``trio.from_thread`` or a token), and should return quickly,
    since the link reads nothing else meanwhile. Batches of one link arrive
    in order. CUDA forwarding does not use it (its sessions have data
    connections of their own); ``wire_bench`` does. Added in 0.1.
    """


@hookspec(firstresult=True)
def gleam_control_request(
    agent: Agent, op: str, args: dict[str, Any]
) -> dict[str, Any] | Awaitable[dict[str, Any]] | None:
    """Answer a request that arrived on the local control socket.

    :param op: the operation name, e.g. ``"status"``.
    :param args: the request's arguments (untrusted: validate them).
    *firstresult*: return a CBOR-encodable dict (or an awaitable giving one)
    for an ``op`` this plugin owns, ``None`` otherwise. A
    :class:`gleam.peer.control.Handoff` (or an awaitable giving one) takes
    the connection over instead of answering (added in 0.2). Raise
    :class:`gleam.peer.control.RequestError` for a bad request; its message
    reaches the user. Added in 0.1.
    """


@hookspec
def gleam_status(agent: Agent) -> dict[str, Any]:
    """Contribute top-level sections to ``gleam-peer status --json``.

    Returns a dict merged into the status document; keys must not collide
    with the core's (``node``, ``peers``, ``plugins``). Added in 0.1.
    """


@hookspec
def gleam_gossip_fields(agent: Agent) -> dict[str, Any]:
    """Contribute fields to this node's record in the mesh's gossip.

    Returns a dict of plain CBOR values (text keys). All results are merged
    into the record's ``extra`` map, which every peer sees in its view (and
    ``status --json`` shows under each peer's ``extra``). Keep it small: the
    whole map is bounded (see ``gleam.peer.gossip.records``) and spread to
    every member; fields that do not fit are dropped with a warning.
    Called on the Trio thread about once per gossip refresh. Added in 0.1.
    """


@hookspec
def gleam_session_rows(agent: Agent) -> list[dict[str, Any]]:
    """Sessions this node runs or serves, one dict each, for the status view.

    All results are concatenated into the status document's ``sessions``.
    Each row has at least ``id`` (text), ``role`` (``"client"`` or
    ``"served"``), ``peer`` (the other side's name), ``calls`` and ``bytes``.
    Called on the Trio thread. Added in 0.2.
    """


@hookspec
def gleam_finished_sessions(agent: Agent) -> list[dict[str, Any]]:
    """The last sessions this node ran or served that have ended, oldest first.

    All results are concatenated into the status document's ``finished``,
    which keeps the last 16 by their ``ended`` time (Unix seconds). Each row
    has at least ``id``, ``role``, ``peer``, ``ended``, ``seconds``, ``calls``,
    ``round_trips``, ``bytes_to_server`` and ``end_reason`` (None when the
    program ended the session; docs/status.md lists the rest). Called on the
    Trio thread. Added in 0.5.
    """


# ---------------------------------------------------------------- CUDA forwarding

if TYPE_CHECKING:
    from gleam.peer.cuda.server.kernels import HostKernel


@hookspec
def gleam_host_kernels() -> list[HostKernel]:
    """Kernels the host backend runs, by CUDA entry name.

    Every plugin contributes; all results are concatenated into one registry
    (``{kernel.name: kernel}``) when a serving agent opens its host backend.
    A name offered twice is an error: the later one is ignored and logged
    once. A launch of an entry with no host kernel is CUDA_ERROR_NOT_FOUND.
    Called once per agent start, on the Trio thread. Added in 0.2.
    """


# ---------------------------------------------------------------- compression
# (hook specs of the gradient compression family go here)


@hookspec
def gleam_compress_codecs() -> list[str]:
    """Names of the gradient codecs this plugin provides (e.g. ``["sketch"]``).

    All results are concatenated; :func:`gleam.peer.compress.available_codecs`
    lists them and :func:`gleam.peer.compress.ddp.register` accepts any of
    them as ``codec``. Added in 0.1.
    """


@hookspec(firstresult=True)
def gleam_compress_codec(name: str, options: dict[str, Any]) -> Any | None:
    """Make a fresh gradient codec called ``name``, or return ``None``.

    :param name: a name this plugin listed in ``gleam_compress_codecs``.
    :param options: keyword options from the caller (untrusted: validate
        them; raise ``ValueError`` with a clear message for a bad one).
    *firstresult*: the first codec returned is used. The object follows
    :class:`gleam.peer.compress.aggregation.GradientCodec`: a ``name`` and
    ``aggregate(x, *, world, key)``, a generator that yields
    :class:`~gleam.peer.compress.aggregation.Reduction` requests (OR or SUM
    across workers, in place) and returns its
    :class:`~gleam.peer.compress.stats.AggregationStats`. It must be lossless
    and ask every worker for the same reductions in the same order. The
    same codec then runs under the DDP communication hook
    (:mod:`gleam.peer.compress.ddp`) and any other driver. Called in the
    training process, not in the agent. Added in 0.1.
    """


# ---------------------------------------------------------------- batch tuning
# (hook specs of batch-size tuning go here)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gleam.peer.tuning.observation import Observation
    from gleam.peer.tuning.view import TunerView


@hookspec(firstresult=True)
def gleam_tune_batch(tuner: TunerView, observation: Observation) -> Sequence[int] | None:
    """Choose every worker's next batch size for a data-parallel job.

    Called in the training process (not in the agent) by
    :class:`gleam.peer.tuning.BatchTuner` once per observation window (every
    ``tuner.interval`` iterations, 50 by default).

    :param tuner: the tuner asking; ``tuner.policy_name`` is the policy the
        user selected (``"ppo"``, ``"pollux"``, ``"static"`` or a custom
        policy's name), ``tuner.batch_sizes`` the current sizes,
        ``tuner.min_batch`` / ``tuner.max_batch`` each worker's limits.
    :param observation: the window just closed: per worker its batch size,
        samples/s, compute time, communication wait, utilization and links;
        globally loss and trend, gradient norm and noise scale.
    *firstresult*: return one batch size per worker (in worker order) to
    decide, or ``None`` to let the next implementation decide. The built-in
    ``batch-tuner`` plugin answers last (``trylast``) with the tuner's own
    policy, so any other implementation that answers replaces it. Results
    are clamped to each worker's limits. Runs on the training loop's thread:
    keep it quick. Added in 0.1.
    """


# ---------------------------------------------------------------- scheduling
# (hook specs of the scheduler go here; docs/scheduler.md)

if TYPE_CHECKING:
    from gleam.peer.sched.cost import Candidate, Demand
    from gleam.peer.sched.ranking import Ranking


@hookspec(firstresult=True)
def gleam_rank_servers(session: Demand, candidates: Sequence[Candidate]) -> Ranking | None:
    """Rank the servers that could run a new CUDA session, best first.

    :param session: what the session needs (unique bytes, bytes each server
        likely caches, waiting round trips, GFLOP, device memory).
    :param candidates: every linked serving peer with its gossiped offer
        (speed, sessions, queue, utilisation, free memory) and the measured
        link (RTT, bandwidth). Never empty.
    *firstresult*: return a :class:`gleam.peer.sched.ranking.Ranking`; its
    ``order`` (node ids, best first) is the order in which leases are asked
    and its ``reason`` is kept as the session's reason (status view,
    ``status --json``, the demo). The built-in ``scheduler`` plugin ranks by
    the cost model of :mod:`gleam.peer.sched.cost`. Not called when the
    program pins a server (``gleam-peer run --peer NODE``). Runs on the Trio
    thread: do not block. Added in 0.3.
    """
