"""A DistributedDataParallel communication hook that runs a gleam codec.

    from gleam.peer.compress.ddp import register
    model = DDP(net)
    hook = register(model)            # the "sketch" codec, lossless
    ...
    hook.stats.as_dict()              # what was sent, per block kind

DDP calls the hook once per gradient bucket, from the autograd thread, in
the same bucket order on every rank. The hook divides the bucket by the
world size (as DDP's default hook does) and queues it for one worker thread
that runs the codec to the end, bucket after bucket. One thread keeps the
collectives in the same order on every rank (a codec makes several per
bucket; callbacks racing on gloo's threads could interleave two buckets
differently on two ranks), and backward keeps computing meanwhile: the C
codec and the collectives release the GIL. The codec talks on a process
group of its own, so nothing else the job does can interleave with it.
"""

# No ``from __future__ import annotations`` here: DDP checks the hook's
# annotations against the real GradBucket and Future types.
import queue
import threading
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from gleam.peer.compress.aggregation import GradientCodec, run_sync
from gleam.peer.compress.collective import TorchCollective
from gleam.peer.compress.registry import make_codec
from gleam.peer.compress.stats import CompressionStats

_STOP = object()


class CompressionHook:
    """The state passed to :func:`comm_hook`: codec, collective, worker thread, stats."""

    def __init__(
        self,
        codec: GradientCodec,
        process_group: dist.ProcessGroup | None = None,
        *,
        dedicated_group: bool = True,
        native_or: bool | None = None,
    ) -> None:
        self.codec = codec
        if dedicated_group:
            # Every rank reaches this line in the same order (construction).
            ranks = dist.get_process_group_ranks(process_group or dist.group.WORLD)
            group = dist.new_group(ranks=ranks, backend=dist.get_backend(process_group))
            # new_group answers a marker, not a group, to a rank outside ranks.
            if not isinstance(group, dist.ProcessGroup):
                raise RuntimeError("this rank is not in the group it built from its own ranks")
            process_group = group
        self.group = process_group
        self.collective = TorchCollective(process_group, native_or=native_or)
        self.world = self.collective.world
        self.stats = CompressionStats()
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="gleam-compress", daemon=True)
        self._thread.start()

    def submit(
        self, bucket: dist.GradBucket  # type: ignore[name-defined]
    ) -> torch.futures.Future[torch.Tensor]:
        future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
        tensor = bucket.buffer()
        self._jobs.put((tensor, (bucket.index(), tensor.numel()), future))
        return future

    def close(self) -> None:
        """Stop the worker thread once the queued buckets are done."""
        self._jobs.put(_STOP)
        self._thread.join()

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is _STOP:
                return
            tensor, key, future = job
            try:
                self.aggregate(tensor, key)
            except BaseException as exc:  # the training loop sees it in backward
                future.set_exception(exc)
            else:
                future.set_result(tensor)

    def aggregate(self, tensor: torch.Tensor, key: Any = 0) -> torch.Tensor:
        """Average ``tensor`` across the group in place (any thread, one at a time)."""
        tensor.div_(self.world)
        if tensor.dtype != torch.float32:
            # The codec is fp32; other dtypes keep DDP's plain allreduce.
            dist.all_reduce(tensor, group=self.group)
            return tensor
        host = tensor.detach().reshape(-1)
        on_host = host.device.type == "cpu" and host.is_contiguous()
        if not on_host:
            host = host.contiguous().cpu()
        stats = run_sync(self.codec.aggregate(host.numpy(), world=self.world, key=key),
                         self.collective.start)
        if not on_host:
            tensor.copy_(host.view_as(tensor))
            if tensor.is_cuda:
                torch.cuda.current_stream(tensor.device).synchronize()
        self.stats.add(stats)
        return tensor


def comm_hook(
    state: CompressionHook, bucket: dist.GradBucket  # type: ignore[name-defined]
) -> torch.futures.Future[torch.Tensor]:
    """The function given to ``DistributedDataParallel.register_comm_hook``."""
    return state.submit(bucket)


def register(
    model: DistributedDataParallel,
    codec: str | GradientCodec = "sketch",
    process_group: dist.ProcessGroup | None = None,
    **options: Any,
) -> CompressionHook:
    """Make ``model`` aggregate its gradients with ``codec`` (a name or an instance).

    ``options`` go to the codec's plugin (for ``sketch``: see
    :class:`gleam.peer.compress.sketch.SketchConfig`). Call it on every
    rank, right after wrapping the model.
    """
    made = make_codec(codec, **options) if isinstance(codec, str) else codec
    state = CompressionHook(made, process_group)
    model.register_comm_hook(state, comm_hook)
    return state
