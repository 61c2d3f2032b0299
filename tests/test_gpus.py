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


def _stat(path, busy: int, idle: int) -> None:
    # user nice system idle iowait irq softirq steal, in clock ticks
    path.write_text(f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n")


def test_the_host_devices_load_leaves_out_the_agents_own_work(tmp_path):
    """Sessions of the host device run in the agent's process: their CPU is the
    device's own work, not someone else's (the cost model counts utilisation as
    foreign work), so only what other processes used counts."""
    import os

    from gleam.peer.gpus import ForeignLoad

    tick = os.sysconf("SC_CLK_TCK")
    stat, own = tmp_path / "stat", [0.0]
    _stat(stat, busy=100 * tick, idle=100 * tick)
    load = ForeignLoad(stat, own=lambda: own[0], tau=1e-9)  # no memory: each window alone
    # 10 s of all cores: 6 s busy, 4 s of it this process's (its sessions).
    _stat(stat, busy=106 * tick, idle=104 * tick)
    own[0] = 4.0
    assert abs(load.sample() - 20.0) < 1e-6
    # Quiet again: nothing remembered from the busy window (a load average would).
    _stat(stat, busy=106 * tick, idle=114 * tick)
    assert load.sample() == 0.0
    # Never negative, whatever the clocks say.
    _stat(stat, busy=107 * tick, idle=124 * tick)
    own[0] = 9.0
    assert load.sample() == 0.0


def test_a_short_burst_moves_the_load_a_little_and_lasting_work_fully(tmp_path):
    import os

    from gleam.peer.gpus import ForeignLoad

    tick, cores = os.sysconf("SC_CLK_TCK"), os.cpu_count() or 1
    stat = tmp_path / "stat"
    busy = idle = 0
    _stat(stat, busy, idle)
    load = ForeignLoad(stat, own=lambda: 0.0, tau=10.0)

    def window(seconds: float, fraction: float) -> float:
        nonlocal busy, idle
        busy += round(seconds * cores * fraction * tick)
        idle += round(seconds * cores * (1 - fraction) * tick)
        _stat(stat, busy, idle)
        return load.sample()

    burst = window(2, 1.0)  # another program starting: 2 s of every core
    assert 10 < burst < 25
    for _ in range(30):  # a minute of work at 60 %
        lasting = window(2, 0.6)
    assert abs(lasting - 60.0) < 1.0
