"""The contract between a gradient codec and what moves its bytes.

A codec aggregates one flat float32 gradient ``x`` across the workers of a
job: every worker calls ``codec.aggregate(x, world=W, key=K)`` on its own
``x`` and drives the generator it returns. The generator yields requests:

* :class:`Reduction`: reduce ``request.buffer`` in place across all workers
  (element-wise OR or SUM). With ``wait=True`` (the default) the driver
  resumes the generator once the result is in the buffer. With
  ``wait=False`` it only starts the reduction and resumes at once, so the
  codec can compute while bytes travel; the codec must then yield
  :class:`Wait` for it before touching the buffer.
* :class:`Wait`: resume once that started reduction has completed.

When the generator returns, ``x`` holds the sum over workers and the return
value is the aggregation's :class:`~gleam.peer.compress.stats.AggregationStats`.
Workers must yield the same requests in the same order; a codec guarantees
it by deciding only from what every worker sees alike (sizes, the results
of earlier reductions, the sequence of keys).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Hashable
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

from gleam.peer.compress.stats import AggregationStats

ReduceOp = Literal["or", "sum"]


@dataclass(frozen=True, eq=False)
class Reduction:
    """Reduce ``buffer`` in place across all workers.

    ``op`` is ``"or"`` (uint8 buffers, bitwise) or ``"sum"`` (float32 or
    int64 buffers; int64 sums wrap modulo 2^64, as every collective's do).
    ``purpose`` names the step for statistics and logs.
    """

    op: ReduceOp
    buffer: np.ndarray = field(repr=False)
    purpose: str
    wait: bool = True


@dataclass(frozen=True, eq=False)
class Wait:
    """Resume once ``reduction`` (started with ``wait=False``) has completed."""

    reduction: Reduction


Request = Reduction | Wait
Aggregation = Generator[Request, None, AggregationStats]


class GradientCodec(Protocol):
    """What a ``gleam_compress_codec`` implementation returns."""

    name: str

    def aggregate(self, x: np.ndarray, *, world: int, key: Hashable = 0) -> Aggregation:
        """Aggregate ``x`` (1-D, C-contiguous float32, replaced in place by the sum)."""
        ...


class Pending(Protocol):
    def wait(self) -> None: ...


class Done:
    """A reduction that completed when it was started."""

    def wait(self) -> None:
        return None


def run_sync(aggregation: Aggregation, start: Callable[[Reduction], Pending]) -> AggregationStats:
    """Drive one worker's aggregation; ``start`` begins a reduction and returns its handle."""
    pending: dict[int, Pending] = {}
    try:
        request = next(aggregation)
        while True:
            if isinstance(request, Wait):
                handle = pending.pop(id(request.reduction), None)
                if handle is None:
                    raise RuntimeError("the codec waits for a reduction it never started")
                handle.wait()
            else:
                handle = start(request)
                if request.wait:
                    handle.wait()
                else:
                    pending[id(request)] = handle
            request = aggregation.send(None)
    except StopIteration as done:
        for handle in pending.values():  # a codec that forgot one: finish it anyway
            handle.wait()
        stats: AggregationStats = done.value
        return stats
