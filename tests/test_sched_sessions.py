"""Leases in the real session-open path: agents as `gleam-peer up` processes on loopback,
the test attaching as the interposer does (tests/test_cuda_sessions.py)."""

from __future__ import annotations

import pytest

from gleam.peer.cuda.client.hello import unpack_hello
from gleam.peer.cuda.wire import envelope
from gleam.peer.localmesh import wait_for

from .test_cuda_sessions import attach

pytestmark = pytest.mark.slow


def _speeds(client) -> dict[str, float]:
    out = {}
    for peer in client.status()["peers"]:
        cuda = (peer.get("extra") or {}).get("cuda") or {}
        if cuda.get("backend") == "host":
            out[peer.get("name")] = float(cuda.get("gflops") or 0.0)
    return out


def test_a_full_best_server_denies_the_lease_and_the_session_falls_back(process_mesh, mesh_key):
    fast = process_mesh.start("fast", mesh_key=mesh_key,
                              extra=["--backend", "host", "--max-sessions", "1"])
    slow = process_mesh.start("slow", mesh_key=mesh_key,
                              extra=["--backend", "host", "--host-slowdown", "4"])
    client = process_mesh.start("client", mesh_key=mesh_key, extra=["--backend", "none"],
                                peers=[f"127.0.0.1:{fast.port}", f"127.0.0.1:{slow.port}"])

    def ranked_fast_first() -> bool:
        speeds = _speeds(client)
        return speeds.get("fast", 0) > 2 * speeds.get("slow", float("inf")) > 0

    wait_for(ranked_fast_first, 30, "both servers' measured speeds in the client's gossip")
    first, kind, body = attach(client)
    with first:
        assert kind == envelope.HELLO, body
        assert unpack_hello(body).server == "fast"
        # fast is still ranked first (twice the speed even shared) but holds its one session.
        second, kind, body = attach(client)
        with second:
            assert kind == envelope.HELLO, body
            assert unpack_hello(body).server == "slow"
            rows = client.request("cuda_sessions")["client"]
            reasons = {row["peer"]: row["reason"] for row in rows}
            assert reasons["fast"].startswith("soonest estimated completion: fast")
            assert "fast: full: 1 sessions + 0 leases of 1 (denied)" in reasons["slow"]
        # Pinning skips the lease: the server's own admission refuses instead.
        pinned, kind, body = attach(client, peer="fast")
        pinned.close()
        assert kind == envelope.FAIL and b"server is full" in body
