"""``gleam-peer bench batch``: adaptive batch sizes against static ones, in real training.

Four real worker processes train one model with torch.distributed (gloo, on
loopback): synchronous data parallelism, each worker's gradient weighted by
its share of the global batch (``gleam.peer.tuning.ddp.exchange_gradients``),
the learning rate scaled with the global batch (``lr_gain``), batches drawn
by ``HeterogeneousBatchSampler``. The task: a 32-64-64-10 MLP classifying
generated data (a random teacher network's labels with noise; best possible
accuracy about 0.90).

The workers differ as a home LAN does. One machine cannot have four GPUs
and Wi-Fi, so each worker has a documented speed knob (``PROFILES``): after
its real forward and backward pass it sleeps until ``overhead + per_sample *
batch`` has passed (its device's speed), then for ``rtt + 1.5 * gradient
bytes / bandwidth`` (its link's share of a ring all-reduce) before the real
all-reduce. Everyone waits for the slowest worker in the all-reduce, exactly
as on real hardware; the clock is real wall time.

Compared, each over ``--seeds`` seeds with a fixed training-time budget:
static small, medium and large per-worker batches (16, 64, 256), the
Pollux-style goodput heuristic and the PPO policy (both from 32 per worker).
Measured: training time to the target test accuracy, and the test accuracy
when the budget is spent. Evaluation pauses the clock.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gleam.peer.bench.report import Row, positive_int, print_report

HELP = "adaptive batch sizes (PPO, Pollux-style) against static batches, 4 workers"
DESCRIPTION = (
    "Train a small model with four torch.distributed (gloo, loopback) workers of different "
    "speeds and links (a documented per-worker speed knob) and compare static batch sizes, "
    "a Pollux-style goodput heuristic and the PPO batch-size policy: time to a target "
    "accuracy and accuracy after a fixed time, over several seeds. Needs torch (gleam[train])."
)

TIME_TARGET = 0.54  # PPO's time to accuracy over the best static batch's


@dataclass(frozen=True)
class WorkerProfile:
    """One emulated device and its link (the speed knob)."""

    name: str
    per_sample_s: float
    overhead_s: float
    rtt_ms: float
    bandwidth_bps: float
    max_batch: int  # what its memory allows

    def link_s(self, gradient_bytes: int) -> float:
        return self.rtt_ms / 1000 + 1.5 * gradient_bytes * 8 / self.bandwidth_bps


PROFILES = (
    WorkerProfile("desktop GPU, Ethernet", 10e-6, 0.002, 0.3, 1e9, 2048),
    WorkerProfile("laptop GPU, Wi-Fi 5", 30e-6, 0.002, 2.0, 3e8, 1024),
    WorkerProfile("laptop CPU, Wi-Fi 4", 80e-6, 0.003, 3.0, 1e8, 512),
    WorkerProfile("mini PC, Ethernet", 160e-6, 0.003, 0.5, 1e9, 256),
)


@dataclass(frozen=True)
class RunSpec:
    label: str
    policy: str  # static | pollux | ppo
    initial: int  # per-worker batch at the start


RUNS = (
    RunSpec("static small", "static", 16),
    RunSpec("static medium", "static", 64),
    RunSpec("static large", "static", 256),
    RunSpec("pollux-style", "pollux", 32),
    RunSpec("ppo", "ppo", 32),
)
STATIC_LABELS = ("static small", "static medium", "static large")


@dataclass(frozen=True)
class BenchConfig:
    seeds: list[int]
    budget_s: float
    target: float
    interval: int
    eval_every_s: float
    base_batch: int = 64
    base_lr: float = 0.01
    min_batch: int = 8
    train_size: int = 60000
    test_size: int = 10000
    runs: tuple[str, ...] = tuple(r.label for r in RUNS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seeds", type=positive_int, default=3, help="seeds per policy (3)")
    parser.add_argument("--budget", type=float, default=15.0,
                        help="training seconds per run (15)")
    parser.add_argument("--target", type=float, default=0.78,
                        help="target test accuracy (0.78)")
    parser.add_argument("--interval", type=positive_int, default=20,
                        help="iterations per tuner observation (20)")
    parser.add_argument("--quick", action="store_true",
                        help="one seed, 2 s per run: checks that everything runs")
    parser.add_argument("--runs", default=",".join(r.label for r in RUNS),
                        help="comma-separated subset of: " + ", ".join(r.label for r in RUNS))


def main(args: argparse.Namespace) -> int:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        print("gleam-peer bench batch: needs torch; install it with pip install 'gleam[train]'",
              file=sys.stderr)
        return 1
    if not args.budget > 0 or not 0 < args.target <= 1:
        print("gleam-peer bench batch: --budget must be positive and --target in (0, 1]",
              file=sys.stderr)
        return 2
    seeds = 1 if args.quick else args.seeds
    budget = 2.0 if args.quick else args.budget
    runs = tuple(label.strip() for label in args.runs.split(",") if label.strip())
    unknown = set(runs) - {r.label for r in RUNS}
    if unknown:
        raise SystemExit(f"gleam-peer bench batch: unknown runs {sorted(unknown)}")
    config = BenchConfig(
        runs=runs, seeds=list(range(seeds)), budget_s=budget, target=args.target,
        interval=args.interval,
        eval_every_s=0.1 if args.quick else 0.25,
        train_size=20000 if args.quick else 60000, test_size=4000 if args.quick else 10000,
    )
    return run_batch_bench(config, as_json=args.json)


# ------------------------------------------------------------------ the task


def make_task(train_size: int, test_size: int, seed: int = 1234) -> tuple[Any, ...]:
    """Inputs N(0, I) in 32 dimensions; labels of a random ReLU teacher with Gumbel noise."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    dim, hidden, classes = 32, 32, 10
    w1 = torch.randn(dim, hidden, generator=gen) / math.sqrt(dim) * 1.5
    b1 = torch.randn(hidden, generator=gen) * 0.5
    w2 = torch.randn(hidden, classes, generator=gen) / math.sqrt(hidden) * 3.0
    x = torch.randn(train_size + test_size, dim, generator=gen)
    logits = torch.relu(x @ w1 + b1) @ w2
    uniform = torch.rand(len(x), classes, generator=gen).clamp_min(1e-9)
    y = (logits - 0.3 * torch.log(-torch.log(uniform))).argmax(1)
    return x[:train_size], y[:train_size], x[train_size:], y[train_size:]


def make_model(seed: int) -> Any:
    import torch

    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 10),
    )


# ----------------------------------------------------------------- a worker

# Rank 0's control block, shared with everyone in each exchange (so all
# ranks act on identical values): training clock, learning-rate gain,
# evaluate?, stop?, then every worker's batch size.
CTRL_CLOCK, CTRL_GAIN, CTRL_EVAL, CTRL_STOP, CTRL_SIZES = 0, 1, 2, 3, 4
STAT_COMPUTE, STAT_COMM, STAT_LOSS, STAT_UTIL = 0, 1, 2, 3
STATS = 4


def _sleep_until(deadline: float) -> None:
    while True:
        left = deadline - time.perf_counter()
        if left <= 0:
            return
        time.sleep(left)


def _run_one(spec: RunSpec, seed: int, config: BenchConfig, rank: int, world: int,
             task: tuple[Any, ...]) -> dict[str, Any] | None:
    import torch
    import torch.distributed as dist

    from gleam.peer.tuning import BatchTuner, IterationSample
    from gleam.peer.tuning.ddp import HeterogeneousBatchSampler, exchange_gradients, set_lr
    from gleam.peer.tuning.system import UtilizationMeter

    xtr, ytr, xte, yte = task
    profile = PROFILES[rank]
    model = make_model(seed)
    params = list(model.parameters())
    grad_bytes = 4 * sum(p.numel() for p in params)
    link_s = profile.link_s(grad_bytes)
    optimizer = torch.optim.SGD(params, lr=config.base_lr, momentum=0.9)
    limits = [min(p.max_batch, 4096) for p in PROFILES]
    sizes = [min(spec.initial, m) for m in limits]
    sampler = HeterogeneousBatchSampler(len(xtr), sizes, rank, seed=seed)
    tuner = None
    if rank == 0:
        tuner = BatchTuner(
            sizes, max_batch=limits, min_batch=config.min_batch, base_batch=config.base_batch,
            interval=config.interval, policy=spec.policy, seed=seed, job=spec.label,
        )
        for i, p in enumerate(PROFILES):
            tuner.set_link(i, p.rtt_ms, p.bandwidth_bps)
    meter = UtilizationMeter()
    ctrl_width = CTRL_SIZES + world
    ctrl = [0.0] * ctrl_width
    gain = 1.0
    clock = 0.0
    next_eval = 0.0
    prev_comm = 0.0
    evals: list[tuple[float, float]] = []
    iterations = samples = 0
    epoch = 0
    batches = iter(sampler)
    while True:
        try:
            indices = next(batches)
        except StopIteration:
            epoch += 1
            sampler.set_epoch(epoch)
            batches = iter(sampler)
            indices = next(batches)
        start = time.perf_counter()
        optimizer.zero_grad()
        out = model(xtr[indices])
        loss = torch.nn.functional.cross_entropy(out, ytr[indices])
        loss.backward()
        _sleep_until(start + profile.overhead_s + profile.per_sample_s * len(indices))
        compute = time.perf_counter() - start
        time.sleep(link_s)
        row = [0.0] * STATS
        row[STAT_COMPUTE], row[STAT_COMM] = compute, prev_comm
        row[STAT_LOSS], row[STAT_UTIL] = float(loss.detach()) * len(indices), meter.sample()
        ran = list(sizes)
        ex = exchange_gradients(params, len(indices), sum(ran),
                                stats=row + (ctrl if rank == 0 else [0.0] * ctrl_width))
        shared = ex.stats[0][STATS:]
        gain = shared[CTRL_GAIN] or 1.0
        set_lr(optimizer, config.base_lr, gain)
        optimizer.step()
        end = time.perf_counter()
        prev_comm = end - start - compute
        iterations += 1
        samples += sum(ran)
        new_sizes = [round(b) for b in shared[CTRL_SIZES:]]
        if iterations > 1 and new_sizes != sizes:
            sizes = new_sizes
            sampler.set_batch_sizes(sizes)
        if shared[CTRL_EVAL] or shared[CTRL_STOP]:
            if rank == 0:
                with torch.no_grad():
                    acc = float((model(xte).argmax(1) == yte).float().mean())
                evals.append((round(shared[CTRL_CLOCK], 4), acc))
            dist.barrier()  # evaluation is not training time: ``end`` was taken before it
            if shared[CTRL_STOP]:
                break
        if rank == 0 and tuner is not None:
            clock += end - start
            stats = ex.stats
            decided = tuner.observe(IterationSample(
                compute_s=[s[STAT_COMPUTE] for s in stats],
                comm_wait_s=[s[STAT_COMM] for s in stats],
                loss=sum(s[STAT_LOSS] for s in stats) / sum(ran),
                local_sqr_norms=ex.local_sqr_norms, global_sqr_norm=ex.global_sqr_norm,
                utilization=[s[STAT_UTIL] for s in stats],
                seconds=end - start, batch_sizes=ran,
            ))
            del decided  # the tuner keeps its sizes; they travel in the control block
            ctrl = [0.0] * ctrl_width
            ctrl[CTRL_CLOCK] = clock
            ctrl[CTRL_GAIN] = tuner.lr_gain()
            ctrl[CTRL_SIZES:] = [float(b) for b in tuner.batch_sizes]
            if clock >= next_eval:
                ctrl[CTRL_EVAL] = 1.0
                next_eval += config.eval_every_s
            if clock >= config.budget_s:
                ctrl[CTRL_STOP] = 1.0
    if rank != 0 or tuner is None:
        return None
    reached = next((t for t, a in evals if a >= config.target), None)
    return {
        "label": spec.label, "policy": spec.policy, "seed": seed,
        "time_to_target_s": reached, "final_accuracy": evals[-1][1],
        "iterations": iterations, "samples": samples,
        "final_batches": list(tuner.batch_sizes),
        "noise_scale": tuner.noise.noise_scale,
        "decisions": [[d.iteration, list(d.after)] for d in tuner.decisions][-12:],
        "evals": evals,
    }


def worker_main(rank: int, world: int, store: str, config: BenchConfig) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=world, timeout=__import__("datetime").timedelta(60))
    try:
        task = make_task(config.train_size, config.test_size)
        wanted = set(config.runs)
        for seed in config.seeds:
            for spec in RUNS:
                if spec.label not in wanted:
                    continue
                result = _run_one(spec, seed, config, rank, world, task)
                dist.barrier()
                if result is not None:
                    print(json.dumps(result), flush=True)
    finally:
        dist.destroy_process_group()


# --------------------------------------------------------------- the driver


def run_workers(config: BenchConfig, progress: Any = None) -> list[dict[str, Any]]:
    """Start the four workers, collect rank 0's results, stop them all."""
    world = len(PROFILES)
    env = {
        **os.environ,
        "GLOO_SOCKET_IFNAME": "lo",  # gloo must stay on loopback
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
    }
    blob = json.dumps(asdict(config))
    procs: list[subprocess.Popen[str]] = []
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gleam-bench-batch-") as tmp:
        logs = [Path(tmp) / f"worker{r}.log" for r in range(world)]
        # The workers meet through a file: a port picked in advance could be
        # taken by another process before rank 0 binds it.
        store = str(Path(tmp) / "rendezvous")
        try:
            for rank in range(world):
                with open(logs[rank], "w") as log:
                    procs.append(subprocess.Popen(
                        [sys.executable, "-m", "gleam.peer.bench.batch", "--worker",
                         str(rank), str(world), store, blob],
                        stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL,
                        stderr=log, text=True, env=env,
                    ))
            assert procs[0].stdout is not None
            for line in procs[0].stdout:
                result = json.loads(line)
                results.append(result)
                if progress is not None:
                    t = result["time_to_target_s"]
                    progress.log(f"{result['label']:>14} seed {result['seed']}: target "
                                 f"{'not reached' if t is None else f'at {t:.2f} s'}, "
                                 f"final accuracy {result['final_accuracy']:.3f}, "
                                 f"batches {result['final_batches']}")
            codes = [p.wait(60) for p in procs]
            if any(codes):
                tail = "\n".join(log.read_text(errors="replace")[-2000:] for log in logs)
                raise RuntimeError(f"bench workers failed (exit codes {codes}):\n{tail}")
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    return results


def summarize(results: list[dict[str, Any]], config: BenchConfig) -> dict[str, dict[str, Any]]:
    """Per run label: median time to target (inf if a seed missed) and median final accuracy."""
    out: dict[str, dict[str, Any]] = {}
    for label in config.runs:
        mine = [r for r in results if r["label"] == label]
        if not mine:
            continue
        times = [math.inf if r["time_to_target_s"] is None else r["time_to_target_s"]
                 for r in mine]
        out[label] = {
            "time_to_target_s": statistics.median(times),
            "final_accuracy": statistics.median(r["final_accuracy"] for r in mine),
            "reached": sum(t < math.inf for t in times),
            "seeds": len(mine),
            "times": [None if t == math.inf else t for t in times],
            "accuracies": [r["final_accuracy"] for r in mine],
            "final_batches": [r["final_batches"] for r in mine],
        }
    return out


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def run_batch_bench(config: BenchConfig, *, as_json: bool) -> int:
    from rich.console import Console

    progress = Console(stderr=True)
    progress.log(f"4 workers, {len(config.seeds)} seed(s), {config.budget_s:.0f} s of training "
                 f"per run, target accuracy {config.target}")
    started = time.monotonic()
    results = run_workers(config, progress)
    summary = summarize(results, config)
    if not all(k in summary for k in ("ppo", "pollux-style", *STATIC_LABELS)):
        # A partial run (--runs): report what was measured, no comparison.
        print_report("batch", [], {"policies": summary, "runs": results,
                                   "target_met": None}, as_json=as_json)
        if not as_json:
            print("a partial run (--runs) compares nothing; --json has what each policy did")
        return 0
    statics = {k: v for k, v in summary.items() if k in STATIC_LABELS}
    best_time_label = min(statics, key=lambda k: (statics[k]["time_to_target_s"],
                                                  -statics[k]["final_accuracy"]))
    best_acc_label = max(statics, key=lambda k: statics[k]["final_accuracy"])
    ppo, pollux = summary["ppo"], summary["pollux-style"]
    best_time = statics[best_time_label]["time_to_target_s"]
    ratio = ppo["time_to_target_s"] / best_time if math.isfinite(best_time) else math.nan
    time_met = bool(ratio <= TIME_TARGET)
    acc_met = ppo["final_accuracy"] >= statics[best_acc_label]["final_accuracy"]
    pollux_met = ppo["time_to_target_s"] < pollux["time_to_target_s"]
    inf_safe = lambda x: x if math.isfinite(x) else float("nan")  # noqa: E731
    rows = [
        Row(f"time to {config.target:.0%} accuracy", inf_safe(ppo["time_to_target_s"]),
            best_time_label, inf_safe(best_time), "s",
            target=f"<= {TIME_TARGET}x best static", met=time_met),
        Row(f"accuracy after {config.budget_s:.0f} s", ppo["final_accuracy"] * 100,
            best_acc_label, statics[best_acc_label]["final_accuracy"] * 100, "%",
            target=">= best static", met=acc_met),
        Row(f"time to {config.target:.0%} accuracy", inf_safe(ppo["time_to_target_s"]),
            "pollux-style", inf_safe(pollux["time_to_target_s"]), "s",
            target="< pollux-style", met=pollux_met),
    ]
    meta = {
        "params": {
            **{k: v for k, v in asdict(config).items() if k != "runs"},
            "workers": [asdict(p) for p in PROFILES],
            "runs": [asdict(r) for r in RUNS if r.label in config.runs],
            "link": "loopback gloo; device and link speeds emulated by the per-worker knob",
            "statistic": "median over seeds; time is training wall time, evaluation excluded",
        },
        "policies": {
            label: {**s, "time_to_target_s": _finite(s["time_to_target_s"])}
            for label, s in summary.items()
        },
        "ratio_ppo_to_best_static": _finite(ratio),
        "targets": {"time_to_accuracy": time_met, "final_accuracy": acc_met,
                    "beats_pollux": pollux_met},
        "target_met": time_met and acc_met and pollux_met,
        "wall_s": round(time.monotonic() - started, 1),
        "runs": results,
    }
    print_report("batch", rows, meta, as_json=as_json)
    return 0


def _entry(argv: list[str]) -> int:
    if argv[:1] == ["--worker"]:
        rank, world, store = int(argv[1]), int(argv[2]), argv[3]
        raw = json.loads(argv[4])
        raw["runs"] = tuple(raw["runs"])
        worker_main(rank, world, store, BenchConfig(**raw))
        return 0
    parser = argparse.ArgumentParser(prog="gleam-peer bench batch", description=DESCRIPTION)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_arguments(parser)
    return main(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(_entry(sys.argv[1:]))
