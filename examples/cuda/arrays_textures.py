"""CUDA arrays, texture and surface objects through the driver API, with NVIDIA's Python
bindings.

``cuArrayCreate`` and ``cuArray3DCreate`` (2D, layered, surface load/store) with their
descriptor queries and the descriptors a GPU refuses; the 1D array copies
(``cuMemcpyHtoA``/``AtoH``/``DtoA``/``AtoD``/``AtoA`` and the Async forms);
``cuMemcpy2D`` and ``cuMemcpy3D`` with an array side (host pitches wider than a row,
offsets, device memory); ``cuMipmappedArrayCreate`` (levels clamped) and
``cuMipmappedArrayGetLevel``; ``cuTexObjectCreate`` over a layered array through a
resource view, the ``Get*Desc`` round trips; ``cuSurfObjectCreate``; an NVRTC kernel that
samples the texture and writes through the surface. numpy computes every expected value.
It prints one JSON verdict naming each check; the checks are the same on a GPU.
``--gleam`` adds what gleam refuses beyond a GPU: a packed array format, and a 1D copy
to a 2D array.
"""

from __future__ import annotations

import ctypes
import json
import sys
from typing import Any

import numpy as np
from cuda.bindings import driver as cu
from cuda.bindings import nvrtc

MT = cu.CUmemorytype
FMT = cu.CUarray_format
INVALID_VALUE = int(cu.CUresult.CUDA_ERROR_INVALID_VALUE)
NOT_SUPPORTED = int(cu.CUresult.CUDA_ERROR_NOT_SUPPORTED)
LAYERED = cu.CUDA_ARRAY3D_LAYERED
SURFACE = cu.CUDA_ARRAY3D_SURFACE_LDST

KERNEL = b"""
extern "C" __global__ void sample(float *out, cudaTextureObject_t t, cudaSurfaceObject_t s,
                                  int w, int layers)
{
    int x = threadIdx.x, layer = blockIdx.x;
    if (x >= w || layer >= layers)
        return;
    float v = tex2DLayered<float>(t, x + 0.5f, 0.5f, layer);
    out[layer * w + x] = v;
    surf2Dwrite<float>(v * 2.0f, s, x * 4, layer);
}
"""


def code(result: Any) -> int:
    """A call's CUresult (the bindings return it first)."""
    return int(result[0])


def ok(result: Any) -> Any:
    """The values of a call that must succeed."""
    if code(result) != 0:
        raise RuntimeError(f"{result[0]!r}")
    values = result[1:]
    return values[0] if len(values) == 1 else (values or None)


def desc3d(w: int, h: int, d: int, fmt: Any, channels: int = 1, flags: int = 0) -> Any:
    a = cu.CUDA_ARRAY3D_DESCRIPTOR()
    a.Width, a.Height, a.Depth, a.Format, a.NumChannels, a.Flags = w, h, d, fmt, channels, flags
    return a


def descriptors(checks: dict[str, bool]) -> None:
    a = cu.CUDA_ARRAY_DESCRIPTOR()
    a.Width, a.Height, a.Format, a.NumChannels = 33, 7, FMT.CU_AD_FORMAT_UNSIGNED_INT16, 2
    arr = ok(cu.cuArrayCreate(a))
    back = ok(cu.cuArrayGetDescriptor(arr))
    back3 = ok(cu.cuArray3DGetDescriptor(arr))
    checks["array_descriptor"] = (back.Width, back.Height, int(back.Format),
                                  back.NumChannels) == (33, 7, 2, 2)
    checks["array3d_descriptor"] = (back3.Width, back3.Height, back3.Depth, back3.Flags) == (
        33, 7, 0, 0)
    ok(cu.cuArrayDestroy(arr))
    cube5 = desc3d(8, 8, 5, FMT.CU_AD_FORMAT_FLOAT, 1, cu.CUDA_ARRAY3D_CUBEMAP)
    three = desc3d(8, 8, 0, FMT.CU_AD_FORMAT_FLOAT, 3)
    height_only = desc3d(8, 0, 4, FMT.CU_AD_FORMAT_FLOAT)
    checks["bad_descriptors_invalid_value"] = all(
        code(cu.cuArray3DCreate(d)) == INVALID_VALUE for d in (cube5, three, height_only))


def one_d_copies(checks: dict[str, bool], stream: Any) -> None:
    n = 1000
    a = cu.CUDA_ARRAY_DESCRIPTOR()
    a.Width, a.Height, a.Format, a.NumChannels = n, 0, FMT.CU_AD_FORMAT_SIGNED_INT32, 1
    arr, arr2 = ok(cu.cuArrayCreate(a)), ok(cu.cuArrayCreate(a))
    src = np.arange(n, dtype=np.int32) * 3
    ok(cu.cuMemcpyHtoA(arr, 0, src.ctypes.data, src.nbytes))
    ok(cu.cuMemcpyAtoA(arr2, 40, arr, 0, 400))  # elements 0..99 to 10..109
    dev = ok(cu.cuMemAlloc(src.nbytes))
    ok(cu.cuMemsetD32(dev, 0, n))
    ok(cu.cuMemcpyAtoD(dev, arr, 80, 800))  # elements 20..219 to the device's start
    ok(cu.cuMemcpyDtoA(arr2, 2000, dev, 800))  # ... then to elements 500..699
    back = np.zeros(n, np.int32)
    ok(cu.cuMemcpyHtoAAsync(arr, 3996, src[:1].ctypes.data, 4, stream))  # the last element
    ok(cu.cuMemcpyAtoHAsync(back[:110].ctypes.data, arr2, 0, 440, stream))
    ok(cu.cuStreamSynchronize(stream))
    ok(cu.cuMemcpyAtoH(back[500:700].ctypes.data, arr2, 2000, 800))
    last = np.zeros(1, np.int32)
    ok(cu.cuMemcpyAtoH(last.ctypes.data, arr, 3996, 4))
    checks["one_d_copies"] = bool((back[10:110] == src[:100]).all() and
                                  (back[500:700] == src[20:220]).all() and last[0] == 0)
    checks["one_d_past_the_end"] = code(cu.cuMemcpyHtoA(arr, 3992, src.ctypes.data, 16)) == \
        INVALID_VALUE
    for x in (arr, arr2):
        ok(cu.cuArrayDestroy(x))
    ok(cu.cuMemFree(dev))


def side_fields(side: tuple) -> dict[str, Any]:
    """A copy side's CUDA_MEMCPY2D members, named without their src/dst prefix."""
    if side[0] == "array":
        _, handle, x, y = side
        return {"MemoryType": MT.CU_MEMORYTYPE_ARRAY, "Array": handle, "XInBytes": x, "Y": y}
    kind, addr, pitch, x, y = side
    where = "Host" if kind == MT.CU_MEMORYTYPE_HOST else "Device"
    return {"MemoryType": kind, where: addr, "Pitch": pitch, "XInBytes": x, "Y": y}


def memcpy2d(width: int, height: int, src: tuple, dst: tuple) -> Any:
    """src and dst: ("array", handle, x, y) or (memory type, address, pitch, x, y)."""
    p = cu.CUDA_MEMCPY2D()
    for prefix, side in (("src", src), ("dst", dst)):
        for name, value in side_fields(side).items():
            setattr(p, prefix + name, value)
    p.WidthInBytes, p.Height = width, height
    return p


def copies_2d_3d(checks: dict[str, bool]) -> None:
    w, h = 50, 20
    arr = ok(cu.cuArray3DCreate(desc3d(w, h, 0, FMT.CU_AD_FORMAT_FLOAT)))
    img = np.arange(h * 64, dtype=np.float32).reshape(h, 64)  # host pitch 256 bytes
    ok(cu.cuMemcpy2D(memcpy2d(w * 4, h, (MT.CU_MEMORYTYPE_HOST, img.ctypes.data, 256, 0, 0),
                              ("array", arr, 0, 0))))
    dev = ok(cu.cuMemAlloc(512 * h))
    ok(cu.cuMemsetD8(dev, 0, 512 * h))
    ok(cu.cuMemcpy2D(memcpy2d(10 * 4, 5, ("array", arr, 3 * 4, 2),
                              (MT.CU_MEMORYTYPE_DEVICE, dev, 512, 4 * 4, 1))))
    back = np.zeros((h, 128), np.float32)
    ok(cu.cuMemcpyDtoH(back.ctypes.data, dev, back.nbytes))
    want = np.zeros((h, 128), np.float32)
    want[1:6, 4:14] = img[2:7, 3:13]
    checks["memcpy2d_with_an_array"] = bool((back == want).all())
    vol = np.arange(4 * 6 * 9, dtype=np.int16).reshape(4, 6, 9)
    a3 = ok(cu.cuArray3DCreate(desc3d(9, 6, 4, FMT.CU_AD_FORMAT_SIGNED_INT16)))
    p = cu.CUDA_MEMCPY3D()
    p.srcMemoryType, p.srcHost, p.srcPitch, p.srcHeight = MT.CU_MEMORYTYPE_HOST, \
        vol.ctypes.data, 18, 6
    p.dstMemoryType, p.dstArray = MT.CU_MEMORYTYPE_ARRAY, a3
    p.WidthInBytes, p.Height, p.Depth = 18, 6, 4
    ok(cu.cuMemcpy3D(p))
    box = np.zeros((2, 8, 16), np.int16)  # a gapped host box: slices of 8 rows of 32 bytes
    r = cu.CUDA_MEMCPY3D()
    r.srcMemoryType, r.srcArray = MT.CU_MEMORYTYPE_ARRAY, a3
    r.srcXInBytes, r.srcY, r.srcZ = 2 * 2, 1, 2
    r.dstMemoryType, r.dstHost, r.dstPitch, r.dstHeight = MT.CU_MEMORYTYPE_HOST, \
        box.ctypes.data, 32, 8
    r.WidthInBytes, r.Height, r.Depth = 5 * 2, 4, 2
    ok(cu.cuMemcpy3D(r))
    want3 = np.zeros_like(box)
    want3[:, :4, :5] = vol[2:4, 1:5, 2:7]
    checks["memcpy3d_with_an_array"] = bool((box == want3).all())
    for x in (arr, a3):
        ok(cu.cuArrayDestroy(x))
    ok(cu.cuMemFree(dev))


def mipmaps(checks: dict[str, bool]) -> None:
    m = ok(cu.cuMipmappedArrayCreate(desc3d(16, 16, 0, FMT.CU_AD_FORMAT_FLOAT), 10))
    levels = []
    for level in range(5):  # 10 levels asked for; a 16x16 array has 5
        levels.append(ok(cu.cuMipmappedArrayGetLevel(m, level)))
    d = ok(cu.cuArray3DGetDescriptor(levels[2]))
    again = ok(cu.cuMipmappedArrayGetLevel(m, 2))
    checks["mipmap_levels"] = (d.Width, d.Height) == (4, 4) and int(again) == int(levels[2])
    checks["mipmap_levels_clamped"] = code(cu.cuMipmappedArrayGetLevel(m, 5)) == INVALID_VALUE
    lvl = np.full((4, 4), 3.5, np.float32)
    ok(cu.cuMemcpy2D(memcpy2d(16, 4, (MT.CU_MEMORYTYPE_HOST, lvl.ctypes.data, 16, 0, 0),
                              ("array", levels[2], 0, 0))))
    ok(cu.cuMipmappedArrayDestroy(m))


def kernel() -> Any:
    prog = ok(nvrtc.nvrtcCreateProgram(KERNEL, b"arrays_textures.cu", 0, [], []))
    ok(nvrtc.nvrtcCompileProgram(prog, 1, [b"--gpu-architecture=compute_80"]))
    ptx = b" " * ok(nvrtc.nvrtcGetPTXSize(prog))
    ok(nvrtc.nvrtcGetPTX(prog, ptx))
    mod = ok(cu.cuModuleLoadData(ptx))
    return ok(cu.cuModuleGetFunction(mod, b"sample"))


def textures_and_surfaces(checks: dict[str, bool]) -> None:
    w, layers = 16, 5
    data = (np.arange(layers * w, dtype=np.float32) + 1).reshape(layers, 1, w)
    arr = ok(cu.cuArray3DCreate(desc3d(w, 1, layers, FMT.CU_AD_FORMAT_FLOAT, 1, LAYERED)))
    p = cu.CUDA_MEMCPY3D()
    p.srcMemoryType, p.srcHost, p.srcPitch, p.srcHeight = MT.CU_MEMORYTYPE_HOST, \
        data.ctypes.data, w * 4, 1
    p.dstMemoryType, p.dstArray = MT.CU_MEMORYTYPE_ARRAY, arr
    p.WidthInBytes, p.Height, p.Depth = w * 4, 1, layers
    ok(cu.cuMemcpy3D(p))
    res = cu.CUDA_RESOURCE_DESC()
    res.resType = cu.CUresourcetype.CU_RESOURCE_TYPE_ARRAY
    res.res.array.hArray = arr
    tex = cu.CUDA_TEXTURE_DESC()
    tex.addressMode = [cu.CUaddress_mode.CU_TR_ADDRESS_MODE_CLAMP] * 3
    tex.filterMode = cu.CUfilter_mode.CU_TR_FILTER_MODE_POINT
    view = cu.CUDA_RESOURCE_VIEW_DESC()
    view.format = cu.CUresourceViewFormat.CU_RES_VIEW_FORMAT_NONE
    view.width, view.height, view.depth = w, 1, layers
    view.firstLayer, view.lastLayer = 2, 4  # layers 2..4 become 0..2
    t = ok(cu.cuTexObjectCreate(res, tex, view))
    plain = ok(cu.cuTexObjectCreate(res, tex, None))
    back = ok(cu.cuTexObjectGetResourceDesc(t))
    tback = ok(cu.cuTexObjectGetTextureDesc(t))
    vback = ok(cu.cuTexObjectGetResourceViewDesc(t))
    checks["texture_descriptors"] = (
        int(back.resType) == 0 and int(back.res.array.hArray) == int(arr)
        and int(tback.filterMode) == 0 and (vback.firstLayer, vback.lastLayer) == (2, 4))
    checks["no_view_invalid_value"] = code(cu.cuTexObjectGetResourceViewDesc(plain)) == \
        INVALID_VALUE
    sarr = ok(cu.cuArray3DCreate(desc3d(w, 3, 0, FMT.CU_AD_FORMAT_FLOAT, 1, SURFACE)))
    sres = cu.CUDA_RESOURCE_DESC()
    sres.resType = cu.CUresourcetype.CU_RESOURCE_TYPE_ARRAY
    sres.res.array.hArray = sarr
    s = ok(cu.cuSurfObjectCreate(sres))
    checks["surface_descriptor"] = int(ok(cu.cuSurfObjectGetResourceDesc(s)).res.array.hArray) \
        == int(sarr)
    mres = cu.CUDA_RESOURCE_DESC()
    mres.resType = cu.CUresourcetype.CU_RESOURCE_TYPE_MIPMAPPED_ARRAY
    mip = ok(cu.cuMipmappedArrayCreate(desc3d(8, 8, 0, FMT.CU_AD_FORMAT_FLOAT), 2))
    mres.res.mipmap.hMipmappedArray = mip
    checks["surface_of_a_mipmap_refused"] = code(cu.cuSurfObjectCreate(mres)) != 0
    ok(cu.cuMipmappedArrayDestroy(mip))
    out = ok(cu.cuMemAlloc(3 * w * 4))
    f = kernel()
    args = [np.array([int(out)], np.uint64), np.array([int(t)], np.uint64),
            np.array([int(s)], np.uint64), np.array([w], np.int32), np.array([3], np.int32)]
    params = np.array([a.ctypes.data for a in args], np.uint64)
    ok(cu.cuLaunchKernel(f, 3, 1, 1, w, 1, 1, 0, 0, params.ctypes.data, 0))
    got = np.zeros((3, w), np.float32)
    ok(cu.cuMemcpyDtoH(got.ctypes.data, out, got.nbytes))
    written = np.zeros((3, w), np.float32)
    ok(cu.cuMemcpy2D(memcpy2d(w * 4, 3, ("array", sarr, 0, 0),
                              (MT.CU_MEMORYTYPE_HOST, written.ctypes.data, w * 4, 0, 0))))
    checks["texture_through_a_view"] = bool((got == data[2:5, 0]).all())
    checks["surface_writes"] = bool((written == 2 * data[2:5, 0]).all())
    for obj in (t, plain):
        ok(cu.cuTexObjectDestroy(obj))
    ok(cu.cuSurfObjectDestroy(s))
    for x in (arr, sarr):
        ok(cu.cuArrayDestroy(x))
    ok(cu.cuMemFree(out))


def gleam_only(checks: dict[str, bool]) -> None:
    packed = desc3d(8, 8, 0, FMT.CU_AD_FORMAT_UNORM_INT8X4, 1)
    checks["packed_format_not_supported"] = code(cu.cuArray3DCreate(packed)) == NOT_SUPPORTED
    two = ok(cu.cuArray3DCreate(desc3d(8, 8, 0, FMT.CU_AD_FORMAT_FLOAT)))
    word = ctypes.c_float(1.0)
    checks["one_d_copy_to_2d_refused"] = code(
        cu.cuMemcpyHtoA(two, 0, ctypes.addressof(word), 4)) == INVALID_VALUE
    ok(cu.cuArrayDestroy(two))


def main() -> None:
    ok(cu.cuInit(0))
    device = ok(cu.cuDeviceGet(0))
    ok(cu.cuCtxSetCurrent(ok(cu.cuDevicePrimaryCtxRetain(device))))
    checks: dict[str, bool] = {}
    stream = ok(cu.cuStreamCreate(0))
    descriptors(checks)
    one_d_copies(checks, stream)
    copies_2d_3d(checks)
    mipmaps(checks)
    textures_and_surfaces(checks)
    if "--gleam" in sys.argv[1:]:
        gleam_only(checks)
    ok(cu.cuCtxSynchronize())
    print(json.dumps({"ok": all(checks.values()), "checks": checks}))


if __name__ == "__main__":
    main()
