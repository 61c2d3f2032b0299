"""Raw TCP references for the wire benchmark: plain blocking sockets, no framing.

Run as a child process (``python -m gleam.peer.bench.tcp_reference``) so the
reference, like the agents, gets a process and a core of its own. It listens
on 127.0.0.1 (or the address given after N), prints its port, then serves one
connection:

* ``sink N [HOST]``: read N bytes into a reused buffer, answer one byte, then print
  the CPU seconds its receiving took (``bench cpu``'s reference).
* ``echo``: answer every 8-byte message with the same 8 bytes until EOF.

``source HOST PORT N CHUNK`` is the sending side as a process of its own (for a
network namespace other than the benchmark's): it prints the seconds
``measure_throughput`` took, then on a second line the CPU seconds it took.
"""

from __future__ import annotations

import socket
import sys
import time

BUFFER = 1 << 20


def _serve(mode: str, total: int, host: str = "127.0.0.1") -> None:
    listener = socket.create_server((host, 0))
    print(listener.getsockname()[1], flush=True)
    listener.settimeout(60)
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with conn:
        if mode == "sink":
            start = time.process_time()
            buf = bytearray(BUFFER)
            view = memoryview(buf)
            got = 0
            while got < total:
                n = conn.recv_into(view, min(BUFFER, total - got))
                if n == 0:
                    return
                got += n
            conn.sendall(b"k")
            print(time.process_time() - start, flush=True)
        else:
            while msg := conn.recv(8):
                conn.sendall(msg)


def measure_throughput(port: int, total: int, chunk: int, host: str = "127.0.0.1") -> float:
    """Seconds to push ``total`` bytes to a sink and hear it got them all."""
    payload = bytes(chunk)
    with socket.create_connection((host, port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = time.perf_counter()
        sent = 0
        while sent < total:
            piece = payload if total - sent >= chunk else payload[: total - sent]
            sock.sendall(piece)
            sent += len(piece)
        sock.recv(1)
        return time.perf_counter() - start


def measure_pingpong(port: int, count: int) -> float:
    """Seconds for ``count`` sequential 8-byte round trips."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        msg = b"pingpong"
        start = time.perf_counter()
        for _ in range(count):
            sock.sendall(msg)
            got = b""
            while len(got) < 8:
                part = sock.recv(8 - len(got))
                if not part:
                    raise ConnectionError("echo reference closed early")
                got += part
        return time.perf_counter() - start


if __name__ == "__main__":
    if sys.argv[1] == "source":
        host, port, total, chunk = sys.argv[2], *map(int, sys.argv[3:6])
        start = time.process_time()
        print(measure_throughput(port, total, chunk, host))
        print(time.process_time() - start)
    else:
        _serve(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0,
               *(sys.argv[3:4] or ["127.0.0.1"]))
