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

import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console

from gleam.peer.bench import tcp_reference
from gleam.peer.bench.report import Row, print_report
from gleam.peer.localmesh import local_mesh, wait_for

BULK_TARGET = 0.5  # encrypted agent path ≥ 50% of raw TCP


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


def run_wire_bench(*, total_bytes: int, chunk: int, pings: int, as_json: bool) -> int:
    progress = Console(stderr=True)
    with tempfile.TemporaryDirectory(prefix="gleam-bench-") as tmp, local_mesh(Path(tmp)) as mesh:
        key = secrets.token_bytes(32)
        progress.log("starting two agents on loopback")
        b = mesh.start("bench-b", mesh_key=key)
        a = mesh.start("bench-a", mesh_key=key, peers=[f"127.0.0.1:{b.port}"])
        b_id = b.node_id
        wait_for(lambda: b_id in a.authenticated_peers(), 15, "the agents to authenticate")

        progress.log(f"control round trips: {pings} through the agents, {pings} raw")
        agent_ping = a.request("bench_ping", {"peer": b_id, "count": pings}, timeout=600)
        raw_rtt = _raw_pingpong(pings)
        progress.log(f"bulk: {total_bytes / 2**20:,.0f} MiB through the agents, then raw TCP")
        agent_bulk = a.request(
            "bench_send", {"peer": b_id, "bytes": total_bytes, "chunk": chunk}, timeout=600
        )
        raw_bulk = _raw_throughput(total_bytes, chunk)

    agent_rtt = agent_ping["count"] / agent_ping["seconds"]
    agent_bps = agent_bulk["bytes"] / agent_bulk["seconds"]
    ratio = agent_bps / raw_bulk
    rows = [
        Row("control round trips", agent_rtt, "raw TCP ping-pong", raw_rtt, "/s"),
        Row(
            "bulk data plane (AES-256-GCM)", agent_bps / 1e6, "raw TCP", raw_bulk / 1e6, "MB/s",
            target=f">= {BULK_TARGET:.0%} of raw", met=ratio >= BULK_TARGET,
        ),
    ]
    meta = {
        "params": {"bytes": total_bytes, "chunk": chunk, "pings": pings, "link": "loopback"},
        "target_met": ratio >= BULK_TARGET,
    }
    print_report("wire", rows, meta, as_json=as_json)
    return 0
