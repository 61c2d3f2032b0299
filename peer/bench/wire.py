"""``gleam-peer bench wire``: the peer protocol against raw TCP, in one run.

Two real agents (child processes, shared mesh key, loopback) and a raw TCP
reference (child process, plain blocking sockets) are measured back to back:

* control round trips per second: sequential ping/pong over the encrypted
  link, beside an 8-byte ping-pong over a plain socket;
* bulk data-plane throughput: sealed batches from agent A to agent B until B
  has decrypted them all, beside the same bytes pushed through a plain
  socket into a sink.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console

from gleam.peer.bench import tcp_reference
from gleam.peer.bench.report import Row, positive_int, print_report
from gleam.peer.localmesh import local_mesh, wait_for

BULK_TARGET = 0.5  # encrypted agent path ≥ 50% of raw TCP

HELP = "control round trips and encrypted bulk throughput"
DESCRIPTION = (
    "Start two agents on loopback and measure control round trips and encrypted "
    "data-plane throughput beside raw TCP, alternating the two for several rounds."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bytes", type=positive_int, default=2 << 30,
                        help="bytes to push per throughput run (default 2 GiB)")
    parser.add_argument("--chunk", type=positive_int, default=1 << 20,
                        help="batch size in bytes (default 1 MiB)")
    parser.add_argument("--pings", type=positive_int, default=5000,
                        help="round trips per latency run (default 5000)")
    parser.add_argument("--rounds", type=positive_int, default=3,
                        help="alternating agent/raw rounds; medians are reported (default 3)")


def main(args: argparse.Namespace) -> int:
    return run_wire_bench(total_bytes=args.bytes, chunk=args.chunk, pings=args.pings,
                          rounds=args.rounds, as_json=args.json)


def _reference(mode: str, total: int = 0) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gleam.peer.bench.tcp_reference", mode, str(total)],
        stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def _raw_throughput(total: int, chunk: int) -> float:
    proc, port = _reference("sink", total)
    try:
        return total / tcp_reference.measure_throughput(port, total, chunk)
    finally:
        proc.wait(30)


def _raw_pingpong(count: int) -> float:
    proc, port = _reference("echo")
    try:
        return count / tcp_reference.measure_pingpong(port, count)
    finally:
        proc.wait(30)


def run_wire_bench(
    *, total_bytes: int, chunk: int, pings: int, rounds: int, as_json: bool
) -> int:
    progress = Console(stderr=True)
    agent_rtt: list[float] = []
    raw_rtt: list[float] = []
    agent_bulk: list[float] = []
    raw_bulk: list[float] = []
    with tempfile.TemporaryDirectory(prefix="gleam-bench-") as tmp, local_mesh(Path(tmp)) as mesh:
        key = secrets.token_bytes(32)
        progress.log("starting two agents on loopback")
        b = mesh.start("bench-b", mesh_key=key)
        a = mesh.start("bench-a", mesh_key=key, peers=[f"127.0.0.1:{b.port}"])
        b_id = b.node_id
        wait_for(lambda: b_id in a.authenticated_peers(), 15, "the agents to authenticate")
        # Alternate agent and reference runs, so a busy moment of the machine
        # hits both alike; the medians are reported.
        for n in range(1, rounds + 1):
            progress.log(f"round {n}/{rounds}: {pings} round trips, "
                         f"{total_bytes / 2**20:,.0f} MiB, each through the agents and raw TCP")
            ping = a.request("bench_ping", {"peer": b_id, "count": pings}, timeout=600)
            agent_rtt.append(ping["count"] / ping["seconds"])
            raw_rtt.append(_raw_pingpong(pings))
            bulk = a.request(
                "bench_send", {"peer": b_id, "bytes": total_bytes, "chunk": chunk}, timeout=600
            )
            agent_bulk.append(bulk["bytes"] / bulk["seconds"])
            raw_bulk.append(_raw_throughput(total_bytes, chunk))

    ratio = statistics.median(agent_bulk) / statistics.median(raw_bulk)
    rows = [
        Row("control round trips", statistics.median(agent_rtt), "raw TCP ping-pong",
            statistics.median(raw_rtt), "/s"),
        Row(
            "bulk data plane (AES-256-GCM)", statistics.median(agent_bulk) / 1e6, "raw TCP",
            statistics.median(raw_bulk) / 1e6, "MB/s",
            target=f">= {BULK_TARGET:.0%} of raw", met=ratio >= BULK_TARGET,
        ),
    ]
    meta = {
        "params": {
            "bytes": total_bytes, "chunk": chunk, "pings": pings, "rounds": rounds,
            "link": "loopback", "statistic": "median of rounds",
        },
        "samples": {
            "agent_round_trips_per_s": agent_rtt, "raw_round_trips_per_s": raw_rtt,
            "agent_bulk_bytes_per_s": agent_bulk, "raw_bulk_bytes_per_s": raw_bulk,
        },
        "target_met": ratio >= BULK_TARGET,
    }
    print_report("wire", rows, meta, as_json=as_json)
    return 0
