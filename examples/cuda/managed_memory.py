"""Mapped and managed memory through the driver API, with NVIDIA's Python bindings.

Managed memory (``cuMemAllocManaged``), mapped host memory (``cuMemHostAlloc`` with
``DEVICEMAP``) and mapped registered memory (``cuMemHostRegister`` with ``DEVICEMAP``),
each written on the CPU through a numpy view, read and written by kernels on two
streams, and read back on the CPU, round after round, without a copy; then memsets,
copies in and out, pointer and range attributes, advice and prefetches, and the
errors NVIDIA documents. Prints one JSON verdict naming every check.

``python managed_memory.py [KERNELS.ptx] [--gleam]``: the kernels are examples/cuda's
(``saxpy``, ``vector_add``); ``--gleam`` adds what gleam answers as a device without
concurrent managed access (a GPU may answer otherwise) and that registered memory has a
device address of its own.

``python managed_memory.py steps KERNELS STEPS gate``: state that lives only in managed
and mapped memory, carried across steps, one step per line on stdin (the way
``accumulate`` runs, peer/bench/gated.py), so a test can kill or move the server between
two steps: each step the CPU writes x and h, kernels add 2x into y and write y + h into
registered memory r, and the CPU checks y and r against its own sums.
"""

from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from cuda.bindings import driver as cu
from driver_calls import code, ok  # (this folder: the script's own)

N = 5000  # not a multiple of a page
DEVICEMAP = 2
CU_DEVICE_CPU, CU_DEVICE_INVALID = -1, -2


def view(ptr: int, n: int = N) -> np.ndarray:
    """n float32 at a pointer the CPU can use."""
    return np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), (n,))


def params(*values: Any) -> np.ndarray:
    """kernelParams: an array of pointers to each value, kept alive by the caller."""
    held = [np.array([v], dtype=np.float32 if isinstance(v, float) else
                     np.int32 if isinstance(v, int) and v < 2**31 else np.uint64)
            for v in values]
    params.held = held  # type: ignore[attr-defined]
    return np.array([h.ctypes.data for h in held], dtype=np.uint64)


def launch(fn: Any, stream: Any, *values: Any) -> None:
    p = params(*values)
    ok(cu.cuLaunchKernel(fn, (N + 127) // 128, 1, 1, 128, 1, 1, 0, stream, p.ctypes.data, 0))


def attr(name: str, ptr: int) -> Any:
    return ok(cu.cuPointerGetAttribute(getattr(cu.CUpointer_attribute, name), ptr))


def loc(kind: str, ident: int = 0) -> Any:
    location = cu.CUmemLocation()
    location.type = getattr(cu.CUmemLocationType, f"CU_MEM_LOCATION_TYPE_{kind}")
    location.id = ident
    return location


def range_attr(name: str, ptr: int, count: int, size: int = 4) -> Any:
    return ok(cu.cuMemRangeGetAttribute(
        size, getattr(cu.CUmem_range_attribute, f"CU_MEM_RANGE_ATTRIBUTE_{name}"), ptr, count))


def rounds(checks: dict[str, bool], saxpy: Any, vadd: Any, streams: list[Any]) -> None:
    """CPU writes, kernels on two streams, CPU reads; six rounds, no copies."""
    flags = cu.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL
    xs = [int(ok(cu.cuMemAllocManaged(N * 4, flags))) for _ in streams]
    ys = [int(ok(cu.cuMemAllocManaged(N * 4, flags))) for _ in streams]
    host = int(ok(cu.cuMemHostAlloc(N * 4, DEVICEMAP)))
    dhost = int(ok(cu.cuMemHostGetDevicePointer(host, 0)))
    reg = np.zeros(N + 3, np.float32)[3:]  # not page aligned either
    ok(cu.cuMemHostRegister(reg.ctypes.data, reg.nbytes, DEVICEMAP))
    dreg = int(ok(cu.cuMemHostGetDevicePointer(reg.ctypes.data, 0)))
    checks["hostalloc_device_pointer_is_its_address"] = dhost == host
    bad = 0
    for r in range(6):
        h = view(host)
        h[:] = np.arange(N, dtype=np.float32) % 13 + r
        for s, stream in enumerate(streams):
            view(xs[s])[:] = np.arange(N, dtype=np.float32) * (s + 1)
            view(ys[s])[:] = r
            launch(saxpy, stream, 2.0 + s, xs[s], ys[s], N)  # y = a x + y
        launch(vadd, streams[0], ys[0], dhost, dreg, N)  # reg = y0 + host
        for stream in streams:
            ok(cu.cuStreamSynchronize(stream))
        for s in range(len(streams)):
            want = (2.0 + s) * np.arange(N, dtype=np.float32) * (s + 1) + r
            bad += int((view(ys[s]) != want).sum())
        bad += int((reg != view(ys[0]) + h).sum())
    checks["rounds"] = bad == 0
    # A kernel's writes to registered memory reach it by cuMemHostUnregister at the latest.
    launch(vadd, streams[1], ys[1], ys[1], dreg, N)
    ok(cu.cuMemHostUnregister(reg.ctypes.data))
    checks["unregister_brings_the_kernels_writes"] = bool((reg == 2 * view(ys[1])).all())
    checks["cu_mem_free_of_mapped_host_memory_refused"] = code(cu.cuMemFree(host)) == 1
    ok(cu.cuMemFreeHost(host))
    for p in xs + ys:
        ok(cu.cuMemFree(p))


def both_wrote(checks: dict[str, bool], saxpy: Any, stream: Any) -> None:
    """The CPU writes managed memory a kernel it launched writes too, before
    synchronizing (a race without concurrent managed access): through gleam the
    synchronization reports it (where both wrote a byte, the device's is kept)."""
    flags = cu.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL
    x, y = (int(ok(cu.cuMemAllocManaged(N * 4, flags))) for _ in range(2))
    view(x)[:] = 1.0
    launch(saxpy, stream, 2.0, x, y, N)  # y = 2
    view(y)[7] = 5.0  # the same bytes, meanwhile, on the CPU
    result = code(cu.cuStreamSynchronize(stream))
    checks["both_wrote_is_an_error"] = (result == int(cu.CUresult.CUDA_ERROR_ILLEGAL_STATE)
                                        and bool((view(y)[:7] == 2.0).all()))
    ok(cu.cuStreamSynchronize(stream))  # reported once; the copies agree again
    ok(cu.cuMemFree(x))
    ok(cu.cuMemFree(y))


def memsets_and_copies(checks: dict[str, bool], stream: Any) -> None:
    m = int(ok(cu.cuMemAllocManaged(N * 4, cu.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL)))
    ok(cu.cuMemsetD32(m, 0x3F800000, N))  # 1.0f: seen when the call returns
    checks["memset_seen_at_once"] = bool((view(m) == 1.0).all())
    ok(cu.cuMemsetD32Async(m, 0x40000000, N, stream))  # 2.0f: seen after the stream
    ok(cu.cuStreamSynchronize(stream))
    checks["async_memset_seen_after_sync"] = bool((view(m) == 2.0).all())
    src = np.arange(N, dtype=np.float32)
    ok(cu.cuMemcpyHtoD(m, src.ctypes.data, src.nbytes))
    checks["copy_in_seen_at_once"] = bool((view(m) == src).all())
    view(m)[:10] = -1.0
    dev = int(ok(cu.cuMemAlloc(N * 4)))
    ok(cu.cuMemcpy(dev, m, N * 4))  # managed -> device: the CPU's writes go along
    out = np.zeros(N, np.float32)
    ok(cu.cuMemcpyDtoH(out.ctypes.data, dev, out.nbytes))
    checks["copy_out_has_cpu_writes"] = bool((out[:10] == -1).all()
                                             and (out[10:] == src[10:]).all())
    ok(cu.cuMemFree(dev))
    ok(cu.cuMemFree(m))


def queries(checks: dict[str, bool], gleam: bool, stream: Any) -> None:
    dev = ok(cu.cuDeviceGet(0))

    def dattr(name: str) -> int:
        return int(ok(cu.cuDeviceGetAttribute(getattr(cu.CUdevice_attribute, name), dev)))

    checks["managed_memory_attribute"] = dattr("CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY") == 1
    checks["can_map_host_memory"] = dattr("CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY") == 1
    concurrent = dattr("CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS")
    flags = cu.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL
    checks["size_0_refused"] = code(cu.cuMemAllocManaged(0, flags)) == 1
    checks["bad_flags_refused"] = code(cu.cuMemAllocManaged(64, 3)) == 1
    m = int(ok(cu.cuMemAllocManaged(N * 4, flags)))
    checks["managed_pointer"] = (bool(attr("CU_POINTER_ATTRIBUTE_IS_MANAGED", m + 8))
                                 and int(attr("CU_POINTER_ATTRIBUTE_DEVICE_POINTER", m + 8))
                                 == m + 8
                                 and int(attr("CU_POINTER_ATTRIBUTE_HOST_POINTER", m + 8)) == m + 8
                                 and int(attr("CU_POINTER_ATTRIBUTE_RANGE_START_ADDR", m + 8)) == m)
    reg = np.zeros(1024, np.float32)
    ok(cu.cuMemHostRegister(reg.ctypes.data, reg.nbytes, DEVICEMAP))
    dreg = int(ok(cu.cuMemHostGetDevicePointer(reg.ctypes.data + 4, 0)))
    checks["registered_pointers"] = (
        int(attr("CU_POINTER_ATTRIBUTE_HOST_POINTER", dreg)) == reg.ctypes.data + 4
        and int(attr("CU_POINTER_ATTRIBUTE_DEVICE_POINTER", reg.ctypes.data + 4)) == dreg
        and not attr("CU_POINTER_ATTRIBUTE_IS_MANAGED", dreg)
        and int(attr("CU_POINTER_ATTRIBUTE_MEMORY_TYPE", reg.ctypes.data)) == 1)
    checks["get_device_pointer_flags_refused"] = code(
        cu.cuMemHostGetDevicePointer(reg.ctypes.data, 1)) == 1
    ok(cu.cuMemHostUnregister(reg.ctypes.data))
    half = N * 2
    ok(cu.cuMemAdvise(m, half, cu.CUmem_advise.CU_MEM_ADVISE_SET_PREFERRED_LOCATION, loc("HOST")))
    checks["preferred_location"] = (range_attr("PREFERRED_LOCATION", m, half) == CU_DEVICE_CPU
                                    and range_attr("PREFERRED_LOCATION", m, N * 4)
                                    == CU_DEVICE_INVALID)
    ok(cu.cuMemAdvise(m, N * 4, cu.CUmem_advise.CU_MEM_ADVISE_SET_READ_MOSTLY, loc("HOST")))
    checks["read_mostly"] = range_attr("READ_MOSTLY", m, N * 4) == 1
    ok(cu.cuMemPrefetchAsync(m, N * 4, loc("HOST"), 0, stream))
    checks["last_prefetch"] = (
        range_attr("LAST_PREFETCH_LOCATION", m, N * 4) == CU_DEVICE_CPU
        and range_attr("LAST_PREFETCH_LOCATION_TYPE", m, N * 4)
        == int(cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_HOST))
    to_device = code(cu.cuMemPrefetchAsync(m, N * 4, loc("DEVICE"), 0, stream))
    plain = int(ok(cu.cuMemAlloc(64)))
    checks["advice_on_plain_memory_refused"] = code(cu.cuMemAdvise(
        plain, 64, cu.CUmem_advise.CU_MEM_ADVISE_SET_READ_MOSTLY, loc("HOST"))) == 1
    if gleam:
        invalid_device = int(cu.CUresult.CUDA_ERROR_INVALID_DEVICE)
        checks["no_concurrent_managed_access"] = concurrent == 0
        checks["prefetch_to_device_refused"] = to_device == invalid_device
        checks["registered_has_its_own_device_address"] = dreg != reg.ctypes.data + 4
    else:
        checks["prefetch_to_device"] = to_device == 0 or not concurrent
    ok(cu.cuMemFree(plain))
    ok(cu.cuMemFree(m))


def steps(kernels: str, count: int, gate: bool) -> None:
    ok(cu.cuInit(0))
    ok(cu.cuCtxSetCurrent(ok(cu.cuDevicePrimaryCtxRetain(ok(cu.cuDeviceGet(0))))))
    mod = ok(cu.cuModuleLoadData(Path(kernels).read_bytes() + b"\0"))
    saxpy = ok(cu.cuModuleGetFunction(mod, b"saxpy"))
    vadd = ok(cu.cuModuleGetFunction(mod, b"vector_add"))
    stream = ok(cu.cuStreamCreate(0))
    flags = cu.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL
    x, y = (int(ok(cu.cuMemAllocManaged(N * 4, flags))) for _ in range(2))
    h = int(ok(cu.cuMemHostAlloc(N * 4, DEVICEMAP)))
    r = np.zeros(N, np.float32)
    ok(cu.cuMemHostRegister(r.ctypes.data, r.nbytes, DEVICEMAP))
    dr = int(ok(cu.cuMemHostGetDevicePointer(r.ctypes.data, 0)))
    want = np.zeros(N, np.float32)
    bad = 0
    for k in range(count):
        if gate and k > 0 and not sys.stdin.readline():
            break
        view(x)[:] = np.arange(N, dtype=np.float32) % 97 + k
        view(h)[:] = k
        launch(saxpy, stream, 2.0, x, y, N)
        launch(vadd, stream, y, h, dr, N)
        ok(cu.cuStreamSynchronize(stream))
        want += 2 * (np.arange(N, dtype=np.float32) % 97 + k)
        bad += int((view(y) != want).sum()) + int((r != want + k).sum())
        print(f"step {k} sum {float(view(y).sum()):.1f} bad {bad}", flush=True)
    ok(cu.cuMemHostUnregister(r.ctypes.data))
    print(json.dumps({"ok": bad == 0, "steps": count, "mismatches": bad}), flush=True)


def main() -> None:
    if sys.argv[1:2] == ["steps"]:
        steps(sys.argv[2], int(sys.argv[3]), "gate" in sys.argv[4:])
        return
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    gleam = "--gleam" in sys.argv
    if args:
        path = args[0]
    else:
        from gleam.peer.cuda.examples import KERNELS_PTX

        path = str(KERNELS_PTX)
    image = Path(path).read_bytes() + b"\0"
    ok(cu.cuInit(0))
    ok(cu.cuCtxSetCurrent(ok(cu.cuDevicePrimaryCtxRetain(ok(cu.cuDeviceGet(0))))))
    mod = ok(cu.cuModuleLoadData(image))
    saxpy = ok(cu.cuModuleGetFunction(mod, b"saxpy"))
    vadd = ok(cu.cuModuleGetFunction(mod, b"vector_add"))
    streams = [ok(cu.cuStreamCreate(0)) for _ in range(2)]
    checks: dict[str, bool] = {}
    rounds(checks, saxpy, vadd, streams)
    memsets_and_copies(checks, streams[0])
    queries(checks, gleam, streams[1])
    if gleam:
        both_wrote(checks, saxpy, streams[0])
    print(json.dumps({"ok": all(checks.values()), "checks": checks}))


if __name__ == "__main__":
    main()
