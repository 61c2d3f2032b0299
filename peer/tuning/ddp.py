"""PyTorch helpers for training with unequal per-worker batches (``gleam[train]``).

The only module of :mod:`gleam.peer.tuning` that imports torch.

Correctness with unequal batches: worker i computes the mean gradient g_i
over its b_i samples. Averaging the g_i equally (what DDP does) would give a
small batch's samples more weight than a large batch's. Weighting each by
its share of the global batch, sum_i (b_i / B) g_i with B = sum_i b_i, is
exactly the mean gradient over all B samples, as if one machine had run the
whole global batch: each worker multiplies its gradient by b_i / B and the
workers SUM-reduce. :func:`exchange_gradients` does this for a plain
training loop; :class:`UnequalBatchHook` does it inside DDP as a
communication hook.

Learning rate: the rate tuned for the base global batch B0 is multiplied by
``BatchTuner.lr_gain()`` (:func:`gleam.peer.tuning.noise.lr_gain`), which
the helpers here apply with :func:`set_lr`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.utils.data import Sampler


@dataclass(frozen=True)
class Exchange:
    """What one gradient exchange learned besides the averaged gradient."""

    local_sqr_norms: list[float]  # |g_i|^2 of every worker's own mean gradient
    global_sqr_norm: float  # |g_bar|^2 of the applied gradient
    stats: list[list[float]]  # every worker's ``stats`` row, in rank order


def _grads(params: Iterable[torch.nn.Parameter]) -> list[torch.Tensor]:
    grads = []
    for p in params:
        if p.requires_grad:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            grads.append(p.grad)
    return grads


def exchange_gradients(
    params: Iterable[torch.nn.Parameter],
    batch_size: int,
    global_batch: int,
    stats: Sequence[float] = (),
    group: dist.ProcessGroup | None = None,
) -> Exchange:
    """Replace every ``p.grad`` by the global-batch mean gradient, in one all-reduce.

    Each worker's gradient is weighted by ``batch_size / global_batch`` and
    summed. The same all-reduce carries every worker's squared gradient norm
    (for the noise-scale estimator) and a row of ``stats`` (compute time,
    loss, ...; the same length on every worker), gathered by giving each rank
    its own slot in a zeroed block.
    """
    grads = _grads(params)
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    width = len(stats) + 1
    flat = torch.cat([g.reshape(-1) for g in grads]).to(torch.float32)
    local_sqr = float(flat.dot(flat))
    side = torch.zeros(world * width, dtype=torch.float64)
    side[rank * width] = local_sqr
    if stats:
        side[rank * width + 1: (rank + 1) * width] = torch.tensor(stats, dtype=torch.float64)
    # The side block rides in float32 with the gradient: each slot is written
    # by one rank only, so the sum returns that rank's value (to float32).
    buf = torch.cat([flat * (batch_size / global_batch), side.to(torch.float32)])
    dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=group)
    n = flat.numel()
    applied = buf[:n]
    offset = 0
    for g in grads:
        size = g.numel()
        g.copy_(applied[offset: offset + size].view_as(g))
        offset += size
    side_out = buf[n:].to(torch.float64).view(world, width)
    return Exchange(
        local_sqr_norms=side_out[:, 0].tolist(),
        global_sqr_norm=float(applied.dot(applied)),
        stats=side_out[:, 1:].tolist(),
    )


class UnequalBatchHook:
    """DDP communication hook weighting each worker's gradient by b_i / B.

        hook = UnequalBatchHook()
        ddp_model.register_comm_hook(hook, UnequalBatchHook.hook)
        ...
        hook.set_batch(my_batch, global_batch)    # whenever the tuner decides

    It also accumulates this worker's |g_i|^2 and the applied |g_bar|^2 over
    the buckets of an iteration (``take_norms`` returns and resets them), for
    the noise-scale estimator.
    """

    def __init__(self, group: dist.ProcessGroup | None = None) -> None:
        self.group = group
        self.share = 1.0 / dist.get_world_size(group) if dist.is_initialized() else 1.0
        self._local = torch.zeros((), dtype=torch.float64)
        self._global = torch.zeros((), dtype=torch.float64)

    def set_batch(self, batch_size: int, global_batch: int) -> None:
        self.share = batch_size / global_batch

    def take_norms(self) -> tuple[float, float]:
        local, glob = float(self._local), float(self._global)
        self._local.zero_()
        self._global.zero_()
        return local, glob

    @staticmethod
    def hook(state, bucket):  # type: ignore[no-untyped-def]
        # No annotations: DDP checks them against the real classes, and with
        # postponed evaluation they would be strings. (state: UnequalBatchHook,
        # bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]
        buf = bucket.buffer()
        state._local += buf.double().pow(2).sum().cpu()
        buf.mul_(state.share)
        fut = dist.all_reduce(buf, group=state.group, async_op=True).get_future()

        def done(f: torch.futures.Future[list[torch.Tensor]]) -> torch.Tensor:
            out = f.value()[0]
            state._global += out.double().pow(2).sum().cpu()
            return out

        return fut.then(done)


def set_lr(optimizer: torch.optim.Optimizer, base_lr: float, gain: float) -> float:
    """Set every parameter group's rate to ``base_lr * gain``; returns it."""
    lr = base_lr * gain
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr


class HeterogeneousBatchSampler(Sampler[list[int]]):
    """A batch sampler giving each worker its own batch size, without overlap.

    Every worker builds the same permutation of the dataset (from ``seed``
    and the epoch, like ``DistributedSampler``). Each iteration takes the
    next B = sum(batch_sizes) indices of it and gives worker r the slice
    after the first ``sum(batch_sizes[:r])``, so within an epoch no sample is
    used twice and together the workers see exactly one global batch.
    ``set_batch_sizes`` takes effect from the next batch drawn; every worker
    must call it at the same iteration (they do when they apply the tuner's
    decision from the same exchange). Use it as a DataLoader's
    ``batch_sampler`` with ``num_workers=0`` (or expect the loader's
    prefetch to delay a change by its prefetch depth).

    With ``drop_last`` (default) an epoch ends when less than a global batch
    remains; otherwise the rest is split in proportion to the batch sizes
    (a worker may then get an empty batch and must weight it zero).
    """

    def __init__(
        self, dataset_size: int, batch_sizes: Sequence[int], rank: int, *, seed: int = 0,
        shuffle: bool = True, drop_last: bool = True,
    ) -> None:
        if not 0 <= rank < len(batch_sizes):
            raise ValueError(f"rank {rank} has no batch size in {list(batch_sizes)}")
        self.dataset_size = dataset_size
        self.rank = rank
        self.seed = seed
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.epoch = 0
        self.batch_sizes: tuple[int, ...] = ()
        self.set_batch_sizes(batch_sizes)

    def set_batch_sizes(self, batch_sizes: Sequence[int]) -> None:
        sizes = tuple(int(b) for b in batch_sizes)
        if len(sizes) <= self.rank or any(b < 0 for b in sizes) or sum(sizes) <= 0:
            raise ValueError(f"invalid batch sizes {list(batch_sizes)} for rank {self.rank}")
        self.batch_sizes = sizes

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _order(self) -> torch.Tensor:
        if not self.shuffle:
            return torch.arange(self.dataset_size)
        gen = torch.Generator()
        gen.manual_seed(self.seed + self.epoch)
        return torch.randperm(self.dataset_size, generator=gen)

    @staticmethod
    def _split(rest: int, sizes: Sequence[int]) -> list[int]:
        total = sum(sizes)
        exact = [rest * b / total for b in sizes]
        parts = [int(x) for x in exact]
        by_remainder = sorted(range(len(sizes)), key=lambda i: exact[i] - parts[i], reverse=True)
        for i in by_remainder[: rest - sum(parts)]:
            parts[i] += 1
        return parts

    def __iter__(self) -> Iterator[list[int]]:
        order = self._order()
        pos = 0
        while pos < self.dataset_size:
            sizes: Sequence[int] = self.batch_sizes
            total = sum(sizes)
            if pos + total > self.dataset_size:
                if self.drop_last:
                    return
                sizes = self._split(self.dataset_size - pos, sizes)
                total = sum(sizes)
            start = pos + sum(sizes[: self.rank])
            yield order[start: start + sizes[self.rank]].tolist()
            pos += total

    def __len__(self) -> int:
        full, rest = divmod(self.dataset_size, sum(self.batch_sizes))
        return full + (1 if rest and not self.drop_last else 0)
