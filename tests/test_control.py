"""The local control socket: permissions, one agent per state dir, bad requests."""

from __future__ import annotations

import socket
import stat

import cbor2
import pytest
import trio

from gleam.peer import control
from gleam.peer.agent import AgentStartError
from gleam.peer.protocol.framing import FrameBuffer, frame


async def _raw(path, body: bytes) -> dict:
    stream = await trio.open_unix_socket(str(path))
    async with stream:
        await stream.send_all(body)
        buffer = FrameBuffer()
        while (reply := buffer.next_frame()) is None:
            data = await stream.receive_some(65536)
            if not data:
                return {}
            buffer.feed(data)
    return cbor2.loads(reply)


async def test_socket_is_private(agents, mesh_key):
    a = await agents.start("a", mesh_key)
    mode = stat.S_IMODE(a.state.control_socket.stat().st_mode)
    assert mode == 0o600
    assert stat.S_ISSOCK(a.state.control_socket.stat().st_mode)


async def test_malformed_requests_get_errors(agents, mesh_key):
    a = await agents.start("a", mesh_key)
    path = a.state.control_socket
    assert (await _raw(path, frame(cbor2.dumps([1, 2]))))["ok"] is False
    assert "args" in (await _raw(path, frame(cbor2.dumps({"op": "status", "args": 3}))))["error"]
    assert "not CBOR" in (await _raw(path, frame(b"\xff\xff")))["error"]
    reply = await _raw(path, frame(cbor2.dumps({"op": "status"})))
    assert reply["ok"] and reply["result"]["node"]["id"] == a.node_id


async def test_second_agent_on_same_state_dir_is_refused(agents, mesh_key):
    a = await agents.start("a", mesh_key)
    from gleam.peer.agent import Agent, AgentConfig
    from gleam.peer.plugin_manager import make_plugin_manager

    twin = Agent(AgentConfig(state=a.state, host="127.0.0.1", port=0), make_plugin_manager(()))
    with pytest.raises(AgentStartError, match="already running"):
        await twin.run()
    # The first agent still answers.
    assert (await trio.to_thread.run_sync(control.request, a.state.control_socket, "ping"))


def test_stale_socket_is_replaced(tmp_path):
    path = tmp_path / "control.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()  # bound but nobody listens: what a crash leaves behind
    control._claim_socket_path(path)
    assert not path.exists()
