"""A client agent and a host-backend server agent in two lab namespaces, linked.

The benchmarks that measure the forwarded path over a shaped link (`bench calls`,
`bench cache`) start the same pair: a server with the host backend, a client with
no device that names the server with `--peer`, both with one fresh mesh key and
mDNS off. Each agent lives as long as its lab host (NetLab stops it).
"""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

from gleam.peer.localmesh import wait_for
from gleam.peer.state import StateDir

PORT = 7411


def start_linked_pair(client: Any, server: Any, root: Path) -> StateDir:
    """Start both agents on lab hosts ``client`` and ``server``; the client's state
    directory, once the client has authenticated the server."""
    from gleam.peer import control

    key = secrets.token_bytes(32)
    states = {}
    for host, name, extra in ((server, "server", ["--backend", "host", "--port", str(PORT)]),
                              (client, "client", ["--backend", "none", "--port", str(PORT),
                                                  "--peer", f"{server.address}:{PORT}"])):
        state = StateDir(root / name)
        state.ensure()
        state.store_mesh_key(key)
        states[name] = state
        log = open(root / f"lab-{name}.log", "ab")  # noqa: SIM115 - lives as long as the agent
        host.start([sys.executable, "-m", "gleam.peer", "up", "--no-tui", "--no-mdns",
                    "--host", host.address, "--state-dir", str(state.path), "--name", name,
                    *extra], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def linked() -> bool:
        try:
            peers = control.request(states["client"].control_socket, "status", timeout=5)
        except (control.AgentNotRunning, control.ControlError):
            return False
        return any(p.get("authenticated") for p in peers.get("peers", []))

    wait_for(linked, 30, "the lab client agent to link the server")
    return states["client"]
