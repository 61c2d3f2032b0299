"""One run of examples/cuda/bench_calls.c with its marks: each agent's CPU over its timed section.

The program runs under the interposer's environment (as ``gleam-peer run`` sets
it) with ``GLEAM_BENCH_MARKS=1``: it prints ``mark start`` and ``mark end`` around
its timed section and waits for a line on stdin at each, while the agents are
read (peer/bench/proc_cpu.py).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gleam.peer.bench.proc_cpu import CpuTime, read_all, settle
from gleam.peer.cuda.examples import KERNELS_PTX
from gleam.peer.localmesh import LocalAgent
from gleam.peer.run_cmd import interposer_dir, run_environment

RUN_TIMEOUT_S = 600


@dataclass(frozen=True)
class MarkedRun:
    """The program's JSON result, each agent's CPU and the program's own (key
    "program") between the marks, and whether the agents were quiet when the end
    was read."""

    result: dict[str, Any]
    cpu: dict[str, CpuTime]
    settled: bool


def _until_mark(proc: subprocess.Popen[str], where: str, errors: Path) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == f"mark {where}":
            return
    proc.wait(RUN_TIMEOUT_S)
    raise RuntimeError(f"the program ended ({proc.returncode}) before its mark {where}:\n"
                       f"{errors.read_text(errors='replace')[-2000:]}")


def _go_on(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("\n")
    proc.stdin.flush()


def run_marked(binary: Path, client: LocalAgent, pids: Mapping[str, int], args: list[str],
               workdir: Path) -> MarkedRun:
    """Run ``binary args`` against ``client``'s agent; read ``pids`` and the program
    at its marks."""
    env = run_environment(interposer_dir(), client.state.control_socket, None,
                          {**os.environ, "GLEAM_EXAMPLE_KERNELS": str(KERNELS_PTX),
                           "GLEAM_BENCH_MARKS": "1"}, quiet=True)
    errors = workdir / "program.stderr"
    with open(errors, "w") as err:
        proc = subprocess.Popen([str(binary), *args], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    try:
        # The program too: its interposer's share of each call (it stops at each
        # mark, so its own clock reads the timed section alone).
        every = {**pids, "program": proc.pid}
        _until_mark(proc, "start", errors)
        before = read_all(every)
        _go_on(proc)
        _until_mark(proc, "end", errors)
        settled = settle(list(pids.values()))
        after = read_all(every)
        _go_on(proc)
        out, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{binary.name} {' '.join(args)} failed ({proc.returncode}):\n"
                           f"{out[-2000:]}\n{errors.read_text(errors='replace')[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    if result.get("ok") is False:
        raise RuntimeError(f"{binary.name} {' '.join(args)}: its data came back wrong: {result}")
    return MarkedRun(result, {k: after[k] - before[k] for k in every}, settled)
