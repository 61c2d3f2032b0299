"""Driver calls that runtimes and libraries make, with NVIDIA's Python bindings.

Primary-context state and flags, memory pools (default and created, their
attributes) with stream-ordered allocation, ``cuMemGetAddressRange``,
registered host memory, stream-capture queries, the thread's capture mode, events with
flags (an untimed event in ``cuEventElapsedTime``), ``cuStreamWaitEvent``,
``cuMemcpyBatchAsync``, and the per-thread-stream twins of these calls. It
checks each answer and prints one JSON verdict. ``--gleam`` adds the checks of what gleam answers
differently from a GPU, of its own symbol table (twins, every name of
NVIDIA's driver exported), of freeing address 0 and of the read-only CIG limits.
"""

from __future__ import annotations

import ctypes
import json
import sys
from typing import Any

import numpy as np
from cuda.bindings import driver as cu


def ok(result: Any) -> Any:
    """The outputs of a bindings call, or an exception naming its error."""
    err, *rest = result
    if int(err) != 0:
        raise RuntimeError(repr(err))
    return rest[0] if len(rest) == 1 else (rest or None)


def code(result: Any) -> int:
    return int(result[0])


def pool_attr(pool: Any, name: str) -> int:
    return int(ok(cu.cuMemPoolGetAttribute(pool, getattr(cu.CUmemPool_attribute, name))))


def primary_context(checks: dict[str, bool]) -> Any:
    dev = ok(cu.cuDeviceGet(0))
    _, active = ok(cu.cuDevicePrimaryCtxGetState(dev))
    checks["primary_inactive_first"] = active == 0
    blocking = cu.CUctx_flags.CU_CTX_SCHED_BLOCKING_SYNC
    ok(cu.cuDevicePrimaryCtxSetFlags(dev, blocking))
    ctx = ok(cu.cuDevicePrimaryCtxRetain(dev))
    ok(cu.cuCtxSetCurrent(ctx))
    flags, active = ok(cu.cuDevicePrimaryCtxGetState(dev))
    checks["primary_state"] = active == 1 and flags == int(blocking)
    return dev


def pools(checks: dict[str, bool], dev: Any, stream: Any) -> tuple[Any, np.ndarray]:
    pool = ok(cu.cuDeviceGetDefaultMemPool(dev))
    checks["current_is_default"] = int(ok(cu.cuDeviceGetMemPool(dev))) == int(pool)
    props = cu.CUmemPoolProps()
    props.allocType = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    props.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    props.location.id = 0
    mine = ok(cu.cuMemPoolCreate(props))
    ok(cu.cuMemPoolSetAttribute(mine, cu.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                                cu.cuuint64_t(1 << 20)))
    checks["threshold"] = pool_attr(mine, "CU_MEMPOOL_ATTR_RELEASE_THRESHOLD") == 1 << 20
    a = ok(cu.cuMemAllocAsync(4096, stream))
    b = ok(cu.cuMemAllocFromPoolAsync(1 << 16, mine, stream))
    # A GPU may round a pool allocation up; gleam's sub-allocations are exact.
    checks["pool_used"] = pool_attr(mine, "CU_MEMPOOL_ATTR_USED_MEM_CURRENT") >= 1 << 16
    base, size = ok(cu.cuMemGetAddressRange(int(b) + 100))
    checks["address_range"] = int(base) == int(b) and size >= 1 << 16
    x = np.arange(1 << 14, dtype=np.float32)
    ok(cu.cuMemcpyHtoDAsync(b, x.ctypes.data, x.nbytes, stream))
    ok(cu.cuMemcpyDtoDAsync(a, b, 4096, stream))
    ok(cu.cuMemFreeAsync(b, stream))
    ok(cu.cuStreamSynchronize(stream))
    checks["pool_freed"] = (pool_attr(mine, "CU_MEMPOOL_ATTR_USED_MEM_CURRENT") == 0
                            and pool_attr(mine, "CU_MEMPOOL_ATTR_USED_MEM_HIGH") >= 1 << 16)
    ok(cu.cuMemPoolDestroy(mine))
    return a, x


def registered(checks: dict[str, bool], a: Any, x: np.ndarray) -> None:
    host = np.zeros(1024, np.float32)
    ok(cu.cuMemHostRegister(host.ctypes.data, host.nbytes, 0))
    already = cu.CUresult.CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
    checks["register_twice"] = code(cu.cuMemHostRegister(host.ctypes.data, host.nbytes, 0)) \
        == int(already)
    checks["host_flags"] = ok(cu.cuMemHostGetFlags(host.ctypes.data)) == 0
    ok(cu.cuMemcpyDtoH(host.ctypes.data, a, host.nbytes))
    checks["copy_into_registered"] = bool(np.array_equal(host, x[:1024]))
    ok(cu.cuMemHostUnregister(host.ctypes.data))
    checks["unregister_twice"] = code(cu.cuMemHostUnregister(host.ctypes.data)) \
        == int(cu.CUresult.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED)


def streams_and_events(checks: dict[str, bool], stream: Any) -> None:
    none = cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
    checks["not_capturing"] = ok(cu.cuStreamIsCapturing(stream)) == none
    info = cu.cuStreamGetCaptureInfo(stream)
    checks["capture_info"] = int(info[0]) == 0 and info[1] == none
    modes = cu.CUstreamCaptureMode
    old = ok(cu.cuThreadExchangeStreamCaptureMode(modes.CU_STREAM_CAPTURE_MODE_RELAXED))
    back = ok(cu.cuThreadExchangeStreamCaptureMode(old))
    checks["capture_mode_roundtrip"] = (old == modes.CU_STREAM_CAPTURE_MODE_GLOBAL
                                        and back == modes.CU_STREAM_CAPTURE_MODE_RELAXED)
    timed = ok(cu.cuEventCreate(0))
    untimed = ok(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING))
    ok(cu.cuEventRecord(timed, stream))
    ok(cu.cuEventRecordWithFlags(untimed, stream, 0))
    other = ok(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING))
    ok(cu.cuStreamWaitEvent(other, untimed, 0))
    ok(cu.cuStreamSynchronize(other))
    checks["elapsed_of_untimed_event"] = code(cu.cuEventElapsedTime(timed, untimed)) \
        == int(cu.CUresult.CUDA_ERROR_INVALID_HANDLE)


def batch_copies(checks: dict[str, bool], stream: Any) -> None:
    """cuMemcpyBatchAsync: host to device, device to device and back in one batch
    of three (two attribute sets), then the legacy stream is refused."""
    a = np.arange(256, dtype=np.float32)
    back = np.zeros_like(a)
    d1, d2 = ok(cu.cuMemAlloc(a.nbytes)), ok(cu.cuMemAlloc(a.nbytes))
    stream_order = cu.CUmemcpySrcAccessOrder.CU_MEMCPY_SRC_ACCESS_ORDER_STREAM
    attrs = [cu.CUmemcpyAttributes(), cu.CUmemcpyAttributes()]
    for at in attrs:
        at.srcAccessOrder = stream_order
    ptr = cu.CUdeviceptr  # the bindings take every address as one, host ones too
    ok(cu.cuMemcpyBatchAsync([d1], [ptr(a.ctypes.data)], [a.nbytes], 1, attrs[:1], [0], 1,
                             stream))
    ok(cu.cuMemcpyBatchAsync([d2, ptr(back.ctypes.data)], [d1, d2], [a.nbytes, a.nbytes // 2],
                             2, attrs, [0, 1], 2, stream))
    ok(cu.cuStreamSynchronize(stream))
    checks["batch_copies"] = bool((back[:128] == a[:128]).all() and (back[128:] == 0).all())
    bad = cu.CUmemcpyAttributes()  # srcAccessOrder left INVALID
    checks["batch_bad_attribute"] = code(cu.cuMemcpyBatchAsync(
        [d2], [d1], [16], 1, [bad], [0], 1, stream)) == int(cu.CUresult.CUDA_ERROR_INVALID_VALUE)
    ok(cu.cuMemFree(d1))
    ok(cu.cuMemFree(d2))


def gleam_only(checks: dict[str, bool], stream: Any) -> None:
    """What gleam answers that a GPU would not, and its exported twins."""
    lib = ctypes.CDLL("libcuda.so.1")
    for name in ("cuMemAllocAsync_ptsz", "cuMemFreeAsync_ptsz", "cuMemAllocFromPoolAsync_ptsz",
                 "cuStreamIsCapturing_ptsz", "cuStreamGetCaptureInfo_v3_ptsz",
                 "cuEventRecordWithFlags_ptsz", "cuStreamWaitEvent_ptsz"):
        checks["twin_" + name] = hasattr(lib, name)
    pfn, _ = ok(cu.cuGetProcAddress(
        b"cuMemAllocAsync", 12000,
        cu.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
    checks["per_thread_twin_resolved"] = \
        int(pfn) == ctypes.cast(lib.cuMemAllocAsync_ptsz, ctypes.c_void_p).value
    # cudart's cudaFree(0) and the cudart inside cuBLAS free 0 to start up.
    checks["free_null"] = code(cu.cuMemFree(0)) == 0
    # cuBLASLt reads the context's shared memory (CUDA 12.8's CIG limits, read-only):
    # a context that is not CIG has the device's opt-in shared memory per block.
    dev = ok(cu.cuCtxGetDevice())
    optin = cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    checks["shmem_limit"] = int(ok(cu.cuCtxGetLimit(cu.CUlimit.CU_LIMIT_SHMEM_SIZE))) \
        == int(ok(cu.cuDeviceGetAttribute(optin, dev)))
    checks["cig_limit_read_only"] = code(cu.cuCtxSetLimit(cu.CUlimit.CU_LIMIT_CIG_ENABLED, 1)) \
        == int(cu.CUresult.CUDA_ERROR_INVALID_VALUE)
    # cuBLASLt finds its entry points with dlsym: every driver name is there,
    # and one gleam does not forward answers CUDA_ERROR_NOT_SUPPORTED.
    array_create = lib.cuArrayCreate
    array_create.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    checks["unforwarded_exported"] = \
        array_create(None, None) == int(cu.CUresult.CUDA_ERROR_NOT_SUPPORTED)


def main() -> None:
    checks: dict[str, bool] = {}
    ok(cu.cuInit(0))
    dev = primary_context(checks)
    stream = ok(cu.cuStreamCreate(0))
    a, x = pools(checks, dev, stream)
    registered(checks, a, x)
    ok(cu.cuMemFreeAsync(a, stream))
    streams_and_events(checks, stream)
    batch_copies(checks, stream)
    if "--gleam" in sys.argv[1:]:
        gleam_only(checks, stream)
    ok(cu.cuCtxSynchronize())
    print(json.dumps({"ok": all(checks.values()), "checks": checks}))


if __name__ == "__main__":
    main()
