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
                timeout: float = 120, options: tuple[str, ...] = ("--quiet",)
                ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Runs argv through gleam (``gleam-peer run [options]``); returns the process and
    its last JSON line. By default --quiet: run's own lines (where it ran, what it
    did) are tests/test_run_lines.py's, and stderr here holds the program's and
    gleam's lines alone."""
    done = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "run", "--state-dir", str(client.state.path),
         *options, "--", *map(str, argv)],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})},
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return done, (json.loads(lines[-1]) if lines else {})


# A program that opens a session, allocates HOLD_MIB of device memory and waits
# (so a test can look at the agents while a session holds memory): it prints
# {"total": cuDeviceTotalMem, "pid": its pid} once the allocation has reached the
# server, then
# exits with the status it reads on stdin (ctypes against gleam's libcuda.so.1,
# which `gleam-peer run` puts first on LD_LIBRARY_PATH).
HOLD_MIB = 48
HOLDER = f"""
import ctypes, json, os, sys
cu = ctypes.CDLL("libcuda.so.1")
def ok(rc):
    if rc: sys.exit(f"CUDA error {{rc}}")
dev, ctx, ptr, total = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64(), ctypes.c_size_t()
ok(cu.cuInit(0)); ok(cu.cuDeviceGet(ctypes.byref(dev), 0))
ok(cu.cuDeviceTotalMem_v2(ctypes.byref(total), dev))
ok(cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev))
ok(cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t({HOLD_MIB} << 20)))
ok(cu.cuCtxSynchronize())  # a waiting call: the allocation is on the server now
print(json.dumps({{"total": total.value, "pid": os.getpid()}}), flush=True)
sys.exit(int(sys.stdin.readline() or 0))
"""


def start_holder(client: LocalAgent, *options: str,
                 env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    """HOLDER through ``gleam-peer run [options]``; stdin, stdout and stderr are pipes."""
    return subprocess.Popen(
        [sys.executable, "-m", "gleam.peer", "run", "--state-dir", str(client.state.path),
         *options, "--", sys.executable, "-c", HOLDER],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})},
    )
