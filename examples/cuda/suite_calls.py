"""Driver calls that NVIDIA's samples and numba-cuda's test suite check, with NVIDIA's
Python bindings.

Profiler start and stop; the names of functions and kernels (``cuFuncGetName``,
``cuKernelGetName``); the names of error codes; the exact codes of unregistering host
memory; a kernel's attributes (constant, shared and local bytes, registers, its launch
bounds as MAX_THREADS_PER_BLOCK) and a launch over its bounds refused; and a child
forked after ``cuInit``, where every call answers ``CUDA_ERROR_NOT_INITIALIZED`` while
the parent goes on. It checks each answer and prints one JSON verdict. ``--gleam`` adds
the checks of what gleam refuses on purpose (IPC, virtual memory management, green
contexts: ``CUDA_ERROR_NOT_SUPPORTED``, and the device attributes that announce them
read 0), which a GPU would do.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import numpy as np
from cuda.bindings import driver as cu
from cuda.bindings import nvrtc
from driver_calls import code, ok

SOURCE = rb"""
__constant__ float weights[64];
extern "C" __global__ void __launch_bounds__(128) bounded(float *out)
{
    __shared__ float tile[32];
    float local[16];
    int i = threadIdx.x;
    for (int k = 0; k < 16; k++)
        local[k] = weights[(i + k) % 64];
    tile[i % 32] = local[i % 16];
    __syncthreads();
    out[i] = tile[(i + 1) % 32] + local[(i * 7) % 16];
}
"""
CONST_BYTES = 64 * 4


def compile_ptx() -> bytes:
    prog = ok(nvrtc.nvrtcCreateProgram(SOURCE, b"bounded.cu", 0, [], []))
    ok(nvrtc.nvrtcCompileProgram(prog, 1, [b"--gpu-architecture=compute_80"]))
    out = b" " * ok(nvrtc.nvrtcGetPTXSize(prog))
    ok(nvrtc.nvrtcGetPTX(prog, out))
    return out


def attribute(fn: Any, name: str) -> int:
    return int(ok(cu.cuFuncGetAttribute(getattr(cu.CUfunction_attribute, name), fn)))


def launch(fn: Any, threads: int, out: Any) -> int:
    arg = np.array([int(out)], np.uint64)
    params = np.array([arg.ctypes.data], np.uint64)
    return code(cu.cuLaunchKernel(fn, 1, 1, 1, threads, 1, 1, 0, 0, params.ctypes.data, 0))


def kernels(checks: dict[str, bool], ptx: bytes) -> None:
    fn = ok(cu.cuModuleGetFunction(ok(cu.cuModuleLoadData(ptx)), b"bounded"))
    checks["func_name"] = ok(cu.cuFuncGetName(fn)) == b"bounded"
    library = ok(cu.cuLibraryLoadData(ptx, [], [], 0, [], [], 0))
    kernel = ok(cu.cuLibraryGetKernel(library, b"bounded"))
    checks["kernel_name"] = ok(cu.cuKernelGetName(kernel)) == b"bounded"
    checks["max_threads_is_the_bound"] = attribute(
        fn, "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK") == 128
    checks["const_bytes"] = attribute(fn, "CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES") >= CONST_BYTES
    checks["shared_bytes"] = attribute(fn, "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES") >= 32 * 4
    checks["local_bytes"] = attribute(fn, "CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES") >= 0
    regs = attribute(fn, "CU_FUNC_ATTRIBUTE_NUM_REGS")
    checks["registers_plausible"] = 0 < regs < 255 and regs * 128 <= 65536
    out = ok(cu.cuMemAlloc(256 * 4))
    checks["launch_within_bounds"] = launch(fn, 128, out) == 0
    checks["launch_over_bounds_refused"] = launch(fn, 256, out) == int(
        cu.CUresult.CUDA_ERROR_INVALID_VALUE)
    checks["context_usable_after"] = code(cu.cuCtxSynchronize()) == 0
    ok(cu.cuMemFree(out))


def profiler_and_error_names(checks: dict[str, bool]) -> None:
    checks["profiler"] = code(cu.cuProfilerStart()) == 0 and code(cu.cuProfilerStop()) == 0
    names = [cu.CUresult.CUDA_ERROR_PROFILER_DISABLED, cu.CUresult.CUDA_ERROR_STUB_LIBRARY,
             cu.CUresult.CUDA_ERROR_ASSERT, cu.CUresult.CUDA_ERROR_TIMEOUT,
             cu.CUresult.CUDA_ERROR_KEY_ROTATION]
    checks["error_names"] = all(ok(cu.cuGetErrorName(e)).decode() == e.name for e in names)
    checks["error_strings"] = all(ok(cu.cuGetErrorString(e)) for e in names)


def unregister_codes(checks: dict[str, bool]) -> None:
    page = 4096
    buf = np.zeros(4 * page, np.uint8)
    base = (buf.ctypes.data + page - 1) // page * page
    ok(cu.cuMemHostRegister(base, 2 * page, 0))
    checks["unregister_inside_is_invalid_value"] = code(cu.cuMemHostUnregister(base + page)) == int(
        cu.CUresult.CUDA_ERROR_INVALID_VALUE)
    checks["unregister_base"] = code(cu.cuMemHostUnregister(base)) == 0
    checks["unregister_again_not_registered"] = code(cu.cuMemHostUnregister(base)) == int(
        cu.CUresult.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED)


def fork_after_init(checks: dict[str, bool]) -> None:
    """The child of a fork after cuInit cannot use CUDA: every call answers
    NOT_INITIALIZED, cuInit too. The parent's session goes on."""
    d = ok(cu.cuMemAlloc(64))
    pid = os.fork()
    if pid == 0:
        want = int(cu.CUresult.CUDA_ERROR_NOT_INITIALIZED)
        answers = [code(cu.cuMemAlloc(64)), code(cu.cuCtxSynchronize()), code(cu.cuInit(0)),
                   code(cu.cuMemsetD8(d, 7, 64))]
        os._exit(0 if all(a == want for a in answers) else 1)
    _, status = os.waitpid(pid, 0)
    checks["forked_child_not_initialized"] = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    ok(cu.cuMemsetD8(d, 5, 64))
    host = np.zeros(64, np.uint8)
    ok(cu.cuMemcpyDtoH(host.ctypes.data, d, 64))
    checks["parent_goes_on_after_fork"] = bool((host == 5).all())
    ok(cu.cuMemFree(d))


def gleam_refusals(checks: dict[str, bool], dev: Any) -> None:
    unsupported = int(cu.CUresult.CUDA_ERROR_NOT_SUPPORTED)
    d = ok(cu.cuMemAlloc(64))
    checks["ipc_refused"] = code(cu.cuIpcGetMemHandle(d)) == unsupported
    prop = cu.CUmemAllocationProp()
    prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    checks["vmm_refused"] = code(cu.cuMemCreate(1 << 21, prop, 0)) == unsupported
    checks["green_contexts_refused"] = code(cu.cuDeviceGetDevResource(
        dev, cu.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM)) == unsupported
    vmm = cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
    ipc = cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED
    checks["refused_attributes_read_0"] = (ok(cu.cuDeviceGetAttribute(vmm, dev)) == 0
                                           and ok(cu.cuDeviceGetAttribute(ipc, dev)) == 0)
    ok(cu.cuMemFree(d))


def main() -> None:
    checks: dict[str, bool] = {}
    ptx = compile_ptx()
    ok(cu.cuInit(0))
    dev = ok(cu.cuDeviceGet(0))
    ok(cu.cuCtxSetCurrent(ok(cu.cuDevicePrimaryCtxRetain(dev))))
    profiler_and_error_names(checks)
    kernels(checks, ptx)
    unregister_codes(checks)
    fork_after_init(checks)
    if "--gleam" in sys.argv[1:]:
        gleam_refusals(checks, dev)
    print(json.dumps({"ok": all(checks.values()), "checks": checks}))


if __name__ == "__main__":
    main()
