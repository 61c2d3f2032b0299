"""``gleam-peer bench compression``: the sparse-gradient codec, measured.

Three parts, each beside a reference measured in the same run:

* codec speed, one core: encode (index, plan, cells) and decode (peel,
  write back) in GB/s of uncompressed fp32 gradient, beside a memory copy;
* ratio and peel failures vs union density (0.1%, 1%, 5%, 20%) and worker
  count (2, 4, 8): W workers simulated in one process running the same
  codec code (``gleam.peer.compress.lockstep``), every sum checked against a
  float64 reference; and the peel failure rate per block vs the number of
  union nonzeros in it, at the default ratio table;
* aggregation over a network: 4 workers, each a torch.distributed (gloo)
  process in its own network namespace behind a bridge shaped to 1 Gbit/s
  per host (``gleam.peer.lab``), aggregating the same 100M-coordinate
  gradient with the codec and with a plain sum-allreduce, alternating.
  Needs root and torch; skipped with the reason otherwise.

This module is also the lab worker: ``python -m gleam.peer.bench.compression
--lab-worker CONFIG`` (started by the benchmark inside each namespace).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.console import Console

from gleam.peer.bench.report import Row, positive_int, print_report

if TYPE_CHECKING:
    import numpy as np

# numpy (the train extra) and the codec are imported where they are used:
# `gleam-peer` builds its parser from every benchmark module, with or
# without the extra installed.

AGGREGATION_TARGET = 6.33  # compressed vs plain allreduce at 1% union density
TARGET_DENSITY = 0.01
DENSITIES = (0.001, 0.01, 0.05, 0.2)
WORKERS = (2, 4, 8)
PEEL_COUNTS = (30, 100, 300, 1000, 3000, 10000, 30000)
LAB_WORKERS = 4
LAB_RATE_MBIT = 1000
LAB_PORT = 29517

HELP = "sparse-gradient compression: codec speed, ratio, peel failures, lab aggregation"
DESCRIPTION = (
    "Measure the lossless sparse-gradient codec: encode/decode speed per core, compression "
    "ratio and peel failure rate vs union density and worker count (simulated workers, "
    "checked against float64), and 4 workers aggregating a 100M-coordinate gradient over "
    "1 Gbit/s links in network namespaces, compressed vs plain allreduce (needs root, torch)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and few trials (seconds; for tests and smoke runs)")
    parser.add_argument("--coordinates", type=positive_int, default=1 << 24,
                        help="gradient size of the simulations (default 2^24)")
    parser.add_argument("--lab-coordinates", type=positive_int, default=100_000_000,
                        help="gradient size aggregated in the lab (default 100M)")
    parser.add_argument("--lab-densities", default="0.01,0.001,0.05",
                        help="union densities aggregated in the lab (default 0.01,0.001,0.05)")
    parser.add_argument("--rounds", type=positive_int, default=3,
                        help="alternating compressed/plain lab rounds; medians reported")
    parser.add_argument("--no-lab", action="store_true", help="skip the network measurement")


def main(args: argparse.Namespace) -> int:
    quick = args.quick
    n = min(args.coordinates, 1 << 20) if quick else args.coordinates
    lab_n = min(args.lab_coordinates, 4_000_000) if quick else args.lab_coordinates
    densities = [float(d) for d in args.lab_densities.split(",") if d.strip()]
    return run_compression_bench(
        coordinates=n, lab_coordinates=lab_n, lab_densities=densities,
        rounds=1 if quick else args.rounds, quick=quick, lab=not args.no_lab,
        as_json=args.json,
    )


# ---------------------------------------------------------------- workloads


def sparse_gradients(
    n: int, world: int, density: float, seed: int, ranks: range | None = None
) -> list[np.ndarray]:
    """Per-worker fp32 gradients whose union of nonzeros is ``density * n`` coordinates.

    Every union coordinate has one owner and each other worker holds it too
    with probability 1/4; values are N(0, 1) scaled by a log-uniform
    magnitude over six decades, as gradients of one tensor spread.
    Workers agree on the union through the shared ``seed``.
    """
    import numpy as np

    shared = np.random.default_rng(seed)
    count = max(1, int(n * density))
    union = np.unique(shared.integers(0, n, count, dtype=np.int64))
    owner = shared.integers(0, world, union.size)
    extra = shared.random((world, union.size)) < 0.25
    out = []
    for rank in ranks if ranks is not None else range(world):
        held = union[(owner == rank) | extra[rank]]
        own = np.random.default_rng((seed, rank))
        x = np.zeros(n, np.float32)
        magnitude = 10.0 ** own.uniform(-6, 0, held.size)
        x[held] = (own.standard_normal(held.size) * magnitude).astype(np.float32)
        out.append(x)
    return out


# ---------------------------------------------------------------- simulations


@dataclass(frozen=True)
class SimResult:
    density: float
    world: int
    union: int
    ratio: float
    blocks_sketch: int
    blocks_raw: int
    blocks_failed: int
    mismatches: int  # sketch-block coordinates differing from fp32(float64 sum)
    encode_gbps: float
    decode_gbps: float

    @property
    def failure_rate(self) -> float:
        return self.blocks_failed / self.blocks_sketch if self.blocks_sketch else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "failure_rate": self.failure_rate}


def simulate(n: int, world: int, density: float, block: int, seed: int) -> SimResult:
    import numpy as np

    from gleam.peer.compress import codec
    from gleam.peer.compress.lockstep import run_lockstep
    from gleam.peer.compress.sketch import SketchCodec, SketchConfig

    xs = sparse_gradients(n, world, density, seed)
    exact = np.sum([x.astype(np.float64) for x in xs], axis=0).astype(np.float32)
    geo = codec.geometry(n, block)
    plan = codec.plan(np.bitwise_or.reduce([codec.mark(x, geo).index for x in xs]), geo, world)
    codecs = [SketchCodec(SketchConfig(block=block, min_coordinates=0)) for _ in xs]
    stats = run_lockstep([c.aggregate(x, world=world, key="sim")
                          for c, x in zip(codecs, xs, strict=True)])
    first = stats[0]
    # Raw blocks are plain fp32 sums (their rounding depends on the order);
    # sketch blocks must equal the exactly rounded sum.
    in_sketch = np.repeat(plan.blocks["kind"] == codec.CELLS, block)[:n]
    mismatches = int(np.count_nonzero((xs[0] != exact) & in_sketch))
    return SimResult(
        density=density, world=world, union=first.union, ratio=first.ratio,
        blocks_sketch=first.blocks_sketch,
        blocks_raw=first.blocks_raw_dense + first.blocks_raw_spread + first.blocks_raw_nonfinite,
        blocks_failed=first.blocks_failed, mismatches=mismatches,
        encode_gbps=4 * n / first.encode_s / 1e9 if first.encode_s else float("nan"),
        decode_gbps=4 * n / first.decode_s / 1e9 if first.decode_s else float("nan"),
    )


def peel_failure_rate(count: int, trials: int, seed: int) -> tuple[int, int, float]:
    """Blocks of ``count`` union nonzeros that fail to peel at the default ratio."""
    import numpy as np

    from gleam.peer.compress import codec

    ratio = codec.default_ratio(count)
    block = 256
    while block < 8 * count * ratio:
        block *= 2
    rng = np.random.default_rng(seed)
    rows = np.zeros((trials, block), np.float32)
    for row in rows:
        row[rng.choice(block, count, replace=False)] = 1.0
    x = rows.reshape(-1)
    geo = codec.geometry(x.size, block)
    own = codec.mark(x, geo)
    plan = codec.plan(own.index, geo, 1)
    cells, raw = codec.encode(x, own.index, plan, seed, own)
    failed = codec.decode(cells, raw, own.index, plan, seed, x.copy())
    return int(failed.sum()), trials, ratio


def memory_copy_gbps(n: int) -> float:
    import numpy as np

    src = np.ones(n, np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    started = time.perf_counter()
    np.copyto(dst, src)
    return 4 * n / (time.perf_counter() - started) / 1e9


# ---------------------------------------------------------------- lab


def lab_worker_main(config_json: str) -> int:
    """One worker in a lab host: plain and compressed allreduce, alternating."""
    import numpy as np
    import torch
    import torch.distributed as dist

    from gleam.peer.compress.aggregation import run_sync
    from gleam.peer.compress.collective import TorchCollective
    from gleam.peer.compress.sketch import SketchCodec, SketchConfig

    cfg = json.loads(config_json)
    rank, world, n = cfg["rank"], cfg["world"], cfg["coordinates"]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://{cfg['master']}:{cfg['port']}",
                            rank=rank, world_size=world)
    collective = TorchCollective()

    def timed(action: Any) -> float:
        dist.barrier()
        started = time.perf_counter()
        action()
        elapsed = torch.tensor([time.perf_counter() - started], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest worker finishes it
        return float(elapsed.item())

    report: dict[str, Any] = {"plain_s": [], "densities": {}}
    plain_result: np.ndarray | None = None
    for d_index, density in enumerate(cfg["densities"]):
        (x,) = sparse_gradients(n, world, density, cfg["seed"] + d_index, range(rank, rank + 1))
        entry: dict[str, Any] = {"compressed_s": [], "stats": None}
        sketch = SketchCodec(SketchConfig())
        for _ in range(cfg["rounds"]):
            y = x.copy()
            holder: dict[str, Any] = {}

            def compressed(y: np.ndarray = y, holder: dict[str, Any] = holder,
                           sketch: SketchCodec = sketch) -> None:
                holder["stats"] = run_sync(sketch.aggregate(y, world=world, key="bench"),
                                           collective.start)

            entry["compressed_s"].append(timed(compressed))
            entry["stats"] = holder["stats"].as_dict()
            if d_index == 0:
                plain = torch.from_numpy(x.copy())
                report["plain_s"].append(timed(lambda plain=plain: dist.all_reduce(plain)))
                plain_result = plain.numpy()
            if d_index == 0 and plain_result is not None:
                diff = np.abs(y.astype(np.float64) - plain_result)
                scale = np.maximum(np.abs(plain_result), 1e-30)
                entry["max_rel_diff_vs_plain"] = float((diff / scale)[plain_result != 0].max(
                    initial=0.0))
                entry["nonzero_pattern_equal"] = bool(np.array_equal(y != 0, plain_result != 0))
        report["densities"][str(density)] = entry
        del x
    if rank == 0:
        print(json.dumps(report), flush=True)
    dist.destroy_process_group()
    return 0


def run_lab(coordinates: int, densities: list[float], rounds: int,
            progress: Console) -> dict[str, Any]:
    """Start the workers in a fresh lab; returns rank 0's report or {'skipped': why}."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return {"skipped": "torch is not installed (pip install 'gleam[train]')"}
    from gleam.peer.lab.netns import NetLab, lab_unavailable_reason

    why = lab_unavailable_reason()
    if why is not None:
        return {"skipped": f"network namespace lab unavailable: {why}"}
    with NetLab() as lab:
        hosts = [lab.add_host(f"w{i}") for i in range(LAB_WORKERS)]
        for host in hosts:
            lab.shape(host, LAB_RATE_MBIT)
        progress.log(f"lab: {LAB_WORKERS} hosts at {LAB_RATE_MBIT} Mbit/s, "
                     f"{coordinates:,} coordinates, densities {densities}")
        env = {**os.environ, "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"}
        procs = []
        for rank, host in enumerate(hosts):
            cfg = {"rank": rank, "world": LAB_WORKERS, "coordinates": coordinates,
                   "densities": densities, "rounds": rounds, "seed": 2024,
                   "master": hosts[0].address, "port": LAB_PORT}
            procs.append(host.start(
                [sys.executable, "-m", "gleam.peer.bench.compression", "--lab-worker",
                 json.dumps(cfg)],
                stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL, text=True, env=env,
            ))
        try:
            out, _ = procs[0].communicate(timeout=1800)
            for proc in procs[1:]:
                proc.wait(60)
        except subprocess.TimeoutExpired:
            return {"skipped": "lab workers did not finish within 30 minutes"}
        if procs[0].returncode != 0 or not out.strip():
            return {"skipped": f"lab worker 0 failed (exit {procs[0].returncode})"}
        report: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return report


# ---------------------------------------------------------------- report


def run_compression_bench(
    *, coordinates: int, lab_coordinates: int, lab_densities: list[float], rounds: int,
    quick: bool, lab: bool, as_json: bool,
) -> int:
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("gleam-peer bench compression: needs numpy; pip install 'gleam[train]'",
              file=sys.stderr)
        return 1
    progress = Console(stderr=True)
    block = 1 << 16 if quick else 1 << 20
    copy_gbps = memory_copy_gbps(max(coordinates, 1 << 24))  # beyond the caches
    sims: list[SimResult] = []
    for density in DENSITIES:
        for world in WORKERS:
            progress.log(f"simulating {world} workers, union density {density:.1%}")
            sims.append(simulate(coordinates, world, density, block, seed=len(sims) + 1))
    peel: list[dict[str, Any]] = []
    for count in PEEL_COUNTS:
        trials = max(20, min(2000, (200_000 if quick else 3_000_000) // count))
        failed, trials, ratio = peel_failure_rate(count, trials, seed=count)
        peel.append({"count": count, "ratio": ratio, "trials": trials, "failed": failed,
                     "failure_rate": failed / trials})
    load_before = os.getloadavg()
    lab_report: dict[str, Any] = (run_lab(lab_coordinates, lab_densities, rounds, progress) if lab
                  else {"skipped": "--no-lab"})
    if "skipped" not in lab_report:
        # The codec is CPU-bound here (4 workers share this machine's cores):
        # other load on the machine slows the compressed runs, not the plain.
        lab_report["load_average_before"] = load_before[0]
        lab_report["cpus"] = os.cpu_count()

    rows = []
    for sim in sims:
        if sim.world == 4:
            rows.append(Row(f"encode, {sim.density:.1%} union (1 core)", sim.encode_gbps,
                            "memory copy", copy_gbps, "GB/s"))
            rows.append(Row(f"decode, {sim.density:.1%} union (1 core)", sim.decode_gbps,
                            "memory copy", copy_gbps, "GB/s"))
    rows.extend(_lab_rows(lab_report, lab_coordinates))
    meta = {
        "params": {"coordinates": coordinates, "block": block, "quick": quick,
                   "lab_coordinates": lab_coordinates, "lab_densities": lab_densities,
                   "rounds": rounds, "lab_workers": LAB_WORKERS, "lab_rate_mbit": LAB_RATE_MBIT},
        "simulations": [s.as_dict() for s in sims],
        "peel": peel,
        "lab": lab_report,
    }
    if not as_json:
        _print_tables(sims, peel, lab_report)
    print_report("compression", rows, meta, as_json=as_json)
    return 0


def _lab_rows(report: dict[str, Any], n: int) -> list[Row]:
    if "skipped" in report:
        return []
    plain = statistics.median(report["plain_s"])
    rows = []
    for density, entry in report["densities"].items():
        compressed = statistics.median(entry["compressed_s"])
        speedup = plain / compressed
        target = float(density) == TARGET_DENSITY
        rows.append(Row(
            f"aggregation, {LAB_WORKERS} workers, {float(density):.1%} union, "
            f"{n / 1e6:g}M coords, {LAB_RATE_MBIT} Mbit/s",
            4 * n / compressed / 1e9, "plain allreduce", 4 * n / plain / 1e9, "GB/s",
            target=f">= {AGGREGATION_TARGET}x" if target else "",
            met=speedup >= AGGREGATION_TARGET if target else None,
        ))
    return rows


def _print_tables(sims: list[SimResult], peel: list[dict[str, Any]],
                  lab_report: dict[str, Any]) -> None:
    from rich.table import Table

    console = Console()
    table = Table(title="compression ratio and peel failures (simulated workers)")
    for column in ("union density", "workers", "union", "ratio", "sketch blocks", "raw blocks",
                   "failed blocks", "exact"):
        table.add_column(column)
    for s in sims:
        table.add_row(f"{s.density:.1%}", str(s.world), f"{s.union:,}", f"{s.ratio:.1f}x",
                      str(s.blocks_sketch), str(s.blocks_raw),
                      f"{s.blocks_failed} ({s.failure_rate:.2%})",
                      "yes" if s.mismatches == 0 else f"NO ({s.mismatches})")
    console.print(table)
    table = Table(title="peel failures per block at the default ratio")
    for column in ("union nonzeros per block", "cells per nonzero", "blocks", "failed", "rate"):
        table.add_column(column)
    for p in peel:
        table.add_row(f"{p['count']:,}", f"{p['ratio']:.2f}", str(p["trials"]), str(p["failed"]),
                      f"{p['failure_rate']:.2%}")
    console.print(table)
    if "skipped" in lab_report:
        console.print(f"lab aggregation skipped: {lab_report['skipped']}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--lab-worker":
        sys.exit(lab_worker_main(sys.argv[2]))
    sys.exit("usage: python -m gleam.peer.bench.compression --lab-worker CONFIG_JSON "
             "(run `gleam-peer bench compression` instead)")
