"""Hostile and broken peers against a real agent: each connection is closed
with a logged reason, and the agent carries on serving its mesh."""

from __future__ import annotations

import os
import secrets
import struct

import pytest
import trio

from gleam.peer.addresses import PeerAddress
from gleam.peer.protocol import (
    NEED_DATA,
    PROTOCOL_VERSION,
    Auth,
    Connection,
    FrameKind,
    LocalIdentity,
    PeerAuthenticated,
    ProtocolError,
    Role,
    encode_message,
    frame,
    mesh_id,
)
from gleam.peer.protocol.messages import Hello

from .conftest import wait_until


async def _open(agent) -> trio.SocketStream:
    return await trio.open_tcp_stream("127.0.0.1", agent.listen_port)


async def _read_until_closed(stream: trio.SocketStream, timeout: float = 5.0) -> bytes:
    """Everything the agent sends until it closes the connection."""
    received = bytearray()
    with trio.fail_after(timeout):
        while True:
            try:
                data = await stream.receive_some(65536)
            except trio.BrokenResourceError:
                break
            if not data:
                break
            received += data
    return bytes(received)


async def _handshake(stream: trio.SocketStream, key: bytes, record: list[bytes] | None = None):
    """Act as a peer holding ``key``; return the established Connection."""
    conn = Connection(Role.INITIATOR, LocalIdentity(secrets.token_hex(16), "tester", key))
    first = conn.start()
    if record is not None:
        record.append(first)
    await stream.send_all(first)
    with trio.fail_after(5):
        while True:
            event = conn.next_event()
            if event is NEED_DATA:
                out = conn.data_to_send()
                if out:
                    if record is not None:
                        record.append(out)
                    await stream.send_all(out)
                conn.receive_data(await stream.receive_some(65536))
            elif isinstance(event, PeerAuthenticated):
                out = conn.data_to_send()
                if record is not None:
                    record.append(out)
                await stream.send_all(out)
                return conn


async def _still_serving(agents, agent, key) -> None:
    """A legitimate peer can still join and exchange pings."""
    friend = await agents.start(f"friend{secrets.token_hex(2)}", key,
                                peers=[PeerAddress("127.0.0.1", agent.listen_port)])
    await wait_until(lambda: friend.node_id in agent.links)
    assert await agent.links[friend.node_id].ping() > 0


def _hello(key: bytes, **changes) -> bytes:
    fields = dict(node_id=secrets.token_hex(16), name="mallory", version=PROTOCOL_VERSION,
                  capabilities=(),
                  nonce=os.urandom(32), mesh_id=mesh_id(key), listen_port=None)
    fields.update(changes)
    return frame(bytes((FrameKind.HELLO,)) + encode_message(Hello(**fields)))


def _refusals(agent) -> list[str]:
    return [e.text for e in agent.events if e.kind == "refused"]


async def test_peer_with_another_key(agents, mesh_key):
    a = await agents.start("a", mesh_key)
    stream = await _open(a)
    with pytest.raises(ProtocolError):
        await _handshake(stream, secrets.token_bytes(32))
    await wait_until(lambda: any("another mesh" in r for r in _refusals(a)))
    await _still_serving(agents, a, mesh_key)


async def test_stolen_mesh_id_without_the_key_fails_auth(agents, mesh_key):
    a = await agents.start("a", mesh_key)
    stream = await _open(a)
    # Claims the right mesh id (it is public) but cannot compute the MAC.
    await stream.send_all(_hello(mesh_key))
    await stream.send_all(frame(bytes((FrameKind.AUTH,)) + encode_message(Auth(mac=bytes(32)))))
    await _read_until_closed(stream)
    await wait_until(lambda: any("authentication failed" in r for r in _refusals(a)))
    await _still_serving(agents, a, mesh_key)


async def test_replayed_handshake(agents, mesh_key):
    a = await agents.start("a", mesh_key)
    recorded: list[bytes] = []
    first = await _open(a)
    await _handshake(first, mesh_key, record=recorded)
    await first.aclose()
    replay = await _open(a)
    for chunk in recorded:  # our hello and auth from the earlier session
        await replay.send_all(chunk)
    await _read_until_closed(replay)
    await wait_until(lambda: any("authentication failed" in r for r in _refusals(a)))
    await _still_serving(agents, a, mesh_key)


async def test_tampered_frame_after_authentication(agents, mesh_key):
    a = await agents.start("a", mesh_key)
    stream = await _open(a)
    conn = await _handshake(stream, mesh_key)
    await wait_until(lambda: len(a.links) == 1)
    wire = bytearray(conn.send_batch(b"payload that will be tampered with"))
    wire[-1] ^= 0x40
    await stream.send_all(bytes(wire))
    await _read_until_closed(stream)
    await wait_until(lambda: not a.links)
    left = [e.text for e in a.events if e.kind == "left"]
    assert any("tampered or replayed" in text for text in left), left
    await _still_serving(agents, a, mesh_key)


async def test_unknown_protocol_version(agents, mesh_key):
    a = await agents.start("a", mesh_key)
    stream = await _open(a)
    await stream.send_all(_hello(mesh_key, version=99))
    answer = await _read_until_closed(stream)
    assert b"protocol version" in answer  # the peer is told why, in plaintext
    await wait_until(lambda: any("protocol version 99" in r for r in _refusals(a)))
    await _still_serving(agents, a, mesh_key)


@pytest.mark.parametrize(
    "garbage, reason",
    [
        (struct.pack(">I", 1 << 30), "accepts at most"),
        (frame(b"\x01\xff\xfe\xfd"), "bad cbor"),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "accepts at most"),
    ],
    ids=["oversized", "malformed-cbor", "http"],
)
async def test_oversized_or_malformed_frames(agents, mesh_key, garbage, reason):
    a = await agents.start("a", mesh_key)
    stream = await _open(a)
    await stream.send_all(garbage)
    await _read_until_closed(stream)
    await wait_until(lambda: len(_refusals(a)) == 1)
    assert reason in _refusals(a)[0].lower()
    await _still_serving(agents, a, mesh_key)


async def test_a_flood_of_bad_connections_is_summarised_not_logged_each(agents, mesh_key, caplog):
    """300 connections of random bytes, bogus length prefixes and early closes: a few
    log lines, a count per source and reason, and the agent still serves its mesh."""
    a = await agents.start("a", mesh_key)
    a.refusals.interval_s = 3600  # the whole flood in one interval, however slow the machine
    garbage = [os.urandom(64), struct.pack(">I", 1 << 31), b"GET / HTTP/1.1\r\n\r\n", b""]
    caplog.set_level("WARNING", logger="gleam.peer.agent")

    async def attack(i: int) -> None:
        stream = await _open(a)
        await stream.send_all(garbage[i % len(garbage)])
        if i % len(garbage) == len(garbage) - 1:
            await stream.aclose()  # hangs up before saying anything
        else:
            await _read_until_closed(stream)  # idle ones wait for the handshake timeout

    async with trio.open_nursery() as nursery:  # at once, so the timeouts overlap
        for i in range(300):
            nursery.start_soon(attack, i)
    refused = lambda: [r for r in caplog.records if "refused" in r.getMessage()]  # noqa: E731
    await wait_until(lambda: len(refused()) >= 1)
    assert len(refused()) <= 8, [r.getMessage() for r in refused()]

    summary = a.refusals.flush(trio.current_time(), force=True)
    counted = sum(int(line.split()[1]) for line in summary)
    assert counted + len(refused()) >= 290  # a hang-up may end before it is refused
    assert all("from 127.0.0.1" in line for line in summary)
    await _still_serving(agents, a, mesh_key)
