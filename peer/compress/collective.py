"""Reductions over torch.distributed: the driver the DDP hook and the benchmark use.

gloo has a bitwise OR (``ReduceOp.BOR`` on uint8, verified); NCCL has none,
and MAX over the bytes of a bitmap is not an OR of its bits (0b01 and 0b10
give 0b10). Without BOR, the OR travels as a SUM: each bit becomes a field
wide enough to count every worker (``bit_length(world)`` bits, so no sum
carries into the next field), and a bit of the result is set where its
field is nonzero. That costs ``bit_length(world)`` times the bitmap
(``gl_sketch_widen``); all-gathering the bitmaps would cost ``world - 1``
times.

Tensors on a GPU are reduced there; the codec itself runs on the host.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from gleam.peer.compress import codec
from gleam.peer.compress.aggregation import Reduction

# Backends whose allreduce has a bitwise OR on uint8.
NATIVE_OR_BACKENDS = frozenset({"gloo"})


class _Started:
    """An asynchronous all_reduce, and what to do with its result once it is in."""

    def __init__(self, work: Any, finish: Callable[[], None] | None = None) -> None:
        self._work = work
        self._finish = finish

    def wait(self) -> None:
        self._work.wait()
        if self._finish is not None:
            self._finish()


class TorchCollective:
    """Performs a codec's :class:`Reduction` requests with ``dist.all_reduce``.

    Every reduction is started asynchronously (gloo and NCCL move the bytes
    on their own threads); :func:`gleam.peer.compress.aggregation.run_sync`
    waits where the codec asks it to.
    """

    def __init__(
        self, group: dist.ProcessGroup | None = None, *, native_or: bool | None = None
    ) -> None:
        self.group = group
        self.world = dist.get_world_size(group)
        backend = str(dist.get_backend(group))
        self.native_or = backend in NATIVE_OR_BACKENDS if native_or is None else native_or
        self.device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" \
            else torch.device("cpu")

    def _all_reduce(self, array: np.ndarray, op: Any,
                    then: Callable[[], None] | None = None) -> _Started:
        tensor = torch.from_numpy(array)
        if self.device.type == "cpu":
            return _Started(dist.all_reduce(tensor, op=op, group=self.group, async_op=True), then)
        moved = tensor.to(self.device)

        def back() -> None:
            array[...] = moved.cpu().numpy()
            if then is not None:
                then()

        return _Started(dist.all_reduce(moved, op=op, group=self.group, async_op=True), back)

    def start(self, request: Reduction) -> _Started:
        if request.op == "sum":
            return self._all_reduce(request.buffer, dist.ReduceOp.SUM)
        if self.native_or:
            return self._all_reduce(request.buffer, dist.ReduceOp.BOR)
        width = max(1, self.world.bit_length())
        words = codec.widen(request.buffer, width)
        return self._all_reduce(words, dist.ReduceOp.SUM,
                                lambda: codec.narrow(words, width, request.buffer))
