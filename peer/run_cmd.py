"""``gleam-peer run`` and ``gleam-peer lib``: run an unmodified CUDA program through gleam.

``run`` puts gleam's interposer (its own ``libcuda.so.1``) first on
``LD_LIBRARY_PATH`` and replaces itself with the program, so the program's
driver calls go to the local agent, which forwards them to a GPU in the
mesh. ``lib`` prints the interposer's directory for doing the same by hand.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from gleam.peer.failures import NO_AGENT, UserError

INTERPOSER = "libcuda.so.1"

RUN_DESCRIPTION = """\
Run CMD with its CUDA driver calls forwarded to a GPU in the mesh (or this
machine's own backend). The program is not modified: gleam's libcuda.so.1 is
placed first on LD_LIBRARY_PATH and talks to the running agent.

examples:
  gleam-peer run -- ./vector_add 1000000
  gleam-peer run --peer desk-gpu -- python train.py

A gleam agent must be running (gleam-peer up). Without --peer the agent
chooses the server. CUPY_COMPILE_WITH_PTX=1 is set unless the environment sets
it: CuPy then compiles to PTX, which every device can run (a session may move,
or fail over to gleam's host device, which runs PTX only).

GLEAM_TRACE=1 prints each driver call and each symbol gleam does not forward;
GLEAM_TRACE=errors prints only the calls that fail, each with its result."""

LIB_DESCRIPTION = """\
Print the directory that holds gleam's interposer (libcuda.so.1), for running
a program by hand:

  LD_LIBRARY_PATH=$(gleam-peer lib) ./prog

GLEAM_CUDA_SOCKET (the agent's control socket) and GLEAM_CUDA_PEER (a peer to
use) are read by the interposer; `gleam-peer run` sets both."""


class RunError(UserError):
    """``run`` or ``lib`` cannot go on; one line, and the exit status it carries."""


def interposer_dir() -> Path:
    """The directory of the interposer; RunError if it was not built."""
    from gleam.peer import cuda

    libdir = Path(cuda.__file__).resolve().parent / "lib"
    if not (libdir / INTERPOSER).is_file():
        raise RunError("the interposer is not built; reinstall gleam")
    return libdir


def _ask_agent(socket_path: Path, op: str) -> Any:
    from gleam.peer import control

    try:
        return control.request(socket_path, op, timeout=10)
    except (control.AgentNotRunning, control.ControlError) as exc:
        raise RunError(str(exc), NO_AGENT) from None


def _peer_node_id(socket_path: Path, wanted: str) -> str:
    """The node id ``--peer`` names, as the agent knows the mesh now: one line
    (with the candidates) for a name the agent does not know or several nodes share."""
    from gleam.peer.names import resolve
    from gleam.peer.status import node_names

    try:
        return resolve(wanted, node_names(_ask_agent(socket_path, "status")))
    except LookupError as exc:
        raise RunError(f"--peer: {exc.args[0]}; `gleam-peer status` lists the peers") from None


def run_environment(libdir: Path, socket_path: Path, peer: str | None,
                    base: dict[str, str]) -> dict[str, str]:
    """The program's environment: the interposer first, and where the agent is."""
    env = dict(base)
    old = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = f"{libdir}:{old}" if old else str(libdir)
    env["GLEAM_CUDA_SOCKET"] = str(socket_path)
    if peer:
        env["GLEAM_CUDA_PEER"] = peer
    else:
        env.pop("GLEAM_CUDA_PEER", None)
    # CuPy compiles its kernels to PTX rather than to one GPU's machine code:
    # the server is chosen after the program starts and a session may move to
    # another device (or fail over to gleam's host device, which runs PTX only).
    # A GPU JITs the PTX once. The user's own setting wins.
    env.setdefault("CUPY_COMPILE_WITH_PTX", "1")
    return env


def cmd_run(args: argparse.Namespace) -> int:
    from gleam.peer.state import StateDir

    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    try:
        if not command:
            raise RunError("nothing to run: gleam-peer run [--peer NODE] -- CMD [ARGS...]")
        socket_path = StateDir(args.state_dir).control_socket
        if args.peer:
            # The program is given the node id: the name was resolved once, here.
            peer: str | None = _peer_node_id(socket_path, args.peer)
        else:
            _ask_agent(socket_path, "ping")
            peer = None
        env = run_environment(interposer_dir(), socket_path, peer, dict(os.environ))
    except RunError as exc:
        print(f"gleam-peer: {exc}", file=sys.stderr)
        return exc.status
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        print(f"gleam-peer: cannot run {command[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 127
    return 0  # pragma: no cover - execvpe does not return


def cmd_lib(args: argparse.Namespace) -> int:
    try:
        print(interposer_dir())
    except RunError as exc:
        print(f"gleam-peer: {exc}", file=sys.stderr)
        return exc.status
    return 0


def add_commands(sub: Any, add_state_dir: Any) -> None:
    """Add ``run`` and ``lib`` to the ``gleam-peer`` subcommands."""
    run = sub.add_parser(
        "run", help="run a CUDA program on a GPU of the mesh",
        description=RUN_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_state_dir(run)
    run.add_argument("--peer", metavar="NODE",
                     help="the peer that serves the program: its name as `gleam-peer status` "
                     "shows it, or a node id prefix (default: the agent chooses)")
    run.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS...]",
                     help="the program and its arguments")
    run.set_defaults(func=cmd_run)
    lib = sub.add_parser(
        "lib", help="print the directory of gleam's libcuda.so.1",
        description=LIB_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    lib.set_defaults(func=cmd_lib)
