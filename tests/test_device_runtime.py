"""Device printf, assert and malloc in a program built by nvcc, through two real
agents: what the program's own stdout and stderr show, when, and the errors its
calls return (examples/cuda/runtime/devrt.cu; the server on the host device)."""

from __future__ import annotations

import re
import shutil

import pytest

from .cuda_mesh import host_mesh, run_through
from .test_cuda_runtime import RUNTIME, nvcc

NVCC = shutil.which("nvcc")


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
