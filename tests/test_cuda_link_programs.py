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
