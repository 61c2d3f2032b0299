"""A documented speed knob for the host device: ``gleam-peer up --host-slowdown K``.

On one machine every host-backend server has the same CPU, so a demo or a lab
that wants servers of different speed slows some down on purpose: each host
kernel sleeps ``K - 1`` times as long as it computed (so it takes K times as
long), and the speed the agent measures and gossips is divided by K, so the
measured figure and the served speed agree. The default, 1, changes nothing.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

from gleam.peer.cuda.kernels import HostKernel


def _slow(run: Callable[[Any], None], factor: float) -> Callable[[Any], None]:
    def slowed(launch: Any) -> None:
        start = time.perf_counter()
        run(launch)
        time.sleep((factor - 1.0) * (time.perf_counter() - start))

    return slowed


def slowed_kernels(kernels: Mapping[str, HostKernel], factor: float) -> dict[str, HostKernel]:
    """The same kernels, each taking ``factor`` times as long (native ones are left alone:
    they do no work to scale)."""
    if factor < 1.0:
        raise ValueError(f"a slowdown must be at least 1, not {factor}")
    if factor == 1.0:
        return dict(kernels)
    return {
        name: dataclasses.replace(kernel, run=_slow(kernel.run, factor))
        if kernel.run is not None else kernel
        for name, kernel in kernels.items()
    }
