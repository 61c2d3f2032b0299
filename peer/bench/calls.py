"""``gleam-peer bench calls``: the forwarded call path, end to end, beside raw sockets.

Three figures, each beside its reference measured in the same run:

* one-way call rate — an empty kernel launched N times by a C program through
  the interposer → local agent → remote agent → host backend, then one
  synchronize; reference: the published fire-and-forget costs of remoting
  systems (7.3 µs per call, 3.2 µs per launch), and the target of 1 M calls/s.
* waiting round trip — ``cuMemcpyDtoH`` of 4 bytes, beside a raw TCP ping-pong
  plus a raw Unix-socket ping-pong (C, blocking, same machine, same run).
* host-to-device throughput — 1 GiB in 64 MiB ``cuMemcpyHtoD`` calls between two
  network namespaces whose link is shaped with htb to 10 Gbit/s, encryption on,
  beside raw TCP over the same link (needs root; ``--no-lab`` skips it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gleam.peer.bench.lab_agents import start_linked_pair
from gleam.peer.bench.report import Row, positive_int, print_report
from gleam.peer.bench.workdir import example_workdir
from gleam.peer.cuda.examples import KERNELS_PTX
from gleam.peer.localmesh import LocalMesh

HELP = "forwarded CUDA calls: one-way rate, waiting round trip, H2D throughput"
DESCRIPTION = __doc__

PUBLISHED_CALL_RATE = 1 / 7.3e-6  # fire-and-forget call, published
TARGET_CALL_RATE = 1_000_000
LAB_RATE_MBIT = 10_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
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


def _raw_rtt(count: int) -> tuple[float, float]:
    from gleam.peer.nativelib import lib

    tcp = float(lib.gl_pingpong_rtt(0, count, 8))
    unix = float(lib.gl_pingpong_rtt(1, count, 8))
    if tcp <= 0 or unix <= 0:
        raise RuntimeError("raw ping-pong reference failed")
    return tcp, unix


def _loopback_figures(args: argparse.Namespace, binary: Path, root: Path) -> list[Row]:
    mesh = LocalMesh(root)
    try:
        client, _server = mesh.serving_pair()
        _run_example(binary, client.state.path, ["oneway", "1000"])  # warm the path
        oneway = _run_example(binary, client.state.path, ["oneway", str(args.calls)])
        waiting = _run_example(binary, client.state.path, ["waiting", str(args.waits)])
    finally:
        mesh.close()
    tcp, unix = _raw_rtt(args.waits)
    rate = oneway["calls"] / oneway["seconds"]
    rtt_us = waiting["seconds"] / waiting["calls"] * 1e6
    reference_us = (tcp + unix) * 1e6
    return [
        Row("one-way calls (empty launch)", rate, "published fire-and-forget", PUBLISHED_CALL_RATE,
            "calls/s", f">= {TARGET_CALL_RATE:,} calls/s", rate >= TARGET_CALL_RATE),
        Row("waiting call round trip (4 B DtoH)", rtt_us, "raw TCP + Unix ping-pong",
            reference_us, "µs", "<= 1.5x reference", rtt_us <= 1.5 * reference_us),
    ]


# The raw reference runs in the lab's namespaces as processes of its own.
TCP_REFERENCE = [sys.executable, "-m", "gleam.peer.bench.tcp_reference"]


def _lab_figure(args: argparse.Namespace, binary: Path, root: Path) -> Row:
    from gleam.peer.lab.netns import NetLab

    total = args.h2d_mib << 20
    chunk = args.chunk_mib << 20
    with NetLab() as lab:
        a, b = lab.add_host("client"), lab.add_host("server")
        lab.shape(a, LAB_RATE_MBIT)
        lab.shape(b, LAB_RATE_MBIT)
        # The reference: raw TCP over the same shaped link, same chunking.
        sink = b.start([*TCP_REFERENCE, "sink", str(total), b.address],
                       stdout=subprocess.PIPE, text=True)
        port = sink.stdout.readline().strip()  # type: ignore[union-attr]
        raw = a.run([*TCP_REFERENCE, "source", b.address, port, str(total), str(chunk)],
                    capture_output=True, text=True, check=True)
        raw_seconds = float(raw.stdout.strip())
        sink.wait(30)
        client = start_linked_pair(a, b, root)
        result = _run_example(binary, client.path, ["h2d", str(total), str(chunk)],
                              netns=a.netns)
    value = result["bytes"] / result["seconds"] / 1e6
    reference = total / raw_seconds / 1e6
    return Row("host-to-device 1 GiB / 64 MiB copies (10 Gbit/s link)", value,
               "raw TCP, same link", reference, "MB/s", ">= 80% of reference",
               value >= 0.8 * reference)


def main(args: argparse.Namespace) -> int:
    with example_workdir("calls", "bench_calls") as (root, binary):
        if binary is None:
            return 2
        started = time.time()
        rows = _loopback_figures(args, binary, root / "loopback")
        notes: dict[str, Any] = {}
        if args.no_lab:
            notes["lab"] = "skipped (--no-lab)"
        else:
            from gleam.peer.lab.netns import lab_unavailable_reason

            reason = lab_unavailable_reason()
            if reason is None:
                rows.append(_lab_figure(args, binary, root / "lab"))
            else:
                notes["lab"] = f"skipped: {reason}"
        meta = {"calls": args.calls, "waits": args.waits, "h2d_mib": args.h2d_mib,
                "chunk_mib": args.chunk_mib, "seconds": round(time.time() - started, 1),
                "published_launch_rate": 1 / 3.2e-6, **notes}
        print_report("calls", rows, meta, as_json=args.json)
    return 0
