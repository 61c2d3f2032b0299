"""Virtual memory management with NVIDIA's Python bindings: a reservation, one
physical allocation mapped at two addresses of it, bytes written through one view
and read through the other by copies and by a kernel, the handle released while
mapped, access flags, and each error NVIDIA documents (sizes, offsets, overlaps,
sub-ranges, double release) and each refusal of gleam (shareable handles, host
memory, read-only access). The last check launches a kernel on a mapping without
access, which must fault (the context is lost then: it comes last). Prints one JSON
verdict naming every check.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from cuda.bindings import driver as cu
from driver_calls import code, ok
from suite_calls import compile_ptx

SOURCE = rb"""
extern "C" __global__ void twice(float *dst, const float *src, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dst[i] = 2.0f * src[i];
}
"""
INVALID = int(cu.CUresult.CUDA_ERROR_INVALID_VALUE)
UNSUPPORTED = int(cu.CUresult.CUDA_ERROR_NOT_SUPPORTED)
ILLEGAL = int(cu.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS)
RW = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
ATTR = cu.CUdevice_attribute


def device_prop(handle_types: int = 0, host: bool = False) -> Any:
    prop = cu.CUmemAllocationProp()
    prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = (cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_HOST if host
                          else cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE)
    prop.location.id = 0
    prop.requestedHandleTypes = handle_types
    return prop


def access(flags: Any) -> Any:
    desc = cu.CUmemAccessDesc()
    desc.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    desc.location.id = 0
    desc.flags = flags
    return desc


def launch(fn: Any, dst: int, src: int, n: int) -> int:
    args = [np.array([dst], np.uint64), np.array([src], np.uint64), np.array([n], np.int32)]
    params = np.array([a.ctypes.data for a in args], np.uint64)
    return code(cu.cuLaunchKernel(fn, (n + 127) // 128, 1, 1, 128, 1, 1, 0, 0,
                                  params.ctypes.data, 0))


def attributes(checks: dict[str, bool], dev: Any) -> None:
    def attr(name: str) -> int:
        return int(ok(cu.cuDeviceGetAttribute(getattr(ATTR, name), dev)))
    checks["vmm_supported"] = attr("CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED") == 1
    checks["no_shareable_or_compression"] = (
        attr("CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED") == 0
        and attr("CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED") == 0
        and attr("CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED") == 0)


def refusals(checks: dict[str, bool], gran: int) -> None:
    fd = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    checks["shareable_refused"] = code(cu.cuMemCreate(gran, device_prop(fd), 0)) == UNSUPPORTED
    checks["host_memory_refused"] = code(cu.cuMemCreate(gran, device_prop(host=True),
                                                        0)) == UNSUPPORTED
    checks["bad_create_sizes"] = (code(cu.cuMemCreate(gran + 4096, device_prop(), 0)) == INVALID
                                  and code(cu.cuMemCreate(0, device_prop(), 0)) == INVALID)
    bad_option = code(cu.cuMemGetAllocationGranularity(device_prop(), 7)) == INVALID
    checks["granularity_option_checked"] = bad_option
    checks["unknown_handle"] = code(cu.cuMemRelease(0x1234)) == INVALID


def aliasing(checks: dict[str, bool], fn: Any, gran: int) -> int:
    """Two views of one allocation; returns the reservation, whose first mapping has
    no access (for the fault)."""
    size = 2 * gran
    base = int(ok(cu.cuMemAddressReserve(3 * size, 0, 0, 0)))
    handle = ok(cu.cuMemCreate(size, device_prop(), 0))
    a, b = base, base + size
    ok(cu.cuMemMap(a, size, 0, handle, 0))
    ok(cu.cuMemMap(b, size, 0, handle, 0))
    checks["map_errors"] = (
        code(cu.cuMemMap(base + 2 * size, gran + 4096, 0, handle, 0)) == INVALID
        and code(cu.cuMemMap(b, size, 0, handle, 0)) == INVALID  # already mapped
        and code(cu.cuMemMap(base + 2 * size, size, gran, handle, 0)) == INVALID  # past its end
        and code(cu.cuMemMap(base + 3 * size, size, 0, handle, 0)) == INVALID)  # past the range
    n = size // 4
    host = np.arange(n, dtype=np.float32)
    back = np.zeros_like(host)
    checks["no_access_no_copy"] = code(cu.cuMemcpyDtoH(back.ctypes.data, a, back.nbytes)) != 0
    got = ok(cu.cuMemGetAllocationPropertiesFromHandle(handle))
    checks["properties_from_handle"] = (int(got.location.id) == 0 and int(
        got.location.type) == int(cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE)
        and int(got.allocFlags.compressionType) == 0)
    retained = ok(cu.cuMemRetainAllocationHandle(b + 4096))  # any address of a mapping
    checks["retain_gives_the_handle"] = int(retained) == int(handle)
    checks["retain_needs_a_mapping"] = code(
        cu.cuMemRetainAllocationHandle(base + 2 * size)) == INVALID
    ok(cu.cuMemRelease(retained))
    ok(cu.cuMemRelease(handle))  # mapped: the memory stays
    checks["double_release"] = code(cu.cuMemRelease(handle)) == INVALID
    read_only = access(cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READ)
    checks["read_only_refused"] = code(cu.cuMemSetAccess(a, size, [read_only], 1)) == UNSUPPORTED
    checks["access_needs_whole_mappings"] = code(
        cu.cuMemSetAccess(a, gran, [access(RW)], 1)) == INVALID
    ok(cu.cuMemSetAccess(a, 2 * size, [access(RW)], 1))  # both mappings at once
    location = cu.CUmemLocation()
    location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    checks["get_access"] = int(ok(cu.cuMemGetAccess(location, b + 64))) == int(RW)
    ok(cu.cuMemcpyHtoD(a, host.ctypes.data, host.nbytes))
    ok(cu.cuMemcpyDtoH(back.ctypes.data, b, back.nbytes))
    checks["copy_through_one_read_through_other"] = bool((back == host).all())
    out = int(ok(cu.cuMemAlloc(host.nbytes)))
    ok_launch = launch(fn, out, b, n) == 0 and code(cu.cuCtxSynchronize()) == 0
    ok(cu.cuMemcpyDtoH(back.ctypes.data, out, back.nbytes))
    checks["kernel_reads_the_other_view"] = ok_launch and bool((back == 2 * host).all())
    ok_launch = launch(fn, a, out, n) == 0 and code(cu.cuCtxSynchronize()) == 0
    ok(cu.cuMemcpyDtoH(back.ctypes.data, b, back.nbytes))
    checks["kernel_writes_seen_in_the_other_view"] = ok_launch and bool((back == 4 * host).all())
    checks["free_of_a_reservation_refused"] = code(cu.cuMemFree(base)) == INVALID
    checks["unmap_sub_range_refused"] = code(cu.cuMemUnmap(a, gran)) == INVALID
    still_mapped = code(cu.cuMemAddressFree(base, 3 * size))
    checks["address_free_while_mapped_refused"] = still_mapped == INVALID
    # a handle retained from the mapping after the release keeps it past the unmap
    again = ok(cu.cuMemRetainAllocationHandle(a))
    ok(cu.cuMemUnmap(a, 2 * size))
    checks["retained_outlives_its_mappings"] = code(cu.cuMemMap(b, size, 0, again, 0)) == 0
    ok(cu.cuMemRelease(again))
    ok(cu.cuMemUnmap(b, size))
    checks["unmapped_copy_refused"] = code(cu.cuMemcpyDtoH(back.ctypes.data, b, 64)) != 0
    checks["released_and_unmapped_is_gone"] = code(cu.cuMemMap(a, size, 0, handle, 0)) == INVALID
    checks["address_free_size_checked"] = code(cu.cuMemAddressFree(base, size)) == INVALID
    ok(cu.cuMemFree(out))
    # A fresh allocation at the same addresses is fresh memory.
    fresh = ok(cu.cuMemCreate(size, device_prop(), 0))
    ok(cu.cuMemMap(a, size, 0, fresh, 0))
    ok(cu.cuMemSetAccess(a, size, [access(RW)], 1))
    ok(cu.cuMemcpyDtoH(back.ctypes.data, a, back.nbytes))
    checks["fresh_allocation_zero"] = not back.any()
    ok(cu.cuMemUnmap(a, size))
    ok(cu.cuMemMap(a, size, 0, fresh, 0))  # mapped again: no access until set
    ok(cu.cuMemRelease(fresh))
    return base


def main() -> None:
    checks: dict[str, bool] = {}
    ptx = compile_ptx(SOURCE, b"twice.cu")
    ok(cu.cuInit(0))
    dev = ok(cu.cuDeviceGet(0))
    ok(cu.cuCtxSetCurrent(ok(cu.cuDevicePrimaryCtxRetain(dev))))
    fn = ok(cu.cuModuleGetFunction(ok(cu.cuModuleLoadData(ptx)), b"twice"))
    attributes(checks, dev)
    option = cu.CUmemAllocationGranularity_flags
    gran = int(ok(cu.cuMemGetAllocationGranularity(
        device_prop(), option.CU_MEM_ALLOC_GRANULARITY_MINIMUM)))
    recommended = int(ok(cu.cuMemGetAllocationGranularity(
        device_prop(), option.CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)))
    checks["granularity"] = gran == recommended == 2 << 20
    refusals(checks, gran)
    base = aliasing(checks, fn, gran)
    # Last: a kernel on the mapping without access faults, and the context is lost.
    scratch = int(ok(cu.cuMemAlloc(256)))
    result = launch(fn, base, scratch, 64)
    checks["no_access_kernel_faults"] = (result == ILLEGAL
                                         or code(cu.cuCtxSynchronize()) == ILLEGAL)
    print(json.dumps({"ok": all(checks.values()), "checks": checks}))


if __name__ == "__main__":
    main()
