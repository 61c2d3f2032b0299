"""Torch helpers: unequal-batch weighting is the full-batch gradient; the sampler partitions."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from gleam.peer.tuning.ddp import HeterogeneousBatchSampler, set_lr  # noqa: E402

SIZES = (5, 19)  # two workers, very unequal

# Each worker: exchange_gradients over its slice, then the same through DDP with
# UnequalBatchHook; both results are written for the test to compare.
WORKER = textwrap.dedent("""
    import sys, torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from gleam.peer.tuning.ddp import UnequalBatchHook, exchange_gradients
    rank, store, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    sizes = SIZES
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=2)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    gen = torch.Generator().manual_seed(1)
    x, y = torch.randn(sum(sizes), 6, generator=gen), torch.randint(0, 3, (sum(sizes),),
                                                                   generator=gen)
    mine = slice(sum(sizes[:rank]), sum(sizes[:rank + 1]))
    torch.nn.functional.cross_entropy(model(x[mine]), y[mine]).backward()
    ex = exchange_gradients(model.parameters(), sizes[rank], sum(sizes), stats=[rank + 0.5])
    plain = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    ddp = DistributedDataParallel(model)
    hook = UnequalBatchHook()
    hook.set_batch(sizes[rank], sum(sizes))
    ddp.register_comm_hook(hook, UnequalBatchHook.hook)
    torch.nn.functional.cross_entropy(ddp(x[mine]), y[mine]).backward()
    hooked = [p.grad.clone() for p in model.parameters()]
    torch.save({"plain": plain, "hooked": hooked, "stats": ex.stats,
                "local": ex.local_sqr_norms, "global": ex.global_sqr_norm,
                "norms": hook.take_norms()}, out)
    # Gloo aborts ("terminate called without an active exception") when the
    # group is torn down while a peer still runs or a DDP reducer still holds it.
    dist.barrier()
    del ddp
    dist.destroy_process_group()
""").replace("SIZES", repr(SIZES))


def test_unequal_batches_weighted_by_share_give_the_full_batch_gradient(tmp_path):
    # A file rendezvous: a port picked in advance can be taken by another
    # process before rank 0 binds it.
    store = tmp_path / "rendezvous"
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER, str(rank), str(store),
                          str(tmp_path / f"{rank}.pt")], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for rank in range(2)
    ]
    try:
        outputs = [p.communicate(timeout=120)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert all(p.returncode == 0 for p in procs), outputs

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(sum(SIZES), 6, generator=gen)
    y = torch.randint(0, 3, (sum(SIZES),), generator=gen)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    full = [p.grad for p in model.parameters()]
    # An equal-weight average (what plain DDP computes) is measurably different.
    results = [torch.load(tmp_path / f"{rank}.pt") for rank in range(2)]
    for res in results:
        for got, want in zip(res["plain"], full, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        for got, want in zip(res["hooked"], full, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        assert res["stats"] == [[0.5], [1.5]]  # each rank's row, gathered
        assert res["global"] == pytest.approx(sum(float((g * g).sum()) for g in full), rel=1e-5)
        assert res["norms"][1] == pytest.approx(res["global"], rel=1e-5)
    assert results[0]["local"] == results[1]["local"]
    assert results[0]["local"][0] != pytest.approx(results[0]["local"][1])


def test_sampler_partitions_each_epoch_without_overlap():
    sizes = [5, 3, 8]
    samplers = [HeterogeneousBatchSampler(100, sizes, r, seed=4) for r in range(3)]
    steps = [list(s) for s in samplers]
    assert [len(s) for s in steps] == [len(samplers[0])] * 3 == [6] * 3  # 100 // 16
    seen: list[int] = []
    for batches in zip(*steps, strict=True):
        assert [len(b) for b in batches] == sizes
        seen.extend(i for b in batches for i in b)
    assert len(seen) == len(set(seen)) == 96


def test_sampler_follows_batch_size_changes_and_keeps_the_partition():
    samplers = [HeterogeneousBatchSampler(200, [10, 10], r, seed=1) for r in range(2)]
    iters = [iter(s) for s in samplers]
    seen: list[int] = []
    for step in range(8):
        if step == 3:
            for s in samplers:
                s.set_batch_sizes([4, 20])
        batches = [next(it) for it in iters]
        assert [len(b) for b in batches] == ([10, 10] if step < 3 else [4, 20])
        seen.extend(i for b in batches for i in b)
    assert len(seen) == len(set(seen))


def test_sampler_without_drop_last_covers_the_dataset_and_new_epochs_reshuffle():
    samplers = [HeterogeneousBatchSampler(50, [7, 13], r, seed=2, drop_last=False)
                for r in range(2)]
    first = [[i for b in s for i in b] for s in samplers]
    assert sorted(first[0] + first[1]) == list(range(50))
    for s in samplers:
        s.set_epoch(1)
    second = [[i for b in s for i in b] for s in samplers]
    assert sorted(second[0] + second[1]) == list(range(50))
    assert second != first


def test_set_lr():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=1.0)
    assert set_lr(opt, 0.01, 2.5) == pytest.approx(0.025)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.025)
