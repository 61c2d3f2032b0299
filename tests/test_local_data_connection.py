"""A session an agent serves for its own interposer takes the same native lanes as a
peer's (dataconn.local_pair, docs/data-connection.md): the pump and the serving
executor talk over an in-process pair of bounded queues, and Python sees no envelope."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from gleam.peer.bench.gated import GatedRun
from gleam.peer.cuda.examples import KERNELS_PTX
from gleam.peer.cuda.wire import dataconn, envelope
from gleam.peer.cuda.wire.stream import StreamError
from gleam.peer.localmesh import LocalAgent, LocalMesh, wait_for
from tests.cuda_mesh import host_mesh

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


def _peer_run(root: Path, binary: Path) -> tuple[list[str], dict]:
    """``accumulate`` served by a peer over TCP; (lines, its client row)."""
    with host_mesh(root) as (client, _server):
        run = GatedRun(client.state.path, binary, KERNELS_PTX, STEPS, "server")
        lines = run.steps(STEPS)
        rc, rest, err = run.finish()
        assert rc == 0, err
        done = wait_for(lambda: client.request("cuda_sessions")["finished"], 20, "the end")
        return lines + rest, done[-1]


def test_an_agents_own_program_runs_on_the_native_lanes(tmp_path, accumulate):
    lines, row = _solo_run(tmp_path / "solo", accumulate, {})
    reference, peer = _peer_run(tmp_path / "peer", accumulate)
    assert row["data_connection"] is True and peer["data_connection"] is True
    assert lines == reference and len(lines) >= STEPS
    # The pump counted every call natively, and the program's replies all came back
    # (batches are not compared: where the flusher cuts them depends on timing).
    assert row["calls"] == peer["calls"] and row["waiting"] == peer["waiting"]
    assert row["batches"] > 0


def test_the_local_pair_carries_frames_both_ways_in_order_and_ends_cleanly():
    client, server = dataconn.local_pair()
    try:
        frames = [envelope.pack_header(envelope.BATCH, 7, n) + bytes([n % 251]) * n
                  for n in (1, 300, 70_000)]
        for frame in frames:
            client.send(frame)
        assert [server.recv() for _ in frames] == frames
        server.sealed.sendv([b"re", b"ply"])
        assert client.recv() == b"reply"
        counters = client.sealed.counters()
        assert counters.frames_sent == 3 and counters.frames_received == 1
        with pytest.raises(StreamError):  # a frame over the stream's bound is refused
            client.send(b"x" * (dataconn.MAX_FRAME + 1))
    finally:
        client.close()
    # The other end drains nothing more and sees a clean end, then cannot send.
    assert server.recv() == b""
    with pytest.raises(StreamError):
        server.send(b"late")
    server.close()


def test_a_full_direction_holds_its_sender_until_the_receiver_takes_a_frame():
    client, server = dataconn.local_pair()
    chunk = b"c" * (dataconn.MAX_FRAME - 64)
    sent: list[int] = []

    def sender() -> None:
        for i in range(dataconn.LOCAL_QUEUED // len(chunk) + 4):
            client.send(chunk)
            sent.append(i)

    thread = threading.Thread(target=sender, daemon=True)
    thread.start()
    try:
        # The sender stops at the queue's bound; each frame taken lets one more in.
        wait_for(lambda: len(sent) == dataconn.LOCAL_QUEUED // len(chunk) or None, 10, "bound")
        thread.join(0.3)
        assert thread.is_alive() and len(sent) == dataconn.LOCAL_QUEUED // len(chunk)
        for _ in range(dataconn.LOCAL_QUEUED // len(chunk) + 4):
            assert server.recv() == chunk
        thread.join(10)
        assert not thread.is_alive()
    finally:
        server.shutdown()  # (wakes the sender, were it still waiting)
        thread.join(10)
        client.close()
        server.close()
