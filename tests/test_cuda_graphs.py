"""CUDA graphs, stream capture and host functions, end to end through two agents.

Real programs through ``gleam-peer run`` against a host-backend server on loopback (its
kernel registry off, so kernels run from PTX): one driver-API program per kind of graph
node (examples/cuda/graph_*.c, built with gcc against NVIDIA's cuda.h; each checks its own
numbers and the errors CUDA documents, and prints one JSON verdict), a CuPy program that
captures and replays (cupy.cuda.Graph), and, when NVIDIA's cuda-samples are on this
machine (``GLEAM_CUDA_SAMPLES``, default /work/cuda-samples) and nvcc is installed, the
samples that use graphs and callbacks, unchanged.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gleam.peer.cuda.examples import KERNELS_PTX, ExampleError, build_example
from gleam.peer.localmesh import wait_for

from .cuda_mesh import host_mesh, run_through

PROGRAMS = {  # program: how many checks its verdict counts
    "graph_kernel": 12, "graph_memcpy": 3, "graph_memset": 5, "graph_host": 11,
    "graph_event": 8, "graph_child": 14, "graph_memnodes": 11, "graph_capture": 28,
    "graph_userobj": 13,
}
SAMPLES = Path(os.environ.get("GLEAM_CUDA_SAMPLES", "/work/cuda-samples"))


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    with host_mesh(tmp_path_factory.mktemp("mesh"), {"GLEAM_HOST_KERNELS": "0"}) as pair:
        yield pair


@pytest.fixture(scope="module")
def binaries(tmp_path_factory):
    out = tmp_path_factory.mktemp("graphs")
    try:
        return {name: build_example(name, out) for name in PROGRAMS}
    except ExampleError as exc:
        pytest.fail(str(exc))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_graph_node_kind_programs(mesh, binaries, name):
    client, _ = mesh
    done, verdict = run_through(client, binaries[name], KERNELS_PTX)
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdict == {"ok": True, "checks": PROGRAMS[name], "failed": []}, done.stderr


def test_host_functions_after_a_device_fault(mesh, tmp_path):
    """A kernel faults: cuLaunchHostFunc's function is skipped, a callback is told."""
    client, _ = mesh
    binary = build_example("graph_host_errors", tmp_path)
    done, verdict = run_through(client, binary, KERNELS_PTX)
    assert verdict == {"ok": True, "checks": 3, "failed": []}, done.stdout + done.stderr
    assert "gleam: SERVER:" in done.stderr or "illegal address" in done.stderr


def test_a_replayed_graph_is_one_record_per_launch(mesh, tmp_path):
    """200 launches of a captured step of 8 kernels: the server receives about 200 records
    for them (one glGraphLaunch each), not 1600 launches."""
    client, _ = mesh
    binary = build_example("graph_replay", tmp_path)
    seen = len(client.request("cuda_sessions")["finished"])
    done, verdict = run_through(client, binary, KERNELS_PTX, 8, 200)
    assert verdict == {"ok": True, "checks": 1, "failed": []}, done.stdout + done.stderr
    finished = wait_for(lambda: (f := client.request("cuda_sessions")["finished"])[seen:] and f,
                        20, "the session to be accounted")
    calls = finished[seen]["calls"]
    assert 200 <= calls < 400, finished[seen]


def test_host_function_refused_cuda_call_is_said_once(mesh, binaries):
    client, _ = mesh
    done, _ = run_through(client, binaries["graph_host"], KERNELS_PTX)
    assert done.stderr.count("called from a host function") == 1, done.stderr


CUPY_GRAPH = """
import json
import cupy as cp
import numpy as np
x = cp.arange(1000, dtype=cp.float32)
y = cp.zeros(1000, dtype=cp.float32)
stream = cp.cuda.Stream(non_blocking=True)
with stream:
    stream.begin_capture()
    y += 2 * x
    y *= 3
    z = cp.sqrt(y + 1)
    graph = stream.end_capture()
for _ in range(3):
    graph.launch(stream)
stream.synchronize()
want = np.zeros(1000, np.float32)
for _ in range(3):
    want = (want + 2 * np.arange(1000, dtype=np.float32)) * 3
ok = np.allclose(y.get(), want) and np.allclose(z.get(), np.sqrt(want + 1))
print(json.dumps({"ok": bool(ok), "capturing_after": stream.is_capturing()}))
"""


@pytest.mark.slow
def test_cupy_captures_and_replays_a_graph(mesh, tmp_path):
    pytest.importorskip("cupy", reason="cupy-cuda12x (the test extra) is not installed")
    client, _ = mesh
    script = tmp_path / "graph.py"
    script.write_text(CUPY_GRAPH)
    done, verdict = run_through(client, sys.executable, script, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert verdict == {"ok": True, "capturing_after": False}


SAMPLE_RUNS = {  # sample: (source folder, a line its output must have)
    "simpleCallback": ("0_Introduction/simpleCallback", "Success"),
    "simpleCudaGraphs": ("3_CUDA_Features/simpleCudaGraphs", "Cloned Graph Output"),
}


@pytest.mark.slow
@pytest.mark.parametrize("sample", sorted(SAMPLE_RUNS))
def test_nvidia_samples_with_graphs_and_callbacks(mesh, tmp_path, sample):
    folder, expected = SAMPLE_RUNS[sample]
    source = SAMPLES / "Samples" / folder
    if shutil.which("nvcc") is None or not source.is_dir():
        pytest.skip("NVIDIA's cuda-samples (GLEAM_CUDA_SAMPLES) or nvcc are not here")
    sources = sorted(source.glob("*.cu")) + sorted(source.glob("*.cpp"))
    binary = tmp_path / sample
    subprocess.run(["nvcc", f"-I{SAMPLES / 'Common'}", "-o", str(binary), *map(str, sources)],
                   check=True, capture_output=True, timeout=600)
    client, _ = mesh
    done, _ = run_through(client, binary, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert expected in done.stdout
    assert "is not forwarded" not in done.stderr
    # simpleCudaGraphs reduces the same input by hand-built and captured graphs, each
    # launch ending in a host node that prints the sum: all equal, none zero.
    sums = set(re.findall(r"final reduced sum = ([0-9.]+)", done.stdout))
    assert sample != "simpleCudaGraphs" or (len(sums) == 1 and float(sums.pop()) > 0.5)
