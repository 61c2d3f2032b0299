"""Unmodified CUDA programs through gleam, end to end on loopback.

The examples (examples/cuda) are compiled with gcc against NVIDIA's own cuda.h
and run through ``gleam-peer run``: the interposer (a real libcuda.so.1),
a client agent without a device, the encrypted link, and a second agent serving
with the host backend. Every program checks every number it computes against
its own CPU computation and prints a JSON verdict, which the tests read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gleam.peer.cuda.examples import (
    KERNELS_FATBIN,
    KERNELS_PTX,
    ExampleError,
    build_example,
    interposer_dir,
)
from gleam.peer.localmesh import LocalMesh, wait_for

EXAMPLES = ("device_query", "vector_add", "mlp_infer", "saxpy_streams", "bench_calls")


@pytest.fixture(scope="module")
def binaries(tmp_path_factory):
    out = tmp_path_factory.mktemp("bin")
    try:
        return {name: build_example(name, out) for name in EXAMPLES}
    except ExampleError as exc:
        pytest.fail(str(exc))


# The host device runs a kernel through its registered host implementation when
# there is one, else from PTX; "ptx-only" turns the registry off on the server, so
# every example kernel runs in the PTX interpreter with the same checked results.
@pytest.fixture(scope="module", params=["host-kernels", "ptx-only"])
def mesh(tmp_path_factory, request):
    mesh = LocalMesh(tmp_path_factory.mktemp("mesh"))
    env = {"GLEAM_HOST_KERNELS": "0"} if request.param == "ptx-only" else {}
    try:
        name = "server-ptx" if request.param == "ptx-only" else "server"
        yield mesh.serving_pair(name, server_env=env)
    finally:
        mesh.close()


def run(client, *argv: object, check: bool = True) -> tuple[subprocess.CompletedProcess, dict]:
    done = subprocess.run(
        [sys.executable, "-m", "gleam.peer", "run", "--state-dir", str(client.state.path), "--",
         *map(str, argv)],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "GLEAM_EXAMPLE_KERNELS": str(KERNELS_PTX)},
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    verdict = json.loads(lines[-1]) if lines else {}
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
        assert verdict.get("ok", True), verdict
    return done, verdict


def test_device_query_answers_from_the_serving_host_device(mesh, binaries):
    client, _ = mesh
    done, _ = run(client, binaries["device_query"])
    assert "gleam host device" in done.stdout


@pytest.mark.parametrize("image", [KERNELS_PTX, KERNELS_FATBIN], ids=["ptx", "fatbin"])
def test_vector_add_from_ptx_and_from_a_fatbin(mesh, binaries, image):
    client, server = mesh
    if server.name == "server-ptx" and image == KERNELS_FATBIN:
        # The shipped fatbin holds sm_80 SASS only: without its host kernel the
        # entry cannot run here. The program gets CUDA_ERROR_NOT_FOUND; the serving
        # agent logs one line naming the image's targets and the flag that adds PTX.
        done, _ = run(client, binaries["vector_add"], image, check=False)
        assert done.returncode != 0 and "CUDA_ERROR_NOT_FOUND" in done.stderr
        assert "-gencode arch=compute_80,code=compute_80" in done.stderr  # (the program's)
        wait_for(lambda: "-gencode arch=compute_80,code=compute_80" in server.log_text(), 10,
                 "the server's line about the missing PTX")
        assert "sm_80" in server.log_text()
        return
    _, verdict = run(client, binaries["vector_add"], image)
    assert verdict == {**verdict, "ok": True, "n": 1 << 20, "mismatches": 0}


FAULTS = Path(__file__).resolve().parent / "cuda_faults.py"
ILLEGAL_ADDRESS, LAUNCH_FAILED, INVALID_PTX = 700, 719, 218


@pytest.mark.parametrize(("mode", "expected", "reason"), [
    ("oob", {"launch": 0, "sync": ILLEGAL_ADDRESS, "copy_after": ILLEGAL_ADDRESS},
     "kernel store: illegal address (PTX line 13, address 0x"),
    ("trap", {"launch": 0, "sync": LAUNCH_FAILED, "copy_after": LAUNCH_FAILED},
     "kernel boom: trap (PTX line 16,"),
    ("bad", {"load": 0, "sync": INVALID_PTX, "sync_again": 0},
     "the module's PTX is refused: line 4: unsupported PTX instruction 'frobnicate'"),
])
def test_a_faulting_kernel_fails_its_session_only(mesh, binaries, mode, expected, reason):
    """An out-of-bounds write, a trap and an unsupported instruction give the documented
    error at the next waiting call, with the server's reason on the program's stderr
    (once); the serving agent and its next session go on."""
    pytest.importorskip("cuda.bindings.driver")
    client, server = mesh
    done, result = run(client, sys.executable, FAULTS, mode, check=False)
    assert result == expected
    said = [line for line in done.stderr.splitlines() if line.startswith(f"gleam: {server.name}: ")]
    assert len(said) == 1 and reason in said[0], done.stderr
    _, verdict = run(client, binaries["vector_add"], KERNELS_PTX)
    assert verdict["ok"] and verdict["mismatches"] == 0
    assert server.process.poll() is None


def test_mlp_inference_matches_the_cpu(mesh, binaries):
    client, _ = mesh
    seen = len(client.request("cuda_sessions")["finished"])
    _, verdict = run(client, binaries["mlp_infer"], KERNELS_PTX, 5)
    assert verdict["ok"] and verdict["max_abs_err"] < 1e-4
    assert verdict["classes"] == [0, 3, 9, 0, 1, 0, 9, 0]
    # The agent accounts the session when its reader sees the program's end,
    # which may be just after the program exited.
    # (an earlier test's session may be accounted late too: find this one by name).
    finished = wait_for(
        lambda: next((r for r in client.request("cuda_sessions")["finished"][seen:]
                      if "mlp_infer" in r["program"]), None), 10, "the session to be accounted")
    assert finished["peer"] == mesh[1].name and finished["backend"] == "host"
    assert finished["waiting"] > 0 and finished["oneway"] > finished["waiting"]
    assert finished["bytes_to_server"] > 500_000  # the weights went up


def test_streams_events_unified_copies_and_promised_errors(mesh, binaries):
    client, _ = mesh
    _, verdict = run(client, binaries["saxpy_streams"], KERNELS_PTX)
    assert verdict["mismatches"] == 0 and verdict["failed_checks"] == 0


def test_nvidia_python_bindings_program(mesh):
    pytest.importorskip("cuda.bindings.driver")
    client, _ = mesh
    script = Path(__file__).resolve().parents[1] / "examples" / "cuda" / "vector_add_bindings.py"
    _, verdict = run(client, sys.executable, script, KERNELS_PTX)
    assert verdict["ok"] and verdict["mismatches"] == 0


def test_bench_program_modes_check_their_results(mesh, binaries):
    client, _ = mesh
    _, oneway = run(client, binaries["bench_calls"], "oneway", 2000)
    assert oneway["calls"] == 2000
    _, waiting = run(client, binaries["bench_calls"], "waiting", 50)
    assert waiting["ok"]
    _, h2d = run(client, binaries["bench_calls"], "h2d", 40 << 20, 16 << 20)
    assert h2d["ok"] and h2d["bytes"] == 40 << 20


def test_no_agent_means_no_device_with_one_line_why(binaries, tmp_path):
    env = {**os.environ, "GLEAM_CUDA_SOCKET": str(tmp_path / "nothing.sock"),
           "LD_LIBRARY_PATH": str(interposer_dir())}
    done = subprocess.run([str(binaries["device_query"])], capture_output=True, text=True,
                          env=env, timeout=30)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.startswith("gleam:")]
    assert len(lines) == 1 and "no CUDA device" in lines[0]


def test_a_server_lost_mid_session_fails_the_next_waiting_call(tmp_path, binaries):
    """SIGKILL the server while a program waits between calls: the program's next
    waiting call returns an error (CUDA_ERROR_DEVICE_UNAVAILABLE), not a hang."""
    mesh = LocalMesh(tmp_path)
    try:
        client, server = mesh.serving_pair()
        proc = subprocess.Popen(
            [sys.executable, "-m", "gleam.peer", "run", "--state-dir", str(client.state.path),
             "--", str(binaries["bench_calls"]), "waiting", "100000000"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: client.request("cuda_sessions")["client"], 20, "the session")
        mesh.stop(server, sig=9)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode != 0
        assert "lost the CUDA server" in err
    finally:
        mesh.close()


def test_the_status_view_says_which_backend_serves(mesh):
    from gleam.peer.tui import render_text

    client, server = mesh
    served = render_text(server.status(), width=120)
    assert "cuda" in served and "backend" in served and "host" in served
    assert "none" in render_text(client.status(), width=120)
