"""The session data connection's sealed stream (cffi_build/src/wire/dpstream.c),
driven through peer/cuda/wire/stream.py over real sockets. Frames forged, replayed
and mangled come from the reference sealer in tests/dpstream_frames.py."""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from gleam.peer.cuda.wire.stream import (
    E_AUTH,
    E_CLOSED,
    E_IO,
    E_TOO_BIG,
    E_TRUNCATED,
    TO_CLIENT,
    TO_SERVER,
    SealedStream,
    StreamError,
    crypto_status,
)
from gleam.peer.nativelib import ffi, lib
from tests.dpstream_frames import open_frame, seal, split

MAX_FRAME = (1 << 20) + (64 << 10)


def socketpair_tcp() -> tuple[socket.socket, socket.socket]:
    """A connected loopback TCP pair (the data connection's real transport)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    return client, server


def recv_timeout(sock: socket.socket, seconds: int) -> None:
    """A kernel receive timeout on a blocking socket: a stream that waits for
    bytes that never come fails with E_IO instead of hanging the test."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", seconds, 0))


@contextmanager
def stream_pair(
    tcp: bool = False, max_frame: int = MAX_FRAME
) -> Iterator[tuple[SealedStream, SealedStream, socket.socket, socket.socket]]:
    a, b = socketpair_tcp() if tcp else socket.socketpair()
    up, down = secrets.token_bytes(32), secrets.token_bytes(32)
    client = SealedStream(a.fileno(), up, TO_SERVER, down, TO_CLIENT, max_frame)
    server = SealedStream(b.fileno(), down, TO_CLIENT, up, TO_SERVER, max_frame)
    try:
        yield client, server, a, b
    finally:
        client.close()
        server.close()
        a.close()
        b.close()


@contextmanager
def receiver(
    key: bytes, max_frame: int = MAX_FRAME
) -> Iterator[tuple[SealedStream, socket.socket]]:
    """A server-side stream expecting frames sealed with ``key`` (TO_SERVER),
    and the raw socket a test writes its own bytes into."""
    raw, b = socket.socketpair()
    recv_timeout(b, 10)
    s = SealedStream(b.fileno(), secrets.token_bytes(32), TO_CLIENT, key, TO_SERVER, max_frame)
    try:
        yield s, raw
    finally:
        s.close()
        raw.close()
        b.close()


def error_of(call: Callable[[], object]) -> int:
    with pytest.raises(StreamError) as e:
        call()
    return e.value.code


# The syscall a thread is blocked in, as /proc/<tid>/syscall numbers it.
BLOCKING_CALLS = {"x86_64": {"recv": 45, "send": 44}, "aarch64": {"recv": 207, "send": 206}}


def wait_blocked(thread: threading.Thread, call: str) -> None:
    """Waits (with a deadline) until ``thread`` sleeps inside the stream's
    recv(2) or send(2), not merely on the GIL or before the call."""
    want = BLOCKING_CALLS.get(os.uname().machine, {}).get(call)
    task = f"/proc/self/task/{thread.native_id}"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(f"{task}/stat") as f:
            sleeping = f.read().rsplit(")", 1)[1].split()[0] == "S"
        with open(f"{task}/syscall") as f:
            number = f.read().split()[0]
        if sleeping and (want is None or number == str(want)):
            return
        time.sleep(0.001)  # polling a condition, with a deadline
    raise AssertionError(f"the thread never blocked in {call}")


def test_libcrypto_is_usable() -> None:
    assert crypto_status() is None


def test_sha256_is_libcryptos() -> None:
    data = os.urandom(1000)
    out = ffi.new("uint8_t[32]")
    assert lib.gl_sha256(data, len(data), out) == 0
    assert bytes(out) == hashlib.sha256(data).digest()


@pytest.mark.parametrize("tcp", [False, True], ids=["socketpair", "tcp"])
def test_frames_round_trip_both_ways(tcp: bool) -> None:
    with stream_pair(tcp) as (client, server, _, _):
        client.send(b"hello")
        assert server.recv() == b"hello"
        server.send(b"back")
        assert client.recv() == b"back"
        c, s = client.counters(), server.counters()
        assert (c.frames_sent, c.bytes_sent, c.frames_received, c.bytes_received) == (1, 5, 1, 4)
        assert (s.frames_sent, s.bytes_sent, s.frames_received, s.bytes_received) == (1, 4, 1, 5)


@pytest.mark.parametrize("tcp", [False, True], ids=["socketpair", "tcp"])
def test_many_frames_of_many_sizes_arrive_in_order(tcp: bool) -> None:
    # Around the seal piece (GL_GCM_PIECE) and the open piece (GL_GCM_OPEN_PIECE):
    # a frame of one piece, one byte more (the tag and a byte in a second send), ...
    pieces = [int(lib.GL_GCM_PIECE), int(lib.GL_GCM_OPEN_PIECE), 131072]
    sizes = [1, 2, 15, 16, 17, 4096, 65535, 65536, 300_000, 1, 7]
    sizes += [p + d for p in pieces for d in (-1, 0, 1)]
    frames = [secrets.token_bytes(n) for n in sizes]
    with stream_pair(tcp) as (client, server, _, _):
        # A sender thread, so that a frame larger than the socket's buffers
        # does not block the test against its own unread reply.
        t = threading.Thread(target=lambda: [client.send(f) for f in frames])
        t.start()
        got = [server.recv() for _ in frames]
        t.join()
    assert got == frames


@pytest.mark.parametrize("tcp", [False, True], ids=["socketpair", "tcp"])
def test_a_frame_of_max_frame_bytes_round_trips(tcp: bool) -> None:
    big = secrets.token_bytes(MAX_FRAME)
    with stream_pair(tcp) as (client, server, _, _):
        t = threading.Thread(target=client.sendv, args=([big[:1000], b"", big[1000:]],))
        t.start()
        got = server.recv()
        t.join()
    assert got == big


@pytest.mark.parametrize("max_frame", [1, 17, 4096])
def test_a_stream_of_small_frames_seals_each_whole_frame_in_one_piece(max_frame: int) -> None:
    """The send buffer holds a frame of max_frame bytes (the seal piece is then
    max_frame), its header and its tag: every size up to it round-trips."""
    frames = [secrets.token_bytes(n) for n in sorted({1, max(1, max_frame - 1), max_frame})]
    with stream_pair(max_frame=max_frame) as (client, server, _, _):
        for f in frames:
            client.sendv([f[:1], f[1:]])
            assert server.recv() == f


def test_send_leaves_the_callers_buffer_plaintext() -> None:
    buf = bytearray(secrets.token_bytes(200_000))
    before = bytes(buf)
    with stream_pair() as (client, server, _, _):
        t = threading.Thread(target=client.send, args=(buf,))
        t.start()
        assert server.recv() == before
        t.join()
    assert buf == before


def test_a_view_is_the_frame_until_the_next_recv() -> None:
    with stream_pair() as (client, server, _, _):
        client.send(b"first")
        client.send(b"second")
        view = server.recv_view()
        assert view is not None and bytes(view) == b"first"
        assert server.recv() == b"second"


def test_small_frames_written_together_are_read_ahead_and_split() -> None:
    key = secrets.token_bytes(32)
    frames = [secrets.token_bytes(n) for n in (1, 100, 3, 5000, 16)]
    with receiver(key) as (s, raw):
        raw.sendall(b"".join(seal(key, TO_SERVER, i, f) for i, f in enumerate(frames)))
        raw.shutdown(socket.SHUT_WR)
        assert [s.recv() for _ in frames] == frames
        assert s.recv() is None


# ---- the format, against the reference sealer ------------------------------


def test_a_frame_sealed_in_python_opens_in_c() -> None:
    key = secrets.token_bytes(32)
    with receiver(key) as (s, raw):
        for seq, text in enumerate([b"a", b"from python", os.urandom(200_000)]):
            raw.sendall(seal(key, TO_SERVER, seq, text))
            assert s.recv() == text


def test_a_frame_sealed_in_c_opens_in_python() -> None:
    key = secrets.token_bytes(32)
    a, raw = socket.socketpair()
    texts = [b"x", b"from c", os.urandom(300_000)]
    wire = bytearray()
    with a, raw, SealedStream(a.fileno(), key, TO_CLIENT, os.urandom(32), TO_SERVER, 1 << 20) as s:
        t = threading.Thread(target=lambda: [s.send(x) for x in texts])
        t.start()
        while len(wire) < sum(len(x) + 20 for x in texts):
            wire += raw.recv(1 << 20)
        t.join()
    frames = split(bytes(wire))
    assert [open_frame(key, TO_CLIENT, i, f) for i, f in enumerate(frames)] == texts


def test_the_nonce_names_the_direction() -> None:
    """A frame sealed with the right key but the other direction's nonce (a
    frame reflected back at its sender) does not open."""
    key = secrets.token_bytes(32)
    with receiver(key) as (s, raw):
        raw.sendall(seal(key, TO_CLIENT, 0, b"reflected"))
        assert error_of(s.recv) == E_AUTH


@pytest.mark.parametrize("order", [[0, 0], [1, 0], [0, 2]], ids=["replay", "reorder", "skip"])
def test_a_replayed_reordered_or_dropped_frame_fails(order: list[int]) -> None:
    key = secrets.token_bytes(32)
    frames = [seal(key, TO_SERVER, i, f"frame {i}".encode()) for i in range(3)]
    with receiver(key) as (s, raw):
        raw.sendall(frames[order[0]])
        if order[0] == 0:
            assert s.recv() == b"frame 0"
        else:
            assert error_of(s.recv) == E_AUTH
            return
        raw.sendall(frames[order[1]])
        assert error_of(s.recv) == E_AUTH


# ---- refusals ---------------------------------------------------------------


def test_a_wrong_key_fails_auth_and_the_error_sticks() -> None:
    a, b = socket.socketpair()
    k1, k2 = secrets.token_bytes(32), secrets.token_bytes(32)
    with a, b, SealedStream(a.fileno(), k1, TO_SERVER, k1, TO_CLIENT, 4096) as client, \
            SealedStream(b.fileno(), k2, TO_CLIENT, k2, TO_SERVER, 4096) as server:
        client.send(b"secret")
        client.send(b"more")
        assert error_of(server.recv) == E_AUTH
        # Dead for good, in both directions.
        assert error_of(server.recv) == E_AUTH
        assert error_of(lambda: server.send(b"reply")) == E_AUTH


@pytest.mark.parametrize("where", ["header", "body", "tag"])
def test_a_tampered_byte_fails_auth(where: str) -> None:
    key = secrets.token_bytes(32)
    frame = bytearray(seal(key, TO_SERVER, 0, os.urandom(1000)))
    # Flipping a header bit keeps the length in range (1000 -> 1001).
    frame[{"header": 0, "body": 500, "tag": len(frame) - 1}[where]] ^= 1
    with receiver(key) as (s, raw):
        raw.sendall(frame + os.urandom(1))
        assert error_of(s.recv) == E_AUTH


def test_an_oversize_header_is_refused_before_the_body_arrives() -> None:
    """Only the 4 header bytes are sent: the stream must refuse at once rather
    than wait for (or allocate) 4 GiB; if it waited, the receive timeout would
    turn the wait into E_IO."""
    with receiver(secrets.token_bytes(32), max_frame=1 << 30) as (s, raw):
        raw.sendall(struct.pack("<I", 0xFFFFFFFF))
        assert error_of(s.recv) == E_TOO_BIG
    with receiver(secrets.token_bytes(32), max_frame=4096) as (s, raw):
        raw.sendall(struct.pack("<I", 4097))
        assert error_of(s.recv) == E_TOO_BIG


def test_a_zero_length_frame_is_refused_both_ways() -> None:
    with receiver(secrets.token_bytes(32)) as (s, raw):
        raw.sendall(struct.pack("<I", 0) + bytes(16))
        assert error_of(s.recv) == E_TOO_BIG
    with stream_pair() as (client, _, _, _):
        assert error_of(lambda: client.send(b"")) == E_TOO_BIG


def test_sending_more_than_max_frame_is_refused() -> None:
    with stream_pair(max_frame=100) as (client, _, _, _):
        assert error_of(lambda: client.sendv([bytes(60), bytes(41)])) == E_TOO_BIG


@pytest.mark.parametrize("keep", [2, 4, 500, 1019], ids=["header", "body0", "body", "tag"])
def test_a_connection_closed_inside_a_frame_is_truncated(keep: int) -> None:
    key = secrets.token_bytes(32)
    with receiver(key) as (s, raw):
        raw.sendall(seal(key, TO_SERVER, 0, os.urandom(1000))[:keep])
        raw.shutdown(socket.SHUT_WR)
        assert error_of(s.recv) == E_TRUNCATED


def test_a_clean_end_of_stream_between_frames_is_none() -> None:
    with stream_pair(tcp=True) as (client, server, a, _):
        client.send(b"last")
        a.shutdown(socket.SHUT_WR)
        assert server.recv() == b"last"
        assert server.recv() is None
        assert server.recv() is None


def test_a_receive_timeout_is_an_io_error_with_its_errno() -> None:
    a, b = socket.socketpair()
    recv_timeout(b, 1)
    with a, b, SealedStream(b.fileno(), os.urandom(32), TO_CLIENT, os.urandom(32), TO_SERVER,
                            64) as s, pytest.raises(StreamError) as e:
        s.recv()
    assert e.value.code == E_IO and "EAGAIN" in str(e.value)


def test_bad_arguments_are_refused_at_creation() -> None:
    a, b = socket.socketpair()
    k = os.urandom(32)
    with a, b:
        for args in [(k, TO_SERVER, k, TO_SERVER, 64), (k, TO_SERVER, k, TO_CLIENT, 0),
                     (k, TO_SERVER, k, 7, 64), (k, TO_SERVER, k, TO_CLIENT, (1 << 30) + 1)]:
            with pytest.raises(ValueError, match="cannot start the data connection"):
                SealedStream(a.fileno(), *args)
        with pytest.raises(ValueError, match="32 bytes"):
            SealedStream(a.fileno(), k[:16], TO_SERVER, k, TO_CLIENT, 64)


# ---- threads ----------------------------------------------------------------


def test_shutdown_from_another_thread_wakes_a_blocked_recv() -> None:
    with stream_pair(tcp=True) as (_, server, _, _):
        codes: list[int] = []
        t = threading.Thread(target=lambda: codes.append(error_of(server.recv)))
        t.start()
        wait_blocked(t, "recv")
        server.shutdown()
        t.join(10)
        assert codes == [E_CLOSED]
        assert error_of(lambda: server.send(b"x")) == E_CLOSED


def test_shutdown_from_another_thread_wakes_a_blocked_send() -> None:
    with stream_pair(tcp=True) as (client, _, _, _):
        codes: list[int] = []

        def flood() -> None:
            # Nobody reads: the socket's buffers fill and send blocks.
            codes.append(error_of(lambda: [client.send(bytes(1 << 20)) for _ in range(1000)]))

        t = threading.Thread(target=flood)
        t.start()
        wait_blocked(t, "send")
        client.shutdown()
        t.join(10)
        assert codes == [E_CLOSED]


def test_concurrent_senders_never_interleave_frames() -> None:
    senders, per_sender = 4, 40
    sizes = [1, 700, 70_000, 200_000, 131_100]

    def frame(who: int, i: int) -> bytes:
        n = sizes[(who + i) % len(sizes)]
        return struct.pack("<HH", who, i) + bytes([who]) * n

    with stream_pair(tcp=True) as (client, server, _, _):
        def send_all(who: int) -> None:
            for i in range(per_sender):
                client.send(frame(who, i))

        threads = [threading.Thread(target=send_all, args=(w,)) for w in range(senders)]
        for t in threads:
            t.start()
        next_of = [0] * senders
        for _ in range(senders * per_sender):
            got = server.recv()
            assert got is not None
            who, i = struct.unpack_from("<HH", got)
            assert got == frame(who, i) and i == next_of[who]
            next_of[who] += 1
        for t in threads:
            t.join()
    assert next_of == [per_sender] * senders
