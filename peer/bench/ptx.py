"""``gleam-peer bench ptx``: the host device's PTX interpreter beside plain C.

Four kernels of ``ptx_kernels.cu`` (nvcc's default arch, ``-O3``; the PTX ships
with gleam): SAXPY, a shared-memory reduction, a tiled SGEMM and a byte histogram
with shared and global atomics. Each runs on the interpreter exactly as a
forwarded launch would (the same load, translation and checked memory), and
each figure stands beside references measured in the same run:

* the same kernel written in C (``ptx_reference.c``, gcc ``-O2``, one thread);
* numpy doing the same work, where the host kernel registry has the kernel
  (``saxpy`` and ``sgemm``: the expressions the registry runs), and for the
  others the closest numpy call (``sum``, ``bincount``);
* the target of the PTX-execution issue: 200 M thread-instructions/s per core
  on SAXPY and SGEMM, and every core used on a large grid.

Thread-instructions count each instruction once per active lane. "Per core" is
measured with one worker thread; the speedup with all workers shows whether a
large grid uses every core.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gleam.peer.bench.report import Row, positive_int, print_report
from gleam.peer.cuda.server.launch import param_layout

# gl_ptx_run_tier's tiers (ptxc_tier.h)
TIER_INTERP, TIER_COMPILED = 1, 2
# The compile tier's target (issue 26): within 3x of the C -O2 reference, one core.
TARGET_VS_C = 3.0
HELP = "PTX interpreter: thread-instructions/s on four kernels beside C -O2 and numpy"
DESCRIPTION = __doc__

HERE = Path(__file__).resolve().parent
PTX = HERE / "ptx_kernels.ptx"
REFERENCE_C = HERE / "ptx_reference.c"
TARGET_PER_CORE = 200e6
TILE = 16


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=positive_int, default=1 << 24,
                        help="elements of the vector kernels (default 16,777,216)")
    parser.add_argument("--dim", type=positive_int, default=512,
                        help="M = N = K of the SGEMM (default 512)")
    parser.add_argument("--rounds", type=positive_int, default=3,
                        help="rounds per figure, interleaved across the tiers; the median is kept "
                             "(default 3)")
    parser.add_argument("--workers", type=positive_int, default=os.cpu_count() or 1,
                        help="worker threads of the all-cores runs (default: CPU count)")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and one round (a smoke test, not a measurement)")


class BenchError(Exception):
    """The benchmark cannot run here; the message says why."""


@dataclass(frozen=True)
class Case:
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    params: list[tuple[str, Any]]  # (struct format of one parameter, value)
    buffers: list[Any]             # numpy arrays the kernel may touch
    check: Callable[[], bool]      # the result is right (after a run)
    reset: Callable[[], None]      # inputs as before the first run
    numpy: Callable[[], object] | None
    numpy_name: str


def _params(spec: Sequence[tuple[str, Any]]) -> bytes:
    sizes = tuple(struct.calcsize(fmt) for fmt, _ in spec)
    offsets, total = param_layout(sizes)
    buf = bytearray(total)
    for (fmt, value), off in zip(spec, offsets, strict=True):
        struct.pack_into("<" + fmt, buf, off, value)
    return bytes(buf)


def _cases(np: Any, n: int, dim: int, ffi: Any) -> list[Case]:
    rng = np.random.default_rng(1)

    def addr(a: Any) -> int:
        return int(ffi.cast("uintptr_t", ffi.from_buffer(a)))

    x = rng.standard_normal(n, dtype=np.float32)
    y0 = rng.standard_normal(n, dtype=np.float32)
    y = y0.copy()
    blocks = (n + 255) // 256
    saxpy = Case(
        "bench_saxpy", (blocks, 1, 1), (256, 1, 1),
        [("f", 2.0), ("Q", addr(x)), ("Q", addr(y)), ("i", n)], [x, y],
        check=lambda: bool(np.allclose(y, 2.0 * x + y0, rtol=1e-6, atol=1e-6)),
        reset=lambda: np.copyto(y, y0), numpy=lambda: 2.0 * x + y0,
        numpy_name="numpy a*x + y (the registry's saxpy)",
    )
    parts = 256
    partial = np.zeros(parts, dtype=np.float32)
    reduce = Case(
        "bench_reduce", (parts, 1, 1), (256, 1, 1),
        [("Q", addr(x)), ("Q", addr(partial)), ("i", n)], [x, partial],
        check=lambda: bool(np.isclose(partial.astype(np.float64).sum(),
                                      x.astype(np.float64).sum(), rtol=1e-3, atol=1e-1)),
        reset=lambda: partial.fill(0), numpy=lambda: x.sum(), numpy_name="numpy sum",
    )
    a = rng.standard_normal((dim, dim), dtype=np.float32)
    b = rng.standard_normal((dim, dim), dtype=np.float32)
    c = np.zeros((dim, dim), dtype=np.float32)
    tiles = (dim + TILE - 1) // TILE
    sgemm = Case(
        "bench_sgemm", (tiles, tiles, 1), (TILE, TILE, 1),
        [("Q", addr(a)), ("Q", addr(b)), ("Q", addr(c)), ("i", dim), ("i", dim), ("i", dim)],
        [a, b, c],
        check=lambda: bool(np.allclose(c, a @ b, rtol=1e-3, atol=1e-3)),
        reset=lambda: c.fill(0), numpy=lambda: a @ b,
        numpy_name="numpy A @ B (the registry's sgemm)",
    )
    data = rng.integers(0, 256, n, dtype=np.uint8)
    bins = np.zeros(256, dtype=np.uint32)
    histogram = Case(
        "bench_histogram", (256, 1, 1), (256, 1, 1),
        [("Q", addr(data)), ("Q", addr(bins)), ("i", n)], [data, bins],
        check=lambda: bool((bins == np.bincount(data, minlength=256)).all()),
        reset=lambda: bins.fill(0), numpy=lambda: np.bincount(data, minlength=256),
        numpy_name="numpy bincount",
    )
    return [saxpy, reduce, sgemm, histogram]


class Interpreter:
    """The PTX module of the benchmark kernels, loaded once."""

    def __init__(self, ffi: Any, lib: Any, text: bytes) -> None:
        self.ffi, self.lib = ffi, lib
        err = ffi.new("char[]", 512)
        self.module = lib.gl_ptx_load(text, len(text), err, 512)
        if self.module == ffi.NULL:
            raise BenchError(f"the benchmark PTX does not load: {ffi.string(err).decode()}")

    def run(self, case: Case, workers: int, tier: int = TIER_INTERP) -> tuple[float, int]:
        """One launch on one tier (compiled: compiled before the clock starts):
        (seconds, thread-instructions)."""
        ffi, lib = self.ffi, self.lib
        spans = sorted((int(ffi.cast("uintptr_t", ffi.from_buffer(b))), b.nbytes)
                       for b in case.buffers)
        ranges = ffi.new("uint64_t[]", [v for span in spans for v in span])
        params = _params(case.params)
        insns = ffi.new("uint64_t *")
        err = ffi.new("char[]", 512)
        ran = ffi.new("int *")
        start = time.perf_counter()
        rc = lib.gl_ptx_run_tier(self.module, case.kernel.encode(), case.grid, case.block, 0,
                                 params, len(params), ranges, len(spans), workers, tier, ran,
                                 insns, err, 512)
        elapsed = time.perf_counter() - start
        if rc == 0 and ran[0] != tier:
            raise BenchError(f"{case.kernel} did not run on tier {tier} (ran: {ran[0]})")
        if rc != 0:
            raise BenchError(f"{case.kernel} failed ({rc}): {ffi.string(err).decode()}")
        return elapsed, int(insns[0])

    def close(self) -> None:
        self.lib.gl_ptx_unload(self.module)


class CReference:
    """The kernels in C (``ptx_reference.c``, gcc ``-O2``), built once; each ``run`` times
    every kernel once, so that the reference is measured between the tiers' runs."""

    def __init__(self, n: int, dim: int) -> None:
        compiler = shutil.which(os.environ.get("CC", "gcc"))
        if compiler is None:
            raise BenchError("the C reference needs a C compiler (gcc)")
        self._tmp = tempfile.TemporaryDirectory(prefix="gleam-bench-ptx-")
        self.binary = Path(self._tmp.name) / "ptx_reference"
        self.n, self.dim = n, dim
        subprocess.run([compiler, "-O2", "-o", str(self.binary), str(REFERENCE_C)], check=True)

    def run(self) -> dict[str, float]:
        out = subprocess.run([str(self.binary), str(self.n), str(self.dim), "1"], check=True,
                             capture_output=True, text=True, timeout=600).stdout
        times: dict[str, float] = json.loads(out)
        return times

    def close(self) -> None:
        self._tmp.cleanup()


def _best(rounds: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def measure(n: int, dim: int, rounds: int, workers: int) -> tuple[list[Row], dict[str, Any]]:
    try:
        import numpy as np
    except ImportError as exc:
        raise BenchError("bench ptx needs numpy: pip install gleam[host]") from exc
    from gleam.peer.nativelib import ffi, lib

    vm = Interpreter(ffi, lib, PTX.read_bytes())
    c_ref: CReference | None = None
    try:
        cases = _cases(np, n, dim, ffi)
        c_ref = CReference(n, dim)
        rows: list[Row] = []
        kernels: dict[str, Any] = {}
        for case in cases:
            name = case.kernel.removeprefix("bench_")
            one: list[float] = []
            many: list[float] = []
            comp1: list[float] = []
            compn: list[float] = []
            c_times: list[float] = []
            insns = 0
            vm.run(case, 1, TIER_COMPILED)  # compiles (or loads) before anything is timed
            for _ in range(rounds):  # interleaved, so drift hits every tier alike
                for tier, workers_, times in ((TIER_INTERP, 1, one), (TIER_INTERP, workers, many),
                                              (TIER_COMPILED, 1, comp1),
                                              (TIER_COMPILED, workers, compn)):
                    case.reset()
                    seconds, insns = vm.run(case, workers_, tier)
                    times.append(seconds)
                    if not case.check():
                        raise BenchError(f"{case.kernel} gave a wrong result on tier {tier} "
                                         f"with {workers_} workers")
                c_times.append(c_ref.run()[name])  # C -O2 in the same round
            t1, tn = statistics.median(one), statistics.median(many)
            reference = {name: statistics.median(c_times)}
            c1, cn = statistics.median(comp1), statistics.median(compn)
            per_core = insns / t1
            np_time = _best(rounds, case.numpy) if case.numpy else None
            kernels[name] = {
                "thread_instructions": insns, "seconds_1_worker": t1,
                f"seconds_{workers}_workers": tn, "per_core_per_s": per_core,
                "compiled_seconds_1_worker": c1, f"compiled_seconds_{workers}_workers": cn,
                "compiled_over_c_O2": c1 / reference[name],
                "c_O2_seconds": reference[name], "numpy_seconds": np_time,
                "numpy": case.numpy_name,
            }
            targeted = name in ("saxpy", "sgemm")
            rows.append(Row(
                f"{name}: thread-instructions/s, 1 core", per_core / 1e6,
                "target", TARGET_PER_CORE / 1e6, "M/s",
                target="≥ 200 M/s" if targeted else "",
                met=per_core >= TARGET_PER_CORE if targeted else None,
            ))
            rows.append(Row(f"{name}: wall, {workers} workers", tn * 1e3,
                            "C -O2, 1 thread", reference[name] * 1e3, "ms"))
            rows.append(Row(f"{name}: compiled tier wall, 1 core", c1 * 1e3,
                            "C -O2, 1 thread", reference[name] * 1e3, "ms",
                            target="≤ 3x C -O2",
                            met=c1 <= TARGET_VS_C * reference[name]))
            rows.append(Row(f"{name}: compiled tier wall, {workers} workers", cn * 1e3,
                            "interpreter", tn * 1e3, "ms"))
            rows.append(Row(f"{name}: compiled speedup, {workers} workers over 1", c1 / cn,
                            "cores", float(workers), "x",
                            target=f"≈ {workers} (all cores used)" if workers > 1 else "",
                            met=(c1 / cn >= 0.75 * workers) if workers > 1 else None))
            if np_time is not None:
                rows.append(Row(f"{name}: wall, {workers} workers", tn * 1e3,
                                case.numpy_name, np_time * 1e3, "ms"))
            rows.append(Row(f"{name}: speedup, {workers} workers over 1", t1 / tn,
                            "cores", float(workers), "x",
                            target=f"≈ {workers} (all cores used)" if workers > 1 else "",
                            met=(t1 / tn >= 0.75 * workers) if workers > 1 else None))
        meta = {"n": n, "dim": dim, "rounds": rounds, "workers": workers,
                "cpus": os.cpu_count(), "kernels": kernels}
        return rows, meta
    finally:
        vm.close()
        if c_ref is not None:
            c_ref.close()


def main(args: argparse.Namespace) -> int:
    n, dim, rounds = (1 << 16, 64, 1) if args.quick else (args.n, args.dim, args.rounds)
    try:
        rows, meta = measure(n, dim, rounds, args.workers)
    except BenchError as exc:
        print(f"gleam-peer bench ptx: {exc}", file=sys.stderr)
        return 1
    print_report("ptx", rows, meta, as_json=args.json)
    return 0
