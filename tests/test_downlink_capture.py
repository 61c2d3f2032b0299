"""A checkpoint's snapshot reads stay in the client's native lanes
(cffi_build/src/lanes/pump.c, gl_pump_capture_*): the pump stamps and sends them, its
downlink puts their replies on a capture queue that the checkpoint takes from, with a
deadline, and every other reply goes to the program natively. The downlink never
returns a reply to Python; an abandoned checkpoint's replies still to come are
swallowed, and a move ends a checkpoint still reading."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from gleam.peer.cuda.client import checkpoint
from gleam.peer.cuda.client.journal import Journal
from gleam.peer.cuda.client.lanes import new_pump
from gleam.peer.cuda.client.session import ClientSession
from gleam.peer.cuda.wire import dataconn, envelope
from gleam.peer.cuda.wire.blocks import block_view
from gleam.peer.nativelib import ffi, lib

SESSION = 9
WAIT_MS = 30_000


def _reply(i: int) -> bytes:
    body = bytes([i]) * (8 + i)
    return envelope.pack_header(envelope.REPLY, SESSION, len(body)) + body


class Lanes:
    """A pump on a local data connection, its downlink running on its own thread."""

    def __init__(self) -> None:
        self.program, self._agent = socket.socketpair()
        self.journal = Journal(1 << 20)
        self.pump: Any = new_pump(self._agent.fileno(), SESSION, self.journal.native, b"", 0)
        self.client, self.server = dataconn.local_pair()
        self.pump.out = self.client.stream
        self.codes: list[int] = []
        self._down = threading.Thread(
            target=lambda: self.codes.append(lib.gl_pump_downlink(self.pump, self.client.stream)))
        self._down.start()

    def send_reads(self, n: int) -> list[int]:
        lib.gl_pump_route_lock(self.pump)
        try:
            reads = [checkpoint.read_request(0, 0x1000 * (i + 1), 16) for i in range(n)]
            return [lib.gl_pump_capture_send(self.pump, ffi.from_buffer("uint8_t[]", r), len(r))
                    for r in reads]
        finally:
            lib.gl_pump_route_unlock(self.pump)

    def take(self, wait_ms: int = WAIT_MS) -> tuple[int, bytes | None]:
        out = ffi.new("gl_jblock **")
        rc = lib.gl_pump_capture_take(self.pump, wait_ms, out)
        return rc, bytes(block_view(out[0])) if rc == lib.GL_PUMP_TAKEN else None

    def program_got(self) -> bytes:
        """Ends the data connection; what the program received."""
        self.server.close()
        self._down.join(30)
        assert not self._down.is_alive()
        self._agent.shutdown(socket.SHUT_WR)
        got = b""
        while chunk := self.program.recv(1 << 16):
            got += chunk
        return got

    def close(self) -> None:
        if self._down.is_alive():
            self.server.close()
            self._down.join(30)
        self.client.close()
        self.program.close()
        self._agent.close()


@pytest.fixture
def lanes() -> Iterator[Lanes]:
    ln = Lanes()
    try:
        yield ln
    finally:
        ln.close()


def test_the_reads_replies_go_to_the_capture_queue_and_the_rest_to_the_program(lanes):
    lib.gl_pump_capture_begin(lanes.pump)
    assert lanes.send_reads(2) == [0, 0]
    sent = [lanes.server.recv() for _ in range(2)]
    assert all(envelope.session_of(s) == SESSION for s in sent)  # stamped by the pump
    assert lanes.pump.bytes_to_server == sum(len(s) for s in sent)
    assert lanes.pump.waits_out == 0  # not the program's calls: nothing in flight
    replies = [_reply(i) for i in range(3)]
    for r in replies:
        lanes.server.send(r)
    assert [lanes.take(), lanes.take()] == [(lib.GL_PUMP_TAKEN, replies[0]),
                                            (lib.GL_PUMP_TAKEN, replies[1])]
    lib.gl_pump_capture_end(lanes.pump)
    assert lanes.program_got() == replies[2]
    assert lanes.codes == [lib.GL_PUMP_END]  # the downlink never returned a reply
    assert lanes.pump.replies == 1 and lanes.pump.replies_in == 1 and lanes.pump.swallow == 0


def test_an_abandoned_checkpoints_replies_still_to_come_are_swallowed(lanes):
    lib.gl_pump_capture_begin(lanes.pump)
    assert lanes.send_reads(3) == [0, 0, 0]
    replies = [_reply(i) for i in range(4)]
    lanes.server.send(replies[0])
    assert lanes.take() == (lib.GL_PUMP_TAKEN, replies[0])
    lib.gl_pump_capture_end(lanes.pump)  # (a read failed: the checkpoint gives up)
    assert lanes.pump.swallow == 2
    for r in replies[1:]:
        lanes.server.send(r)
    assert lanes.program_got() == replies[3]
    assert lanes.pump.swallow == 0 and lanes.pump.replies == 1


def test_a_take_waits_no_longer_than_its_deadline(lanes):
    lib.gl_pump_capture_begin(lanes.pump)
    assert lanes.send_reads(1) == [0]
    assert lanes.take(50) == (lib.GL_PUMP_E_TIMEOUT, None)
    lib.gl_pump_capture_end(lanes.pump)
    assert lanes.pump.swallow == 1


def test_a_move_ends_a_checkpoint_still_reading(lanes):
    lanes.journal.answered = 4
    lanes.pump.swallow = 1  # (an earlier abandoned checkpoint's, of the old server)
    lib.gl_pump_capture_begin(lanes.pump)
    assert lanes.send_reads(1) == [0]
    got: list[tuple[int, bytes | None]] = []
    taker = threading.Thread(target=lambda: got.append(lanes.take()))
    taker.start()
    lib.gl_pump_route_lock(lanes.pump)
    lib.gl_pump_new_server(lanes.pump)
    lib.gl_pump_route_unlock(lanes.pump)
    taker.join(10)
    assert got == [(lib.GL_PUMP_MOVED, None)]
    assert lanes.pump.drop == 4 and lanes.pump.swallow == 0 and lanes.pump.waits_out == 0
    assert lanes.send_reads(1) == [lib.GL_PUMP_MOVED]  # until the next checkpoint begins
    lib.gl_pump_capture_end(lanes.pump)
    assert lanes.pump.swallow == 0


def test_no_read_goes_to_a_held_session(lanes):
    lib.gl_pump_capture_begin(lanes.pump)
    lanes.pump.held = 1
    assert lanes.send_reads(1) == [lib.GL_PUMP_MOVED]
    assert lanes.pump.bytes_to_server == 0
    lib.gl_pump_capture_end(lanes.pump)
    assert lanes.pump.swallow == 0


class _Quiet:
    """A channel with nothing queued (the replay's backpressure never waits)."""

    node_id = name = "nowhere"

    def submit_control(self, message: object) -> None:
        raise AssertionError("a checkpoint sends nothing on the control channel")

    def queued_bytes(self) -> int:
        return 0


def _read_reply(data: bytes) -> bytes:
    body = checkpoint.REPLY_HEAD.pack(0, 0, 0, len(data), *[0] * 8) + data
    return envelope.pack_header(envelope.REPLY, SESSION, len(body)) + body


@pytest.fixture
def session() -> Iterator[tuple[ClientSession, Any]]:
    program, agent = socket.socketpair()
    client = ClientSession(SESSION, agent, _Quiet(), lambda c, r: None,
                           program="test", pid=1, backend="host")
    conn, server = dataconn.local_pair()
    client.use_data(conn, lambda c, r: None)
    try:
        yield client, server
    finally:
        server.close()
        client._close_data()
        agent.close()
        program.close()


def _reading(client: ClientSession, n: int) -> tuple[threading.Thread, list[Any]]:
    """A checkpoint's _read_back of n 4-byte reads, on its own thread."""
    reads = [(checkpoint.read_request(SESSION, 0x1000 * (i + 1), 4), 4) for i in range(n)]
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.append(client._read_back(reads)))
    thread.start()
    return thread, got


def test_a_checkpoint_gets_its_reads_replies_from_the_pump(session):
    client, server = session
    thread, got = _reading(client, 2)
    assert [len(server.recv()) > 0 for _ in range(2)] == [True, True]
    server.send(_read_reply(b"abcd"))
    server.send(_read_reply(b"efgh"))
    thread.join(10)
    assert got == [[(0, b"abcd", ()), (0, b"efgh", ())]]
    assert client.replies == 0 and client.in_flight() == 0  # none was the program's


def test_a_move_ends_a_checkpoint_reading_from_the_old_server(session):
    client, server = session
    thread, got = _reading(client, 1)
    server.recv()
    client.hold()
    new_conn, new_server = dataconn.local_pair()
    try:
        assert client.replay_onto(_Quiet(), None, new_conn) == 0
        thread.join(10)
        assert got == [None]  # given up at once, not after the 30 s deadline
        assert not client._held  # caught up (an empty journal): forwarding again
    finally:
        new_server.close()
