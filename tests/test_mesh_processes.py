"""The foundation's acceptance scenario with real `gleam-peer up` processes on loopback."""

from __future__ import annotations

import secrets
import signal
import time

from gleam.peer.localmesh import wait_for


def test_two_agents_authenticate_and_a_stranger_is_refused(process_mesh, mesh_key):
    a = process_mesh.start("alpha", mesh_key=mesh_key)
    b = process_mesh.start("beta", mesh_key=mesh_key, peers=[f"127.0.0.1:{a.port}"])
    started = time.monotonic()
    wait_for(
        lambda: a.node_id in b.authenticated_peers() and b.node_id in a.authenticated_peers(),
        5, "alpha and beta to authenticate each other",
    )
    assert time.monotonic() - started < 5 + 1  # the 5 s of the acceptance criterion

    stranger = process_mesh.start(
        "stranger", mesh_key=secrets.token_bytes(32),
        peers=[f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}"],
    )

    def stranger_refused_by_both() -> bool:
        peers = stranger.status()["peers"]
        return len(peers) == 2 and all(p["state"] == "refused" for p in peers)

    wait_for(stranger_refused_by_both, 10, "both agents to refuse the stranger")
    for agent in (a, b):
        doc = agent.status()
        assert stranger.node_id not in {p["id"] for p in doc["peers"]}
        assert any(e["kind"] == "refused" for e in doc["events"])
        assert agent.process.poll() is None
        assert "refused connection from" in agent.log_text()
    assert a.node_id in b.authenticated_peers()


def test_sigterm_says_goodbye_and_removes_the_socket(process_mesh, mesh_key):
    a = process_mesh.start("alpha", mesh_key=mesh_key)
    b = process_mesh.start("beta", mesh_key=mesh_key, peers=[f"127.0.0.1:{a.port}"])
    wait_for(lambda: b.node_id in a.authenticated_peers(), 5, "beta to join")
    assert process_mesh.stop(b, signal.SIGTERM) == 0
    assert not b.state.control_socket.exists()
    wait_for(lambda: b.node_id not in a.authenticated_peers(), 5, "alpha to drop beta")
    left = [e for e in a.status()["events"] if e["kind"] == "left"]
    assert "agent shutting down" in left[-1]["text"]
