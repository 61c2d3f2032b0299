"""What this node offers: its GPUs and their load, or a software device.

GPUs are read through NVML (the ``pynvml`` module of nvidia-ml-py). A node
without a usable NVIDIA driver offers the host backend's software device:
the CPU, with its FP32 rate measured once at start by the native core.
NVML calls can take milliseconds and the measurement takes ~0.2 s, so both
run off the Trio thread (``trio.to_thread``).
"""

from __future__ import annotations

import logging
import math
import os
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gleam.peer.gossip.records import GpuInfo

log = logging.getLogger("gleam.gpus")

HOST_BACKEND = "host"
CUDA_BACKEND = "cuda"
SPEED_MATRIX = 256
SPEED_SECONDS = 0.2
LOAD_TAU = 10.0  # seconds: how fast the host device's load follows the machine's


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


class ForeignLoad:
    """How busy other processes keep the machine's cores, in percent of all of them:
    the host device's utilisation.

    The host device's sessions run in this agent's process, so its own work is left
    out: the cost model counts utilisation as someone else's work (docs/scheduler.md),
    and the 1-minute load average this replaced counted a session that had just
    ended as foreign load for a minute after, making the next estimate several
    times too long. Each reading's window is folded into a mean that forgets with
    a time constant of ``tau`` seconds, from idle: a burst of a few seconds (another
    program starting) moves it a little, lasting work fully.
    """

    def __init__(self, stat: Path = Path("/proc/stat"),
                 own: Callable[[], float] | None = None, tau: float = LOAD_TAU) -> None:
        self._stat = stat
        self._own = own if own is not None else _own_cpu_seconds
        self._tau = tau
        self._last = self._read()
        self.percent = 0.0

    def _read(self) -> tuple[float, float, float] | None:
        """(busy, total) CPU seconds of the machine's cores, and this process's own;
        None without /proc/stat."""
        try:
            with open(self._stat, encoding="ascii") as f:
                fields = [float(v) for v in f.readline().split()[1:9]]
        except (OSError, ValueError):
            return None
        if len(fields) < 8:
            return None
        tick = os.sysconf("SC_CLK_TCK")
        total = sum(fields) / tick
        idle = (fields[3] + fields[4]) / tick  # idle and waiting for I/O
        return total - idle, total, self._own()

    def sample(self) -> float:
        """The foreign load now (the load average where /proc/stat is missing)."""
        now, last = self._read(), self._last
        if now is None or last is None:
            return _load_average()
        if now[1] <= last[1]:
            return self.percent
        self._last = now
        busy, total, own = (a - b for a, b in zip(now, last, strict=True))
        window = min(100.0, 100.0 * max(busy - own, 0.0) / total)
        seconds = total / (os.cpu_count() or 1)  # the window's wall time
        self.percent += (window - self.percent) * -math.expm1(-seconds / self._tau)
        return self.percent


def _own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def _load_average() -> float:
    try:
        return 100.0 * os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        return 0.0


def _cpu_load(measured: Callable[[], float] = _load_average) -> float:
    """The host device's utilization in percent: ``measured()``, unless
    ``GLEAM_HOST_LOAD`` (a percentage) replaces the measurement: the LAN lab's
    hosts are namespaces of one machine, and each would report the whole
    machine's load as its own device's (docs/scheduler.md, the lab mode)."""
    fixed = os.environ.get("GLEAM_HOST_LOAD", "")
    if fixed:
        try:
            return min(max(float(fixed), 0.0), 100.0)
        except ValueError:
            pass  # not a number: measure
    return measured()


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
        self._load = ForeignLoad()
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
        return [host_device(self._host_gflops, _cpu_load(self._load.sample), memory)]

    def close(self) -> None:
        self._nvml.close()
