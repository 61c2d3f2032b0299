"""Running an agent in the foreground: signals, the live view, clean exit."""

from __future__ import annotations

import logging
import signal
from typing import Any

import trio

from gleam.peer.addresses import PeerAddress
from gleam.peer.agent import Agent, AgentConfig
from gleam.peer.discovering import IdentityChanged
from gleam.peer.failures import user_failure
from gleam.peer.gpus import GpuInventory, host_gflops
from gleam.peer.memory import tune_allocator_for_bulk
from gleam.peer.plugin_manager import make_plugin_manager
from gleam.peer.state import StateDir

log = logging.getLogger("gleam")

TUI_REFRESH = 0.5


async def _live_view(current: list[Agent]) -> None:
    """Redraw the status view from the Trio loop (never from rich's thread)."""
    from rich.console import Console, RenderableType
    from rich.live import Live
    from rich.logging import RichHandler
    from rich.text import Text

    from gleam.peer.tui import render_status

    console = Console()
    root = logging.getLogger()
    # Route logs through the live console so they print above the view
    # instead of tearing it.
    handler = RichHandler(console=console, show_path=False)
    old_handlers = root.handlers[:]
    root.handlers = [handler]
    try:
        def view() -> RenderableType:
            if not current or current[0].listen_port is None:
                return Text("starting...")
            return render_status(current[0].snapshot(), width=console.width)

        with Live(view(), console=console, auto_refresh=False) as live:
            while True:
                await trio.sleep(TUI_REFRESH)
                live.update(view(), refresh=True)
    finally:
        root.handlers = old_handlers


async def _run(config: AgentConfig, tui: bool) -> None:
    tune_allocator_for_bulk()
    pm = make_plugin_manager()
    slowdown = config.host_slowdown
    # The measured speed reflects --host-slowdown, so what is gossiped is what is served.
    inventory = GpuInventory(measure=lambda: host_gflops() / slowdown)
    current: list[Agent] = []
    new_mesh = not config.state.has_mesh_key()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_stop_on_signal, signals, nursery.cancel_scope)
            if tui:
                nursery.start_soon(_live_view, current)
            while True:
                # A node that finds its id in use elsewhere takes a new one and
                # starts again; everything else ends the agent.
                agent = Agent(config, pm, inventory)
                current[:] = [agent]
                if new_mesh:
                    _say_new_mesh(agent)
                    new_mesh = False
                restart = False
                try:
                    await agent.run()
                except* IdentityChanged as group:
                    log.warning("restarting with a new node id: %s", group.exceptions[0])
                    restart = True
                if not restart:
                    return


def _say_new_mesh(agent: Agent) -> None:
    """The agent just made a mesh key: a user who meant to join a mesh must hear it."""
    log.info(
        "no mesh key in %s: this device starts a new mesh (%s). To join an existing mesh "
        "instead, run `gleam-peer mesh show` on a device of it, then `gleam-peer mesh import "
        "CODE` here, and start the agent again", agent.state.path, agent.mesh_id)


async def _stop_on_signal(signals: Any, scope: trio.CancelScope) -> None:
    async for signum in signals:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        scope.cancel()
        return


def run_agent_main(
    *,
    state_dir: str | None,
    name: str | None,
    host: str,
    port: int,
    peers: tuple[PeerAddress, ...],
    tui: bool,
    mdns: bool = True,
    interfaces: tuple[str, ...] = (),
    probe_interval: float = 30.0,
    backend: str = "auto",
    max_sessions: int = 8,
    host_slowdown: float = 1.0,
) -> int:
    """Run until SIGINT/SIGTERM; return the process exit status.

    A failure the user can fix (a full disk, a taken port, a read-only state
    directory) is raised as that one UserError, also when it comes out of the
    agent's nursery inside an exception group; anything else is raised as it is.
    """
    state = StateDir(state_dir)
    try:
        config = AgentConfig(
            state=state,
            name=state.node_name(name),
            host=host,
            port=port,
            peers=peers,
            mdns=mdns,
            interfaces=interfaces,
            probe_interval=probe_interval,
            backend=backend,
            max_sessions=max_sessions,
            host_slowdown=host_slowdown,
        )
        trio.run(_run, config, tui)
    except Exception as exc:
        failure = user_failure(exc)
        if failure is None or failure is exc:
            raise
        raise failure from None  # the group around it says nothing to the user
    return 0
