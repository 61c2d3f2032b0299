"""``gleam-peer bench remoting``: three workloads, two lab links, four modes, beside their limits.

Workloads (examples/cuda/remoting_bench.c, results checked by the program):
``mlp-infer`` (256 MiB of fp32 weights, 50 requests: input upload, every layer's kernels,
output download), ``launch-storm`` (10,000 small launches, a synchronize every 100),
``transfer`` (1 GiB each way). Links (the LAN lab, root): ``wifi`` 100 Mbit/s 3 ms RTT,
``gbe`` 1 Gbit/s 0.5 ms RTT. Modes: ``local`` (the backend on the client's own agent, no
network), ``sync`` (every forwarded call waits for the server, GLEAM_CUDA_SYNC_CALLS=1,
and the client agent content-addresses nothing: how remoting systems work by default),
``gleam-cold`` (first run against the server) and ``gleam-warm`` (second run, cache filled).
Each cell is printed beside its physical limit (remoting_model.py), gleam cells also beside
``sync``. Targets: mlp-infer/wifi warm >= 24.2x sync, launch-storm/gbe >= 6x sync, every
gleam cell within 1.25x of its limit.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gleam.peer.bench.cache import _session
from gleam.peer.bench.plot import bar_chart_svg
from gleam.peer.bench.remoting_model import LINKS, MODES, WORKLOADS, Cell, chart_groups, summarize
from gleam.peer.bench.report import note_file, print_report
from gleam.peer.bench.workdir import example_workdir
from gleam.peer.cuda.examples import KERNELS_PTX
from gleam.peer.localmesh import LocalMesh

HELP = "remoting: mlp-infer, launch-storm, transfer over wifi/gbe; sync vs gleam vs the limit"
DESCRIPTION = __doc__

CLIENT, SERVER = "h1", "h2"
# The sync mode's agents: no copy is big enough to be content-addressed, and the server
# keeps no blob (both cache tiers 0), so not even the module image is served from a cache.
NO_CACHE_ENV = {"GLEAM_CACHE_MIN_BYTES": str(1 << 50), "GLEAM_CACHE_RAM_MB": "0",
                "GLEAM_CACHE_DISK_MB": "0"}
SYNC_ENV = {"GLEAM_CUDA_SYNC_CALLS": "1"}
RUN_TIMEOUT = 900.0


@dataclass(frozen=True)
class Sizes:
    hidden: int
    layers: int
    requests: int
    launches: int
    every: int
    transfer: int
    chunk: int

    def program_args(self, workload: str, run: int) -> list[str]:
        if workload == "mlp-infer":
            return ["mlp", str(self.hidden), str(self.layers), str(self.requests), str(run)]
        if workload == "launch-storm":
            return ["storm", str(self.launches), str(self.every)]
        return ["transfer", str(self.transfer), str(self.chunk)]


FULL = Sizes(hidden=4096, layers=4, requests=50, launches=10_000, every=100,
             transfer=1 << 30, chunk=64 << 20)
QUICK = Sizes(hidden=512, layers=2, requests=5, launches=500, every=100,
              transfer=8 << 20, chunk=2 << 20)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="small sizes for a smoke test (the figures mean little)")
    parser.add_argument("--workload", action="append", choices=WORKLOADS,
                        help="a workload to run (repeatable; default all)")
    parser.add_argument("--link", action="append", choices=sorted(LINKS),
                        help="a lab link to run over (repeatable; default all)")
    parser.add_argument("--mode", action="append", choices=MODES,
                        help="a mode to run (repeatable; default all; local is always run: "
                        "every limit needs its compute)")
    parser.add_argument("--svg", type=Path, metavar="PATH",
                        help="also write the chart (docs/figures/remoting.svg)")


def _program(binary: Path, state: str, args: list[str], *, netns: str | None = None,
             peer: str | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """One run of the workload program through ``gleam-peer run``; its JSON line."""
    cmd = [sys.executable, "-m", "gleam.peer", "run", "--state-dir", state]
    if peer is not None:
        cmd += ["--peer", peer]  # the lab client's own agent has a backend too: pin the server
    cmd += ["--", str(binary), *args]
    if netns is not None:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    full_env = {**os.environ, "GLEAM_EXAMPLE_KERNELS": str(KERNELS_PTX), **(env or {})}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                          env=full_env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{binary.name} {' '.join(args)} failed ({done.returncode}):\n"
                           f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    if not result.get("ok"):
        raise RuntimeError(f"{binary.name} {' '.join(args)}: results came back wrong: {result}")
    return result


def _local(binary: Path, sizes: Sizes, workloads: list[str], root: Path) -> list[Cell]:
    """Mode local: one agent with the host backend, the program on the same machine.
    Twice per workload, the faster run kept (the first also warms the backend's imports)."""
    mesh = LocalMesh(root)
    try:
        agent = mesh.start("local", extra=["--backend", "host"])
        cells = []
        for w in workloads:
            runs = [_program(binary, str(agent.state.path), sizes.program_args(w, run))
                    for run in (1, 2)]
            cells.append(Cell(w, None, "local", min(runs, key=lambda r: r["seconds"])))
        return cells
    finally:
        mesh.close()


@contextmanager
def _lab(link: str, agent_env: dict[str, str]) -> Iterator[Any]:
    """A client and a server host on ``link`` (rate on both, the RTT on the client's side)."""
    from gleam.peer.lab.build import running_lab
    from gleam.peer.lab.spec import LinkSpec

    rate, rtt = LINKS[link]
    saved = {k: os.environ.get(k) for k in agent_env}
    os.environ.update(agent_env)  # the lab's agents inherit this process's environment
    try:
        with running_lab([CLIENT, SERVER], {CLIENT: LinkSpec(rate, rtt),
                                            SERVER: LinkSpec(rate, 0.0)}) as record:
            restore(saved)
            yield record
    finally:
        restore(saved)


def restore(saved: dict[str, str | None]) -> None:
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _lab_runs(binary: Path, sizes: Sizes, link: str, workloads: list[str],
              modes: list[str]) -> list[Cell]:
    from gleam.peer import control
    from gleam.peer.state import StateDir

    cells: list[Cell] = []
    # (the agents' environment, [(mode, the program's environment)]): one lab each.
    plans: list[tuple[dict[str, str], list[tuple[str, dict[str, str]]]]] = []
    if "sync" in modes:
        plans.append((NO_CACHE_ENV, [("sync", SYNC_ENV)]))
    gleam: list[tuple[str, dict[str, str]]] = [
        (m, {}) for m in ("gleam-cold", "gleam-warm") if m in modes]
    if gleam:
        plans.append(({}, gleam))
    for agent_env, runs in plans:
        with _lab(link, agent_env) as record:
            host = next(h for h in record.hosts if h.name == CLIENT)
            sock = StateDir(host.state_dir).control_socket
            ask = functools.partial(control.request, sock, "cuda_sessions")
            for w in workloads:
                # cold and warm are the first and second run of one server; the warm run
                # exists only after a cold one (its inputs still differ: run 2).
                for mode, env in runs:
                    if mode == "gleam-warm" and "gleam-cold" not in modes:
                        _program(binary, host.state_dir, sizes.program_args(w, 1),
                                 netns=host.netns, peer=SERVER, env=env)
                    seen = len(ask()["finished"])
                    run = 2 if mode == "gleam-warm" else 1
                    result = _program(binary, host.state_dir, sizes.program_args(w, run),
                                      netns=host.netns, peer=SERVER, env=env)
                    session = _session(ask, seen)
                    cells.append(Cell(w, link, mode, result, _session_figures(session)))
    return cells


def _session_figures(session: dict[str, Any]) -> dict[str, Any]:
    keep = ("server", "h2d_sent", "bytes_saved", "refs", "ref_misses", "calls", "round_trips")
    return {k: session[k] for k in keep if k in session}


def main(args: argparse.Namespace) -> int:
    sizes = QUICK if args.quick else FULL
    workloads = args.workload or list(WORKLOADS)
    links = args.link or list(LINKS)
    modes = args.mode or list(MODES)
    started = time.time()
    load_before = os.getloadavg()
    with example_workdir("remoting", "remoting_bench") as (root, binary):
        if binary is None:
            return 2
        cells = _local(binary, sizes, workloads, root / "local")
        notes: dict[str, Any] = {}
        from gleam.peer.lab.netns import lab_unavailable_reason

        reason = lab_unavailable_reason()
        if reason is None:
            for link in links:
                cells += _lab_runs(binary, sizes, link, workloads, modes)
        else:
            notes["lab"] = f"skipped: {reason}"
    rows, records = summarize(cells)
    if args.svg is not None:
        args.svg.write_text(bar_chart_svg(chart_groups(records),
                                          "bench remoting: seconds per cell (shorter is better)",
                                          "s"))
    meta = {"quick": args.quick, "sizes": sizes.__dict__, "links": {k: LINKS[k] for k in links},
            "modes": modes, "cells": records,
            "verified": all(r["verified"] for r in records),
            "cpus": os.cpu_count(), "load_before": load_before, "load_after": os.getloadavg(),
            "provisional": "measured on a shared machine: timings under CPU contention",
            "seconds": round(time.time() - started, 1), **notes}
    print_report("remoting", rows, meta, as_json=args.json)
    if args.svg is not None:
        note_file("chart", args.svg, as_json=args.json)
    return 0
