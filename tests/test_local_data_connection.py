"""A session an agent serves for its own interposer takes the same native lanes as a
peer's (dataconn.local_pair, docs/data-connection.md): the pump and the serving
executor talk over an in-process socket pair, and Python sees no envelope."""

from __future__ import annotations

import socket
from pathlib import Path

from gleam.peer.bench.gated import GatedRun
from gleam.peer.cuda import dataconn, envelope
from gleam.peer.cuda.examples import KERNELS_PTX
from gleam.peer.localmesh import LocalAgent, LocalMesh, wait_for

STEPS = 4


def _solo_run(root: Path, binary: Path, env: dict[str, str]) -> tuple[list[str], dict]:
    """``accumulate`` on one agent that serves itself; (lines, its client row)."""
    mesh = LocalMesh(root)
    try:
        solo: LocalAgent = mesh.start("solo", extra=["--backend", "host"], env=env)
        run = GatedRun(solo.state.path, binary, KERNELS_PTX, STEPS, "solo")
        lines = run.steps(STEPS)
        rc, rest, err = run.finish()
        assert rc == 0, err
        done = wait_for(lambda: [r for r in solo.request("cuda_sessions")["finished"]
                                 if r.get("role") == "client"], 20, "the end")
        return lines + rest, done[-1]
    finally:
        mesh.close()


def test_an_agents_own_program_runs_on_the_native_lanes(tmp_path, accumulate):
    lines, row = _solo_run(tmp_path / "on", accumulate, {})
    reference, off = _solo_run(tmp_path / "off", accumulate, {dataconn.ENV: "0"})
    assert row["data_connection"] is True and off["data_connection"] is False
    assert lines == reference and len(lines) >= STEPS
    # The pump counted every batch natively, and the program's replies all came back.
    assert row["batches"] == off["batches"] and row["waiting"] == off["waiting"]


def test_the_local_pair_seals_both_ways_and_refuses_a_forged_frame():
    client, server = dataconn.local_pair()
    try:
        body = envelope.pack_header(envelope.BATCH, 7, 3) + b"abc"
        client.send(body)
        assert server.recv() == body
        server.send(b"reply")
        assert client.recv() == b"reply"
        # Bytes that were not sealed with the session's key end the stream with an error.
        raw = socket.socket(fileno=socket.dup(client.sock.fileno()))
        try:
            raw.sendall(b"\x10\x00\x00\x00" + b"\x00" * 32)
        finally:
            raw.close()
        try:
            got = server.recv()
        except OSError:
            got = None
        assert got is None
    finally:
        client.close()
        server.close()
