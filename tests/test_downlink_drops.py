"""The native downlink drops, itself, the replies Python counts for it
(cffi_build/src/lanes/pump.c): those of replayed calls the program already had
(``drop``: counted as come from the server, not as the program's) and those of an
abandoned checkpoint (``swallow``: not counted at all); no reply goes to Python."""

from __future__ import annotations

import socket
import threading
from typing import Any

from gleam.peer.cuda.client.journal import Journal
from gleam.peer.cuda.client.lanes import new_pump
from gleam.peer.cuda.wire import dataconn, envelope
from gleam.peer.nativelib import lib

SESSION = 7


def _reply(i: int) -> bytes:
    body = bytes([i]) * (8 + i)
    return envelope.pack_header(envelope.REPLY, SESSION, len(body)) + body


def _downlink(drop: int, swallow: int, replies: list[bytes]) -> tuple[Any, list[int], bytes]:
    """The pump after its downlink took ``replies``: (pump, its returns, what the
    program received)."""
    program, agent = socket.socketpair()
    journal = Journal(1 << 20)
    pump = new_pump(agent.fileno(), SESSION, journal.native, b"", 0)
    pump.drop, pump.swallow = drop, swallow
    client, server = dataconn.local_pair()
    codes: list[int] = []
    down = threading.Thread(
        target=lambda: codes.append(lib.gl_pump_downlink(pump, client.stream)))
    try:
        down.start()
        for r in replies:
            server.send(r)
        server.close()
        down.join(30)
        assert not down.is_alive()
        agent.shutdown(socket.SHUT_WR)
        got = b""
        while chunk := program.recv(1 << 16):
            got += chunk
        return pump, codes, got
    finally:
        client.close()
        program.close()
        agent.close()


def test_replies_of_replayed_calls_are_dropped_and_counted_as_come_in():
    replies = [_reply(i) for i in range(4)]
    pump, codes, got = _downlink(2, 0, replies)
    assert codes == [lib.GL_PUMP_END]
    assert got == replies[2] + replies[3]
    assert pump.drop == 0 and pump.replies_in == 4 and pump.replies == 2


def test_replies_of_an_abandoned_checkpoint_are_swallowed_uncounted():
    replies = [_reply(i) for i in range(3)]
    pump, codes, got = _downlink(1, 1, replies)
    assert codes == [lib.GL_PUMP_END]
    assert got == replies[2]  # the first swallowed, the second dropped
    assert pump.swallow == 0 and pump.drop == 0
    assert pump.replies_in == 2 and pump.replies == 1
