"""The agents of a ``lab up`` lab: started in each host, waited for, described.

Every agent gets the host backend (hosts named as ``clients``: none, so they
only run programs, as a laptop without a GPU does), one fresh mesh key shared by the lab, the
host's speed factor as ``--host-slowdown`` over one speed measured for the whole
machine (``GLEAM_HOST_GFLOPS``), and mDNS on its ``eth0`` only: the
namespaces see no interface of the machine, so discovery never leaves the lab.
Agents run in sessions of their own, so they outlive ``lab up``.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from gleam.peer import control
from gleam.peer.gpus import measure_host_gflops
from gleam.peer.lab.netns import NetLab
from gleam.peer.lab.state import LabRecord
from gleam.peer.state import StateDir

POLL = 0.2


def start_agents(lab: NetLab, record: LabRecord, port: int, probe_interval: float,
                 clients: Collection[str] = ()) -> None:
    key = secrets.token_bytes(32)
    directory = Path(record.directory)
    # One speed for the whole machine, measured here: agents measuring at once on
    # shared cores disagree by 2x, which would swamp the --speed factors (each
    # agent gossips this over its slowdown). A caller's GLEAM_HOST_GFLOPS wins.
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.setdefault("GLEAM_HOST_GFLOPS", f"{measure_host_gflops():.3f}")
    for host, entry in zip(lab.hosts, record.hosts, strict=True):
        state = StateDir(directory / "hosts" / host.name)
        state.ensure()
        state.store_mesh_key(key)
        entry.state_dir = str(state.path)
        log = open(directory / f"agent-{host.name}.log", "ab")  # noqa: SIM115 - the agent's
        with log:
            proc = host.start(
                [sys.executable, "-m", "gleam.peer", "up", "--no-tui", "--host", host.address,
                 "--port", str(port), "--interface", "eth0", "--state-dir", str(state.path),
                 "--name", host.name,
                 "--backend", "none" if host.name in clients else "host",
                 "--host-slowdown", str(entry.speed), "--probe-interval", str(probe_interval)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, env=env)
        entry.agent_pid = proc.pid
        record.save()


def agent_status(entry: Any, timeout: float = 3.0) -> dict[str, Any] | None:
    """The agent's status document, or None when it does not answer."""
    if not entry.state_dir:
        return None
    try:
        doc: dict[str, Any] = control.request(StateDir(entry.state_dir).control_socket,
                                              "status", timeout=timeout)
    except (control.AgentNotRunning, control.ControlError, OSError):
        return None
    return doc


def _linked(doc: dict[str, Any] | None) -> int:
    if doc is None:
        return -1
    return sum(1 for p in doc.get("peers", []) if p.get("authenticated"))


def wait_linked(record: LabRecord, timeout: float) -> None:
    """Wait until every agent has an authenticated link to every other."""
    deadline = time.monotonic() + timeout
    want = len(record.hosts) - 1
    while True:
        missing = [h.name for h in record.hosts if _linked(agent_status(h)) < want]
        if not missing:
            return
        dead = [h.name for h in record.hosts if not record.alive(h.agent_pid)]
        if dead:
            raise TimeoutError(f"the agents of {', '.join(dead)} exited; see "
                               f"{record.directory}/agent-{dead[0]}.log")
        if time.monotonic() > deadline:
            raise TimeoutError(f"agents of {', '.join(missing)} did not link every other "
                               f"host within {timeout:.0f} s; see {record.directory}")
        time.sleep(POLL)


def _delay_line(record: LabRecord, name: str) -> str | None:
    path = Path(record.directory) / f"delay-{name}.json"
    try:
        stats = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    parts = []
    for direction in ("to_bridge", "to_host"):
        d = stats.get(direction, {})
        parts.append(f"{direction} {d.get('forwarded', 0)} frames, late mean "
                     f"{d.get('late_mean_us', 0)} us max {d.get('late_max_us', 0)} us, "
                     f"dropped {d.get('dropped', 0) + d.get('send_errors', 0)}")
    return f"{stats.get('delay_us', 0):g} us each way; " + "; ".join(parts)


def describe(record: LabRecord) -> dict[str, Any]:
    """The lab as ``lab status`` shows it (and ``--json`` prints)."""
    hosts = []
    for h in record.hosts:
        alive = record.alive(h.agent_pid)
        doc = agent_status(h) if alive else None
        peers = [{
            "name": link.get("name"), "rtt_ms": link.get("rtt_ms"),
            "rtt_source": link.get("rtt_source"), "ping_ms": link.get("ping_ms"),
            "bandwidth_mbit": None if link.get("bandwidth_bps") is None
            else link["bandwidth_bps"] / 1e6,
        } for link in (doc or {}).get("links", [])]
        hosts.append({
            "name": h.name, "netns": h.netns, "address": h.address, "rate_mbit": h.rate_mbit,
            "rtt_ms": h.rtt_ms, "speed": h.speed, "agent_pid": h.agent_pid,
            "agent_alive": alive, "agent_answers": doc is not None, "state_dir": h.state_dir,
            "peers": peers, "delay_line": _delay_line(record, h.name),
        })
    return {"tag": record.tag, "directory": record.directory, "switch": record.switch,
            "delay": record.delay, "complete": record.complete,
            "namespaces": record.namespaces, "processes": [p for p, _ in record.processes],
            "hosts": hosts}
