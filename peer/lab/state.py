"""What a running lab made, on disk, so that another shell can see it and remove it.

``lab up`` writes ``<root>/<tag>/lab.json`` before it creates anything and
appends to it as it goes: every namespace is recorded before ``ip netns
add``, every process right after it started (with its start time, so that a
PID the kernel has since given to another program is never signalled).
``remove`` works from the record alone, also when ``lab up`` was killed
midway: it stops the recorded processes and whatever still runs inside the
recorded namespaces, deletes those namespaces (which deletes their veths),
and removes the lab's directory. Nothing is found by a name pattern.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gleam.peer.failures import UserError, os_error_line

# Where labs live unless $GLEAM_LAB_DIR says otherwise: /run is a tmpfs, so a
# reboot (which also drops every namespace) drops the records with them.
DEFAULT_ROOT = Path("/run/gleam-lab")
STOP_TIMEOUT = 5.0


def lab_root() -> Path:
    return Path(os.environ.get("GLEAM_LAB_DIR") or DEFAULT_ROOT)


class LabRecordError(UserError):
    """The lab's record cannot be written (a full or read-only $GLEAM_LAB_DIR)."""


def record_error(exc: OSError, doing: str) -> Exception:
    """``exc`` as the one line a user sees, when it is one a user can fix."""
    line = os_error_line(exc, doing)
    return exc if line is None else LabRecordError(f"{line} (or set $GLEAM_LAB_DIR)")


def process_start_time(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (clock ticks after boot), None if it
    is gone or has exited (a zombie its new parent has not reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces; fields after it are plain.
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


@dataclass
class HostRecord:
    name: str
    netns: str
    address: str
    rate_mbit: float | None = None
    rtt_ms: float | None = None
    speed: float = 1.0
    state_dir: str = ""
    agent_pid: int | None = None


@dataclass
class LabRecord:
    tag: str
    directory: str
    switch: str = ""
    delay: str = ""            # "netem", "delay line" or "" (no host has an RTT)
    complete: bool = False     # lab up finished
    namespaces: list[str] = field(default_factory=list)
    processes: list[tuple[int, int]] = field(default_factory=list)  # (pid, start time)
    hosts: list[HostRecord] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return Path(self.directory) / "lab.json"

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(asdict(self), indent=1))
            tmp.replace(self.path)  # a reader never sees half a record
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise record_error(exc, f"cannot write the lab record {self.path}") from exc

    def journal(self, kind: str, value: Any) -> None:
        """NetLab's journal: remember what is about to exist (or just started)."""
        if kind == "netns":
            self.namespaces.append(str(value))
        elif kind == "process":
            self.processes.append((int(value), process_start_time(int(value)) or -1))
        self.save()

    @classmethod
    def load(cls, path: Path) -> LabRecord:
        raw = json.loads(path.read_text())
        hosts = [HostRecord(**h) for h in raw.pop("hosts", [])]
        processes = [(int(p), int(t)) for p, t in raw.pop("processes", [])]
        return cls(**raw, hosts=hosts, processes=processes)

    def host(self, name: str) -> HostRecord:
        for host in self.hosts:
            if host.name == name:
                return host
        names = ", ".join(h.name for h in self.hosts) or "none"
        raise LookupError(f"lab {self.tag} has no host {name!r} (hosts: {names})")

    def alive(self, pid: int | None) -> bool:
        """Whether ``pid`` is still the process this lab started."""
        if pid is None:
            return False
        recorded = dict(self.processes).get(pid)
        return recorded is not None and process_start_time(pid) == recorded


def existing_namespaces() -> set[str]:
    done = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return {line.split()[0] for line in done.stdout.splitlines() if line.strip()}


def _pids_in(netns: str) -> list[int]:
    done = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
    return [int(p) for p in done.stdout.split() if p.isdigit()]


def _signal_all(pids: set[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def remove(record: LabRecord) -> list[str]:
    """Remove everything ``record`` names; return what could not be removed."""
    present = existing_namespaces()
    ours = [ns for ns in record.namespaces if ns in present]
    # The recorded processes that are still themselves, and anything that runs
    # in our namespaces (a process started just before a crash, unrecorded).
    pids = {pid for pid, _ in record.processes if record.alive(pid)}
    for netns in ours:
        pids.update(_pids_in(netns))
    pids.discard(os.getpid())
    _signal_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while pids and time.monotonic() < deadline:
        pids = {pid for pid in pids if process_start_time(pid) is not None}
        time.sleep(0.05)
    _signal_all(pids, signal.SIGKILL)
    left = []
    for netns in reversed(ours):
        done = subprocess.run(["ip", "netns", "del", netns], capture_output=True, text=True)
        if done.returncode != 0:
            left.append(f"namespace {netns}: {done.stderr.strip()}")
    directory = Path(record.directory)
    if directory.parent == lab_root() and directory.name == record.tag:
        shutil.rmtree(directory, ignore_errors=True)
    return left


def find_labs() -> list[Path]:
    root = lab_root()
    return sorted(root.glob("*/lab.json")) if root.is_dir() else []
