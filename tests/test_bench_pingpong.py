"""The raw ping-pong references of `bench calls`: two processes, C loops (figures are
not asserted)."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from gleam.peer.bench import pingpong


@pytest.mark.parametrize("kind", ["unix", "tcp"])
def test_a_reference_is_timed_between_two_processes(kind: str, tmp_path: Path):
    result = pingpong.measure(kind, 100, tmp_path)
    assert result.seconds > 0
    # Each side's loop reports its CPU time (bench cpu's per-call reference).
    assert result.echo_cpu_s > 0 and result.ping_cpu_s > 0
    # Unpinned: each side could run on any CPU the test may use.
    allowed = tuple(sorted(os.sched_getaffinity(0)))
    assert result.echo_affinity == allowed and result.ping_affinity == allowed
    assert not (tmp_path / "pingpong.sock").exists()


def test_the_c_echo_answers_every_message_until_the_peer_closes():
    from gleam.peer.nativelib import lib

    ours, theirs = socket.socketpair()
    answered: list[int] = []
    echo = threading.Thread(target=lambda: answered.append(
        int(lib.gl_pingpong_echo(theirs.fileno(), 8))))
    echo.start()
    assert lib.gl_pingpong_time(ours.fileno(), 10, 8) > 0
    ours.sendall(b"12345678")
    assert ours.recv(8) == b"12345678"
    ours.close()
    echo.join(30)
    theirs.close()
    assert answered and answered[0] > 10  # the warm-up, the timed ten and ours


def test_the_relay_chain_is_timed_through_three_processes(tmp_path: Path):
    assert pingpong.measure_chain(100, tmp_path) > 0
    assert not (tmp_path / "relay.sock").exists()


def test_the_c_relay_carries_both_ways_until_a_side_closes():
    from gleam.peer.nativelib import lib

    program, relay_up = socket.socketpair()
    relay_down, server = socket.socketpair()
    moved: list[int] = []
    relay = threading.Thread(target=lambda: moved.append(
        int(lib.gl_pingpong_relay(relay_up.fileno(), relay_down.fileno(), 8))))
    relay.start()
    program.sendall(b"request!")
    assert server.recv(8) == b"request!"
    server.sendall(b"reply!!!")
    assert program.recv(8) == b"reply!!!"
    program.close()
    relay.join(30)
    assert not relay.is_alive() and moved == [1]
    assert server.recv(8) == b""  # the close went on down the chain
    for sock in (relay_up, relay_down, server):
        sock.close()


def test_the_c_loops_refuse_bad_arguments():
    from gleam.peer.nativelib import lib

    assert lib.gl_pingpong_time(-1, 10, 8) < 0
    assert lib.gl_pingpong_time(0, 0, 8) < 0
    assert lib.gl_pingpong_echo(0, 1 << 20) < 0
    assert lib.gl_pingpong_relay(-1, 0, 8) < 0


def test_a_closed_echo_is_a_failure_not_a_figure():
    from gleam.peer.nativelib import lib

    ours, theirs = socket.socketpair()
    theirs.close()
    with ours:
        assert lib.gl_pingpong_time(ours.fileno(), 10, 8) < 0
