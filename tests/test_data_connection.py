"""A session's data connection (peer/cuda/wire/dataconn.py, docs/data-connection.md):
real agents put every session on one, with the link only for control, and a
session without one fails with the reason; the keys
come from the link, so nobody else can attach to a session; and the native
lanes take whatever bytes a program or a peer sends without crashing."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gleam.peer.addresses import PeerAddress
from gleam.peer.bench.gated import GatedRun
from gleam.peer.cuda.client.attach import Attach
from gleam.peer.cuda.client.journal import Journal
from gleam.peer.cuda.client.lanes import new_pump
from gleam.peer.cuda.examples import KERNELS_PTX
from gleam.peer.cuda.forwarding import CudaForwarding
from gleam.peer.cuda.wire import dataconn, envelope
from gleam.peer.cuda.wire.calls import call_ids
from gleam.peer.localmesh import LocalAgent, wait_for
from gleam.peer.nativelib import lib
from gleam.peer.records import CallRecord, encode_batch
from tests.cuda_mesh import host_mesh

from .conftest import wait_until

STEPS = 4


def _run_accumulate(client: LocalAgent, binary: Path) -> list[str]:
    run = GatedRun(client.state.path, binary, KERNELS_PTX, STEPS, "server")
    lines = run.steps(STEPS)
    rc, rest, err = run.finish()
    assert rc == 0, err
    return lines + rest


def _last_finished(client: LocalAgent) -> dict:
    return wait_for(lambda: client.request("cuda_sessions")["finished"], 20, "the end")[-1]


def test_a_session_travels_on_its_data_connection_and_counts_every_call(tmp_path, accumulate):
    with host_mesh(tmp_path) as (client, _server):
        lines = _run_accumulate(client, accumulate)
        row = _last_finished(client)
    assert len(lines) >= STEPS
    assert row["data_connection"] is True
    # The native lanes count what they forward: every batch, call and reply.
    assert row["batches"] > STEPS and row["calls"] >= row["batches"]
    assert row["waiting"] >= STEPS and row["bytes_to_server"] > 0
    assert row["journal_batches"] > 0 and row["movable"]


async def test_a_session_whose_data_connection_cannot_open_fails_with_the_reason(
        agents, mesh_key, monkeypatch):
    """No other path: the program gets a FAIL that says why, and the server frees
    the session it had opened."""
    server = await agents.start("srv", mesh_key, backend="host")
    client = await agents.start("cli", mesh_key, backend="none",
                                peers=[PeerAddress("127.0.0.1", server.listen_port)])
    await wait_until(lambda: server.node_id in client.links, timeout=10)
    served_fw = server.components.get(CudaForwarding)
    client_fw = client.components.get(CudaForwarding)
    await wait_until(lambda: served_fw.backend is not None, timeout=30)

    def refused(*_args: object) -> None:
        raise dataconn.DataConnectionError("cannot reach 127.0.0.1 port 1: refused")

    monkeypatch.setattr(dataconn, "connect", refused)
    program, agent_end = trio.socket.socketpair()
    with program:
        await Attach(client_fw, {"peer": "srv", "program": "t"}).take(
            trio.SocketStream(agent_end), b"")
        header = await program.recv(envelope.HEADER_SIZE)
        kind, _session, size = envelope.parse_header(header)
        reason = (await program.recv(size)).decode()
    assert kind == envelope.FAIL
    assert reason == ("cannot open the data connection to srv: "
                      "cannot reach 127.0.0.1 port 1: refused")
    await wait_until(lambda: served_fw.server.count() == 0, timeout=10)
    assert not client_fw.routes


# ---------------------------------------------------------------- who may connect


class _LinkEnds:
    """Both ends of a real loopback TCP connection standing in for a link's
    socket, each with the exporter secret the handshake would have given it."""

    def __init__(self, server_secret: bytes, client_secret: bytes) -> None:
        listener = socket.create_server(("127.0.0.1", 0))
        self.client_sock = socket.create_connection(listener.getsockname())
        self.server_sock, _ = listener.accept()
        listener.close()
        self.server = SimpleNamespace(io=SimpleNamespace(sock=self.server_sock),
                                      conn=SimpleNamespace(exporter=server_secret))
        self.client = SimpleNamespace(io=SimpleNamespace(sock=self.client_sock),
                                      conn=SimpleNamespace(exporter=client_secret))

    def close(self) -> None:
        self.client_sock.close()
        self.server_sock.close()


def _accept_in_thread(listener: dataconn.DataListener) -> tuple[threading.Thread, dict]:
    got: dict = {}

    def accept() -> None:
        try:
            got["conn"] = listener.accept()
        except OSError as exc:
            got["error"] = exc

    thread = threading.Thread(target=accept)
    thread.start()
    return thread, got


def test_the_two_agents_of_a_link_open_a_sealed_connection_and_no_one_else_can():
    secret = os.urandom(32)
    ends = _LinkEnds(secret, secret)
    try:
        listener = dataconn.DataListener(ends.server, 7)
        thread, got = _accept_in_thread(listener)
        conn = dataconn.connect(ends.client, 7, listener.port, listener.salt)
        thread.join(10)
        served = got["conn"]
        conn.send(b"to the server")
        assert served.recv() == b"to the server"
        served.send(b"and back")
        assert conn.recv() == b"and back"
        conn.close()
        assert served.recv() == b""  # a clean end
        served.close()
    finally:
        ends.close()


@pytest.mark.parametrize("intruder", ["other secret", "other session", "garbage"])
def test_a_connection_without_the_sessions_keys_is_refused(intruder):
    secret = os.urandom(32)
    ends = _LinkEnds(secret, os.urandom(32) if intruder == "other secret" else secret)
    try:
        listener = dataconn.DataListener(ends.server, 7)
        thread, got = _accept_in_thread(listener)
        if intruder == "garbage":
            with socket.create_connection(("127.0.0.1", listener.port)) as sock:
                sock.sendall(os.urandom(64))
                thread.join(10)
        else:
            session = 8 if intruder == "other session" else 7
            with pytest.raises(dataconn.DataConnectionError):
                dataconn.connect(ends.client, session, listener.port, listener.salt)
            thread.join(10)
        assert not thread.is_alive()
        assert "error" in got and "conn" not in got
    finally:
        ends.close()


def test_the_keys_depend_on_the_secret_the_session_and_the_salt():
    secret, salt = os.urandom(32), os.urandom(32)
    keys = dataconn.data_keys(secret, 1, salt)
    assert keys[0] != keys[1]
    assert keys == dataconn.data_keys(secret, 1, salt)
    assert keys != dataconn.data_keys(secret, 2, salt)
    assert keys != dataconn.data_keys(secret, 1, os.urandom(32))
    assert keys != dataconn.data_keys(os.urandom(32), 1, salt)
    with pytest.raises(dataconn.DataConnectionError):
        dataconn.data_keys(b"", 1, salt)


# ---------------------------------------------------------------- untrusted bytes


def _uplink_verdict(data: bytes) -> tuple[int, list[bytes]]:
    """What the native uplink makes of ``data`` from a program: its one return, and
    the envelopes it journaled (no server attached, so it journals and keeps them,
    as held; Python sees none)."""
    program, agent = socket.socketpair()
    try:
        program.sendall(data)
        program.shutdown(socket.SHUT_WR)
        journal = Journal(1 << 20)
        pump = new_pump(agent.fileno(), 5, journal.native, b"", 0)
        rc = lib.gl_pump_uplink(pump)
        entries = [journal.entry(i) for i in range(journal.count)]
        return rc, [bytes(e.envelope) for e in entries if e is not None]
    finally:
        program.close()
        agent.close()


def _batch_envelope() -> bytes:
    body = encode_batch([CallRecord(call_ids()["cuCtxSynchronize"], ())])
    return envelope.pack_header(envelope.BATCH, 0, len(body)) + body


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200), st.integers(0, 40), st.binary(max_size=8))
def test_the_native_uplink_takes_any_bytes_from_a_program(noise, cut, splice):
    good = _batch_envelope()
    for data in (noise, good[:cut] + splice + good[cut:], good + noise):
        rc, kept = _uplink_verdict(data)
        assert rc in (lib.GL_PUMP_END, lib.GL_PUMP_E_TRUNCATED, lib.GL_PUMP_E_HEADER,
                      lib.GL_PUMP_E_KIND, lib.GL_PUMP_E_SIZE)
        assert all(len(k) >= envelope.HEADER_SIZE for k in kept)


def test_the_native_uplink_journals_each_envelope_whole_and_in_order():
    good = _batch_envelope()
    assert _uplink_verdict(good * 3) == (lib.GL_PUMP_END, [good] * 3)
    assert _uplink_verdict(good[:-1]) == (lib.GL_PUMP_E_TRUNCATED, [])
    reply = envelope.pack_header(envelope.REPLY, 0, 0)
    assert _uplink_verdict(reply) == (lib.GL_PUMP_E_KIND, [])
    huge = envelope.pack_header(envelope.BATCH, 0, envelope.MAX_BODY + 1)
    assert _uplink_verdict(huge) == (lib.GL_PUMP_E_SIZE, [])


def test_a_cache_threshold_past_any_payload_means_the_fast_lane_takes_every_copy(
        tmp_path, accumulate):
    """GLEAM_CACHE_MIN_BYTES beyond a u32 (the remoting bench turns the cache off so)
    is 'never', not an overflow that refuses the session."""
    from gleam.peer.localmesh import LocalMesh

    mesh = LocalMesh(tmp_path)
    try:
        server = mesh.start("server", extra=["--backend", "host"])
        client = mesh.start("client", mesh_key=server.state.mesh_key(),
                            peers=[f"127.0.0.1:{server.port}"], extra=["--backend", "none"],
                            env={"GLEAM_CACHE_MIN_BYTES": str(1 << 50)})
        wait_for(lambda: server.node_id in client.authenticated_peers(), 20, "the link")
        lines = _run_accumulate(client, accumulate)
        row = _last_finished(client)
    finally:
        mesh.close()
    assert len(lines) >= STEPS and row["data_connection"] is True
