"""The session data connection's sealed stream (cffi_build/src/dpstream.c),
driven through peer/cuda/stream.py over real sockets."""

from __future__ import annotations

import secrets
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from gleam.peer.cuda.stream import (
    TO_CLIENT,
    TO_SERVER,
    SealedStream,
    crypto_status,
)

MAX_FRAME = (1 << 20) + (64 << 10)


def socketpair_tcp() -> tuple[socket.socket, socket.socket]:
    """A connected loopback TCP pair (the data connection's real transport)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    return client, server


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


def test_libcrypto_is_usable() -> None:
    assert crypto_status() is None


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
    sizes = [1, 2, 15, 16, 17, 4096, 65535, 65536, 131071, 131072, 131073, 300_000, 1, 7]
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
        t = threading.Thread(target=client.sendv, args=([big[:1000], big[1000:]],))
        t.start()
        got = server.recv()
        t.join()
    assert got == big
