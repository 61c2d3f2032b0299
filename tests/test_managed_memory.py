"""Mapped and managed memory end to end (docs/cuda-forwarding.md, "Mapped and managed
memory"): programs that write on their CPU, launch, and read on their CPU, with several
allocations and streams and no copies, through two real agents on loopback (a client
without a device, a host-backend server running the kernels' PTX). Each program checks
its own numbers and fails without the coherence (a round's results are the CPU's inputs
combined by a kernel on the other machine).

- examples/cuda/runtime/managed.cu, built by nvcc with static and shared cudart 13 and,
  when the wheel is there, cudart 12: cudaMallocManaged, cudaHostAlloc(Mapped),
  cudaHostRegister(Mapped), a page the CPU and a kernel both write, memsets and copies,
  the attributes; and its `poll` mode, zero-copy signalling;
- examples/cuda/managed_memory.py: the same through the driver API with NVIDIA's
  bindings, with the pointer and range attributes, advice, prefetches and errors;
- numba-cuda's own tests of mapped and managed arrays (its wheel's test_host_alloc and
  test_managed_alloc), and a numba program with both kinds of array in a loop.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gleam.peer.localmesh import wait_for

from .cuda_mesh import ptx_mesh, run_through  # noqa: F401 (a fixture)
from .test_consistency import STEPS, GatedRun, _finished, _mesh, _session, verdict
from .test_cuda_runtime import NVCC, flavours
from .test_numba_cuda import _numba_ready

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "cuda"


@pytest.fixture(scope="module")
def managed_binaries(tmp_path_factory):
    if NVCC is None:
        pytest.skip("nvcc (the CUDA toolkit) is not on PATH")
    return flavours(EXAMPLES / "runtime" / "managed.cu", tmp_path_factory.mktemp("managed"),
                    "-DMANAGED_CUDART12")


@pytest.fixture(scope="module")
def mesh(ptx_mesh):  # noqa: F811 (the fixture of that name, imported)
    return ptx_mesh


def checked(mesh, *argv: object, env: dict[str, str] | None = None) -> dict:
    client, server = mesh
    done, verdict = run_through(client, *argv, env=env, timeout=300)
    detail = (f"stdout:\n{done.stdout}\nstderr:\n{done.stderr[-4000:]}\nserver:\n"
              f"{server.log_text()[-2000:]}")
    assert done.returncode == 0 and verdict.get("ok"), detail
    assert "not forwarded" not in done.stderr, detail
    return verdict


@pytest.mark.parametrize("kind", ["static", "shared", "cudart12", "cudart12-static"])
def test_cpu_writes_kernels_read_and_write_cpu_reads_through_cudart(mesh, managed_binaries,
                                                                    kind):
    if kind not in managed_binaries:
        pytest.skip("libcudart 12 (the nvidia-cuda-runtime-cu12 wheel) is not installed")
    verdict = checked(mesh, managed_binaries[kind])
    assert verdict == {"ok": True, "rounds": 6, "mismatches": 0, "shared_page": 0,
                       "concurrent_managed_access": 0,
                       "prefetch_to_device": "cudaErrorInvalidDevice"}


def test_a_flag_a_kernel_sets_in_mapped_memory_reaches_a_polling_program(mesh,
                                                                          managed_binaries):
    """Zero-copy signalling: the program spins on the flag and makes no CUDA call, so
    only the interposer's refresher can bring the kernel's write (once it finished)."""
    assert checked(mesh, managed_binaries["static"], "poll") == {"ok": True, "seen": True}


def test_the_driver_api_with_nvidias_bindings(mesh):
    pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings (the test extra) is missing")
    verdict = checked(mesh, sys.executable, EXAMPLES / "managed_memory.py", "--gleam")
    assert len(verdict["checks"]) == 23


NUMBA_ARRAYS = """
import json
import numpy as np
from numba import cuda

@cuda.jit
def step(m, p, out, k):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = m[i] * k + p[i]
        m[i] += 1.0

n = 3000
m = cuda.managed_array(n, dtype=np.float32)
p = cuda.mapped_array(n, dtype=np.float32)
out = cuda.managed_array(n, dtype=np.float32)
stream = cuda.stream()
bad = 0
for r in range(5):
    m[:] = np.arange(n, dtype=np.float32) + r  # written on the CPU, read by the kernel
    p[:] = r
    step[(n + 127) // 128, 128, stream](m, p, out, 2.0)
    stream.synchronize()
    bad += int((out != (np.arange(n) + r) * 2.0 + r).sum())
    bad += int((m != np.arange(n) + r + 1).sum())  # the kernel's write, on the CPU
print(json.dumps({"ok": bad == 0, "mismatches": bad}))
"""


@pytest.fixture(scope="module")
def numba_ready():
    why = _numba_ready()
    if why is not None:
        pytest.skip(why)


def test_numba_managed_and_mapped_arrays_in_a_loop(mesh, numba_ready, tmp_path):
    program = tmp_path / "arrays.py"
    program.write_text(textwrap.dedent(NUMBA_ARRAYS))
    assert checked(mesh, sys.executable, "-W", "ignore", program)["mismatches"] == 0


def test_numba_cudas_own_tests_of_mapped_and_managed_memory(mesh, numba_ready):
    """Its wheel's tests, unchanged: test_host_alloc (mapped and pinned arrays, a memset
    of mapped memory seen at once) and test_managed_alloc (managed arrays, and a memset of
    a tenth of the device's memory, managed, checked on the CPU)."""
    if importlib.util.find_spec("filecheck") is None:
        pytest.skip("numba-cuda's test helpers need the filecheck package")
    client, server = mesh
    done = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "run", "--state-dir", str(client.state.path), "--",
         sys.executable, "-m", "unittest", "-v", "numba.cuda.tests.cudadrv.test_host_alloc",
         "numba.cuda.tests.cudadrv.test_managed_alloc"],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS": "0"})
    detail = f"{done.stderr[-6000:]}\nserver:\n{server.log_text()[-2000:]}"
    assert done.returncode == 0, detail
    assert "Ran 9 tests" in done.stderr and "OK (skipped=1)" in done.stderr, detail


# ------------------------------------------------------------- moving the session


@pytest.fixture
def managed_steps(tmp_path) -> Path:
    """managed_memory.py's steps mode as one executable, as GatedRun runs programs."""
    pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings (the test extra) is missing")
    script = tmp_path / "managed_steps"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{EXAMPLES / "managed_memory.py"}" '
                      'steps "$@"\n')
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("move", ["failover", "failover-after-checkpoints", "migration"])
def test_managed_and_mapped_state_survives_a_moved_session(tmp_path, managed_steps, move):
    """The program's state lives only in managed and mapped memory. The journal keeps
    the pushes and pulls, and a checkpoint's snapshot keeps both halves of every mirror
    (its memory and its twin: ordinary allocations), so a session rebuilt on another
    server diffs exactly as before; the program's own view never left its process."""
    env = {"GLEAM_JOURNAL_MB": "0.4"} if move == "failover-after-checkpoints" else None
    with _mesh(tmp_path / "mesh", "alpha", "beta", env=env) as (mesh, servers, client):
        run = GatedRun(client, managed_steps, "alpha")
        before = run.steps(STEPS - 2)
        row = _session(client)
        assert row["movable"], row
        if move == "failover-after-checkpoints":
            assert row["checkpoints"] >= 1, row
        if move == "migration":
            done = subprocess.run(
                [sys.executable, "-m", "gleam.peer", "migrate", row["id"], "--to", "beta",
                 "--state-dir", str(client.state.path)], capture_output=True, text=True,
                timeout=120)
            assert done.returncode == 0, done.stdout + done.stderr
        else:
            mesh.stop(servers[0], signal.SIGKILL)
        wait_for(lambda: _session(client)["peer"] == "beta", 30, "the move")
        rc, rest, err = run.finish()
        assert rc == 0, err
        result = verdict(rest)
        assert result == {"ok": True, "steps": STEPS, "mismatches": 0}, (before, rest, err)
        moves = _finished(client, row["id"])
        assert moves["failovers" if move != "migration" else "migrations"] == 1
