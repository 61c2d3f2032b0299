"""``gleam-peer bench cpu``: what each agent's side of a forwarded copy and call costs in CPU.

On a machine with few cores, wall-clock throughput over loopback measures how the
processes share the CPUs more than the path; CPU seconds per GB and per call do not
depend on the link, so they mean the same on a LAN with separate machines. Two
real agent pairs (child processes, real sockets, encryption on; one pair with the
blob cache off, one with it on) serve examples/cuda/bench_calls.c, run with
``GLEAM_BENCH_MARKS=1``: at each end of its timed section it waits while the bench
reads each agent's CPU time from the kernel (the process's CPU clock, every
thread it had, in ns; the user/system split from ``/proc/PID/stat``;
peer/bench/proc_cpu.py). The end reading waits until both
agents are quiet, so work done after the last call returned (the cache's
deferred offers) is counted. Setup, the device buffer's first touch and the
checks after it are not.

Figures, each the median of ``--rounds`` interleaved rounds:

* host-to-device copy, CPU-s per GB of the client agent and of the serving agent,
  cache off and cache on (first sightings: each run copies bytes never sent
  before, so the client hashes and sends everything, claiming each digest, and
  the server keeps it under the claims without hashing it: docs/cache.md,
  "Claims"). The serving agent's figure includes the host backend's memcpy into
  its device memory; a row also shows it less the memcpy reference. Target: each
  side at most 0.35 CPU-s/GB (one core keeps a 10 Gbit/s link full).
  Reference of each: the sum of the parts a lean side must do — raw TCP's side,
  AES-256-GCM's seal (or open), on the serving side the memcpy, and with the
  cache the client's BLAKE3 and the server's second memcpy (the copy it keeps).
* references in the same run, CPU-s per GB of the same bytes: raw TCP sender and
  receiver (two processes, plain blocking sockets), AES-256-GCM seal and open
  (the native core's sealing code, the libcrypto the agents load), BLAKE3
  (the cache's hash; SHA-256 beside it) and memcpy, each in one process
  (peer/bench/cpu_references.py).
* per call: each agent's CPU µs per one-way call (N empty launches, then one
  synchronize) and per waiting call (4-byte cuMemcpyDtoH), beside the CPU µs of
  one side of a raw TCP ping-pong per round trip (C loops, peer/bench/pingpong.py);
  the one-way rate (target >= 5 M calls/s) and the waiting round trip beside the
  raw TCP + Unix ping-pongs (target <= 1.5x), wall clock, as ``bench calls``.
* the program's own CPU (its interposer), read at the same marks: per GB of the
  copy and per call (informative), and the one-way rate the three processes
  allow with a core each (the busiest one's CPU per call sets it), beside the
  rate measured where they share this machine's cores.
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gleam.peer.bench import cpu_references, pingpong
from gleam.peer.bench.calls import oneway_row, waiting_row
from gleam.peer.bench.cpu_program import MarkedRun, run_marked
from gleam.peer.bench.remoting import NO_CACHE_ENV
from gleam.peer.bench.report import Row, positive_int, print_report
from gleam.peer.bench.rounds import Rounds, interleave
from gleam.peer.bench.workdir import example_workdir
from gleam.peer.cache.blobs import digest_kind
from gleam.peer.localmesh import LocalAgent, LocalMesh

HELP = "each agent's CPU cost per GB and per call, beside raw TCP, AES-GCM and SHA-256"
DESCRIPTION = __doc__

TARGET_CPU_S_PER_GB = 0.35
GB = 1e9


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=positive_int, default=3,
                        help="interleaved rounds; the medians are reported (default 3)")
    parser.add_argument("--mib", type=positive_int, default=1024,
                        help="MiB copied host to device per run, and per reference "
                             "(default 1024)")
    parser.add_argument("--chunk-mib", type=positive_int, default=64,
                        help="MiB per cuMemcpyHtoD call (default 64)")
    parser.add_argument("--calls", type=positive_int, default=2_000_000,
                        help="empty-kernel launches per one-way run (default 2,000,000)")
    parser.add_argument("--waits", type=positive_int, default=5_000,
                        help="4-byte device-to-host copies per waiting run, and round trips "
                             "per ping-pong (default 5,000)")


@dataclass
class Pair:
    """A client agent and the host-backend agent it forwards to."""

    mesh: LocalMesh
    client: LocalAgent
    server: LocalAgent

    @property
    def pids(self) -> dict[str, int]:
        return {"client": self.client.process.pid, "server": self.server.process.pid}


def _pair(root: Path, server_env: dict[str, str] | None) -> Pair:
    root.mkdir(parents=True, exist_ok=True)
    mesh = LocalMesh(root)
    try:
        client, server = mesh.serving_pair(server_env=server_env)
    except BaseException:
        mesh.close()
        raise
    return Pair(mesh, client, server)


def _per(run: MarkedRun, amount: float, scale: float) -> dict[str, float]:
    """Each agent's CPU per unit (and its system share), from one marked run."""
    out: dict[str, float] = {}
    for side, used in run.cpu.items():
        out[side] = used.total_s * scale / amount
        out[f"{side}_system"] = used.system_s * scale / amount
    out["settled"] = float(run.settled)
    return out


def _measures(args: argparse.Namespace, binary: Path, root: Path,
              plain: Pair, cached: Pair) -> list[tuple[str, Callable[[], Any]]]:
    total, chunk = args.mib << 20, args.chunk_mib << 20
    # Every copy is of bytes never sent before (its own seed): the cache-on pair
    # then measures first sightings, never a hit.
    seeds = itertools.count(1)

    def h2d(pair: Pair) -> Callable[[], dict[str, float]]:
        def measure() -> dict[str, float]:
            run = run_marked(binary, pair.client, pair.pids,
                             ["h2d", str(total), str(chunk), str(next(seeds))], root)
            return {**_per(run, total, GB), "mb_s": total / run.result["seconds"] / 1e6}
        return measure

    def oneway() -> dict[str, float]:
        run = run_marked(binary, plain.client, plain.pids, ["oneway", str(args.calls)], root)
        return {**_per(run, args.calls, 1e6),
                "calls_per_s": run.result["calls"] / run.result["seconds"]}

    def waiting() -> dict[str, float]:
        run = run_marked(binary, plain.client, plain.pids, ["waiting", str(args.waits)], root)
        return {**_per(run, args.waits, 1e6),
                "us": run.result["seconds"] / run.result["calls"] * 1e6}

    def ping(kind: str) -> Callable[[], dict[str, float]]:
        def measure() -> dict[str, float]:
            done = pingpong.measure(kind, args.waits, root)
            side_us = (done.echo_cpu_s + done.ping_cpu_s) / 2 / args.waits * 1e6
            return {"us": done.seconds * 1e6, "cpu_us_per_side": side_us}
        return measure

    def in_process() -> dict[str, float]:
        return {**cpu_references.aes_gcm(total),
                "digest": cpu_references.content_digest(total),
                "sha256": cpu_references.sha256(total),
                "memcpy": cpu_references.memcpy(total)}

    return [
        ("h2d_nocache", h2d(plain)), ("h2d_cache", h2d(cached)),
        ("raw_tcp", lambda: cpu_references.raw_tcp(total, chunk)), ("cipher", in_process),
        ("oneway", oneway), ("waiting", waiting),
        ("tcp_pingpong", ping("tcp")), ("unix_pingpong", ping("unix")),
    ]


def _size(mib: int) -> str:
    return f"{mib >> 10} GiB" if mib % 1024 == 0 else f"{mib} MiB"


def _copy_rows(r: Rounds, what: str) -> list[Row]:
    m = r.median
    send, recv = m("raw_tcp_sender"), m("raw_tcp_receiver")
    seal, open_, copy = m("cipher_seal"), m("cipher_open"), m("cipher_memcpy")
    digest, sha = m("cipher_digest"), m("cipher_sha256")
    target = f"<= {TARGET_CPU_S_PER_GB} CPU-s/GB"
    unit = "CPU-s/GB"

    def side(name: str, key: str, ref_name: str, ref: float) -> Row:
        value = m(key)
        return Row(f"{name}, {what}", value, ref_name, ref, unit, target,
                   value <= TARGET_CPU_S_PER_GB)

    plain_server = m("h2d_nocache_server")
    return [
        side("client agent, cache off", "h2d_nocache_client", "raw TCP sender + AES-GCM seal",
             send + seal),
        side("serving agent, cache off", "h2d_nocache_server",
             "raw TCP receiver + AES-GCM open + memcpy", recv + open_ + copy),
        side("client agent, cache on (first sightings)", "h2d_cache_client",
             "raw TCP sender + AES-GCM seal + BLAKE3", send + seal + digest),
        side("serving agent, cache on (first sightings)", "h2d_cache_server",
             "raw TCP receiver + AES-GCM open + memcpy x2 (device, kept copy)",
             recv + open_ + 2 * copy),
        Row("program (interposer), cache off", m("h2d_nocache_program"),
            "raw TCP sender", send, unit, "informative"),
        Row("serving agent, cache off, less the memcpy reference", plain_server - copy,
            "raw TCP receiver + AES-GCM open", recv + open_, unit, "informative"),
        Row("raw TCP sender (reference)", send, "raw TCP receiver", recv, unit, "reference"),
        Row("AES-256-GCM seal, 1 MiB frames (reference)", seal, "raw TCP sender", send, unit,
            "reference"),
        Row("AES-256-GCM open, 1 MiB frames (reference)", open_, "raw TCP receiver", recv, unit,
            "reference"),
        Row(f"BLAKE3 ({digest_kind()}), the cache's hash, 1 MiB pieces (reference)", digest,
            "SHA-256 (OpenSSL), 1 MiB pieces", sha, unit, "reference"),
        Row("SHA-256, 1 MiB pieces (reference)", sha, "memcpy, 1 MiB pieces", copy, unit,
            "reference"),
    ]


def _call_rows(r: Rounds) -> list[Row]:
    m = r.median
    side_us = m("tcp_pingpong_cpu_us_per_side")
    ref = "raw TCP ping-pong, one side per round trip"
    rows = [Row(f"{agent} agent per {kind} call", m(f"{key}_{side}"), ref, side_us,
                "CPU-µs", "informative")
            for kind, key in (("one-way", "oneway"), ("waiting", "waiting"))
            for agent, side in (("client", "client"), ("serving", "server"))]
    r.values["reference_us"] = [t + u for t, u in zip(r.values["tcp_pingpong_us"],
                                                       r.values["unix_pingpong_us"], strict=True)]
    rows += [Row(f"program (interposer) per {kind} call", m(f"{key}_program"), ref, side_us,
                 "CPU-µs", "informative")
             for kind, key in (("one-way", "oneway"), ("waiting", "waiting"))]
    rows += [oneway_row(m("oneway_calls_per_s")),
             Row("one-way calls, each process on a core of its own", pipeline_rate(r),
                 "measured rate", m("oneway_calls_per_s"), "calls/s", "informative"),
             waiting_row(m("waiting_us"), m("reference_us"))]
    return rows


def pipeline_rate(r: Rounds) -> float:
    """The one-way rate the three processes allow when none shares a core: a call
    passes the program, the client agent and the serving agent in turn, each
    working while the others do, so the busiest one's CPU per call sets the pace.
    On a LAN the serving agent has its machine; the program and client agent
    share theirs."""
    slowest = max(r.median(f"oneway_{side}") for side in ("program", "client", "server"))
    return 1e6 / slowest if slowest > 0 else 0.0


def _machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "affinity": sorted(os.sched_getaffinity(0)),
            "loadavg": os.getloadavg()}


def main(args: argparse.Namespace) -> int:
    with example_workdir("cpu", "bench_calls") as (root, binary):
        if binary is None:
            return 2
        started, before = time.time(), _machine()
        plain = _pair(root / "nocache", NO_CACHE_ENV)
        try:
            cached = _pair(root / "cache", None)
            try:
                chunk = str(args.chunk_mib << 20)
                for pair in (plain, cached):  # the first session's setup stays out
                    run_marked(binary, pair.client, pair.pids, ["h2d", chunk, chunk, "0"], root)
                run_marked(binary, plain.client, plain.pids, ["oneway", "1000"], root)
                rounds = interleave(args.rounds, _measures(args, binary, root, plain, cached))
            finally:
                cached.mesh.close()
        finally:
            plain.mesh.close()
        rows = _copy_rows(rounds, f"H2D {_size(args.mib)} in {_size(args.chunk_mib)} copies")
        rows += _call_rows(rounds)
        meta = {"mib": args.mib, "chunk_mib": args.chunk_mib, "calls": args.calls,
                "waits": args.waits, "rounds": args.rounds, "statistic": "median",
                "seconds": round(time.time() - started, 1),
                "machine": {"start": before, "end": _machine()},
                "cpu_source": "each agent's process CPU clock (all its threads; the system "
                              "share from /proc/PID/stat), read at the program's marks; the "
                              "end read once both agents were quiet",
                "rounds_detail": rounds.as_dict()}
        print_report("cpu", rows, meta, as_json=args.json)
    return 0
