"""Agents as child processes on this machine: for benchmarks, demos and tests.

Each agent gets its own state directory and a real ``gleam-peer up``
process; everything talks over real sockets. ``LocalMesh`` is a context
manager that stops (SIGTERM, then SIGKILL) every process it started.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gleam.peer import control
from gleam.peer.state import StateDir

POLL = 0.05


class MeshError(Exception):
    pass


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``condition`` until it returns a truthy value or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise MeshError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(POLL)


@dataclass
class LocalAgent:
    name: str
    state: StateDir
    process: subprocess.Popen[bytes]
    log_path: Path

    def request(self, op: str, args: dict[str, Any] | None = None, timeout: float = 30) -> Any:
        return control.request(self.state.control_socket, op, args, timeout=timeout)

    def status(self) -> dict[str, Any]:
        return self.request("status", timeout=10)  # type: ignore[no-any-return]

    def try_status(self) -> dict[str, Any] | None:
        try:
            return self.status()
        except (control.AgentNotRunning, control.ControlError):
            return None

    @property
    def node_id(self) -> str:
        return self.state.node_identity().node_id

    @property
    def port(self) -> int:
        return int(self.status()["node"]["port"])

    def authenticated_peers(self) -> set[str]:
        doc = self.try_status() or {"peers": []}
        return {p["id"] for p in doc["peers"] if p.get("authenticated")}

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@dataclass
class LocalMesh:
    root: Path
    agents: list[LocalAgent] = field(default_factory=list)

    def start(
        self,
        name: str,
        *,
        mesh_key: bytes | None = None,
        peers: Sequence[str] = (),
        extra: Sequence[str] = (),
        mdns: bool = False,
        timeout: float = 20,
        env: dict[str, str] | None = None,
    ) -> LocalAgent:
        """Start an agent on loopback. With ``mdns`` it discovers on ``lo`` only:
        agents started here never multicast on the machine's real interfaces."""
        state = StateDir(self.root / name)
        state.ensure()
        if mesh_key is not None:
            state.store_mesh_key(mesh_key)
        log_path = self.root / f"{name}.log"
        cmd = [
            sys.executable, "-m", "gleam.peer", "--log-level", "debug", "up", "--no-tui",
            "--host", "127.0.0.1", "--port", "0", "--state-dir", str(state.path),
            "--name", name,
        ]
        cmd += ["--interface", "lo"] if mdns else ["--no-mdns"]
        for peer in peers:
            cmd += ["--peer", peer]
        cmd += list(extra)
        with open(log_path, "ab") as log_file:
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            )
        agent = LocalAgent(name, state, proc, log_path)
        self.agents.append(agent)

        def ready() -> bool:
            if proc.poll() is not None:
                raise MeshError(f"agent {name} exited with {proc.returncode}:\n{agent.log_text()}")
            return agent.try_status() is not None

        wait_for(ready, timeout, f"agent {name} to answer on its control socket")
        return agent

    def serving_pair(
        self, server: str = "server", server_env: dict[str, str] | None = None
    ) -> tuple[LocalAgent, LocalAgent]:
        """A host-backend server and a client without a device, linked: (client, server)."""
        serving = self.start(server, extra=["--backend", "host"], env=server_env)
        client = self.start("client", mesh_key=serving.state.mesh_key(),
                            peers=[f"127.0.0.1:{serving.port}"], extra=["--backend", "none"])
        wait_for(lambda: serving.node_id in client.authenticated_peers(), 20,
                 "the client agent to link the server")
        return client, serving

    def stop(self, agent: LocalAgent, sig: int = signal.SIGTERM, timeout: float = 10) -> int:
        if agent.process.poll() is None:
            agent.process.send_signal(sig)
            try:
                agent.process.wait(timeout)
            except subprocess.TimeoutExpired:
                agent.process.kill()
                agent.process.wait(timeout)
        return agent.process.returncode

    def close(self) -> None:
        for agent in self.agents:
            self.stop(agent)


@contextmanager
def local_mesh(root: Path) -> Iterator[LocalMesh]:
    mesh = LocalMesh(root)
    try:
        yield mesh
    finally:
        mesh.close()
