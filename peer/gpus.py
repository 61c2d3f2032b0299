"""What this node offers: its GPUs and their load, or a software device.

GPUs are read through NVML (the ``pynvml`` module of nvidia-ml-py). A node
without a usable NVIDIA driver offers the host backend's software device:
the CPU, with its FP32 rate measured once at start by the native core.
NVML calls can take milliseconds and the measurement takes ~0.2 s, so both
run off the Trio thread (``trio.to_thread``).
"""

from __future__ import annotations

import logging
import os
import platform
from collections.abc import Callable
from typing import Any

from gleam.peer.gossip.records import GpuInfo

log = logging.getLogger("gleam.gpus")

HOST_BACKEND = "host"
CUDA_BACKEND = "cuda"
SPEED_MATRIX = 256
SPEED_SECONDS = 0.2


def measure_host_gflops(seconds: float = SPEED_SECONDS) -> float:
    """The CPU's measured FP32 matrix-product rate (one core), in GFLOP/s."""
    from gleam.peer.nativelib import lib

    rate = float(lib.gl_host_sgemm_gflops(SPEED_MATRIX, seconds))
    if rate <= 0:
        raise RuntimeError(f"host speed measurement failed ({rate})")
    return rate


def host_gflops() -> float:
    """The host device's speed before ``--host-slowdown``: ``GLEAM_HOST_GFLOPS`` when
    it is a positive number (the LAN lab measures once for all of its hosts, which
    would otherwise measure at once on shared cores and disagree), else measured."""
    try:
        fixed = float(os.environ.get("GLEAM_HOST_GFLOPS", "") or 0.0)
    except ValueError:
        fixed = 0.0
    return fixed if 0.0 < fixed < 1e9 else measure_host_gflops()


def _memory_total() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


def host_device(gflops: float, load: float = 0.0,
                memory: tuple[int, int] | None = None) -> GpuInfo:
    """The software device of the host backend. ``memory`` is (total, used) of the
    device the agent serves; without it, the machine's memory and nothing used."""
    cpu = platform.processor() or platform.machine() or "cpu"
    total, used = memory if memory is not None else (_memory_total(), 0)
    return GpuInfo(
        name=f"host ({cpu}, {os.cpu_count() or 1} cores)"[:64],
        backend=HOST_BACKEND,
        compute_capability=None,
        memory_total=total,
        memory_used=used,
        utilization=min(100.0, max(0.0, load)),
        gflops=round(gflops, 2),
    )


def _cpu_load() -> float:
    """Run-queue load as a percentage of the cores (the host device's utilization).

    ``GLEAM_HOST_LOAD`` (a percentage) replaces the measurement: the LAN lab's
    hosts are namespaces of one machine, and each would report the whole
    machine's load as its own device's (docs/scheduler.md, the lab mode)."""
    fixed = os.environ.get("GLEAM_HOST_LOAD", "")
    if fixed:
        try:
            return min(max(float(fixed), 0.0), 100.0)
        except ValueError:
            pass  # not a number: measure
    try:
        return 100.0 * os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        return 0.0


class NvmlInventory:
    """NVIDIA GPUs through NVML; ``available`` is False without a driver."""

    def __init__(self, nvml: Any = None) -> None:
        self._nvml = nvml
        self.available = False
        self.error: str | None = None
        try:
            if self._nvml is None:
                import pynvml

                self._nvml = pynvml
            self._nvml.nvmlInit()
            self.available = self._nvml.nvmlDeviceGetCount() > 0
            if not self.available:
                self.error = "NVML reports no GPUs"
        except Exception as exc:  # NVMLError, ImportError, OSError: all mean "no GPU here"
            self.error = str(exc) or type(exc).__name__

    def sample(self) -> list[GpuInfo]:
        """Inventory and current load of every GPU (blocking: call off the Trio thread)."""
        nvml = self._nvml
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            name = nvml.nvmlDeviceGetName(handle)
            if isinstance(name, bytes):
                name = name.decode(errors="replace")
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
            util = nvml.nvmlDeviceGetUtilizationRates(handle)
            gpus.append(GpuInfo(
                name=str(name)[:64], backend=CUDA_BACKEND, compute_capability=(major, minor),
                memory_total=int(memory.total), memory_used=int(memory.used),
                utilization=float(util.gpu),
            ))
        return gpus

    def close(self) -> None:
        if self.available:
            try:
                self._nvml.nvmlShutdown()
            except Exception as exc:
                log.debug("nvmlShutdown: %s", exc)


class GpuInventory:
    """This node's devices: NVML GPUs when present, else the host software device."""

    def __init__(self, *, nvml: Any = None, measure: Callable[[], float] = measure_host_gflops):
        self._nvml = NvmlInventory(nvml)
        self._measure = measure
        self._host_gflops: float | None = None
        self._served: tuple[int, Callable[[], int]] | None = None
        self.backend = CUDA_BACKEND if self._nvml.available else HOST_BACKEND

    def serve_host(self, total: int, used: Callable[[], int]) -> None:
        """The agent serves the host device: report its memory as programs see it
        (``total``, what ``cuDeviceTotalMem`` answers them) and ``used()``, what its
        sessions hold, instead of the machine's memory (called from any thread)."""
        self._served = (total, used)

    @property
    def why_host(self) -> str | None:
        """Why the host backend is used (None when GPUs are)."""
        return None if self._nvml.available else f"no usable NVIDIA GPU: {self._nvml.error}"

    def sample(self) -> list[GpuInfo]:
        """Current devices and load; blocking, call off the Trio thread."""
        if self._nvml.available:
            try:
                return self._nvml.sample()
            except Exception as exc:
                log.warning("reading GPUs through NVML failed: %s", exc)
                return []
        if self._host_gflops is None:
            self._host_gflops = self._measure()
        served = self._served
        memory = (served[0], served[1]()) if served is not None else None
        return [host_device(self._host_gflops, _cpu_load(), memory)]

    def close(self) -> None:
        self._nvml.close()
