"""GPU inventory: NVML when a driver answers, the measured host device otherwise."""

from types import SimpleNamespace

import pytest

from gleam.peer.gpus import GpuInventory, measure_host_gflops


class FakeNvml:
    """NVML's Python surface, answering like a machine with one GPU."""

    class NVMLError(Exception):
        pass

    def __init__(self, count=1, fail_init=False):
        self.count, self.fail_init, self.shutdown = count, fail_init, False

    def nvmlInit(self):
        if self.fail_init:
            raise self.NVMLError("Driver Not Loaded")

    def nvmlDeviceGetCount(self):
        return self.count

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA GeForce RTX 4090"

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(total=24 << 30, used=3 << 30)

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return (8, 9)

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=42, memory=10)

    def nvmlShutdown(self):
        self.shutdown = True


def test_nvml_gpus_are_reported():
    nvml = FakeNvml()
    inv = GpuInventory(nvml=nvml, measure=lambda: pytest.fail("no host measurement with a GPU"))
    assert inv.backend == "cuda" and inv.why_host is None
    (gpu,) = inv.sample()
    assert gpu.name == "NVIDIA GeForce RTX 4090"
    assert gpu.compute_capability == (8, 9)
    assert (gpu.memory_total, gpu.memory_used, gpu.utilization) == (24 << 30, 3 << 30, 42.0)
    inv.close()
    assert nvml.shutdown


def test_no_driver_means_the_host_device_with_its_measured_speed():
    calls = []
    inv = GpuInventory(nvml=FakeNvml(fail_init=True), measure=lambda: calls.append(1) or 12.5)
    assert inv.backend == "host"
    assert "Driver Not Loaded" in inv.why_host
    (dev,) = inv.sample()
    inv.sample()
    assert dev.backend == "host" and dev.gflops == 12.5 and dev.memory_total > 0
    assert calls == [1]  # measured once


def test_the_real_measurement_runs_native_code():
    assert measure_host_gflops(0.02) > 0.05


def test_the_lab_can_fix_the_host_speed_and_load(monkeypatch):
    from gleam.peer.gpus import _cpu_load, host_gflops

    monkeypatch.setenv("GLEAM_HOST_GFLOPS", "12.5")
    monkeypatch.setenv("GLEAM_HOST_LOAD", "0")
    assert host_gflops() == 12.5 and _cpu_load() == 0.0
    monkeypatch.setenv("GLEAM_HOST_LOAD", "250")
    assert _cpu_load() == 100.0
    # Nonsense is measured instead.
    monkeypatch.setenv("GLEAM_HOST_GFLOPS", "fast")
    monkeypatch.setenv("GLEAM_HOST_LOAD", "busy")
    assert host_gflops() > 0 and _cpu_load() >= 0.0
