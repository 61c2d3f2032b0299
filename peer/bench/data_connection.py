"""``bench wire``'s session data connection figures: bulk through a
``SealedStream`` child to child beside raw TCP child to child, and small-frame
round trips beside raw TCP ping-pong.

The bulk transfers run between two child processes on loopback, so each side
has a process of its own and the benchmark process only times them. Run as a
child (``python -m gleam.peer.bench.data_connection``), with the two 32-byte
stream keys as one hex line on stdin (never on the command line):

* ``sink N CHUNK``: listen on 127.0.0.1, print the port, receive N plaintext
  bytes in frames of up to CHUNK, then answer one sealed byte.
* ``source PORT N CHUNK``: connect, push N bytes in CHUNK-byte frames, wait for
  the answer, print the seconds that took.
* ``echo``: listen, print the port, send every frame back until end of stream
  (the far side of ``round_trips``).

The raw reference pairs ``tcp_reference``'s ``sink`` and ``source`` modes.
Each transfer also reports the CPU seconds each child spent (from wait4), which
is what says where the time goes on a machine with few cores.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from gleam.peer.cuda.wire.stream import TO_CLIENT, TO_SERVER, SealedStream


@dataclass(frozen=True)
class Transfer:
    """One child-to-child transfer: its rate and each side's CPU seconds."""

    bytes_per_s: float
    sender_cpu_s: float
    receiver_cpu_s: float


def _spawn(module: str, args: list[str], stdin: bytes | None) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )
    if stdin is not None:
        assert proc.stdin is not None
        proc.stdin.write(stdin)
        proc.stdin.close()
    return proc


def _reap(proc: subprocess.Popen[bytes]) -> float:
    """Waits for a child and returns the CPU seconds it used. Its stdout at end
    of file means it is exiting, so the wait that follows is short."""
    assert proc.stdout is not None
    proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"bench child {proc.args!r} exited with {proc.returncode}")
    return float(usage.ru_utime + usage.ru_stime)


def _transfer(
    module: str, sink_args: list[str], source_args: Callable[[str], list[str]],
    stdin: bytes | None, total: int,
) -> Transfer:
    """Starts the sink, then the source with the sink's port; times the source."""
    sink = _spawn(module, sink_args, stdin)
    assert sink.stdout is not None
    port = sink.stdout.readline().decode().strip()
    source = _spawn(module, source_args(port), stdin)
    assert source.stdout is not None
    seconds = float(source.stdout.readline().decode())
    return Transfer(total / seconds, _reap(source), _reap(sink))


def sealed(total: int, chunk: int) -> Transfer:
    """``total`` bytes through a SealedStream in ``chunk``-byte frames."""
    keys = (secrets.token_bytes(32).hex() + secrets.token_bytes(32).hex() + "\n").encode()
    return _transfer(
        __name__, ["sink", str(total), str(chunk)],
        lambda port: ["source", port, str(total), str(chunk)], keys, total,
    )


def raw(total: int, chunk: int) -> Transfer:
    """The same bytes through plain sockets (tcp_reference), also child to child."""
    return _transfer(
        "gleam.peer.bench.tcp_reference", ["sink", str(total)],
        lambda port: ["source", "127.0.0.1", port, str(total), str(chunk)], None, total,
    )


def round_trips(count: int, size: int = 8) -> float:
    """Sequential round trips per second of ``size``-byte frames to an echo
    child: a waiting call's floor on the data connection."""
    up, down = secrets.token_bytes(32), secrets.token_bytes(32)
    echo = _spawn(__name__, ["echo"], (up.hex() + down.hex() + "\n").encode())
    assert echo.stdout is not None
    port = int(echo.stdout.readline())
    msg = bytes(size)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with SealedStream(sock.fileno(), up, TO_SERVER, down, TO_CLIENT, 1 << 16) as stream:
            start = time.perf_counter()
            for _ in range(count):
                stream.send(msg)
                if stream.recv() is None:
                    raise ConnectionError("the echo child closed early")
            seconds = time.perf_counter() - start
    _reap(echo)
    return count / seconds


def _keys() -> tuple[bytes, bytes]:
    line = sys.stdin.readline().strip()
    return bytes.fromhex(line[:64]), bytes.fromhex(line[64:128])


def _accept() -> socket.socket:
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    listener.settimeout(60)
    conn, _ = listener.accept()
    listener.close()
    conn.settimeout(None)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def _echo() -> None:
    up, down = _keys()
    conn = _accept()
    with conn, SealedStream(conn.fileno(), down, TO_CLIENT, up, TO_SERVER, 1 << 16) as stream:
        while (frame := stream.recv_view()) is not None:
            stream.send(frame)


def _sink(total: int, chunk: int) -> None:
    up, down = _keys()
    conn = _accept()
    with conn, SealedStream(conn.fileno(), down, TO_CLIENT, up, TO_SERVER, chunk) as stream:
        got = 0
        while got < total:
            view = stream.recv_view()
            if view is None:
                raise ConnectionError("the source closed early")
            got += len(view)
        stream.send(b"k")


def _source(port: int, total: int, chunk: int) -> None:
    up, down = _keys()
    payload = memoryview(bytes(chunk))
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with SealedStream(sock.fileno(), up, TO_SERVER, down, TO_CLIENT, chunk) as stream:
            start = time.perf_counter()
            sent = 0
            while sent < total:
                n = min(chunk, total - sent)
                stream.send(payload[:n])
                sent += n
            if stream.recv() != b"k":
                raise ConnectionError("the sink did not confirm")
            print(time.perf_counter() - start, flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "sink":
        _sink(int(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1] == "echo":
        _echo()
    else:
        _source(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
