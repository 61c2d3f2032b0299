"""W workers in one process: drive their aggregations in lock step.

The same codec code that runs under torch.distributed runs here, with the
reductions done by numpy as soon as every worker has asked for them: OR
bitwise, int64 sums wrapping, float32 sums in worker order (a chain of fp32
additions). Used by the benchmark's simulations and by the tests.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gleam.peer.compress.aggregation import Aggregation, Reduction, Request, Wait
from gleam.peer.compress.stats import AggregationStats


class LockstepError(RuntimeError):
    """Workers asked for different things: the codec is not deterministic."""


def _describe(request: Request) -> tuple[object, ...]:
    if isinstance(request, Wait):
        return ("wait", request.reduction.purpose)
    buffer = request.buffer
    return (request.op, request.purpose, request.wait, buffer.dtype, buffer.shape)


def _reduce(requests: Sequence[Reduction]) -> None:
    first = requests[0]
    total = first.buffer.copy()
    for other in requests[1:]:
        if first.op == "or":
            np.bitwise_or(total, other.buffer, out=total)
        else:
            np.add(total, other.buffer, out=total)  # int64 wraps, like the collectives
    for request in requests:
        request.buffer[...] = total


def run_lockstep(aggregations: Sequence[Aggregation]) -> list[AggregationStats]:
    """Run one aggregation per worker to the end; returns each worker's stats."""
    results: list[AggregationStats | None] = [None] * len(aggregations)
    requests: list[Request | None] = []
    for i, agg in enumerate(aggregations):
        try:
            requests.append(next(agg))
        except StopIteration as done:
            requests.append(None)
            results[i] = done.value
    while any(r is not None for r in requests):
        live = [r for r in requests if r is not None]
        if len(live) != len(requests) or len({_describe(r) for r in live}) != 1:
            seen = [None if r is None else _describe(r) for r in requests]
            raise LockstepError(f"workers disagree: {seen}")
        if isinstance(live[0], Reduction):
            _reduce([r for r in live if isinstance(r, Reduction)])
        for i, agg in enumerate(aggregations):
            try:
                requests[i] = agg.send(None)
            except StopIteration as done:
                requests[i] = None
                results[i] = done.value
    return [r for r in results if r is not None]
