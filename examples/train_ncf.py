"""Data-parallel NCF (neural collaborative filtering) with gleam's lossless gradient codec.

An embedding-heavy recommender on generated implicit-feedback data: each
step touches a few thousand of the embedding rows, so the gradient is
mostly zeros and the ``sketch`` codec sends a small fraction of it, with
exactly the same sums.

Three ways to run it:

    # one process per device, ranks from the mesh (or torchrun's env://):
    gleam-peer train --world 4 -- python examples/train_ncf.py --hook

    # N processes on this machine, loopback; trains without and with the hook:
    python examples/train_ncf.py --local 2 --steps 5 --tiny

    # N network namespaces behind a bridge shaped to --rate Mbit/s (root):
    python examples/train_ncf.py --lab 4 --rate 1000 --steps 40

The last two print both loss curves and per-iteration times (JSON with
--json). Rank 0 of a plain run prints one JSON line per step.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

HERE = Path(__file__).resolve()


@dataclass(frozen=True)
class Sizes:
    users: int
    items: int
    dim: int
    batch: int  # positive interactions per worker and step
    negatives: int  # sampled negatives per positive


FULL = Sizes(users=500_000, items=100_000, dim=32, batch=256, negatives=4)
TINY = Sizes(users=3_000, items=800, dim=8, batch=64, negatives=4)


class NeuMF(nn.Module):
    """GMF and MLP towers over user/item embeddings, fused by a linear layer."""

    def __init__(self, sizes: Sizes) -> None:
        super().__init__()
        d = sizes.dim
        self.user_gmf = nn.Embedding(sizes.users, d)
        self.item_gmf = nn.Embedding(sizes.items, d)
        self.user_mlp = nn.Embedding(sizes.users, d)
        self.item_mlp = nn.Embedding(sizes.items, d)
        self.mlp = nn.Sequential(nn.Linear(2 * d, 2 * d), nn.ReLU(), nn.Linear(2 * d, d),
                                 nn.ReLU())
        self.out = nn.Linear(2 * d, 1)
        for table in (self.user_gmf, self.item_gmf, self.user_mlp, self.item_mlp):
            nn.init.normal_(table.weight, std=0.01)

    def forward(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        gmf = self.user_gmf(users) * self.item_gmf(items)
        mlp = self.mlp(torch.cat([self.user_mlp(users), self.item_mlp(items)], dim=-1))
        return self.out(torch.cat([gmf, mlp], dim=-1)).squeeze(-1)


class Interactions:
    """Generated implicit feedback: users in taste clusters, items by Zipf popularity.

    A user's positives come mostly from its cluster's slice of the catalogue,
    so there is something to learn; negatives are uniform items.
    """

    def __init__(self, sizes: Sizes, rank: int, seed: int = 7, clusters: int = 64) -> None:
        self.sizes = sizes
        self.rng = np.random.default_rng((seed, rank))
        self.clusters = clusters
        self.cluster_of_user = np.random.default_rng(seed).integers(0, clusters, sizes.users)
        ranks = np.arange(1, sizes.items // clusters + 1)
        self.popularity = (1.0 / ranks) / (1.0 / ranks).sum()

    def batch(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        s, rng = self.sizes, self.rng
        users = rng.integers(0, s.users, s.batch)
        width = s.items // self.clusters
        slot = rng.choice(width, s.batch, p=self.popularity)
        items = (self.cluster_of_user[users] * width + slot) % s.items
        neg_users = np.repeat(users, s.negatives)
        neg_items = rng.integers(0, s.items, s.batch * s.negatives)
        u = torch.from_numpy(np.concatenate([users, neg_users]))
        i = torch.from_numpy(np.concatenate([items, neg_items]))
        y = torch.cat([torch.ones(s.batch), torch.zeros(s.batch * s.negatives)])
        return u, i, y


def train(sizes: Sizes, steps: int, use_hook: bool, lr: float = 0.05) -> dict[str, Any]:
    """Train on the initialised process group; returns rank 0's curve (others: {})."""
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial model on every rank and in both runs
    model = DistributedDataParallel(NeuMF(sizes))
    hook = None
    if use_hook:
        from gleam.peer.compress.ddp import register

        hook = register(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    data = Interactions(sizes, rank)
    loss_fn = nn.BCEWithLogitsLoss()
    losses, times = [], []
    for _ in range(steps):
        users, items, labels = data.batch()
        dist.barrier()  # steps start together: the times measure the step, not stragglers
        started = time.perf_counter()
        optimizer.zero_grad()
        loss = loss_fn(model(users, items), labels)
        loss.backward()
        optimizer.step()
        elapsed = time.perf_counter() - started
        summary = torch.tensor([loss.item(), elapsed], dtype=torch.float64)
        dist.all_reduce(summary)
        losses.append(summary[0].item() / world)
        times.append(summary[1].item() / world)
        if rank == 0 and os.environ.get("GLEAM_NCF_PROGRESS"):
            print(json.dumps({"step": len(losses), "loss": losses[-1], "seconds": times[-1]}),
                  file=sys.stderr, flush=True)
    result: dict[str, Any] = {"losses": losses, "step_seconds": times, "hook": use_hook,
                              "world": world}
    if hook is not None:
        result["compression"] = hook.stats.as_dict()
        hook.close()
    return result if rank == 0 else {}


def worker_main(args: argparse.Namespace) -> int:
    torch.set_num_threads(1)
    sizes = TINY if args.tiny else FULL
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    try:
        modes = [False, True] if args.both else [args.hook]
        results = [train(sizes, args.steps, mode) for mode in modes]
    finally:
        dist.destroy_process_group()
    if rank == 0:
        print(json.dumps(results), flush=True)
    return 0


# ---------------------------------------------------------------- launchers


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker_argv(args: argparse.Namespace) -> list[str]:
    argv = [sys.executable, str(HERE), "--steps", str(args.steps), "--both"]
    return argv + (["--tiny"] if args.tiny else [])


def _collect(procs: list[subprocess.Popen[str]], timeout: float) -> list[dict[str, Any]]:
    out, err = procs[0].communicate(timeout=timeout)
    for proc in procs[1:]:
        proc.wait(timeout=60)
    if procs[0].returncode != 0:
        raise SystemExit(f"rank 0 failed:\n{err[-3000:]}")
    results: list[dict[str, Any]] = json.loads(out.strip().splitlines()[-1])
    return results


def run_local(args: argparse.Namespace) -> list[dict[str, Any]]:
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()),
           "WORLD_SIZE": str(args.local), "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen(_worker_argv(args), env={**env, "RANK": str(r)}, text=True,
                              stdout=subprocess.PIPE if r == 0 else subprocess.DEVNULL,
                              stderr=subprocess.PIPE if r == 0 else None)
             for r in range(args.local)]
    try:
        return _collect(procs, timeout=600)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()


def run_lab(args: argparse.Namespace) -> list[dict[str, Any]]:
    from gleam.peer.lab.netns import NetLab, lab_unavailable_reason

    why = lab_unavailable_reason()
    if why is not None:
        raise SystemExit(f"--lab needs network namespaces: {why}")
    with NetLab() as lab:
        hosts = [lab.add_host(f"ncf{i}") for i in range(args.lab)]
        for host in hosts:
            lab.shape(host, args.rate)
        env = {**os.environ, "MASTER_ADDR": hosts[0].address, "MASTER_PORT": "29533",
               "WORLD_SIZE": str(args.lab), "GLOO_SOCKET_IFNAME": "eth0",
               "OMP_NUM_THREADS": "1"}
        procs = [host.start(_worker_argv(args), env={**env, "RANK": str(r)}, text=True,
                            stdout=subprocess.PIPE if r == 0 else subprocess.DEVNULL,
                            stderr=subprocess.PIPE if r == 0 else None)
                 for r, host in enumerate(hosts)]
        return _collect(procs, timeout=3600)


def compare(results: list[dict[str, Any]], skip: int) -> dict[str, Any]:
    """Loss curves side by side, and per-iteration times after ``skip`` warm-up steps."""
    plain, hooked = results
    a, b = np.array(plain["losses"]), np.array(hooked["losses"])
    summary = {
        "world": plain["world"],
        "steps": len(a),
        "loss_plain": a.tolist(),
        "loss_hook": b.tolist(),
        "max_abs_loss_diff": float(np.abs(a - b).max()),
        "max_rel_loss_diff": float((np.abs(a - b) / np.abs(a)).max()),
        "step_s_plain": statistics.median(plain["step_seconds"][skip:]),
        "step_s_hook": statistics.median(hooked["step_seconds"][skip:]),
        "compression": hooked.get("compression", {}).get("totals"),
    }
    summary["speedup"] = summary["step_s_plain"] / summary["step_s_hook"]
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--tiny", action="store_true", help="a small model and batch")
    parser.add_argument("--hook", action="store_true", help="aggregate with the sketch codec")
    parser.add_argument("--both", action="store_true", help="train without, then with the hook")
    parser.add_argument("--local", type=int, metavar="N", help="run N processes on loopback")
    parser.add_argument("--lab", type=int, metavar="N", help="run N lab hosts (root)")
    parser.add_argument("--rate", type=int, default=1000, help="lab link rate, Mbit/s")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.local is None and args.lab is None:
        return worker_main(args)
    results = run_local(args) if args.local is not None else run_lab(args)
    summary = compare(results, skip=min(3, args.steps - 1))
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"{summary['world']} workers, {summary['steps']} steps")
    print(f"{'step':>4} {'loss (allreduce)':>18} {'loss (sketch hook)':>20}")
    for step, (x, y) in enumerate(zip(summary["loss_plain"], summary["loss_hook"],
                                      strict=True), 1):
        print(f"{step:>4} {x:>18.7f} {y:>20.7f}")
    print(f"max |loss difference| {summary['max_abs_loss_diff']:.2e} "
          f"(relative {summary['max_rel_loss_diff']:.2e})")
    print(f"median step: {summary['step_s_plain'] * 1e3:.0f} ms with allreduce, "
          f"{summary['step_s_hook'] * 1e3:.0f} ms with the hook ({summary['speedup']:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
