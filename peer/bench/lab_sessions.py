"""Batches of real CUDA programs in a running lab: started together, timed, checked.

``Lab.batch`` starts one ``gleam-peer run`` per session inside its client
host's namespace (pinned with ``--peer`` or left to the agent's scheduler),
waits for every program, and keeps each one's time from the common start, its
exit status, whether it printed ``"ok": true`` (the examples check their
results against the CPU), and the server it ran on, from the line ``gleam-peer
run`` prints when the program's session opens.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gleam.peer import control
from gleam.peer.cuda.client.runs import OPEN_LINE_PREFIX
from gleam.peer.cuda.examples import KERNELS_PTX
from gleam.peer.lab.state import LabRecord
from gleam.peer.sched.cost import Demand
from gleam.peer.sched.workload import SessionSpec
from gleam.peer.state import StateDir

SESSION_TIMEOUT = 240.0
DRAIN_TIMEOUT = 20.0
# The open line the interposer prints under `gleam-peer run` (cuda/client/runs.py's
# open_line): the server's name, then its device, why it was chosen, the link.
OPEN_LINE = re.compile(rf"^{re.escape(OPEN_LINE_PREFIX)}(\S+) \((.*)$")


@dataclass(frozen=True)
class Program:
    kind: str
    argv: tuple[str, ...]  # after the binary
    binary: str  # example name
    demand: Demand  # what it asks in the lab's units: bytes, waits, forward passes


@dataclass
class SessionRun:
    name: str
    host: str
    kind: str
    pinned: str | None
    server: str | None = None
    seconds: float = 0.0
    verified: bool = False
    rc: int | None = None
    error: str = ""
    reason: str = ""  # the open line's: the device, why that server, the link

    def as_dict(self) -> dict[str, Any]:
        return {"session": self.name, "host": self.host, "kind": self.kind,
                "pinned": self.pinned, "server": self.server, "seconds": self.seconds,
                "verified": self.verified, "rc": self.rc, "error": self.error,
                "reason": self.reason}


class Lab:
    """A running lab and the built programs: runs batches of sessions in it."""

    def __init__(self, record: LabRecord, binaries: dict[str, Path],
                 clients: Sequence[str]) -> None:
        self.record = record
        self.binaries = binaries
        self.clients = tuple(clients)  # the hosts whose agents run programs, not serve
        self.seed = 0

    def _command(self, host: str, prog: Program, pinned: str | None) -> list[str]:
        entry = self.record.host(host)
        argv = list(prog.argv)
        if prog.binary == "bench_calls":
            self.seed += 1  # fresh bytes each run: no run finds them in a server's cache
            argv.append(str(self.seed))
        peer = ["--peer", pinned] if pinned else []
        return ["ip", "netns", "exec", entry.netns, "env", f"GLEAM_STATE_DIR={entry.state_dir}",
                f"GLEAM_EXAMPLE_KERNELS={KERNELS_PTX}", sys.executable, "-m", "gleam.peer",
                "run", *peer, "--", str(self.binaries[prog.binary]), *argv]

    def batch(self, specs: Sequence[SessionSpec], progs: Sequence[Program],
              pinned: Sequence[str | None]) -> list[SessionRun]:
        """Start every session at once; wait for all; each one's time, server, verdict."""
        self.drain()
        runs = [SessionRun(s.name, s.host, s.kind, p) for s, p in zip(specs, pinned,
                                                                         strict=True)]
        procs: list[subprocess.Popen[str]] = []
        start = time.perf_counter()
        try:
            for spec, prog, pin in zip(specs, progs, pinned, strict=True):
                procs.append(subprocess.Popen(
                    self._command(spec.host, prog, pin), stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL))
            threads = [threading.Thread(target=_collect, args=(proc, run, start))
                       for proc, run in zip(procs, runs, strict=False)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        return runs

    def drain(self) -> None:
        """Wait until no server agent has a session left (the previous batch's)."""
        deadline = time.monotonic() + DRAIN_TIMEOUT
        servers = [h for h in self.record.hosts if h.name not in self.clients and h.state_dir]
        while time.monotonic() < deadline:
            if not any(_session_rows(h.state_dir or "") for h in servers):
                return
            time.sleep(0.2)


def _session_rows(state_dir: str) -> list[Any]:
    try:
        doc = control.request(StateDir(state_dir).control_socket, "status", timeout=3)
    except (control.AgentNotRunning, control.ControlError, OSError):
        return []
    return list(doc.get("sessions") or [])


def _collect(proc: subprocess.Popen[str], run: SessionRun, start: float) -> None:
    try:
        out, err = proc.communicate(timeout=SESSION_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        run.error = f"timed out after {SESSION_TIMEOUT:.0f} s"
    run.seconds = time.perf_counter() - start
    run.rc = proc.returncode
    result = _last_json(out)
    run.verified = proc.returncode == 0 and bool(result and result.get("ok") is True)
    said = [line for line in err.splitlines() if line.strip()]
    for line in said:
        opened = OPEN_LINE.match(line)
        if opened and run.server is None:  # the first session's server
            run.server, run.reason = opened[1], opened[2][:300]
    if not run.verified and not run.error:
        # The program's own last word: run's closing account of its sessions
        # (the last line, "gleam: ...") says what they did, not what failed.
        own = [line for line in said if not OPEN_LINE.match(line)]
        if len(own) > 1 and own[-1].startswith("gleam: "):
            own.pop()
        run.error = (own or ["no output"])[-1][:300]


def _last_json(out: str) -> dict[str, Any] | None:
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                return None
            return doc if isinstance(doc, dict) else None
    return None
