#!/usr/bin/env python3
"""Data-parallel training whose per-worker batch sizes a gleam BatchTuner chooses.

    python examples/train_batch_tuned.py --workers 3 --slow 1,2,4 --steps 600
    python examples/train_batch_tuned.py --policy pollux --state-dir ~/.local/state/gleam

Runs ``--workers`` processes on this machine (torch.distributed, gloo, on
loopback); on a real LAN start one per peer with the same code and a
``MASTER_ADDR`` every peer reaches. ``--slow`` makes worker i that many
times slower (it sleeps after computing), standing in for weaker hardware.

Each iteration, every worker:
  1. takes its slice of the global batch from HeterogeneousBatchSampler,
  2. computes its mean gradient,
  3. joins one all-reduce that weights its gradient by its share b_i / B
     (so the result is the exact global-batch gradient) and also gathers
     every worker's timings, loss and squared gradient norm,
  4. steps with the learning rate scaled by the tuner's gain.
Rank 0 feeds the tuner and sends its decisions to everyone in the next
all-reduce. With ``--state-dir`` (or a running agent at the default state
directory) each worker posts the tuner's state to its local gleam agent,
which shows it in ``gleam-peer status`` and returns its measured links.

Needs torch (``pip install 'gleam[train]'``).
"""

from __future__ import annotations

import argparse
import math
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from gleam.peer.tuning import BatchTuner, IterationSample
from gleam.peer.tuning.ddp import HeterogeneousBatchSampler, exchange_gradients, set_lr
from gleam.peer.tuning.reporting import AgentReporter
from gleam.peer.tuning.system import UtilizationMeter

BASE_LR = 0.01
BASE_BATCH = 64


def make_data(n: int = 40000) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    w1 = torch.randn(32, 32, generator=gen) / math.sqrt(32) * 1.5
    w2 = torch.randn(32, 10, generator=gen) / math.sqrt(32) * 3.0
    x = torch.randn(n, 32, generator=gen)
    noise = -0.3 * torch.log(-torch.log(torch.rand(n, 10, generator=gen).clamp_min(1e-9)))
    return x, (torch.relu(x @ w1) @ w2 + noise).argmax(1)


def worker(rank: int, args: argparse.Namespace) -> None:
    world = args.workers
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank,
                            world_size=world)
    torch.manual_seed(0)
    x, y = make_data()
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=BASE_LR, momentum=0.9)
    sizes = [32] * world
    sampler = HeterogeneousBatchSampler(len(x), sizes, rank)
    slow = [float(s) for s in args.slow.split(",")] if args.slow else [1.0] * world
    tuner = BatchTuner(sizes, max_batch=1024, min_batch=8, base_batch=BASE_BATCH,
                       interval=args.interval, policy=args.policy, job="example") \
        if rank == 0 else None
    reporter = AgentReporter("example", rank, args.state_dir)
    meter = UtilizationMeter()
    control = [1.0] + [0.0] * world  # rank 0's LR gain and sizes, shared in the next exchange
    prev_comm, epoch, step = 0.0, 0, 0
    while step < args.steps:
        for indices in sampler:
            start = time.perf_counter()
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[indices]), y[indices])
            loss.backward()
            time.sleep((time.perf_counter() - start) * (slow[rank] - 1))  # the speed knob
            compute = time.perf_counter() - start
            ran = list(sizes)
            row = [compute, prev_comm, float(loss.detach()) * len(indices), meter.sample()]
            ex = exchange_gradients(model.parameters(), len(indices), sum(ran),
                                    stats=row + (control if rank == 0 else [0.0] * (world + 1)))
            # Everyone acts on rank 0's row of the same exchange: identical values.
            gain, decided = ex.stats[0][4], [int(v) for v in ex.stats[0][5:]]
            set_lr(optimizer, BASE_LR, gain)
            optimizer.step()
            prev_comm = time.perf_counter() - start - compute
            if all(decided) and decided != sizes:
                sizes = decided
                sampler.set_batch_sizes(sizes)  # from the next batch on, on every worker
            if tuner is not None and tuner.observe(IterationSample(
                compute_s=[r[0] for r in ex.stats], comm_wait_s=[r[1] for r in ex.stats],
                loss=sum(r[2] for r in ex.stats) / sum(ran),
                local_sqr_norms=ex.local_sqr_norms, global_sqr_norm=ex.global_sqr_norm,
                utilization=[r[3] for r in ex.stats], batch_sizes=ran,
            )) is not None:
                control = [tuner.lr_gain(), *(float(b) for b in tuner.batch_sizes)]
                links = reporter.report(tuner.status())
                if links:
                    tuner.set_link(0, links.get("rtt_ms"), links.get("bandwidth_bps"))
                print(f"step {step}: batches {list(tuner.batch_sizes)}, "
                      f"loss {tuner.last_observation.loss:.3f}, lr x{gain:.2f}, "
                      f"noise scale {tuner.status()['noise_scale']}", flush=True)
            step += 1
            if step >= args.steps:
                break
        else:
            epoch += 1
            sampler.set_epoch(epoch)
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--interval", type=int, default=20, help="iterations per decision")
    parser.add_argument("--policy", default="ppo", choices=("ppo", "pollux", "static"))
    parser.add_argument("--slow", default="1,2,4", help="per-worker slowdown factors")
    parser.add_argument("--state-dir", default=None, help="the local agent's state directory")
    parser.add_argument("--port", type=int, default=29517)
    args = parser.parse_args()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(worker, args=(args,), nprocs=args.workers)


if __name__ == "__main__":
    main()
