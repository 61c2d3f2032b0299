"""``gleam-peer run`` and ``gleam-peer lib``: run an unmodified CUDA program through gleam.

``run`` puts gleam's interposer (its own ``libcuda.so.1``) first on
``LD_LIBRARY_PATH`` and runs the program as its child, so the program's driver
calls go to the local agent, which forwards them to a GPU in the mesh. The
program's sessions say where they run when they open (the interposer prints the
line the agent wrote), and ``run`` says what they did once the program exited
(cuda/client/runs.py); the program's exit status and signals pass through
(peer/child.py). ``lib`` prints the interposer's directory for doing the same
by hand.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from gleam.peer.failures import NO_AGENT, UserError

INTERPOSER = "libcuda.so.1"
NVRTC_PRELOAD = "libgleam_nvrtc.so"  # built beside the interposer (cffi_build/interposer/nvrtc)
CANNOT_RUN_STATUS = 127  # as a shell says for a command it cannot run
# How long run waits for the agent to account for the sessions of a program that exited.
REPORT_WAIT = 5.0

RUN_DESCRIPTION = """\
Run CMD with its CUDA driver calls forwarded to a GPU in the mesh (or this
machine's own backend). The program is not modified: gleam's libcuda.so.1 is
placed first on LD_LIBRARY_PATH and talks to the running agent.

examples:
  gleam-peer run -- ./vector_add 1000000
  gleam-peer run --peer desk-gpu -- python train.py

A gleam agent must be running (gleam-peer up). Without --peer the agent
chooses the server. On stderr, each CUDA session the program opens says where
it runs, why there and over which link; when the program exits, one line says
what its sessions did (calls, round trips, bytes sent and saved by the blob
cache, time), or that it opened none. --quiet leaves both out (errors still
print). The program's stdout, exit status and signals are its own.

CUPY_COMPILE_WITH_PTX=1 is set unless the environment sets it: CuPy then
compiles to PTX, which every device can run (a session may move, or fail over
to gleam's host device, which runs PTX only).

NVRTC compiles for the virtual architecture (PTX) where the program asks for
a real one (sm_XX), and the program's "cubin" is that PTX: gleam's host device
runs PTX only, and a GPU's driver JIT-compiles it (libgleam_nvrtc.so is
preloaded; GLEAM_NVRTC_PTX=0 turns this off).

GLEAM_TRACE=1 prints each driver call (a symbol gleam does not forward is named
once, when the program calls it); GLEAM_TRACE=errors prints only the calls that
fail, each with its result, and none that NVIDIA's driver refuses too. Why the
server refused or faulted (a kernel's illegal address, a refused PTX) is always
printed at the call that reports the error, as `gleam: SERVER: ...`."""

LIB_DESCRIPTION = """\
Print the directory that holds gleam's interposer (libcuda.so.1), for running
a program by hand:

  LD_LIBRARY_PATH=$(gleam-peer lib) ./prog

A program that compiles with NVRTC also needs the library run preloads
(NVRTC then makes PTX where the program asks for a cubin):

  LD_LIBRARY_PATH=$(gleam-peer lib) LD_PRELOAD=$(gleam-peer lib)/libgleam_nvrtc.so ./prog

GLEAM_CUDA_SOCKET (the agent's control socket) and GLEAM_CUDA_PEER (a peer to
use) are read by the interposer; `gleam-peer run` sets both. GLEAM_SESSION_LINE=1
makes the interposer print where the session runs and why (run sets it unless
--quiet); GLEAM_RUN_ID tags the sessions for run's closing line."""


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


def _preload(old: str | None, library: str) -> str:
    """LD_PRELOAD with library first (once; the user's own entries after it). A path
    with a space or colon cannot be preloaded (both separate LD_PRELOAD's entries):
    then NVRTC is left alone, and its cubins are refused by the host device."""
    if any(c.isspace() or c == ":" for c in library):
        return old or ""
    kept = [entry for entry in (old or "").replace(":", " ").split() if entry != library]
    return " ".join([library, *kept])


def run_environment(libdir: Path, socket_path: Path, peer: str | None,
                    base: dict[str, str], *, run_id: str = "",
                    quiet: bool = False) -> dict[str, str]:
    """The program's environment: the interposer first, NVRTC's wrapper preloaded
    (a program's NVRTC makes PTX where it asks for a cubin: docs/cuda-forwarding.md,
    "NVRTC"), where the agent is, the run's id for its sessions, and whether their
    open lines print."""
    env = dict(base)
    old = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = f"{libdir}:{old}" if old else str(libdir)
    env["LD_PRELOAD"] = _preload(env.get("LD_PRELOAD"), str(libdir / NVRTC_PRELOAD))
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
    env["GLEAM_RUN_ID"] = run_id  # empty: the sessions belong to no run
    if quiet:
        env.pop("GLEAM_SESSION_LINE", None)
    else:
        env["GLEAM_SESSION_LINE"] = "1"
    return env


def cmd_run(args: argparse.Namespace) -> int:
    from gleam.peer import child
    from gleam.peer.state import StateDir

    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    run_id = secrets.token_hex(8)
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
        env = run_environment(interposer_dir(), socket_path, peer, dict(os.environ),
                              run_id=run_id, quiet=args.quiet)
    except RunError as exc:
        print(f"gleam-peer: {exc}", file=sys.stderr)
        return exc.status
    sys.stdout.flush()
    sys.stderr.flush()
    started = time.monotonic()
    try:
        ended = child.run(command, env)
    except OSError as exc:
        print(f"gleam-peer: cannot run {command[0]}: {exc.strerror or exc}", file=sys.stderr)
        return CANNOT_RUN_STATUS
    if not args.quiet:
        _say_what_ran(socket_path, run_id, time.monotonic() - started)
    return child.pass_on(ended)


def _say_what_ran(socket_path: Path, run_id: str, wall: float) -> None:
    """The closing line: what the program's sessions did, from the agent's tally."""
    from gleam.peer import control
    from gleam.peer.cuda.client.runs import end_line

    try:
        report = control.request(socket_path, "cuda_run", {"run": run_id, "wait": REPORT_WAIT},
                                 timeout=REPORT_WAIT + 5)
        line = end_line(report, wall)
    except (control.AgentNotRunning, control.ControlError, OSError) as exc:
        line = f"no account of the program's CUDA sessions from the agent: {exc}"
    except KeyboardInterrupt:  # the user does not want to wait for it
        return
    print(f"gleam: {line}", file=sys.stderr, flush=True)


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
    run.add_argument("--quiet", "-q", action="store_true",
                     help="print no line about where the program's CUDA sessions ran and "
                     "what they did (errors still print)")
    run.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS...]",
                     help="the program and its arguments")
    run.set_defaults(func=cmd_run)
    lib = sub.add_parser(
        "lib", help="print the directory of gleam's libcuda.so.1",
        description=LIB_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    lib.set_defaults(func=cmd_lib)
