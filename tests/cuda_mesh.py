"""Two real agents on loopback for CUDA tests: a host-backend server and a
client without a device, and a helper that runs a program through
``gleam-peer run`` and reads the JSON verdict it prints last."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from gleam.peer.localmesh import LocalAgent, LocalMesh, wait_for


@contextmanager
def host_mesh(root: Path, server_env: Mapping[str, str] | None = None
              ) -> Iterator[tuple[LocalAgent, LocalAgent]]:
    """A client agent linked to a server agent with the host backend."""
    mesh = LocalMesh(root)
    try:
        server = mesh.start("server", extra=["--backend", "host"], env=dict(server_env or {}))
        client = mesh.start("client", mesh_key=server.state.mesh_key(),
                            peers=[f"127.0.0.1:{server.port}"], extra=["--backend", "none"])
        wait_for(lambda: server.node_id in client.authenticated_peers(), 20, "the link")
        yield client, server
    finally:
        mesh.close()


@pytest.fixture(scope="module")
def ptx_mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalAgent, LocalAgent]]:
    """A module's pair of agents, the server running every kernel from its PTX (its
    registry of host kernels off)."""
    with host_mesh(tmp_path_factory.mktemp("mesh"), {"GLEAM_HOST_KERNELS": "0"}) as pair:
        yield pair


def run_through(client: LocalAgent, *argv: object, env: Mapping[str, str] | None = None,
                timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Runs argv through gleam; returns the process and its last JSON line."""
    done = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "run", "--state-dir", str(client.state.path), "--",
         *map(str, argv)],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})},
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return done, (json.loads(lines[-1]) if lines else {})
