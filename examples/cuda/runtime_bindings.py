"""A runtime-API program with NVIDIA's Python bindings (``cuda.bindings.runtime``).

cuda.bindings.runtime is libcudart compiled into the bindings: this program is a
cudart program like any nvcc-built one. It compiles a kernel to PTX with NVRTC
(``cuda.bindings.nvrtc``), loads it with ``cudaLibraryLoadData``, takes the kernel
with ``cudaLibraryGetKernel`` and launches it with the driver's ``cuLaunchKernel``
(the bindings have no ``cudaLaunchKernel``: it is a C++ template); around it:
``cudaMalloc``, ``cudaMallocAsync``/``cudaFreeAsync`` on a stream, copies, events
with ``cudaEventElapsedTime``, an event without timing, ``cudaStreamWaitEvent``,
``cudaStreamIsCapturing``, ``cudaHostRegister`` memory, and the kernel
attribute setters cuBLAS and PyTorch call. It checks each result
and prints one JSON verdict. Through gleam: ``gleam-peer run -- python runtime_bindings.py``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from cuda.bindings import driver as cu
from cuda.bindings import nvrtc
from cuda.bindings import runtime as rt


def ok(result: Any) -> Any:
    """The outputs of a bindings call, or an exception naming its error."""
    err, *rest = result
    if int(err) != 0:
        raise RuntimeError(repr(err))
    return rest[0] if len(rest) == 1 else (rest or None)


SOURCE = b"""
extern "C" __global__ void gl_axpy(float a, const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}"""


def ptx_of(source: bytes) -> bytes:
    prog = ok(nvrtc.nvrtcCreateProgram(source, b"axpy.cu", 0, [], []))
    ok(nvrtc.nvrtcCompileProgram(prog, 1, [b"--gpu-architecture=compute_80"]))
    out = b" " * ok(nvrtc.nvrtcGetPTXSize(prog))
    ok(nvrtc.nvrtcGetPTX(prog, out))
    return out


def main() -> None:
    ptx = np.frombuffer(ptx_of(SOURCE), dtype=np.uint8)
    h2d, d2h = rt.cudaMemcpyKind.cudaMemcpyHostToDevice, rt.cudaMemcpyKind.cudaMemcpyDeviceToHost
    checks: dict[str, bool] = {}
    ok(rt.cudaSetDevice(0))
    checks["devices"] = ok(rt.cudaGetDeviceCount()) >= 1
    n = 10000
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, dtype=np.float32)
    dx = ok(rt.cudaMalloc(x.nbytes))
    stream = ok(rt.cudaStreamCreate())
    dy = ok(rt.cudaMallocAsync(y.nbytes, stream))
    ok(rt.cudaMemcpy(dx, x.ctypes.data, x.nbytes, h2d))
    ok(rt.cudaMemcpyAsync(dy, y.ctypes.data, y.nbytes, h2d, stream))
    lib = ok(rt.cudaLibraryLoadData(ptx.ctypes.data, None, None, 0, None, None, 0))
    kernel = ok(rt.cudaLibraryGetKernel(lib, b"gl_axpy"))
    # What cuBLAS and PyTorch do before launching a kernel with large shared memory.
    dynamic = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    ok(cu.cuKernelSetAttribute(dynamic, 32 * 1024, cu.CUkernel(int(kernel)), 0))
    ok(cu.cuFuncSetAttribute(cu.CUfunction(int(kernel)), dynamic, 16 * 1024))
    ok(cu.cuFuncSetCacheConfig(cu.CUfunction(int(kernel)),
                               cu.CUfunc_cache.CU_FUNC_CACHE_PREFER_SHARED))
    start, end = ok(rt.cudaEventCreate()), ok(rt.cudaEventCreate())
    ok(rt.cudaEventRecord(start, stream))
    values = (np.array([2.0], np.float32), np.array([int(dx)], np.uint64),
              np.array([int(dy)], np.uint64), np.array([n], np.int32))
    params = np.array([v.ctypes.data for v in values], dtype=np.uint64)
    ok(cu.cuLaunchKernel(cu.CUfunction(int(kernel)), (n + 255) // 256, 1, 1, 256, 1, 1, 0,
                         cu.CUstream(int(stream)), params.ctypes.data, 0))
    # The extensible launch with what cuBLAS passes on Hopper: programmatic
    # stream serialization and a scheduling preference.
    config = cu.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = (n + 255) // 256, 1, 1
    config.blockDimX, config.blockDimY, config.blockDimZ = 256, 1, 1
    config.hStream = cu.CUstream(int(stream))
    attrs = [cu.CUlaunchAttribute(), cu.CUlaunchAttribute()]
    ids = cu.CUlaunchAttributeID
    attrs[0].id = ids.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attrs[0].value.programmaticStreamSerializationAllowed = 1
    attrs[1].id = ids.CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE
    attrs[1].value.clusterSchedulingPolicyPreference = \
        cu.CUclusterSchedulingPolicy.CU_CLUSTER_SCHEDULING_POLICY_DEFAULT
    config.attrs, config.numAttrs = attrs, len(attrs)
    ok(cu.cuLaunchKernelEx(config, cu.CUfunction(int(kernel)), params.ctypes.data, 0))
    ok(rt.cudaEventRecord(end, stream))
    ok(rt.cudaEventSynchronize(end))
    checks["elapsed_nonnegative"] = ok(rt.cudaEventElapsedTime(start, end)) >= 0
    got = np.empty_like(y)
    ok(rt.cudaMemcpy(got.ctypes.data, dy, got.nbytes, d2h))
    checks["axpy"] = bool(np.array_equal(got, 4 * x + 1))  # two launches of y = 2x + y
    quiet = ok(rt.cudaEventCreateWithFlags(rt.cudaEventDisableTiming))
    ok(rt.cudaEventRecord(quiet, stream))
    ok(rt.cudaStreamWaitEvent(0, quiet, 0))
    err, _ = rt.cudaEventElapsedTime(start, quiet)
    checks["untimed_event_is_invalid_handle"] = (
        err == rt.cudaError_t.cudaErrorInvalidResourceHandle)
    checks["not_capturing"] = int(ok(rt.cudaStreamIsCapturing(stream))) == 0
    # An impossible limit is refused: at once on a GPU, at the next waiting call
    # through gleam (the setter is one-way there).
    refused = int(cu.cuFuncSetAttribute(cu.CUfunction(int(kernel)), dynamic, 1 << 30)[0])
    synced = int(rt.cudaDeviceSynchronize()[0])
    checks["huge_shared_memory_refused"] = refused != 0 or synced != 0
    host = np.zeros(1024, np.float32)
    ok(rt.cudaHostRegister(host.ctypes.data, host.nbytes, 0))
    attrs = ok(rt.cudaPointerGetAttributes(host.ctypes.data))
    checks["registered_is_host_memory"] = attrs.type == rt.cudaMemoryType.cudaMemoryTypeHost
    ok(rt.cudaMemcpy(host.ctypes.data, dy, host.nbytes, d2h))
    checks["copy_into_registered"] = bool(np.array_equal(host, (4 * x + 1)[:1024]))
    ok(rt.cudaHostUnregister(host.ctypes.data))
    ok(rt.cudaFreeAsync(dy, stream))
    ok(rt.cudaStreamSynchronize(stream))
    ok(rt.cudaFree(dx))
    ok(rt.cudaLibraryUnload(lib))
    print(json.dumps({"ok": all(checks.values()), "checks": checks}))


if __name__ == "__main__":
    main()
