"""Stream capture of copies with a side in the program's memory, across streams, through
two real agents (examples/cuda/runtime/capture_host.cu, built by nvcc; the server on
the host device): the shape of cuda-samples' graphMemoryNodes, which failed twice here
before: destroying a forked stream that had been joined back invalidated the capture
("a stream operation cannot be captured"), and then its graph hung, the managed memory's
refresher waiting behind the graph's host copy while holding the lock the graph's next
stage needed."""

from __future__ import annotations

import shutil

import pytest

from .cuda_mesh import ptx_mesh, run_through  # noqa: F401 (a fixture)
from .test_cuda_runtime import RUNTIME, nvcc


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc (the CUDA toolkit) is not on PATH")
    return nvcc(RUNTIME / "capture_host.cu", tmp_path_factory.mktemp("capture") / "capture_host")


@pytest.fixture
def client(ptx_mesh):  # noqa: F811 (the fixture of that name, imported)
    return ptx_mesh[0]


def test_a_captured_graph_copies_host_memory_when_it_runs(client, program):
    """Each launch reads the input the program wrote after the capture and writes the
    output then; the refresher pulls every 2 ms (a pull behind the graph's copy out
    deadlocked before)."""
    done, verdict = run_through(client, program, "fork", env={"GLEAM_MIRROR_REFRESH_MS": "2"},
                                timeout=180)
    assert done.returncode == 0, done.stderr
    assert verdict == {"ok": True, "runs": 3, "wrong": 0, "flag": 7}
    assert "cannot be captured" not in done.stderr


def test_a_graph_host_function_between_kernels_with_managed_memory(client, program):
    """A captured kernel, a host function of 200 ms, a kernel: with managed memory the
    refresher pulls during the host function, and the second kernel's launch must still
    go (the refresher's pull no longer waits behind a host function holding the lock
    that launch takes)."""
    done, verdict = run_through(client, program, "hostnode", env={"GLEAM_MIRROR_REFRESH_MS": "2"},
                                timeout=120)
    assert done.returncode == 0, done.stderr
    assert verdict == {"ok": True, "bumps": 2, "flag": 7}


@pytest.mark.parametrize("mode", ["origin", "unjoined"])
def test_destroying_a_stream_the_capture_needs_invalidates_it_naming_the_call(
        client, program, mode):
    done, verdict = run_through(client, program, mode)
    assert done.returncode == 0, done.stderr
    assert verdict == {"destroy": "cudaErrorStreamCaptureUnsupported",
                       "end": "cudaErrorStreamCaptureInvalidated", "graph": False}
    assert "cuStreamDestroy_v2 of a capture's origin stream, or of a stream not joined" \
        in done.stderr
