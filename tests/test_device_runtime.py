"""Device printf, assert and malloc in a program built by nvcc, through two real
agents: what the program's own stdout and stderr show, when, and the errors its
calls return (examples/cuda/runtime/devrt.cu; the server on the host device)."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

from .cuda_mesh import host_mesh, run_through
from .test_cuda_runtime import RUNTIME, nvcc

NVCC = shutil.which("nvcc")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    if NVCC is None:
        pytest.skip("nvcc (the CUDA toolkit) is not on PATH")
    return nvcc(RUNTIME / "devrt.cu", tmp_path_factory.mktemp("devrt") / "devrt")


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    with host_mesh(tmp_path_factory.mktemp("mesh")) as (client, _server):
        yield client


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("{")]


def test_printf_reaches_stdout_at_the_synchronisation(client, program):
    """The launch is the program's first CUDA call: cudart asks for the kernel
    before any context exists (cuLibraryGetKernel needs none)."""
    done, verdict = run_through(client, program, "print", options=("--quiet",))
    assert done.returncode == 0, done.stderr
    assert verdict == {"sync": "cudaSuccess"}
    out = lines(done.stdout)
    assert out[0] == "before" and out[-1] == "after"
    assert sorted(out[1:-1]) == sorted(f"hello 7 from thread {t} of block {b} ({t / 4:.2f})"
                                       for b in (0, 1) for t in (0, 1))


def test_output_a_flush_point_released_reaches_the_program_when_it_exits(client, program):
    """cudaDeviceReset is one-way here: the interposer takes the output as it exits."""
    done, _ = run_through(client, program, "reset", options=("--quiet",))
    assert done.returncode == 0, done.stderr
    assert lines(done.stdout) == ["hello 1 from thread 0 of block 0 (0.00)",
                                  "hello 1 from thread 1 of block 0 (0.25)",
                                  "hello 2 from thread 0 of block 0 (0.00)"]


def test_output_no_flush_point_released_is_not_printed_as_on_a_gpu(client, program):
    """CUDA does not flush the FIFO as a program exits (cudart unloads its
    libraries then, which is no documented flush point)."""
    done, _ = run_through(client, program, "noflush", options=("--quiet",))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""


def test_a_failed_assertion_is_cuda_error_assert_with_the_drivers_message(client, program):
    done, verdict = run_through(client, program, "assert", options=("--quiet",))
    assert done.returncode == 0, done.stderr
    assert verdict == {"sync": "cudaErrorAssert", "later": "cudaErrorAssert"}
    failed = re.findall(r"devrt\.cu:\d+: void guarded\(int\): block: \[0,0,0\], thread: "
                        r"\[(\d),0,0\] Assertion `threadIdx.x < n` failed\.", done.stderr)
    assert failed == ["3", "4", "5", "6", "7"]
    assert "gleam: server: kernel _Z7guardedi: device assertion failed" in done.stderr


def test_new_delete_malloc_free_under_the_heap_limit(client, program):
    done, verdict = run_through(client, program, "heap", options=("--quiet",))
    assert done.returncode == 0, done.stderr
    assert verdict == {"set": "cudaSuccess", "heap": 1 << 20, "sync": "cudaSuccess",
                       "right": 256, "again": "cudaErrorInvalidValue"}


def test_a_large_fifo_takes_output_larger_than_a_reply(client, program):
    done, verdict = run_through(client, program, "fifo", options=("--quiet",))
    assert done.returncode == 0, done.stderr
    assert verdict == {"set": "cudaSuccess", "sync": "cudaSuccess",
                       "again": "cudaErrorInvalidValue"}
    out = lines(done.stdout)
    assert len(out) == 64 * 400 and len(done.stdout) > 2_000_000  # more than a reply holds
    assert sorted(out)[0].startswith("thread   0 line    0 ") and len(set(out)) == len(out)


HEAP_THROUGH_THE_DRIVER_API = r"""
import json, struct, sys
import numpy as np
from cuda.bindings import driver as cu
sys.path.insert(0, %(root)r)
from tests.device_runtime import KERNELS

def ok(result):
    err, *rest = result
    if int(err) != 0:
        raise RuntimeError(repr(err))
    return rest[0] if len(rest) == 1 else (rest or None)

ok(cu.cuInit(0))
ok(cu.cuCtxSetCurrent(ok(cu.cuDevicePrimaryCtxRetain(ok(cu.cuDeviceGet(0))))))
before = ok(cu.cuMemGetInfo())[0]
mod = ok(cu.cuModuleLoadData(KERNELS))
grab = ok(cu.cuModuleGetFunction(mod, b"grab"))
out = ok(cu.cuMemAlloc(8))
args = np.array([int(out), 100], np.uint64)
ptrs = np.array([a for a in (args[0:1].ctypes.data, args[1:2].ctypes.data)], np.uint64)
ok(cu.cuLaunchKernel(grab, 1, 1, 1, 1, 1, 1, 0, 0, ptrs.ctypes.data, 0))
p = np.zeros(1, np.uint64)
ok(cu.cuMemcpyDtoH(p.ctypes.data, out, 8))
base, size = ok(cu.cuMemGetAddressRange(int(p[0])))
after = ok(cu.cuMemGetInfo())[0]
print(json.dumps({
    "block_in_heap": int(base) < int(p[0]) < int(base) + int(size),
    "heap_size": int(size),
    "counted": before - after,
    "free_heap": cu.cuMemFree(base)[0].name,
    "resize": cu.cuCtxSetLimit(cu.CUlimit.CU_LIMIT_MALLOC_HEAP_SIZE, 1 << 20)[0].name,
    "limit": int(ok(cu.cuCtxGetLimit(cu.CUlimit.CU_LIMIT_MALLOC_HEAP_SIZE))),
}))
"""


def test_the_heap_is_session_memory_the_program_cannot_free(client, tmp_path):
    """The interposer makes the host device's heap (8 MiB, CUDA's default) at the first
    launch of a kernel that calls malloc: counted in cuMemGetInfo as a GPU reserves
    its heap, its blocks inside it; cuMemFree of it is the program's error, and once a
    kernel allocated from it its size no longer changes (CUDA's rule)."""
    pytest.importorskip("cuda.bindings.driver")
    script = tmp_path / "heap.py"
    script.write_text(HEAP_THROUGH_THE_DRIVER_API % {"root": str(ROOT)})
    done, verdict = run_through(client, sys.executable, script, options=("--quiet",))
    assert done.returncode == 0, done.stderr
    assert verdict == {"block_in_heap": True, "heap_size": 8 << 20,
                       "counted": (8 << 20) + 8, "free_heap": "CUDA_ERROR_INVALID_VALUE",
                       "resize": "CUDA_ERROR_INVALID_VALUE", "limit": 8 << 20}
