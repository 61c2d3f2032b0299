"""The DDP communication hook on real gloo process groups (loopback, 3 ranks).

Each rank trains two copies of a small embedding model, one with DDP's
default allreduce and one with the sketch hook, from the same parameters at
every step: the averaged gradients must agree to fp32 rounding (the hook's
are the exactly rounded averages). The same run checks the OR-by-SUM path
used for backends without a bitwise OR, and that a NaN gradient propagates
as it does with the default hook.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the train extra (torch) is not installed")

WORLD = 3
ROOT = Path(__file__).resolve().parent.parent


def worker(rank: int, world: int, store: str, out: str) -> None:
    """One rank (run in a child process)."""
    import numpy as np
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from gleam.peer.compress.aggregation import run_sync
    from gleam.peer.compress.collective import TorchCollective
    from gleam.peer.compress.ddp import register

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=world)

    def net():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.EmbeddingBag(60000, 8, mode="sum"),
                                   torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    plain, hooked = DDP(net()), DDP(net())
    hook = register(hooked, block=1 << 14)
    gen = torch.Generator().manual_seed(rank)
    report = {"max_rel_diff": 0.0, "steps": 0}
    for step in range(4):
        with torch.no_grad():
            for p, q in zip(plain.parameters(), hooked.parameters(), strict=True):
                q.copy_(p)
        idx = torch.randint(0, 60000, (32, 6), generator=gen)
        target = torch.randn(32, 1, generator=gen)
        for model in (plain, hooked):
            model.zero_grad()
            ((model(idx) - target) ** 2).mean().backward()
        for p, q in zip(plain.parameters(), hooked.parameters(), strict=True):
            scale = p.grad.abs().max().item() or 1.0
            diff = (p.grad - q.grad).abs().max().item() / scale
            report["max_rel_diff"] = max(report["max_rel_diff"], diff)
            assert torch.equal(p.grad != 0, q.grad != 0), f"support differs at step {step}"
        with torch.no_grad():
            for p in plain.parameters():
                p.add_(p.grad, alpha=-0.05)
        report["steps"] += 1
    report["stats"] = hook.stats.as_dict()

    # NaN in one rank's gradient: the default hook gives NaN there, so must the codec.
    with torch.no_grad():
        for p, q in zip(plain.parameters(), hooked.parameters(), strict=True):
            q.copy_(p)
    for model in (plain, hooked):
        model.zero_grad()
        loss = (model(torch.tensor([[1, 2]])) ** 2).sum()
        if rank == 1:
            loss = loss * float("nan")
        loss.backward()
    report["nan_matches"] = all(
        torch.equal(torch.isnan(p.grad), torch.isnan(q.grad))
        for p, q in zip(plain.parameters(), hooked.parameters(), strict=True))
    hook.close()

    # The OR-by-SUM path (NCCL has no bitwise OR), on gloo.
    emulated = TorchCollective(native_or=False)
    native = TorchCollective()
    bits = np.random.default_rng(rank).integers(0, 256, 1000).astype(np.uint8)
    a, b = bits.copy(), bits.copy()
    from gleam.peer.compress.aggregation import Reduction

    emulated.start(Reduction("or", a, "t")).wait()
    native.start(Reduction("or", b, "t")).wait()
    report["or_by_sum_matches"] = bool((a == b).all())
    x = np.zeros(1 << 16, np.float32)
    x[np.random.default_rng(rank + 10).choice(x.size, 500, replace=False)] = rank + 1.5
    expected = torch.from_numpy(x.copy())
    dist.all_reduce(expected)
    from gleam.peer.compress import SketchCodec, SketchConfig

    run_sync(SketchCodec(SketchConfig(block=1 << 14)).aggregate(x, world=world),
             emulated.start)
    report["emulated_sum_matches"] = bool(np.array_equal(x, expected.numpy()))
    # Tear down only when both ranks are done and no DDP reducer holds the group.
    dist.barrier()
    del plain, hooked
    dist.destroy_process_group()
    Path(out).write_text(json.dumps(report))


@pytest.mark.slow
def test_hook_matches_default_allreduce_on_gloo(tmp_path):
    store = str(tmp_path / "rendezvous")  # a file: no port to race for
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c",
             f"from tests.test_compress_ddp import worker; "
             f"worker({rank}, {WORLD}, {store!r}, {str(tmp_path / f'r{rank}.json')!r})"],
            cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True,
        )
        for rank in range(WORLD)
    ]
    errors = []
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        if proc.returncode != 0:
            errors.append(err[-3000:])
    assert not errors, "\n".join(errors)
    reports = [json.loads((tmp_path / f"r{r}.json").read_text()) for r in range(WORLD)]
    for report in reports:
        assert report["steps"] == 4
        assert report["max_rel_diff"] < 1e-6
        totals = report["stats"]["totals"]
        assert totals["blocks_sketch"] > 0 and totals["ratio"] > 1.5
        assert report["nan_matches"]
        assert report["or_by_sum_matches"] and report["emulated_sum_matches"]
