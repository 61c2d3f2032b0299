"""A worker's utilization: the GPU's from NVML when there is one, else its CPU share."""

from __future__ import annotations

import time
from typing import Any


class UtilizationMeter:
    """``sample()`` gives the busy share (0..1) since the previous sample.

    With ``gpu_index`` and a working NVML (``pynvml`` from nvidia-ml-py, a
    core dependency of gleam) it reads the device's own utilization counter;
    otherwise it divides the process's CPU time by the wall time (more than
    one busy thread still counts as 1).
    """

    def __init__(self, gpu_index: int | None = None, nvml: Any = None) -> None:
        self._handle = None
        self._nvml = None
        if gpu_index is not None:
            try:
                if nvml is None:
                    import pynvml

                    nvml = pynvml
                nvml.nvmlInit()
                self._handle = nvml.nvmlDeviceGetHandleByIndex(gpu_index)
                self._nvml = nvml
            except Exception:  # no driver, no device: fall back to the CPU share
                self._handle = None
        self.source = "nvml" if self._handle is not None else "cpu"
        self._cpu = time.process_time()
        self._wall = time.perf_counter()

    def sample(self) -> float:
        if self._handle is not None and self._nvml is not None:
            try:
                return float(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu) / 100.0
            except Exception:
                self._handle = None
                self.source = "cpu"
        cpu, wall = time.process_time(), time.perf_counter()
        share = (cpu - self._cpu) / max(wall - self._wall, 1e-9)
        self._cpu, self._wall = cpu, wall
        return max(0.0, min(1.0, share))
