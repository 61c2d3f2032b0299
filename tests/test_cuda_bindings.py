"""NVIDIA's Python bindings through gleam on a host-backend peer.

``examples/cuda/runtime_bindings.py`` is a ``cuda.bindings.runtime`` program
(cudart 13 compiled into the bindings) with an NVRTC kernel;
``examples/cuda/driver_calls.py`` makes the driver calls of runtimes and
libraries: memory pools and stream-ordered allocation, registered host
memory, capture queries, event flags, primary-context state, the per-thread
twins. Both run through two real agents on loopback and check their own
results; the verdict names every check.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .cuda_mesh import host_mesh, run_through

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "cuda"

pytest.importorskip("cuda.bindings.runtime", reason="cuda-bindings (the test extra) is missing")


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    with host_mesh(tmp_path_factory.mktemp("mesh"), {"GLEAM_HOST_KERNELS": "0"}) as pair:
        yield pair


def run_example(mesh, *argv: str) -> dict:
    client, server = mesh
    done, verdict = run_through(client, sys.executable, *argv, timeout=300)
    detail = (f"stdout:\n{done.stdout}\nstderr:\n{done.stderr[-4000:]}\nserver:\n"
              f"{server.log_text()[-2000:]}")
    assert done.returncode == 0 and verdict.get("ok"), detail
    return verdict


def test_runtime_bindings_program(mesh):
    verdict = run_example(mesh, str(EXAMPLES / "runtime_bindings.py"))
    assert set(verdict["checks"]) == {
        "devices", "elapsed_nonnegative", "axpy", "untimed_event_is_invalid_handle",
        "not_capturing", "registered_is_host_memory", "copy_into_registered"}


def test_driver_calls_of_runtimes_and_libraries(mesh):
    verdict = run_example(mesh, str(EXAMPLES / "driver_calls.py"), "--gleam")
    assert len(verdict["checks"]) == 24
    assert verdict["checks"]["begin_capture_refused"]
    assert verdict["checks"]["per_thread_twin_resolved"]
