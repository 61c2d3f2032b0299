"""NVIDIA's Python bindings through gleam on a host-backend peer.

``examples/cuda/runtime_bindings.py`` is a ``cuda.bindings.runtime`` program
(cudart 13 compiled into the bindings) with an NVRTC kernel;
``examples/cuda/driver_calls.py`` makes the driver calls of runtimes and
libraries: memory pools and stream-ordered allocation, registered host
memory, capture queries, event flags, primary-context state, the per-thread
twins; ``examples/cuda/tensor_maps.py`` encodes, replaces and refuses tensor
maps; ``examples/cuda/clusters.py`` launches thread-block clusters;
``examples/cuda/vmm_calls.py`` maps one allocation at two addresses (VMM). They run
through two real agents on loopback and check their own results; the verdict
names every check. Another program loads a PTX module of
more than one copy chunk, which travels in parts (glImagePart) and, the second
time, as blob references.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gleam.peer import control
from gleam.peer.localmesh import wait_for

from .cuda_mesh import host_mesh, run_through

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "cuda"

pytest.importorskip("cuda.bindings.runtime", reason="cuda-bindings (the test extra) is missing")


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    with host_mesh(tmp_path_factory.mktemp("mesh"), {"GLEAM_HOST_KERNELS": "0"}) as pair:
        yield pair


LARGE_MODULE = r"""
import json
import numpy as np
from cuda.bindings import driver as cu, nvrtc

def ok(result):
    err, *rest = result
    if int(err) != 0:
        raise RuntimeError(repr(err))
    return rest[0] if len(rest) == 1 else (rest or None)

KERNELS = 3000  # about 1.1 MB of PTX: more than one copy chunk (1 MiB)
source = "".join(f'extern "C" __global__ void k{i}(float *a) {{ a[threadIdx.x] += {i}.0f; }}\n'
                 for i in range(KERNELS)).encode()
prog = ok(nvrtc.nvrtcCreateProgram(source, b"many.cu", 0, [], []))
ok(nvrtc.nvrtcCompileProgram(prog, 1, [b"--gpu-architecture=compute_80"]))
ptx = b" " * ok(nvrtc.nvrtcGetPTXSize(prog))
ok(nvrtc.nvrtcGetPTX(prog, ptx))
ok(cu.cuInit(0))
ok(cu.cuCtxSetCurrent(ok(cu.cuDevicePrimaryCtxRetain(ok(cu.cuDeviceGet(0))))))
mod = ok(cu.cuModuleLoadData(ptx))
a = np.zeros(64, np.float32)
d = ok(cu.cuMemAlloc(a.nbytes))
ok(cu.cuMemcpyHtoD(d, a.ctypes.data, a.nbytes))
arg = np.array([int(d)], np.uint64)
params = np.array([arg.ctypes.data], np.uint64)
for name in (b"k1", f"k{KERNELS - 1}".encode()):  # the first part's and the last part's
    f = ok(cu.cuModuleGetFunction(mod, name))
    ok(cu.cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, 0, params.ctypes.data, 0))
ok(cu.cuMemcpyDtoH(a.ctypes.data, d, a.nbytes))
print(json.dumps({"ok": bool((a == KERNELS).all()), "ptx_bytes": len(ptx)}))
"""


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
        "not_capturing", "huge_shared_memory_refused", "registered_is_host_memory",
        "copy_into_registered"}


def test_driver_calls_of_runtimes_and_libraries(mesh):
    verdict = run_example(mesh, str(EXAMPLES / "driver_calls.py"), "--gleam")
    assert len(verdict["checks"]) == 29
    assert verdict["checks"]["per_thread_twin_resolved"]
    assert verdict["checks"]["free_null"] and verdict["checks"]["unforwarded_exported"]
    assert verdict["checks"]["shmem_limit"] and verdict["checks"]["cig_limit_read_only"]


def test_tensor_maps_encoded_replaced_and_refused_by_the_rules(mesh):
    verdict = run_example(mesh, str(EXAMPLES / "tensor_maps.py"), "--gleam")
    checks = verdict["checks"]
    assert checks["tiled_encodes"] and checks["im2col_encodes"] and checks["host_layout"]
    assert checks["refuses_memory_outside_the_session"] and checks["refuses_rank_over_5"]
    assert len([c for c in checks if c.startswith("refuses_")]) == 12
    assert not any(c.startswith("tma_") for c in checks)  # the host device is 8.0: no TMA


# Encodes COUNT tiled maps, of one tensor (SAME) or of COUNT tensors, and checks each.
REPEATED_MAPS = r"""
import json, sys
from cuda.bindings import driver as cu

def ok(result):
    err, *rest = result
    if int(err) != 0:
        raise RuntimeError(repr(err))
    return rest[0] if len(rest) == 1 else (rest or None)

same, count = sys.argv[1] == "same", int(sys.argv[2])
ok(cu.cuInit(0))
ok(cu.cuCtxSetCurrent(ok(cu.cuDevicePrimaryCtxRetain(ok(cu.cuDeviceGet(0))))))
d = int(ok(cu.cuMemAlloc(1 << 20)))
maps = []
for i in range(count):
    maps.append(ok(cu.cuTensorMapEncodeTiled(
        cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, d + (0 if same else 256 * i),
        [cu.cuuint64_t(64), cu.cuuint64_t(32)], [cu.cuuint64_t(256)],
        [cu.cuuint32_t(16), cu.cuuint32_t(16)], [cu.cuuint32_t(1), cu.cuuint32_t(1)],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)))
words = [[int(w) for w in m.opaque] for m in maps]
# The host device's layout keeps the start at word 2: each map names its own tensor.
good = all(w[2] == d + (0 if same else 256 * i) for i, w in enumerate(words))
print(json.dumps({"ok": good and (len({tuple(w) for w in words}) == (1 if same else count))}))
"""


def test_a_repeated_tensor_map_is_answered_without_a_round_trip(mesh, tmp_path):
    client, _ = mesh
    program = tmp_path / "maps.py"
    program.write_text(REPEATED_MAPS)

    def ended() -> list:
        return control.request(client.state.control_socket, "cuda_sessions")["finished"]

    waits = {}
    for kind in ("same", "distinct"):
        before = {r["id"] for r in ended()}
        run_example(mesh, str(program), kind, "20")
        new = wait_for(lambda b=before: [r for r in ended() if r["id"] not in b], 20,
                       "the session's end")
        waits[kind] = new[-1]["waiting"]
    assert waits["distinct"] - waits["same"] == 19, waits


def test_cluster_launches_and_their_occupancy(mesh):
    verdict = run_example(mesh, str(EXAMPLES / "clusters.py"))
    assert set(verdict["checks"]) == {
        "cluster_of_2", "cluster_of_4", "cluster_of_1_is_a_plain_launch",
        "grid_not_a_multiple_refused", "occupancy_of_a_cluster", "potential_cluster_size"}


def test_a_module_larger_than_a_copy_chunk_travels_in_parts_then_as_references(mesh, tmp_path):
    client, _ = mesh
    program = tmp_path / "large_module.py"
    program.write_text(LARGE_MODULE)
    def ended() -> list:  # the agent records an end just after the program exits
        return control.request(client.state.control_socket, "cuda_sessions")["finished"]

    sent = []
    for _ in range(2):
        before = {r["id"] for r in ended()}
        verdict = run_example(mesh, str(program))
        assert verdict["ptx_bytes"] > 1 << 20
        new = wait_for(lambda b=before: [r for r in ended() if r["id"] not in b], 20,
                       "the session's end")
        sent.append(new[-1]["bytes_to_server"])
    assert sent[0] > 1 << 20 and sent[1] < 64 * 1024, sent


def test_pitched_memory_and_2d_3d_copies(mesh):
    """cuMemAllocPitch, cuMemcpy2D/3D every way (packed rows in chunks, gapped 3D
    slices, unified memory types), 2D memsets of each width, a peer copy, and the
    errors: every check against numpy (examples/cuda/pitched_copies.py)."""
    verdict = run_example(mesh, str(EXAMPLES / "pitched_copies.py"), "--gleam")
    assert set(verdict["checks"]) == {
        "pitch_holds_a_row", "htod_dtoh_pitched", "dtod_subrect_unified", "memset_2d_widths",
        "errors_invalid_value", "past_the_end_refused", "rows_wider_than_a_chunk",
        "more_rows_than_a_chunk", "3d_gapped_slices", "3d_one_slice", "3d_refused_whole",
        "peer_copy_same_device"}


def test_calls_that_nvidias_samples_and_numbas_suite_check(mesh):
    """Profiler control, entry names, error names, unregister codes, kernel attributes
    from the PTX and its launch bounds enforced, a fork after cuInit, and (``--gleam``)
    the refused IPC, VMM's shareable handles and green contexts: each with its line."""
    client, _ = mesh
    done, verdict = run_through(client, sys.executable, str(EXAMPLES / "suite_calls.py"),
                                "--gleam", timeout=300)
    assert done.returncode == 0 and verdict.get("ok"), done.stdout + done.stderr[-4000:]
    assert len(verdict["checks"]) == 22
    lines = [line for line in done.stderr.splitlines() if line.startswith("gleam:")]
    assert len(lines) == 3 and all(" is not supported because " in line for line in lines), lines


def test_virtual_memory_management_two_views_of_one_allocation(mesh):
    """VMM (interposer/vmm.c, src/exec/exec_vmm.c): a reservation with one allocation mapped
    at two addresses, written through one and read through the other by copies and a
    kernel, the handle released while mapped and retained from a mapping, its properties,
    every documented error, the refusals
    (shareable handles, host memory, read-only access: one line each), and last a
    kernel's fault on a mapping without access (examples/cuda/vmm_calls.py)."""
    client, server = mesh
    done, verdict = run_through(client, sys.executable, str(EXAMPLES / "vmm_calls.py"),
                                timeout=300)
    assert done.returncode == 0 and verdict.get("ok"), (
        done.stdout + done.stderr[-4000:] + server.log_text()[-2000:])
    assert len(verdict["checks"]) == 29, verdict["checks"]
    lines = [line for line in done.stderr.splitlines() if line.startswith("gleam:")]
    assert len([line for line in lines if " is not supported because " in line]) == 3, lines


def test_arrays_textures_and_surfaces_through_the_driver_api(mesh):
    """cuArrayCreate/3D with their descriptors, the 1D array copies, cuMemcpy2D/3D with
    an array side, mipmapped arrays and their levels, a texture object through a
    resource view with its Get*Desc round trips, a surface object, an NVRTC kernel over
    both, and the refusals (examples/cuda/arrays_textures.py)."""
    verdict = run_example(mesh, str(EXAMPLES / "arrays_textures.py"), "--gleam")
    assert set(verdict["checks"]) == {
        "array_descriptor", "array3d_descriptor", "bad_descriptors_invalid_value",
        "one_d_copies", "one_d_past_the_end", "memcpy2d_with_an_array",
        "memcpy3d_with_an_array", "mipmap_levels", "mipmap_levels_clamped",
        "texture_descriptors", "no_view_invalid_value", "surface_descriptor",
        "surface_of_a_mipmap_refused", "texture_through_a_view", "surface_writes",
        "packed_format_not_supported", "one_d_copy_to_2d_refused"}
GLOBAL_THEN_ALLOCATIONS = r"""
import json
import numpy as np
from cuda.bindings import driver as cu

def ok(result):
    err, *rest = result
    if int(err) != 0:
        raise RuntimeError(repr(err))
    return rest[0] if len(rest) == 1 else (rest or None)

ptx = b'''.version 8.0
.target sm_80
.address_size 64
.visible .global .align 4 .u32 g = 7;
.visible .entry k() { ret; }
'''
ok(cu.cuInit(0))
ok(cu.cuCtxSetCurrent(ok(cu.cuDevicePrimaryCtxRetain(ok(cu.cuDeviceGet(0))))))
mod = ok(cu.cuModuleLoadData(ptx))
g, size = ok(cu.cuModuleGetGlobal(mod, b"g"))
buffers = [ok(cu.cuMemAlloc(4096)) for _ in range(3)]
found = ok(cu.cuMemGetAddressRange(g))
out = np.zeros(1, np.uint32)
ok(cu.cuMemcpyDtoH(out.ctypes.data, g, 4))
print(json.dumps({"ok": int(found[0]) == int(g) and int(out[0]) == 7}))
"""


def test_a_global_asked_for_before_allocations_stays_device_memory(mesh, tmp_path):
    """The host device's module globals lie outside the session's range; allocations
    made after one is known were put after it in the interposer's sorted table, so
    the global was no longer found (numba's debug kernels read their error code so)."""
    script = tmp_path / "global_then_allocations.py"
    script.write_text(GLOBAL_THEN_ALLOCATIONS)
    run_example(mesh, str(script))
