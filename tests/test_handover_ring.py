"""The hand-over ring (cffi_build/include/gl_ring.h): a program's large envelopes go to
its client agent through a shared memfd, a 16-byte RING note on the socket in their
place.

Both ends are the real ones: the interposer's (tests/interposer/harness.c against a
fake agent that passes the ring with its HELLO) and the agent's uplink
(gl_pump_uplink on a local data connection, fed notes written here as the
interposer writes them). A note no interposer writes ends the session with
GL_PUMP_E_RING; the ring's bytes are copied once and the copy is what is checked."""

from __future__ import annotations

import array
import contextlib
import itertools
import mmap
import os
import socket
import struct
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gleam.peer.cuda.client import handover
from gleam.peer.cuda.client.lanes import uplink_error
from gleam.peer.cuda.wire import envelope
from gleam.peer.nativelib import lib
from gleam.peer.records import CallRecord, decode_batch, encode_batch
from tests.test_held_uplink import SESSION, HeldPump
from tests.test_interposer_units import (
    CALL,
    TIMEOUT,
    accept_attach,
    build_harness,
    hello_body,
    recv_exact,
    reply,
    start_fake_agent,
)

HEAD = lib.GL_RING_HEAD_SIZE
RING = lib.GL_RING_SMALLEST  # 256 KiB
NOTE = struct.Struct("<QQ")
ENV = struct.Struct("<IBBHQ")


class Ring:
    """A ring made as the agent makes one, mapped here as well."""

    def __init__(self, size: int = RING) -> None:
        self.fd = lib.gl_handover_create(size)
        assert self.fd >= 0, os.strerror(-self.fd)
        self.size = size
        self.map = mmap.mmap(self.fd, HEAD + size)

    def at(self, at: int, n: int) -> bytes:
        start = HEAD + at % self.size
        return self.map[start:start + n]

    def put(self, at: int, data: bytes) -> None:
        start = HEAD + at % self.size
        self.map[start:start + len(data)] = data

    @property
    def released(self) -> int:
        return int(struct.unpack_from("<Q", self.map, 0)[0])

    def release(self, end: int) -> None:
        struct.pack_into("<Q", self.map, 0, end)

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)


def test_the_ring_is_sealed_so_the_program_cannot_shrink_it() -> None:
    ring = Ring()
    try:
        assert os.fstat(ring.fd).st_size == HEAD + RING
        with pytest.raises(PermissionError):
            os.ftruncate(ring.fd, HEAD)
        with pytest.raises(PermissionError):
            os.ftruncate(ring.fd, HEAD + 2 * RING)
    finally:
        ring.close()


@pytest.mark.parametrize("size", [0, lib.GL_RING_MIN, lib.GL_RING_SMALLEST + 1])
def test_a_ring_too_small_or_not_whole_pages_is_refused(size: int) -> None:
    assert lib.gl_handover_create(size) < 0


@pytest.mark.parametrize("raw, why", [("x", "not a whole number"), ("-1", "outside"),
                                      ("4096", "outside")])
def test_a_wrong_ring_setting_is_refused_with_the_reason(monkeypatch, raw, why) -> None:
    monkeypatch.setenv(handover.ENV, raw)
    with pytest.raises(ValueError, match=why):
        handover.ring_bytes()
    monkeypatch.setenv(handover.ENV, "0")
    assert handover.create() is None


# ------------------------------------------------------ the interposer's end


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_harness(tmp_path_factory)


def send_hello_with(conn: socket.socket, ring: Ring) -> None:
    hello = ENV.pack(len(hello_body()), 3, 0, 0, 0) + hello_body()
    rights = array.array("i", [ring.fd]).tobytes()
    sent = conn.sendmsg([hello], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)])
    conn.sendall(hello[sent:])


@contextlib.contextmanager
def copies_with_a_ring(harness: Path, tmp_path: Path
                       ) -> Iterator[tuple[socket.socket, subprocess.Popen, Ring]]:
    """The harness's `copies` attached to a fake agent that passed it a ring."""
    ring = Ring()
    server, proc = start_fake_agent(harness, tmp_path, "copies")
    try:
        conn, _ = accept_attach(server)
        send_hello_with(conn, ring)
        yield conn, proc, ring
    finally:
        proc.kill()
        server.close()
        ring.close()


def read_envelope(conn: socket.socket, ring: Ring, notes: list[tuple[int, int]]) -> bytes:
    """The next envelope's body, from the socket or the ring (released at once)."""
    length, kind, _, _, session = ENV.unpack(recv_exact(conn, 16))
    assert session == 0
    if kind != lib.GL_ENV_RING:
        assert kind == 1
        return recv_exact(conn, length)
    assert length == lib.GL_RING_NOTE_SIZE
    at, n = NOTE.unpack(recv_exact(conn, length))
    notes.append((at, n))
    env = ring.at(at, n)
    ring.release(at + n)
    body_len, inner, _, _, _ = ENV.unpack(env[:16])
    assert (inner, body_len) == (1, n - 16)
    return env[16:]


def test_large_copies_go_through_the_ring_in_order(harness: Path, tmp_path: Path) -> None:
    notes: list[tuple[int, int]] = []
    with copies_with_a_ring(harness, tmp_path) as (conn, proc, ring):
        records = []
        while not records or records[-1].oneway:
            records += decode_batch(read_envelope(conn, ring, notes)).records
        conn.sendall(reply(0, 0))
        out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, out + err
    copies = [r for r in records if r.call_id == CALL["glMemcpyHtoD"]]
    assert [r.payload for r in copies] == [
        bytes((j + i) % 251 for j in range(100001)) for i in range(8)]
    assert len(notes) == 8  # every copy came through the ring, none by the socket
    # Each note lies past the one before, inside the ring, never across its end
    # (eight copies in a ring of two: the program waited for room and wrapped).
    assert all(b[0] >= a[0] + a[1] for a, b in itertools.pairwise(notes))
    assert all(at % RING + n <= RING for at, n in notes)
    assert notes[-1][0] > 2 * RING
    assert out.splitlines() == [f"copy {i} 0" for i in range(8)] + ["sync 0"]


def test_a_program_waiting_for_room_hears_that_the_agent_went_away(harness: Path,
                                                                  tmp_path: Path) -> None:
    with copies_with_a_ring(harness, tmp_path) as (conn, proc, _):
        # Two copies fill the ring; the agent releases nothing and goes away.
        notes = 0
        while notes < 2:
            length, kind, _, _, _ = ENV.unpack(recv_exact(conn, 16))
            recv_exact(conn, length)
            notes += kind == lib.GL_ENV_RING
        conn.close()
        out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, out + err
    lines = out.splitlines()
    assert lines[:2] == ["copy 0 0", "copy 1 0"]
    assert lines[2:] == [f"copy {i} 46" for i in range(2, 8)] + ["sync 46"]
    assert err.startswith("gleam: lost the CUDA server: ")


# ----------------------------------------------------------- the agent's end


def batch(i: int, payload_len: int) -> bytes:
    """A one-way host-to-device copy whose payload is told apart by i."""
    payload = bytes((j * 7 + i) % 256 for j in range(payload_len))
    body = encode_batch([CallRecord(CALL["glMemcpyHtoD"], (0x1000, payload_len, 0),
                                    payload=payload, oneway=True)])
    return envelope.pack_header(envelope.BATCH, 0, len(body)) + body


def note(at: int, n: int) -> bytes:
    return envelope.pack_header(lib.GL_ENV_RING, 0, 16) + NOTE.pack(at, n)


class Uplink(HeldPump):
    """A client agent's pump on a local data connection, with a ring, its uplink
    running."""

    def __init__(self, ring: Ring | None) -> None:
        super().__init__(held=False, ring=ring.fd if ring else None, journal=1 << 26)
        self.codes: list[int] = []
        self.thread = threading.Thread(
            target=lambda: self.codes.append(lib.gl_pump_uplink(self.pump)))
        self.thread.start()

    def end(self) -> int:
        self.program.shutdown(socket.SHUT_WR)
        self.thread.join(TIMEOUT)
        assert not self.thread.is_alive()
        return self.codes[0]

    def forwarded(self, n: int) -> list[bytes]:
        return [bytes(self.server.recv()) for _ in range(n)]


@pytest.fixture
def ring() -> Iterator[Ring]:
    r = Ring()
    try:
        yield r
    finally:
        r.close()


def stamped(env: bytes, session: int = SESSION) -> bytes:
    return env[:8] + struct.pack("<Q", session) + env[16:]


def test_the_uplink_forwards_ring_and_socket_envelopes_in_the_programs_order(ring) -> None:
    up = Uplink(ring)
    try:
        sent, at = [], 0
        for i in range(6):
            env = batch(i, 70000 if i % 2 == 0 else 100)
            sent.append(env)
            if len(env) < lib.GL_RING_MIN:
                up.program.sendall(env)
                continue
            if at % RING + len(env) > RING:
                at += RING - at % RING
            ring.put(at, env)
            up.program.sendall(note(at, len(env)))
            at += len(env)
        got = up.forwarded(len(sent))
        assert up.end() == lib.GL_PUMP_END
    finally:
        up.close()
    assert got == [stamped(e) for e in sent]
    assert ring.released == at  # everything copied out was released
    assert up.journal.native != 0 and int(up.pump.batches) == 6


def bad_notes() -> list[tuple[str, int, int, bytes | None]]:
    env = batch(0, 70000)
    n = len(env)
    return [
        ("past the end of the ring", RING - 100, n, env),
        ("shorter than a header", 0, 8, env),
        ("longer than the ring", 0, RING + 1, env),
        ("more than a lap ahead", RING + 64, n, env),
        ("not a batch", 0, n, env[:4] + bytes([2]) + env[5:]),
        ("a length the envelope does not have", 0, n - 8, env),
        ("flags set", 0, n, env[:5] + bytes([1]) + env[6:]),
    ]


@pytest.mark.parametrize("why, at, n, env", bad_notes(), ids=[b[0] for b in bad_notes()])
def test_a_note_no_interposer_writes_ends_the_session(ring, why, at, n, env) -> None:
    up = Uplink(ring)
    try:
        ring.put(at % RING, env[:max(0, min(len(env), RING - at % RING))])
        up.program.sendall(note(at, n))
        up.thread.join(TIMEOUT)
        assert up.codes == [lib.GL_PUMP_E_RING], why
        assert "hand-over note" in str(uplink_error(up.pump, up.codes[0]))
    finally:
        up.close()


def test_a_note_behind_the_last_one_is_refused(ring) -> None:
    env = batch(1, 70000)
    up = Uplink(ring)
    try:
        ring.put(0, env)
        up.program.sendall(note(0, len(env)) + note(0, len(env)))
        assert up.forwarded(1) == [stamped(env)]
        up.thread.join(TIMEOUT)
        assert up.codes == [lib.GL_PUMP_E_RING]
    finally:
        up.close()


@pytest.mark.parametrize("body", [b"", b"\0" * 8, b"\0" * 24])
def test_a_note_of_the_wrong_size_or_without_a_ring_is_refused(ring, body) -> None:
    up = Uplink(None if not body else ring)
    try:
        up.program.sendall(envelope.pack_header(lib.GL_ENV_RING, 0, len(body)) + body
                           if body else note(0, 100))
        up.thread.join(TIMEOUT)
        assert up.codes == [lib.GL_PUMP_E_RING]
    finally:
        up.close()


@settings(max_examples=60, deadline=None)
@given(at=st.integers(0, 3 * RING), n=st.integers(0, RING + 64),
       junk=st.binary(min_size=16, max_size=64), as_batch=st.booleans())
def test_any_note_over_any_ring_bytes_is_forwarded_whole_or_refused(at, n, junk, as_batch):
    """Whatever note and ring bytes a program writes, the uplink forwards exactly
    the envelope the ring held (a whole BATCH) or ends the session; it never
    reads outside the ring."""
    ring = Ring()
    up = Uplink(ring)
    try:
        env = junk
        if as_batch:  # a whole batch, the note naming exactly it
            env = batch(2, n % (RING // 2))
            n = len(env)
        start = at % RING
        ring.put(start, env[:max(0, RING - start)])
        up.program.sendall(note(at, n))
        up.program.shutdown(socket.SHUT_WR)
        up.thread.join(TIMEOUT)
        code = up.codes[0]
        assert code in (lib.GL_PUMP_E_RING, lib.GL_PUMP_E_SIZE, lib.GL_PUMP_END)
        if code == lib.GL_PUMP_END:
            assert up.server.recv() == stamped(ring.at(at, n))
        else:
            assert not as_batch or at % RING + n > RING or at >= RING
    finally:
        up.close()
        ring.close()
