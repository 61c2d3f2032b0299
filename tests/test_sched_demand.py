"""Learned demand through real agents (`gleam-peer up` processes on loopback): a
finished session's measured demand is recorded under its program's key, kept in the
client agent's state directory, and ranks the next session of the same program."""

from __future__ import annotations

import json
import re

import pytest

from gleam.peer.cuda.client.hello import unpack_hello
from gleam.peer.cuda.wire import envelope
from gleam.peer.localmesh import wait_for

from .test_cuda_sessions import SIZE, attach, memset_and_read

pytestmark = pytest.mark.slow


def _start_client(process_mesh, mesh_key, server):
    client = process_mesh.start("client", mesh_key=mesh_key, extra=["--backend", "none"],
                                peers=[f"127.0.0.1:{server.port}"])

    def server_advertised() -> bool:
        return any(((p.get("extra") or {}).get("cuda") or {}).get("backend") == "host"
                   for p in client.status()["peers"])

    wait_for(server_advertised, 30, "the server's CUDA advert in the client's gossip")
    return client


def _waits_term(reason: str) -> float:
    """Seconds of waiting the best server's estimate quotes."""
    value, unit = re.search(r"waits ([0-9.]+) (ms|s)", reason).groups()
    return float(value) / (1e3 if unit == "ms" else 1.0)


def _one_session(client) -> str:
    """Attach as this test's process, run one memset and read back; the session's reason."""
    sock, kind, body = attach(client)
    with sock:
        assert kind == envelope.HELLO, body
        assert memset_and_read(sock, unpack_hello(body), 0x5A) == b"\x5a" * SIZE
        [row] = client.request("cuda_sessions")["client"]
        return str(row["reason"])


def test_a_finished_session_teaches_the_next_one_of_its_program(process_mesh, mesh_key):
    server = process_mesh.start("server", mesh_key=mesh_key, extra=["--backend", "host"])
    client = _start_client(process_mesh, mesh_key, server)
    first = _one_session(client)
    assert first.startswith("soonest estimated completion: server")
    assert first.endswith("[demand guessed: no earlier run of this program]")

    # The end of the session is measured in the client agent: its counters, in the
    # cost model's units (bytes it sent, round trips it waited for, GFLOP).
    def learned() -> dict | None:
        rows = client.request("cuda_sessions")["finished"]
        return rows[-1] if rows and "measured_demand" in rows[-1] else None

    row = wait_for(learned, 20, "the finished session's measured demand")
    measured = row["measured_demand"]
    assert measured["waits"] == row["waiting"] == 1
    assert measured["unique_bytes"] == row["bytes_to_server"] > 0
    assert measured["compute"] >= 0

    path = client.state.path / "demand.json"
    wait_for(path.exists, 20, "the demand history on disk")
    doc = json.loads(path.read_text())
    runs = {p["key"]: p for p in doc["programs"]}
    [key] = [k for k in runs if not k.endswith("(any arguments)")]
    assert runs[key]["runs"] == 1 and runs[key]["waits"] == 1
    assert f"{key.rsplit(' ', 1)[0]} (any arguments)" in runs

    # The next session of the same program (this test's process) is ranked by it.
    second = _one_session(client)
    assert second.endswith("[demand learned from 1 run]")
    # The estimate quotes one wait, not the default's 2,000: its waits term shrank.
    assert _waits_term(second) < _waits_term(first)

    # A restarted agent reads what it learned from its state directory.
    wait_for(lambda: json.loads(path.read_text())["programs"][-1]["runs"] == 2, 20,
             "the second run in the history")
    process_mesh.stop(client)
    process_mesh.agents.remove(client)
    client = _start_client(process_mesh, mesh_key, server)
    assert _one_session(client).endswith("[demand learned from 2 runs]")
