"""The silent failures that NVIDIA's samples and numba-cuda's suite found (issue 25).

Each program (examples/cuda/runtime) is a minimal reproduction written here, built by
nvcc with static cudart and run through ``gleam-peer run`` against two real agents on
loopback (the server on the host backend, every kernel from PTX). Before the fixes each
one exited with a wrong answer or an error on a call that had nothing wrong with it;
each checks its own result and prints a JSON verdict.
"""

from __future__ import annotations

import pytest

from .cuda_mesh import host_mesh, run_through
from .test_cuda_runtime import NVCC, RUNTIME, nvcc

PROGRAMS = ("first_launch", "symbol_memset", "partial_shuffle")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if NVCC is None:
        pytest.skip("nvcc (the CUDA toolkit) is not on PATH")
    out = tmp_path_factory.mktemp("silent")
    return {name: nvcc(RUNTIME / f"{name}.cu", out / name) for name in PROGRAMS}


@pytest.fixture(scope="module")
def client(built, tmp_path_factory):
    with host_mesh(tmp_path_factory.mktemp("mesh"), {"GLEAM_HOST_KERNELS": "0"}) as (c, _):
        yield c


def test_a_launch_as_the_first_call_runs(client, built):
    """cudart resolves the kernel with cuLibraryGetKernel before any context is
    current; NVIDIA's driver needs none there, so neither may gleam (it answered
    CUDA_ERROR_INVALID_CONTEXT and every launch failed)."""
    done, verdict = run_through(client, built["first_launch"], env={"GLEAM_TRACE": "errors"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdict == {"ok": True, "launch": "cudaSuccess", "sync": "cudaSuccess", "mark": 42}
    assert "gleam:" not in done.stderr


def test_a_memset_of_a_library_global_sets_it(client, built):
    """cuMemsetD8 on an address from cuLibraryGetGlobal wrote nothing on the host
    device, and its error landed on the next copy."""
    done, verdict = run_through(client, built["symbol_memset"], env={"GLEAM_TRACE": "errors"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdict == {"ok": True, "set": "cudaSuccess", "read": "cudaSuccess",
                       "copy": "cudaSuccess", "mismatches": 0, "sum": 768}
    assert "gleam:" not in done.stderr


def test_a_shuffle_from_lanes_outside_the_members_reads_zero(client, built):
    """The cuda-samples reduction (kernel 7, its default) printed a wrong sum: the last
    warp's shuffles read lanes outside their member mask, which held earlier values."""
    done, verdict = run_through(client, built["partial_shuffle"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdict["ok"] and verdict["mismatches"] == 0, verdict
