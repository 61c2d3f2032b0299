"""``gleam-peer bench calls``: the forwarded call path, end to end, beside raw sockets.

Three figures, each beside its reference measured in the same run:

* one-way call rate — an empty kernel launched N times by a C program through
  the interposer → local agent → remote agent → host backend, then one
  synchronize; reference: the published fire-and-forget costs of remoting
  systems (7.3 µs per call, 3.2 µs per launch), and the target of 5 M calls/s.
* waiting round trip — ``cuMemcpyDtoH`` of 4 bytes, beside a raw TCP ping-pong
  plus a raw Unix-socket ping-pong: the two crossings the call makes (program ↔
  client agent over a Unix socket, client agent ↔ server agent over TCP), each
  between two processes of its own with a C loop on both sides
  (peer/bench/pingpong.py), placed as the agents are (unpinned).
* host-to-device throughput — 1 GiB in 64 MiB ``cuMemcpyHtoD`` calls between two
  network namespaces whose link is shaped with htb to 10 Gbit/s, encryption on,
  beside raw TCP over the same link (needs root; ``--no-lab`` skips it).

Figures and references run in interleaved rounds (``--rounds``, the order
reversed every other round; peer/bench/rounds.py) and the medians are reported;
the JSON carries every round's values and where each process was allowed to run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gleam.peer.bench import pingpong
from gleam.peer.bench.lab_agents import start_linked_pair
from gleam.peer.bench.report import Row, positive_int, print_report
from gleam.peer.bench.rounds import interleave
from gleam.peer.bench.workdir import example_workdir
from gleam.peer.cuda.examples import KERNELS_PTX
from gleam.peer.localmesh import LocalMesh

HELP = "forwarded CUDA calls: one-way rate, waiting round trip, H2D throughput"
DESCRIPTION = __doc__

PUBLISHED_CALL_RATE = 1 / 7.3e-6  # fire-and-forget call, published
TARGET_CALL_RATE = 5_000_000
WAITING_TARGET = 1.5  # at most this many times the raw ping-pongs
LAB_RATE_MBIT = 10_000
LAB_TARGET = 0.9  # at least this share of raw TCP over the same link
# How long the agent may take to record a finished copy's session.
SESSION_END_WAIT = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=positive_int, default=5,
                        help="interleaved rounds of each figure and its reference; the medians "
                             "are reported (default 5)")
    parser.add_argument("--calls", type=positive_int, default=2_000_000,
                        help="empty-kernel launches for the one-way rate (default 2,000,000)")
    parser.add_argument("--waits", type=positive_int, default=5_000,
                        help="4-byte device-to-host copies for the round trip (default 5,000)")
    parser.add_argument("--h2d-mib", type=positive_int, default=1024,
                        help="MiB copied host to device in the lab (default 1024)")
    parser.add_argument("--chunk-mib", type=positive_int, default=64,
                        help="MiB per cuMemcpyHtoD call (default 64)")
    parser.add_argument("--no-lab", action="store_true",
                        help="skip the throughput figure (it needs root for network namespaces)")


def _run_example(binary: Path, state: Path, args: list[str], netns: str | None = None,
                 timeout: float = 600) -> dict[str, Any]:
    """Run a bench example through ``gleam-peer run`` and return its final JSON line."""
    cmd = [sys.executable, "-m", "gleam.peer", "run", "--state-dir", str(state), "--",
           str(binary), *args]
    if netns is not None:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    env = {**os.environ, "GLEAM_EXAMPLE_KERNELS": str(KERNELS_PTX)}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{binary.name} {' '.join(args)} failed ({done.returncode}):\n"
                           f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return json.loads(lines[-1])


def _placement(mesh: LocalMesh) -> dict[str, Any]:
    """Where the processes of the waiting figure may run (nothing is pinned)."""
    return {
        "pinned": False,
        "why": "the agents and the program are not pinned, so neither are the references: "
               "every process may run on any CPU of the bench's set",
        "bench": sorted(os.sched_getaffinity(0)),
        "agents": {a.name: sorted(os.sched_getaffinity(a.process.pid)) for a in mesh.agents},
        "references": {},
    }


def oneway_row(rate: float) -> Row:
    """The one-way call rate (calls/s) beside the published rate, with its target."""
    return Row("one-way calls (empty launch)", rate, "published fire-and-forget",
               PUBLISHED_CALL_RATE, "calls/s", f">= {TARGET_CALL_RATE:,} calls/s",
               rate >= TARGET_CALL_RATE)


def waiting_row(rtt_us: float, reference_us: float) -> Row:
    """The waiting call's round trip (µs) beside the raw TCP + Unix ping-pongs."""
    return Row("waiting call round trip (4 B DtoH)", rtt_us,
               "raw TCP + Unix ping-pong, 2 processes each", reference_us, "µs",
               f"<= {WAITING_TARGET}x reference", rtt_us <= WAITING_TARGET * reference_us)


def _loopback_figures(args: argparse.Namespace, binary: Path,
                      root: Path) -> tuple[list[Row], dict[str, Any]]:
    """The one-way and waiting rows, and the rounds and placement behind them."""
    root.mkdir(parents=True, exist_ok=True)
    mesh = LocalMesh(root)
    try:
        client, _server = mesh.serving_pair()
        state = client.state.path
        placement = _placement(mesh)
        _run_example(binary, state, ["oneway", "1000"])  # warm the path

        def oneway() -> float:
            done = _run_example(binary, state, ["oneway", str(args.calls)])
            return float(done["calls"] / done["seconds"])

        def waiting() -> float:
            done = _run_example(binary, state, ["waiting", str(args.waits)])
            return float(done["seconds"] / done["calls"] * 1e6)

        def reference(kind: str) -> Callable[[], float]:
            def measure() -> float:
                # Each reference is two fresh processes, like each figure's fresh program.
                result = pingpong.measure(kind, args.waits, root)
                placement["references"][kind] = {"echo": list(result.echo_affinity),
                                                 "ping": list(result.ping_affinity)}
                return result.seconds * 1e6
            return measure

        rounds = interleave(args.rounds, [
            ("oneway_calls_per_s", oneway), ("waiting_us", waiting),
            ("tcp_pingpong_us", reference("tcp")), ("unix_pingpong_us", reference("unix")),
            ("relay_chain_us", lambda: pingpong.measure_chain(args.waits, root) * 1e6),
        ])
    finally:
        mesh.close()
    # The reference of a round is its own TCP plus Unix ping-pong: both crossings the
    # waiting call makes, measured beside it.
    rounds.values["reference_us"] = [
        tcp + unix for tcp, unix in zip(rounds.values["tcp_pingpong_us"],
                                        rounds.values["unix_pingpong_us"], strict=True)]
    rtt_us = rounds.median("waiting_us")
    rows = [
        oneway_row(rounds.median("oneway_calls_per_s")),
        waiting_row(rtt_us, rounds.median("reference_us")),
        # What the path itself costs: the same processes, threads and wake-ups with
        # nothing of gleam (no crypto, no journal, no executor). Informative: it
        # shows how much of the first reference's gap is the chain's, not gleam's.
        Row("waiting call round trip, beside the raw relay chain", rtt_us,
            "raw relay chain (program → relay → echo, 3 processes)",
            rounds.median("relay_chain_us"), "µs", "informative", None),
    ]
    return rows, {"rounds": rounds.as_dict(), "placement": placement}


# The raw reference runs in the lab's namespaces as processes of its own.
TCP_REFERENCE = [sys.executable, "-m", "gleam.peer.bench.tcp_reference"]


def _raw_tcp_mb_s(client: Any, server: Any, total: int, chunk: int) -> float:
    """Raw TCP from the client's namespace to the server's, same link and chunking."""
    sink = server.start([*TCP_REFERENCE, "sink", str(total), server.address],
                        stdout=subprocess.PIPE, text=True)
    port = sink.stdout.readline().strip()
    raw = client.run([*TCP_REFERENCE, "source", server.address, port, str(total), str(chunk)],
                     capture_output=True, text=True, check=True)
    sink.wait(30)
    sink.stdout.close()
    return total / float(raw.stdout.split()[0]) / 1e6  # its first line: the seconds


def _finished_sessions(control_socket: Path) -> list[dict[str, Any]]:
    from gleam.peer import control

    return list(control.request(control_socket, "cuda_sessions")["finished"])


def _session_bytes_sent(control_socket: Path, since: float, wait: float = SESSION_END_WAIT) -> int:
    """Bytes sent by the one session that started at or after ``since`` (wall clock,
    the agent's own). The agent records a session's end a moment after its program
    exits, so the row is waited for; matching on the start, not on a count of rows,
    keeps an earlier session recorded late from standing in for this one (a round
    once counted its warm-up's bytes)."""
    deadline = time.monotonic() + wait
    while True:
        mine = [r for r in _finished_sessions(control_socket) if r["started"] >= since]
        if mine or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    if len(mine) != 1:
        raise RuntimeError(f"expected the copy's one session to finish within {wait:.0f} s, "
                           f"found {len(mine)}")
    return int(mine[0]["bytes_to_server"])


def _size(mib: int) -> str:
    return f"{mib >> 10} GiB" if mib % 1024 == 0 else f"{mib} MiB"


def _lab_figure(args: argparse.Namespace, binary: Path, root: Path) -> tuple[Row, dict[str, Any]]:
    """The host-to-device row over the shaped link, and its rounds."""
    from gleam.peer.lab.netns import NetLab

    total = args.h2d_mib << 20
    chunk = args.chunk_mib << 20
    with NetLab() as lab:
        a, b = lab.add_host("client"), lab.add_host("server")
        lab.shape(a, LAB_RATE_MBIT)
        lab.shape(b, LAB_RATE_MBIT)
        client = start_linked_pair(a, b, root)
        # Every run copies other bytes (its own seed): the server's content-addressed
        # cache would otherwise serve a later round from what an earlier one sent.
        seeds = itertools.count(1)
        sent: list[int] = []
        # One untimed copy first, as on loopback: the rounds measure a warm path, not
        # the first session's setup (each raw round still pays its own TCP slow start).
        _run_example(binary, client.path, ["h2d", str(chunk), str(chunk), str(next(seeds))],
                     netns=a.netns)

        def gleam_h2d() -> float:
            since = time.time()
            done = _run_example(binary, client.path,
                                ["h2d", str(total), str(chunk), str(next(seeds))], netns=a.netns)
            sent.append(_session_bytes_sent(client.control_socket, since))
            return float(done["bytes"] / done["seconds"] / 1e6)

        rounds = interleave(args.rounds, [
            ("h2d_mb_s", gleam_h2d), ("raw_tcp_mb_s", lambda: _raw_tcp_mb_s(a, b, total, chunk)),
        ])
    value, reference = rounds.median("h2d_mb_s"), rounds.median("raw_tcp_mb_s")
    row = Row(f"host-to-device {_size(args.h2d_mib)} / {_size(args.chunk_mib)} copies "
              f"({LAB_RATE_MBIT // 1000} Gbit/s link)", value, "raw TCP, same link", reference,
              "MB/s", f">= {LAB_TARGET:.0%} of reference", value >= LAB_TARGET * reference)
    # Each round's bytes on the link: at least the copy, so no round was a cache hit.
    return row, {"rounds": rounds.as_dict(), "bytes_to_server": sent, "pinned": False}


def main(args: argparse.Namespace) -> int:
    with example_workdir("calls", "bench_calls") as (root, binary):
        if binary is None:
            return 2
        started = time.time()
        rows, loopback = _loopback_figures(args, binary, root / "loopback")
        notes: dict[str, Any] = {}
        if args.no_lab:
            notes["lab"] = "skipped (--no-lab)"
        else:
            from gleam.peer.lab.netns import lab_unavailable_reason

            reason = lab_unavailable_reason()
            if reason is None:
                row, notes["lab"] = _lab_figure(args, binary, root / "lab")
                rows.append(row)
            else:
                notes["lab"] = f"skipped: {reason}"
        meta = {"calls": args.calls, "waits": args.waits, "h2d_mib": args.h2d_mib,
                "chunk_mib": args.chunk_mib, "rounds": args.rounds, "statistic": "median",
                "seconds": round(time.time() - started, 1),
                "published_launch_rate": 1 / 3.2e-6, "loopback": loopback, **notes}
        print_report("calls", rows, meta, as_json=args.json)
    return 0
