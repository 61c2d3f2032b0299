"""CUDA sessions through real agents: this test plays the interposer with raw envelopes.

Agents run as `gleam-peer up` child processes on loopback (no mDNS); the test
connects to the client agent's real control socket, attaches, and sends
record batches built with gleam.peer.records, exactly as libcuda.so.1 does.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path

import cbor2
import pytest

from gleam.peer.cuda.client.checkpoint import REPLY_HEAD
from gleam.peer.cuda.client.hello import Hello, HelloDevice, check_layout, pack_hello, unpack_hello
from gleam.peer.cuda.wire import envelope
from gleam.peer.failures import NO_AGENT
from gleam.peer.localmesh import wait_for
from gleam.peer.protocol import frame
from gleam.peer.records import CallRecord, encode_batch

CTX_KIND = 1
SIZE = 4096


# ---------------------------------------------------------------- without agents


def test_hello_round_trips_and_matches_the_native_layout():
    hello = Hello(
        session=0x1234, va_base=0x7000_0000_0000, va_size=1 << 34, driver_version=12080,
        server="beta", backend="host",
        devices=[HelloDevice("gleam host device", 1 << 33, bytes(range(16)), {75: 8, 76: 0})],
        line="running on beta (gleam host device), named with --peer; link RTT 31 µs",
    )
    body = pack_hello(hello)
    assert len(body) == 11064  # sizeof(gl_session_hello) on x86-64 / aarch64
    back = unpack_hello(body)
    assert back.session == 0x1234 and back.backend == "host" and back.server == "beta"
    assert back.line == hello.line
    # A line too long for its 512 bytes is cut at a character, leaving the NUL.
    long = unpack_hello(pack_hello(dataclasses.replace(hello, line="µ" * 400))).line
    assert long == "µ" * 255
    assert back.devices[0].attrs == {75: 8} and back.devices[0].uuid == bytes(range(16))
    check_layout()


def test_envelope_header_and_stamping():
    buf = bytearray(envelope.pack_header(envelope.BATCH, 0, 24) + bytes(24))
    struct.pack_into("<I", buf, 16 + 16, 7)  # the batch header's record count
    envelope.stamp_session(buf, 0xDEAD_BEEF)
    assert envelope.parse_header(buf) == (envelope.BATCH, 0xDEAD_BEEF, 24)
    assert envelope.record_count(buf, envelope.HEADER_SIZE) == 7
    assert envelope.is_session_envelope(buf, (envelope.BATCH,))
    assert not envelope.is_session_envelope(buf[:-1], (envelope.BATCH,))
    with pytest.raises(envelope.EnvelopeError):
        envelope.parse_header(envelope.pack_header(9, 0, 0))


def test_run_without_an_agent_exits_no_agent(tmp_path: Path):
    proc = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "run", "--state-dir", str(tmp_path / "s"),
         "--", "true"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == NO_AGENT  # 3, as every command without an agent
    assert "no agent is running" in proc.stderr and "start one with `gleam-peer up`" in proc.stderr


def test_lib_prints_the_interposer_directory():
    proc = subprocess.run([sys.executable, "-m", "gleam.peer", "lib"],
                          capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        assert "the interposer is not built" in proc.stderr
        pytest.skip("the interposer is not built in this checkout")
    assert (Path(proc.stdout.strip()) / "libcuda.so.1").is_file()


def test_help_explains_manual_use():
    proc = subprocess.run([sys.executable, "-m", "gleam.peer", "lib", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert "LD_LIBRARY_PATH=$(gleam-peer lib) ./prog" in proc.stdout


# ---------------------------------------------------------------- the interposer's side

native = pytest.importorskip("gleam.peer.cuda.server.native",
                             reason="the native executor is not built")


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return bytes(data)


def read_envelope(sock: socket.socket) -> tuple[int, int, bytes]:
    kind, session, body_len = envelope.parse_header(_recv_exact(sock, envelope.HEADER_SIZE))
    return kind, session, _recv_exact(sock, body_len)


def attach(agent, peer: str = "") -> tuple[socket.socket, int, bytes]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(20)
    sock.connect(str(agent.state.control_socket))
    request = {"op": "cuda_attach", "args": {"peer": peer, "pid": os.getpid(), "program": "t"}}
    sock.sendall(frame(cbor2.dumps(request)))
    kind, session, body = read_envelope(sock)
    if kind == envelope.HELLO:
        assert session == unpack_hello(body).session != 0
    return sock, kind, body


def send_batch(sock: socket.socket, records: list[CallRecord]) -> None:
    batch = encode_batch(records)
    sock.sendall(envelope.pack_header(envelope.BATCH, 0, len(batch)) + batch)


def memset_and_read(sock: socket.socket, hello: Hello, value: int) -> bytes:
    ids = native.call_ids()
    ctx = (0x67 << 56) | (CTX_KIND << 48) | 1
    base = hello.va_base
    send_batch(sock, [
        CallRecord(ids["cuCtxCreate"], (ctx, 0, 0), oneway=True),
        CallRecord(ids["glCtxSetCurrent"], (ctx,), oneway=True),
        CallRecord(ids["glMemAlloc"], (base, SIZE), oneway=True),
        CallRecord(ids["cuMemsetD8"], (base, value, SIZE), oneway=True),
        CallRecord(ids["glMemcpyDtoH"], (base, SIZE, 0)),
    ])
    kind, _session, body = read_envelope(sock)
    assert kind == envelope.REPLY, body
    result, deferred, _n_values, n_bytes, *_values = REPLY_HEAD.unpack_from(body)
    assert (result, deferred, n_bytes) == (0, 0, SIZE)
    return body[REPLY_HEAD.size :]


def _two_agents(process_mesh, mesh_key):
    server = process_mesh.start("beta", mesh_key=mesh_key, extra=["--backend", "host"])
    client = process_mesh.start("alpha", mesh_key=mesh_key, peers=[f"127.0.0.1:{server.port}"],
                                extra=["--backend", "none"])
    wait_for(lambda: server.node_id in client.authenticated_peers(), 10, "the link")
    return client, server


def test_a_session_through_two_agents(process_mesh, mesh_key):
    client, server = _two_agents(process_mesh, mesh_key)
    sock, kind, body = attach(client, peer="beta")
    assert kind == envelope.HELLO, body
    hello = unpack_hello(body)
    assert hello.backend == "host" and hello.server == "beta"
    assert hello.va_size > 0 and hello.va_base % 256 == 0
    assert hello.devices and hello.devices[0].name
    with sock:
        assert memset_and_read(sock, hello, 0xAB) == b"\xab" * SIZE
        # The executor refreshes its native counters after the reply is on its way.
        served = wait_for(lambda: [s for s in server.request("cuda_sessions")["served"]
                                   if s["stats"]], 10, "the served session's statistics")
        assert len(served) == 1 and served[0]["calls"] == 5 and served[0]["waiting"] == 1
        assert served[0]["stats"]["waiting"] == 1
        mine = client.request("cuda_sessions")["client"]
        assert mine[0]["peer"] == "beta" and mine[0]["batches"] == 1
        assert mine[0]["bytes_from_server"] >= SIZE
        assert client.status()["sessions"][0]["role"] == "client"
    wait_for(lambda: not server.request("cuda_sessions")["served"], 10,
             "the server to free the session")
    wait_for(lambda: not client.request("cuda_sessions")["client"], 10,
             "the client to drop the session")


def test_the_agent_chooses_a_server_from_gossip(process_mesh, mesh_key):
    client, server = _two_agents(process_mesh, mesh_key)

    def advertised() -> bool:
        peers = client.status()["peers"]
        return any((p.get("extra") or {}).get("cuda", {}).get("backend") == "host"
                   for p in peers if p["id"] == server.node_id)

    wait_for(advertised, 15, "beta's cuda advert to reach alpha")
    sock, kind, body = attach(client)
    with sock:
        assert kind == envelope.HELLO, body
        assert unpack_hello(body).server == "beta"


def test_killing_the_server_fails_the_session(process_mesh, mesh_key):
    client, server = _two_agents(process_mesh, mesh_key)
    sock, kind, body = attach(client, peer="beta")
    assert kind == envelope.HELLO, body
    with sock:
        process_mesh.stop(server, signal.SIGKILL)
        kind, _session, reason = read_envelope(sock)
        assert kind == envelope.FAIL
        assert reason.decode().startswith("lost the link to beta")


def test_an_unknown_peer_fails_with_the_reason(process_mesh, mesh_key):
    client, _server = _two_agents(process_mesh, mesh_key)
    sock, kind, body = attach(client, peer="nosuch")
    sock.close()
    assert kind == envelope.FAIL
    assert body.decode() == "no peer nosuch in the mesh"


def test_an_agent_serves_its_own_program(process_mesh, mesh_key):
    alone = process_mesh.start("solo", mesh_key=mesh_key, extra=["--backend", "host"])
    sock, kind, body = attach(alone)
    assert kind == envelope.HELLO, body
    hello = unpack_hello(body)
    assert hello.server == "solo"
    with sock:
        assert memset_and_read(sock, hello, 0x5A) == b"\x5a" * SIZE
        rows = alone.request("cuda_sessions")
        assert len(rows["client"]) == 1 and len(rows["served"]) == 1
    wait_for(lambda: not alone.request("cuda_sessions")["served"], 10, "the session to end")


def test_a_malformed_batch_ends_the_session_with_the_reason(process_mesh, mesh_key):
    client, server = _two_agents(process_mesh, mesh_key)
    sock, kind, body = attach(client, peer="beta")
    assert kind == envelope.HELLO, body
    with sock:
        junk = b"not a batch at all, only 32 byte"
        sock.sendall(envelope.pack_header(envelope.BATCH, 0, len(junk)) + junk)
        kind, _session, reason = read_envelope(sock)
        assert kind == envelope.FAIL
        assert reason.decode().startswith("beta closed the session: malformed batch")
    wait_for(lambda: not server.request("cuda_sessions")["served"], 10, "the session to end")
    assert client.process.poll() is None and server.process.poll() is None


def test_a_large_copy_round_trips_in_chunks(process_mesh, mesh_key):
    client, _server = _two_agents(process_mesh, mesh_key)
    sock, kind, body = attach(client, peer="beta")
    assert kind == envelope.HELLO, body
    hello = unpack_hello(body)
    ids = native.call_ids()
    chunk = envelope.COPY_CHUNK  # GL_COPY_CHUNK: the largest envelope the interposer sends
    data = os.urandom(chunk)
    base = hello.va_base
    with sock:
        send_batch(sock, [CallRecord(ids["glMemAlloc"], (base, 2 * chunk), oneway=True)])
        for half in range(2):
            send_batch(sock, [CallRecord(ids["glMemcpyHtoD"], (base + half * chunk, chunk, 0),
                                         payload=data, oneway=True)])
        for half in (1, 0):
            send_batch(sock, [CallRecord(ids["glMemcpyDtoH"], (base + half * chunk, chunk, 0))])
            kind, _session, reply = read_envelope(sock)
            assert kind == envelope.REPLY
            result, _deferred, _n, n_bytes, *_values = REPLY_HEAD.unpack_from(reply)
            assert (result, n_bytes) == (0, chunk)
            assert reply[REPLY_HEAD.size :] == data
