"""Opening the agent's CUDA backend from ``--backend auto|host|cuda|none``.

``auto`` prefers the real driver and falls back to the host software
device. Kernels for the host backend come from every plugin's
``gleam_host_kernels``. Opening may load libcuda and touch the GPU, so it
runs in a worker thread, never on the Trio thread.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pluggy

    from gleam.peer.cuda.server.kernels import HostKernel

log = logging.getLogger("gleam.cuda")

CHOICES = ("auto", "host", "cuda", "none")


@dataclass
class OpenedBackend:
    """The backend and the facts a session's HELLO carries."""

    backend: Any
    name: str
    driver_version: int
    devices: list[Any]

    def close(self) -> None:
        self.backend.close()


def kernel_registry(pm: pluggy.PluginManager) -> dict[str, HostKernel]:
    """Every plugin's host kernels by entry name; a later duplicate is logged and ignored."""
    table: dict[str, HostKernel] = {}
    for offered in pm.hook.gleam_host_kernels():
        for kernel in offered or ():
            other = table.get(kernel.name)
            if other is None:
                table[kernel.name] = kernel
            elif other is not kernel:
                log.error("host kernel %r is offered twice (%s and %s); using the first",
                          kernel.name, other.origin(), kernel.origin())
    return table


def _kinds(choice: str) -> Iterable[str]:
    return ("cuda", "host") if choice == "auto" else (choice,)


def open_backend(
    choice: str, kernels: Mapping[str, HostKernel]
) -> tuple[OpenedBackend | None, str]:
    """The backend for ``choice`` and a line saying what happened (blocking)."""
    if choice == "none":
        return None, "CUDA serving disabled (--backend none)"
    try:
        from gleam.peer.cuda.server import native
    except ImportError as exc:
        return None, f"the native executor is not available: {exc}"
    reasons = []
    for kind in _kinds(choice):
        try:
            backend = native.open_backend(kind, kernels)
        except native.BackendUnavailable as exc:
            reasons.append(f"{kind}: {exc}")
            continue
        opened = OpenedBackend(backend, backend.name, int(backend.driver_version),
                               list(backend.devices()))
        return opened, f"serving CUDA with the {backend.name} backend"
    return None, "no CUDA backend: " + "; ".join(reasons)
