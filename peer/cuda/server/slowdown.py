"""A documented speed knob for the host device: ``gleam-peer up --host-slowdown K``.

On one machine every host-backend server has the same CPU, so a demo or a lab
that wants servers of different speed slows some down on purpose: each host
kernel sleeps ``K - 1`` times as long as it computed (so it takes K times as
long), and the speed the agent measures and gossips is divided by K, so the
measured figure and the served speed agree. The default, 1, changes nothing.

``GLEAM_HOST_EXCLUSIVE=1`` adds the other half of a GPU's behaviour a lab
needs: the host device runs one kernel at a time, whichever session launched
it, as a GPU time-slices the contexts that share it. Without it, sessions on
one slowed host sleep side by side and never slow each other, and sessions on
an unslowed one contend for the machine's shared cores instead: neither is
the contention a scheduler is meant to see. A simulation knob, off by default
(a real host device uses every core it has for every session).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from gleam.peer.cuda.server.kernels import HostKernel

EXCLUSIVE_ENV = "GLEAM_HOST_EXCLUSIVE"


def exclusive_from_env() -> bool:
    """Whether ``GLEAM_HOST_EXCLUSIVE`` asks for one kernel at a time."""
    return os.environ.get(EXCLUSIVE_ENV, "").strip().lower() in ("1", "yes", "on", "true")


def _slow(run: Callable[[Any], None], factor: float,
          device: threading.Lock | None) -> Callable[[Any], None]:
    def slowed(launch: Any) -> None:
        with device if device is not None else contextlib.nullcontext():
            start = time.perf_counter()
            run(launch)
            if factor > 1.0:
                time.sleep((factor - 1.0) * (time.perf_counter() - start))

    return slowed


def slowed_kernels(kernels: Mapping[str, HostKernel], factor: float,
                   exclusive: bool = False) -> dict[str, HostKernel]:
    """The same kernels, each taking ``factor`` times as long and, when ``exclusive``,
    one at a time across every session of this device (native ones are left alone:
    they do no work to scale)."""
    if factor < 1.0:
        raise ValueError(f"a slowdown must be at least 1, not {factor}")
    if factor == 1.0 and not exclusive:
        return dict(kernels)
    device = threading.Lock() if exclusive else None  # one per device: every kernel shares it
    return {
        name: dataclasses.replace(kernel, run=_slow(kernel.run, factor, device))
        if kernel.run is not None else kernel
        for name, kernel in kernels.items()
    }
