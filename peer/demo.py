"""``gleam-peer demo``: the whole idea on one machine, no GPU, no second device.

It starts a small mesh on loopback (127.0.0.1 only, no mDNS): a client agent
without a device ("laptop") and two host-backend servers whose measured speeds
differ ("desktop" and a deliberately slowed "mini-pc"). It builds the example
inference program (examples/cuda/mlp_infer.c, an unmodified CUDA driver-API
program), runs it twice through ``gleam-peer run`` while the client's live
status view is on screen, and prints a summary: where each run ran and why,
the scheduler's estimate beside the measured time (and what the estimate rested
on: a guess for the first run, the first run for the second), the calls
(one-way and waiting), bytes, round trips, and whether the
results matched the program's own CPU computation. Everything it started is
stopped and removed at the end, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gleam.peer.bench.report import positive_int
from gleam.peer.cuda.examples import KERNELS_PTX, ExampleError, build_example
from gleam.peer.localmesh import LocalAgent, LocalMesh, MeshError, wait_for
from gleam.peer.sched.ranking import parts

HELP = "see gleam forward an unmodified CUDA program on this machine (no GPU needed)"
DESCRIPTION = __doc__

SLOW_FACTOR = 4  # the mini-pc computes at a quarter of the desktop's speed
# The three "devices" are processes of one machine: each server would count the
# other agents' and the program's work as load on its host device (as the LAN
# lab's hosts would, docs/scheduler.md), so the servers report none.
SERVER_ENV = {"GLEAM_HOST_LOAD": "0"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=positive_int, default=2,
                        help="times to run the example (2)")
    parser.add_argument("--repeats", type=positive_int, default=20,
                        help="forward passes per run of the example (20)")
    parser.add_argument("--no-live", action="store_true",
                        help="no live status view (also when stdout is not a terminal)")


def _serving(client: LocalAgent) -> int:
    """How many peers the client sees offering a CUDA backend."""
    doc = client.try_status() or {"peers": []}
    return sum(1 for p in doc["peers"]
               if p.get("authenticated") and (p.get("extra") or {}).get("cuda"))


def _run_program(client: LocalAgent, binary: Path, repeats: int, live: bool) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "gleam.peer", "run", "--state-dir", str(client.state.path),
           "--", str(binary), str(KERNELS_PTX), str(repeats)]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "GLEAM_EXAMPLE_KERNELS": str(KERNELS_PTX)})
    if live:
        _watch(client, proc)
    out, err = proc.communicate()
    seconds = time.perf_counter() - started
    lines = [line for line in out.splitlines() if line.startswith("{")]
    result = json.loads(lines[-1]) if lines else {"ok": False}
    return {"exit": proc.returncode, "seconds": seconds, "result": result,
            "stderr": err.strip()[-500:]}


def _watch(client: LocalAgent, proc: subprocess.Popen[str]) -> None:
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    from gleam.peer.tui import render_status

    console = Console()
    with Live(Text("starting the example..."), console=console, auto_refresh=False) as view:
        while proc.poll() is None:
            doc = client.try_status()
            if doc is not None:
                view.update(render_status(doc, width=console.width), refresh=True)
            time.sleep(0.3)


def _last_session(client: LocalAgent, seen: int) -> dict[str, Any] | None:
    """The client agent's account of the run's session, once it has ended."""
    def ended() -> list[dict[str, Any]] | None:
        finished = client.request("cuda_sessions").get("finished", [])
        return finished if len(finished) > seen else None

    try:
        return wait_for(ended, 5, "the session to be accounted")[seen]
    except MeshError:
        return None


def _summary(runs: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="gleam demo: the example inference program, run through gleam")
    table.add_column("")
    for i in range(len(runs)):
        table.add_column(f"run {i + 1}")
    rows: dict[str, list[str]] = {key: [] for key in (
        "ran on", "why there", "estimated", "measured", "calls (one-way + waiting)",
        "sent / received", "saved by the blob cache", "envelopes sent", "round trips",
        "result")}
    for run in runs:
        s = run.get("session") or {}
        res = run["result"]
        rows["ran on"].append(f"{s.get('peer', '?')} ({s.get('backend', '?')} backend)")
        rows["why there"].append(s.get("reason", "?"))
        rows["estimated"].append(_estimated(s.get("estimate")))
        rows["measured"].append(_measured(s, run["seconds"], res.get("gpu_ms", 0)))
        rows["calls (one-way + waiting)"].append(
            f"{s.get('calls', 0):,} ({s.get('oneway', 0):,} + {s.get('waiting', 0):,})")
        rows["sent / received"].append(
            f"{_mb(s.get('bytes_to_server', 0))} / {_mb(s.get('bytes_from_server', 0))}")
        hit = s.get("hit_rate")
        rows["saved by the blob cache"].append(
            f"{_mb(s.get('bytes_saved', 0))} ({s.get('refs', 0):,} references, hit rate "
            f"{'-' if hit is None else f'{hit:.0%}'})")
        rows["envelopes sent"].append(f"{s.get('batches', 0):,}")
        rows["round trips"].append(f"{s.get('waiting', 0):,}")
        rows["result"].append(
            f"OK: matches the CPU (max error {res.get('max_abs_err', 0):.1e})" if res.get("ok")
            else f"FAILED (exit {run['exit']}): {run['stderr']}")
    for key, values in rows.items():
        table.add_row(key, *values)
    Console().print(table)


def _estimated(estimate: dict[str, Any] | None) -> str:
    """The scheduler's estimate for the server it chose, its parts, and what it rests on."""
    if not estimate:
        return "- (not ranked by the cost model)"
    terms = parts(estimate["transfer_s"], estimate["waiting_s"], estimate["compute_s"])
    return f"{estimate['total_s']:.2f} s ({terms}); {estimate['demand']}"


def _measured(session: dict[str, Any], wall: float, device_ms: float) -> str:
    """The session's time (what the estimate is of) beside the program's wall time."""
    started, ended = session.get("started"), session.get("ended")
    took = f"{ended - started:.2f} s session, " if started and ended else ""
    return f"{took}{wall:.2f} s wall (device {device_ms:.1f} ms)"


def _mb(n: float) -> str:
    return f"{n / 1e6:.2f} MB"


def main(args: argparse.Namespace) -> int:
    live = not args.no_live and sys.stdout.isatty()
    with tempfile.TemporaryDirectory(prefix="gleam-demo-") as tmp:
        root = Path(tmp)
        mesh = LocalMesh(root)
        try:
            print("gleam demo: building the example program against NVIDIA's cuda.h ...")
            binary = build_example("mlp_infer", root / "bin")
            print("gleam demo: starting three agents on 127.0.0.1 "
                  "(laptop: no device; desktop and mini-pc: host backends) ...")
            desktop = mesh.start("desktop", extra=["--backend", "host"], env=SERVER_ENV)
            key = desktop.state.mesh_key()
            mini = mesh.start("mini-pc", mesh_key=key, env=SERVER_ENV,
                              extra=["--backend", "host", "--host-slowdown", str(SLOW_FACTOR)])
            laptop = mesh.start("laptop", mesh_key=key, extra=["--backend", "none"],
                                peers=[f"127.0.0.1:{desktop.port}", f"127.0.0.1:{mini.port}"])
            wait_for(lambda: _serving(laptop) >= 2, 30,
                     "the laptop to see both servers and their measured speeds")
            runs = []
            for i in range(args.runs):
                print(f"gleam demo: run {i + 1} of {args.runs}: gleam-peer run -- mlp_infer")
                run = _run_program(laptop, binary, args.repeats, live)
                run["session"] = _last_session(laptop, i)
                runs.append(run)
            _summary(runs)
            ok = all(r["exit"] == 0 and r["result"].get("ok") for r in runs)
            print("gleam demo: every result matched the program's own CPU computation" if ok
                  else "gleam demo: some runs FAILED (see above)")
            return 0 if ok else 1
        except KeyboardInterrupt:
            print("\ngleam demo: interrupted; stopping the agents")
            return 130
        except (ExampleError, MeshError) as exc:
            print(f"gleam demo: {exc}", file=sys.stderr)
            return 2
        finally:
            mesh.close()
