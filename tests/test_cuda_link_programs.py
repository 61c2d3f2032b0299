"""Programs that need a link on the device, through two agents on loopback.

A relocatable-device-code program (nvcc -rdc=true, two files) registers its objects with
cudart, which hands them to the driver to link (docs/cuda-forwarding.md, "Linking"); its
kernel syncs its whole grid (cooperative groups), launched with
cudaLaunchCooperativeKernel. The host device links the objects' PTX and runs every block of
the grid at once. Built with static and shared cudart; skipped without nvcc.
"""

from __future__ import annotations

import pytest

from .cuda_mesh import host_mesh, run_through
from .test_cuda_runtime import NVCC, RUNTIME, nvcc


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    if NVCC is None:
        pytest.skip("nvcc (the CUDA toolkit) is not on PATH")
    out = tmp_path_factory.mktemp("rdc")
    return {kind: nvcc(RUNTIME / "coop_rows.cu", out / f"coop_rows_{kind}",
                       str(RUNTIME / "coop_scale.cu"), "-rdc=true", *flags)
            for kind, flags in (("static", []), ("shared", ["-cudart", "shared"]))}


@pytest.fixture(scope="module")
def mesh(programs, tmp_path_factory):
    with host_mesh(tmp_path_factory.mktemp("mesh"), {"GLEAM_HOST_KERNELS": "0"}) as pair:
        yield pair


@pytest.mark.parametrize("kind", ["static", "shared"])
def test_separate_compilation_and_a_grid_sync(mesh, programs, kind):
    client, _ = mesh
    done, verdict = run_through(client, programs[kind])
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdict == {"ok": True, "cooperative": 1, "mismatches": 0,
                       "too_large": "cudaErrorCooperativeLaunchTooLarge"}, done.stderr


@pytest.fixture(scope="module")
def cdp_program(tmp_path_factory):
    """examples/cuda/runtime/cdp.cu's main as nvcc builds a dynamic-parallelism program:
    relocatable device code linked with libcudadevrt, PTX for compute 8.0."""
    if NVCC is None:
        pytest.skip("nvcc (the CUDA toolkit) is not on PATH")
    out = tmp_path_factory.mktemp("cdp")
    return nvcc(RUNTIME / "cdp.cu", out / "cdp", "-rdc=true", "-lcudadevrt",
                "-gencode=arch=compute_80,code=compute_80")


def test_a_tree_of_device_side_launches_completes_before_the_hosts_sync(mesh, cdp_program):
    client, _ = mesh
    done, _ = run_through(client, cdp_program)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "launch tree: 124 of 124 threads ran (no error)" in done.stdout, done.stdout
    # cudaDeviceSetLimit(cudaLimitDevRuntimePendingLaunchCount) reaches the server
    assert ("pending limit 2 (no error): ran 1 1 0 0, errors 0 0 69 69 (no error)"
            in done.stdout), done.stdout
