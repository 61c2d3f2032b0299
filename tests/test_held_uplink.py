"""A held session stays on the native uplink (cffi_build/src/lanes/pump.c): while a
move holds it, each envelope the program sends is journaled and kept in the pump's
backlog, none sent and none handed to Python; a refused move sends the backlog in
order, and a move's replay sends the journal natively (gl_pump_replay) and clears
it. Both go through the cache work, as the uplink's sends do."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from gleam.peer.cache.blobs import CachePolicy, content_digest
from gleam.peer.cache.client import ServerKnowledge, SessionBlobs
from gleam.peer.cuda.client.journal import Journal
from gleam.peer.cuda.client.lanes import new_pump
from gleam.peer.cuda.wire import dataconn, envelope
from gleam.peer.cuda.wire.calls import call_ids
from gleam.peer.nativelib import ffi, lib
from gleam.peer.records import CallRecord, decode_batch, encode_batch

SESSION = 5


def _envelope(i: int) -> bytes:
    """A waiting batch told apart by its number of records (the pump only scans it)."""
    body = encode_batch([CallRecord(call_ids()["cuCtxSynchronize"], ())] * (i + 1))
    return envelope.pack_header(envelope.BATCH, 0, len(body)) + body


class HeldPump:
    """A pump on a local data connection, held as a move holds it (unless told
    otherwise), reading the program's hand-over ring when given one."""

    def __init__(self, *, held: bool = True, ring: int | None = None,
                 journal: int = 1 << 24) -> None:
        self.program, self._agent = socket.socketpair()
        self.journal = Journal(journal)
        self.pump: Any = new_pump(self._agent.fileno(), SESSION, self.journal.native, b"", 0,
                                  ring)
        self.client, self.server = dataconn.local_pair()
        self.pump.out = self.client.stream
        self.pump.held = int(held)

    def uplink_until_end(self, sent: list[bytes]) -> list[int]:
        codes: list[int] = []
        uplink = threading.Thread(target=lambda: codes.append(lib.gl_pump_uplink(self.pump)))
        uplink.start()
        self.program.sendall(b"".join(sent))
        self.program.shutdown(socket.SHUT_WR)
        uplink.join(30)
        assert not uplink.is_alive()
        return codes

    def locked(self, call: Any) -> Any:
        lib.gl_pump_route_lock(self.pump)
        try:
            return call(self.pump)
        finally:
            lib.gl_pump_route_unlock(self.pump)

    def close(self) -> None:
        for conn in (self.client, self.server):
            conn.close()
        self.program.close()
        self._agent.close()


@pytest.fixture
def held() -> Iterator[HeldPump]:
    h = HeldPump()
    try:
        yield h
    finally:
        h.close()


def test_a_held_uplink_journals_and_keeps_every_envelope_and_sends_none(held):
    sent = [_envelope(i) for i in range(3)]
    assert held.uplink_until_end(sent) == [lib.GL_PUMP_END]
    assert held.journal.count == 3 and held.pump.batches == 3
    assert held.pump.bytes_to_server == 0 and held.pump.waits_out == 0  # nothing sent
    # A refused move: the backlog goes, in order, stamped with the session.
    assert held.locked(lib.gl_pump_release) == 0
    assert held.pump.held == 0 and held.pump.waits_out == 3
    got = [held.server.recv() for _ in sent]
    assert [g[envelope.HEADER_SIZE:] for g in got] == [s[envelope.HEADER_SIZE:] for s in sent]
    assert all(envelope.session_of(g) == SESSION for g in got)
    assert held.pump.bytes_to_server == sum(len(s) for s in sent)


def test_after_a_replay_the_backlog_is_gone_and_a_release_sends_nothing(held):
    held.uplink_until_end([_envelope(i) for i in range(2)])
    held.locked(lib.gl_pump_backlog_clear)  # (the replay sent the journal)
    assert held.locked(lib.gl_pump_release) == 0
    assert held.pump.bytes_to_server == 0 and held.journal.count == 2


def _copy_envelope(payload: bytes) -> bytes:
    """A one-way host-to-device copy then a waiting synchronize."""
    body = encode_batch([
        CallRecord(call_ids()["glMemcpyHtoD"], (0x1000, len(payload), 0), payload, oneway=True),
        CallRecord(call_ids()["cuCtxSynchronize"], ())])
    return envelope.pack_header(envelope.BATCH, 0, len(body)) + body


def _knowing(payload: bytes) -> SessionBlobs:
    known = ServerKnowledge()
    known.add(content_digest(payload))
    return SessionBlobs(SESSION, known, CachePolicy())


def _records(got: bytes) -> list[Any]:
    return decode_batch(got[envelope.HEADER_SIZE:]).records


def test_a_refused_move_sends_the_backlog_through_the_cache_work(held):
    payload = os.urandom(80_000)
    blobs = _knowing(payload)
    held.pump.blobref = blobs.native
    held.uplink_until_end([_copy_envelope(payload)])
    assert held.locked(lib.gl_pump_release) == 0
    copy = _records(held.server.recv())[0]
    # The server holds the payload: it goes as a reference, its bytes kept for a miss.
    assert copy.ref is not None and copy.ref.digest == content_digest(payload)
    assert blobs.refs == 1 and blobs.resend(content_digest(payload)) is not None


def _replay_all(held: HeldPump, share: int) -> tuple[list[int], int]:
    at = ffi.new("uint64_t *")
    codes: list[int] = []
    while not codes or codes[-1] == lib.GL_PUMP_REPLAYING:
        codes.append(held.locked(lambda p: lib.gl_pump_replay(p, at, share)))
    return codes, int(at[0])


def test_a_replay_sends_the_journal_natively_in_shares_and_ends_the_hold(held):
    payload = os.urandom(80_000)
    blobs = _knowing(payload)
    held.pump.blobref = blobs.native
    sent = [_envelope(0), _copy_envelope(payload), _envelope(2)]
    held.uplink_until_end(sent)
    codes, at = _replay_all(held, 1)  # one envelope per call
    assert codes == [lib.GL_PUMP_REPLAYING] * 3 + [lib.GL_PUMP_END] and at == 3
    assert held.pump.held == 0 and held.pump.waits_out == 3
    got = [held.server.recv() for _ in sent]
    assert all(envelope.session_of(g) == SESSION for g in got)
    assert got[0][envelope.HEADER_SIZE:] == sent[0][envelope.HEADER_SIZE:]
    assert _records(got[1])[0].ref is not None  # the cache work, as the uplink does it
    assert held.pump.batches == 3  # a replay's sends are not the program's batches
    # The backlog went with the journal: a release now sends nothing more.
    before = held.pump.bytes_to_server
    assert held.locked(lib.gl_pump_release) == 0 and held.pump.bytes_to_server == before


def test_a_replay_stops_when_the_journal_broke(held):
    held.uplink_until_end([_envelope(0)])
    held.journal.cannot_move("a test broke it")
    assert _replay_all(held, 1 << 20) == ([lib.GL_PUMP_E_JOURNAL], 0)
    assert held.pump.held == 1 and held.pump.bytes_to_server == 0
