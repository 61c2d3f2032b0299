"""The ``gleam-peer`` command line."""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from gleam.peer import __version__
from gleam.peer.bench import BENCHES
from gleam.peer.ending import signals_interrupt
from gleam.peer.failures import INTERRUPTED, NO_AGENT, UserError, report_bug, user_failure
from gleam.peer.native_abi import NativeCoreError

log = logging.getLogger("gleam")


# Commands that live in a module of their own, which provides HELP,
# DESCRIPTION, add_arguments(parser) and main(args) -> int.
MODULE_COMMANDS = {
    "train": "gleam.peer.train",
    "demo": "gleam.peer.demo",
    "cache": "gleam.peer.cache.command",
    "lab": "gleam.peer.lab.command",
    "migrate": "gleam.peer.cuda.migrate_cmd",
    "conformance": "gleam.peer.conformance.command",
}


# ---------------------------------------------------------------- helpers


def _state(args: argparse.Namespace) -> Any:
    from gleam.peer.state import StateDir

    return StateDir(args.state_dir)


def _add_state_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir",
        metavar="DIR",
        help="agent state directory (node id, mesh key, control socket); "
        "default $GLEAM_STATE_DIR or ~/.local/state/gleam",
    )


def _print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )


# ---------------------------------------------------------------- commands


def cmd_up(args: argparse.Namespace) -> int:
    from gleam.peer.addresses import parse_peer_address
    from gleam.peer.run_agent import run_agent_main

    try:
        peers = tuple(parse_peer_address(p) for p in args.peer or ())
    except ValueError as exc:
        raise UserError(f"--peer: {exc}") from None
    if args.name is not None and not 0 < len(args.name) <= 64:
        raise UserError("--name must be 1 to 64 characters")
    if args.probe_interval < 0:
        raise UserError("--probe-interval cannot be negative")
    if args.max_sessions < 0:
        raise UserError("--max-sessions cannot be negative")
    if not args.host_slowdown >= 1.0:
        raise UserError("--host-slowdown must be at least 1")
    tui = not args.no_tui and sys.stdout.isatty()
    return run_agent_main(
        state_dir=args.state_dir,
        name=args.name,
        host=args.host,
        port=args.port,
        peers=peers,
        tui=tui,
        mdns=not args.no_mdns,
        interfaces=tuple(args.interface or ()),
        probe_interval=args.probe_interval,
        backend=args.backend,
        max_sessions=args.max_sessions,
        host_slowdown=args.host_slowdown,
    )


def _fetch_status(state: Any) -> dict[str, Any]:
    from gleam.peer import control

    return control.request(state.control_socket, "status", timeout=10)  # type: ignore[no-any-return]


def _watch_status(state: Any, interval: float) -> int:
    """Redraw the status view until Ctrl-C; when the agent goes away, say so and end."""
    import time

    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    from gleam.peer.control import AgentNotRunning
    from gleam.peer.tui import render_status

    console = Console()
    view = render_status(_fetch_status(state), width=console.width)  # no agent: one line
    with Live(view, console=console, auto_refresh=False) as live:
        try:
            while True:
                time.sleep(interval)
                try:
                    doc = _fetch_status(state)
                except AgentNotRunning:
                    live.update(Text(f"the agent at {state.path} stopped"), refresh=True)
                    break
                live.update(render_status(doc, width=console.width), refresh=True)
        except KeyboardInterrupt:
            return 0
    raise UserError(f"the agent at {state.path} stopped; start it again with `gleam-peer up`",
                    NO_AGENT)


def cmd_status(args: argparse.Namespace) -> int:
    from rich.console import Console

    from gleam.peer.tui import render_status

    state = _state(args)
    if args.interval <= 0:
        raise UserError("--interval must be positive")
    if args.watch:
        if args.json:
            raise UserError("--watch shows the live view; use --json without --watch")
        return _watch_status(state, args.interval)
    doc = _fetch_status(state)
    if args.json:
        _print_json(doc)
    else:
        console = Console()
        console.print(render_status(doc, width=console.width))
    return 0


def cmd_plugins(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from gleam.peer.plugin_manager import blocked_plugins, describe_plugins, make_plugin_manager

    pm = make_plugin_manager()
    infos = describe_plugins(pm)
    if args.json:
        _print_json({
            "plugins": [i.as_dict() for i in infos],
            "blocked": blocked_plugins(pm),
        })
        return 0
    table = Table(title="gleam plugins")
    for column in ("name", "project", "version", "hooks"):
        table.add_column(column)
    for info in infos:
        table.add_row(info.name, info.project, info.version, ", ".join(info.hooks))
    console = Console()
    console.print(table)
    blocked = blocked_plugins(pm)
    if blocked:
        console.print(f"blocked by $GLEAM_DISABLE_PLUGINS: {', '.join(blocked)}")
    return 0


def cmd_mesh_show(args: argparse.Namespace) -> int:
    from gleam.peer.joincode import encode_join_code
    from gleam.peer.protocol import mesh_id

    state = _state(args)
    key = state.mesh_key()
    if args.json:
        _print_json({"join_code": encode_join_code(key), "mesh_id": mesh_id(key)})
        return 0
    print(encode_join_code(key))
    print(
        f"# mesh id {mesh_id(key)}. On each other device run: gleam-peer mesh import CODE",
        file=sys.stderr,
    )
    return 0


def cmd_mesh_import(args: argparse.Namespace) -> int:
    from gleam.peer.joincode import JoinCodeError, decode_join_code
    from gleam.peer.protocol import mesh_id

    try:
        key = decode_join_code(args.code)
    except JoinCodeError as exc:
        raise UserError(str(exc)) from None
    state = _state(args)
    if state.has_mesh_key() and state.mesh_key() == key:
        print(f"this node is already in mesh {mesh_id(key)}")
        return 0
    old_id = mesh_id(state.mesh_key()) if state.has_mesh_key() else None
    backup = state.replace_mesh_key(key)
    if backup is not None:
        print(f"previous key (mesh {old_id}) saved to {backup}")
    print(f"joined mesh {mesh_id(key)}; restart a running agent to use the new key")
    return 0


# ---------------------------------------------------------------- parser


def _port(text: str) -> int:
    from gleam.peer.addresses import parse_port

    try:
        return parse_port(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    from gleam.peer.addresses import DEFAULT_PORT

    parser = argparse.ArgumentParser(
        prog="gleam-peer",
        description="Share the GPUs of your LAN. Each device runs this agent; agents "
        "authenticate each other with a shared mesh key and forward CUDA work.",
    )
    parser.add_argument("--version", action="version", version=f"gleam-peer {__version__}")
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"],
        help="log verbosity on stderr (default: info)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    up = sub.add_parser("up", help="run the agent in the foreground",
                        description="Run the agent in the foreground until Ctrl-C.")
    _add_state_dir(up)
    up.add_argument("--port", type=_port, default=DEFAULT_PORT,
                    help=f"TCP port for peers (default {DEFAULT_PORT}; 0 picks a free one)")
    up.add_argument("--host", default="0.0.0.0",
                    help="address to listen on (default 0.0.0.0, all IPv4 interfaces)")
    up.add_argument("--name", help="this node's name, kept in the state directory for later "
                    "starts (default, chosen at the first start: the host name, plus the state "
                    "directory's name when it is not the built-in one)")
    up.add_argument("--peer", action="append", metavar="HOST:PORT",
                    help="a peer to connect to directly (repeatable)")
    up.add_argument("--no-tui", action="store_true",
                    help="plain log output instead of the live status view")
    up.add_argument("--no-mdns", action="store_true",
                    help="do not advertise or discover peers with mDNS (use --peer)")
    up.add_argument("--interface", action="append", metavar="IF",
                    help="advertise and discover on this interface (name or address; "
                    "repeatable). Default: every usable one, skipping container and VPN "
                    "bridges")
    up.add_argument("--probe-interval", type=float, default=30.0, metavar="SECONDS",
                    help="measure each link's bandwidth with a small probe when no bulk "
                    "transfer was seen for this long (default 30; 0 disables)")
    up.add_argument("--backend", choices=["auto", "host", "cuda", "none"], default="auto",
                    help="how this agent serves forwarded CUDA sessions: cuda (this "
                    "machine's GPU), host (gleam's software device on the CPU), auto (cuda if "
                    "a GPU works, else host; the default) or none (serve nothing)")
    up.add_argument("--max-sessions", type=int, default=8, metavar="N",
                    help="CUDA sessions this agent serves at once (default 8)")
    up.add_argument("--host-slowdown", type=float, default=1.0, metavar="K",
                    help="make the host device K times slower than this CPU, and say so in "
                    "its measured speed (for demos and labs with servers of different speed; "
                    "default 1)")
    up.set_defaults(func=cmd_up)

    status = sub.add_parser("status", help="ask the running agent for its status",
                            description="Print the running agent's view of the mesh.")
    _add_state_dir(status)
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--watch", action="store_true",
                        help="keep the view open and refresh it (Ctrl-C to stop; ends with "
                        "status 3 when the agent stops)")
    status.add_argument("--interval", type=float, default=1.0, metavar="SECONDS",
                        help="refresh period for --watch (default 1)")
    status.set_defaults(func=cmd_status)

    plugins = sub.add_parser("plugins", help="list loaded plugins",
                             description="List plugins (built-in and installed) and their hooks. "
                             "Block some with GLEAM_DISABLE_PLUGINS=name,...")
    plugins.add_argument("--json", action="store_true", help="machine-readable output")
    plugins.set_defaults(func=cmd_plugins)

    mesh = sub.add_parser("mesh", help="show or import the mesh key",
                          description="The mesh key authenticates your devices to each other.")
    mesh_sub = mesh.add_subparsers(dest="mesh_command", metavar="ACTION")
    mesh_sub.required = True
    show = mesh_sub.add_parser("show", help="print this node's mesh key as a join code",
                               description="Print the mesh key as a join code (keep it secret).")
    _add_state_dir(show)
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.set_defaults(func=cmd_mesh_show)
    imp = mesh_sub.add_parser("import", help="join a mesh with a code from `mesh show`",
                              description="Store the mesh key from a join code.")
    _add_state_dir(imp)
    imp.add_argument("code", help="join code printed by `gleam-peer mesh show` on another device")
    imp.set_defaults(func=cmd_mesh_import)

    from gleam.peer import run_cmd

    run_cmd.add_commands(sub, _add_state_dir)

    for name, module_name in MODULE_COMMANDS.items():
        module = importlib.import_module(module_name)
        command = sub.add_parser(name, help=module.HELP, description=module.DESCRIPTION)
        module.add_arguments(command)
        command.set_defaults(func=module.main)

    bench = sub.add_parser("bench", help="run a benchmark",
                           description="Benchmarks print a table (or JSON) with each figure "
                           "beside a reference measured in the same run.")
    bench_sub = bench.add_subparsers(dest="bench_command", metavar="BENCH")
    bench_sub.required = True
    for name, module_name in BENCHES.items():
        module = importlib.import_module(module_name)
        one = bench_sub.add_parser(name, help=module.HELP, description=module.DESCRIPTION)
        one.add_argument("--json", action="store_true", help="print JSON instead of a table")
        module.add_arguments(one)
        one.set_defaults(func=module.main)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; a failure the user can fix is one line on stderr and its status
    (gleam.peer.failures, README "Exit status"), anything else a traceback (a bug)."""
    try:
        parser = build_parser()
    except NativeCoreError as exc:  # a command module needs the native core at import
        print(f"gleam-peer: {exc}", file=sys.stderr)
        return 1
    args = parser.parse_args(argv)
    _setup_logging(args.log_level)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        with signals_interrupt():  # kill PID stops a command's agents as ^C does
            return func(args)
    except KeyboardInterrupt:
        return INTERRUPTED
    except NativeCoreError as exc:
        print(f"gleam-peer: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        failure = user_failure(exc)
        if failure is None:
            return report_bug(sys.stderr)
        print(f"gleam-peer: {failure}", file=sys.stderr)
        return failure.status


if __name__ == "__main__":
    sys.exit(main())
