"""Raw ping-pong references for ``bench calls``: two processes, a C loop on each side.

A waiting call crosses processes: the program to the client agent over a Unix
socket, the client agent to the server agent over TCP. Its reference is the same
crossings with nothing else on them: 8-byte messages, blocking sockets,
TCP_NODELAY, an echo process and a timing process. Python only sets the sockets
up; every round trip runs in ``gl_pingpong_echo`` / ``gl_pingpong_time``
(cffi_build/src/measure/pingpong.c).

Neither side is pinned to a CPU: the agents and the program are not, so both run
where the kernel's scheduler puts them; each side reports the CPU set it was
allowed, for the bench's JSON.

As children (``python -m gleam.peer.bench.pingpong``):

* ``echo unix PATH`` / ``echo tcp HOST``: listen, print the address to connect to
  (the path, or the port), answer one connection until it closes, then print
  ``{"echoed": N, "cpu_s": C, "affinity": [...]}`` (C: the CPU seconds of its loop).
* ``ping unix PATH COUNT`` / ``ping tcp HOST PORT COUNT``: time COUNT round trips,
  print ``{"seconds": S, "cpu_s": C, "affinity": [...]}`` (S per round trip, C the
  CPU seconds of the whole loop).
* ``relay PATH HOST PORT``: listen on the Unix socket PATH (print it), connect to
  the TCP echo at HOST:PORT, relay one connection both ways (a thread per
  direction, as the client agent has) until it closes.

The *relay chain* (ping → Unix → relay → TCP → echo) is the waiting call's
path with nothing of gleam on it: three processes, four threads, the same
four wake-ups; on a machine with fewer cores than that chain has busy
threads, it costs more than the two ping-pongs added up.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

MSG_SIZE = 8
ACCEPT_TIMEOUT_S = 60
CHILD = [sys.executable, "-m", "gleam.peer.bench.pingpong"]


@dataclass(frozen=True)
class PingPong:
    """One reference measurement: seconds per round trip, where each side ran and the
    CPU seconds each side's loop took (for ``bench cpu``; the interpreter's start is
    not in them)."""

    seconds: float
    echo_affinity: tuple[int, ...]
    ping_affinity: tuple[int, ...]
    echo_cpu_s: float
    ping_cpu_s: float


def _affinity() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def _stream(kind: str) -> socket.socket:
    if kind == "unix":
        return socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _echo(kind: str, where: str) -> None:
    from gleam.peer.nativelib import lib

    listener = _stream(kind)
    with listener:
        if kind == "unix":
            listener.bind(where)
            address = where
        else:
            listener.bind((where, 0))
            address = str(listener.getsockname()[1])
        listener.listen(1)
        print(address, flush=True)
        listener.settimeout(ACCEPT_TIMEOUT_S)
        conn, _ = listener.accept()
    with conn:
        conn.settimeout(None)  # the C loop needs a blocking socket
        if kind == "tcp":
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = time.process_time()
        echoed = int(lib.gl_pingpong_echo(conn.fileno(), MSG_SIZE))
        cpu_s = time.process_time() - start
    if echoed < 0:
        raise SystemExit("ping-pong echo: socket error")
    print(json.dumps({"echoed": echoed, "cpu_s": cpu_s, "affinity": _affinity()}), flush=True)


def _ping(kind: str, address: str | tuple[str, int], count: int) -> None:
    from gleam.peer.nativelib import lib

    with _stream(kind) as sock:
        sock.connect(address)
        start = time.process_time()
        seconds = float(lib.gl_pingpong_time(sock.fileno(), count, MSG_SIZE))
        cpu_s = time.process_time() - start
    if seconds <= 0:
        raise SystemExit("ping-pong: socket error")
    print(json.dumps({"seconds": seconds, "cpu_s": cpu_s, "affinity": _affinity()}), flush=True)


def _relay(path: str, host: str, port: int) -> None:
    from gleam.peer.nativelib import lib

    down = _stream("tcp")
    down.connect((host, port))
    listener = _stream("unix")
    with listener, down:
        listener.bind(path)
        listener.listen(1)
        print(path, flush=True)
        listener.settimeout(ACCEPT_TIMEOUT_S)
        up, _ = listener.accept()
        with up:
            up.settimeout(None)
            relayed = int(lib.gl_pingpong_relay(up.fileno(), down.fileno(), MSG_SIZE))
    if relayed < 0:
        raise SystemExit("ping-pong relay: socket error")


def _started(cmd: list[str], what: str, timeout: float) -> tuple[subprocess.Popen[str], str]:
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    address = child.stdout.readline().strip()
    if not address:
        raise RuntimeError(f"the {what} did not start ({child.wait(timeout)})")
    return child, address


def _stop(child: subprocess.Popen[str]) -> None:
    """The child is gone afterwards: killed if it has not ended (a failure on the way)."""
    if child.poll() is None:
        child.kill()
        child.wait()
    if child.stdout is not None:
        child.stdout.close()


def measure_chain(count: int, workdir: Path, timeout: float = 120) -> float:
    """Seconds per round trip through the relay chain (ping → Unix → relay → TCP → echo)."""
    path = workdir / "relay.sock"
    path.unlink(missing_ok=True)
    echo, port = _started([*CHILD, "echo", "tcp", "127.0.0.1"], "chain's echo", timeout)
    try:
        relay, _ = _started([*CHILD, "relay", str(path), "127.0.0.1", port], "relay", timeout)
        try:
            ping = subprocess.run([*CHILD, "ping", "unix", str(path), str(count)],
                                  capture_output=True, text=True, timeout=timeout)
            if ping.returncode != 0:
                raise RuntimeError(f"the relay chain failed: {ping.stderr.strip()[-500:]}")
            relay.wait(timeout)
        finally:
            _stop(relay)
        echo.wait(timeout)
    finally:
        _stop(echo)
        path.unlink(missing_ok=True)
    return float(json.loads(ping.stdout)["seconds"])


def measure(kind: str, count: int, workdir: Path, timeout: float = 120) -> PingPong:
    """Run one reference: an echo child and a timing child over a Unix socket in
    ``workdir`` (``kind`` "unix") or TCP on 127.0.0.1 (``kind`` "tcp")."""
    if kind not in ("unix", "tcp"):
        raise ValueError(f"unknown ping-pong kind {kind!r}")
    path = workdir / "pingpong.sock"
    path.unlink(missing_ok=True)
    where = str(path) if kind == "unix" else "127.0.0.1"
    echo, address = _started([*CHILD, "echo", kind, where], f"{kind} ping-pong echo", timeout)
    try:
        target = [address] if kind == "unix" else ["127.0.0.1", address]
        ping = subprocess.run([*CHILD, "ping", kind, *target, str(count)],
                              capture_output=True, text=True, timeout=timeout)
        if ping.returncode != 0:
            raise RuntimeError(f"the {kind} ping-pong failed: {ping.stderr.strip()[-500:]}")
        assert echo.stdout is not None
        echoed = json.loads(echo.stdout.readline())
        echo.wait(timeout)
    finally:
        _stop(echo)
        path.unlink(missing_ok=True)
    timed = json.loads(ping.stdout)
    return PingPong(timed["seconds"], tuple(echoed["affinity"]), tuple(timed["affinity"]),
                    echoed["cpu_s"], timed["cpu_s"])


def _main(argv: list[str]) -> None:
    mode, kind = argv[0], argv[1]
    if mode == "relay":
        _relay(argv[1], argv[2], int(argv[3]))
    elif mode == "echo":
        _echo(kind, argv[2])
    elif kind == "unix":
        _ping(kind, argv[2], int(argv[3]))
    else:
        _ping(kind, (argv[2], int(argv[3])), int(argv[4]))


if __name__ == "__main__":
    _main(sys.argv[1:])
