"""Pitched memory through the driver API, with NVIDIA's Python bindings.

``cuMemAllocPitch``; ``cuMemcpy2D`` host to device, device to device and
back with offsets and host pitches wider than a row, also with unified
memory types; rows wider than a copy chunk and more rows than fit in one;
``cuMemcpy3D``/``cuMemcpy3DAsync`` with slices that do and do not follow each
other; ``cuMemsetD2D8/16/32`` (and Async); a peer copy within the device; and
the errors a GPU gives (a pitch narrower than the row, a bad element size).
numpy computes every expected result. It prints one JSON verdict naming each
check; the checks are the same on a GPU. ``--gleam`` adds what gleam checks
beyond a GPU: a copy whose rows or slices run past the end of an allocation is
refused, and a 3D copy so refused copies none of its slices.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
from cuda.bindings import driver as cu

MT = cu.CUmemorytype
INVALID_VALUE = int(cu.CUresult.CUDA_ERROR_INVALID_VALUE)


def ok(result: Any) -> Any:
    err, *rest = result
    if int(err) != 0:
        raise RuntimeError(repr(err))
    return rest[0] if len(rest) == 1 else (rest or None)


def copy2d(width: int, height: int, *, src: tuple, dst: tuple,
           src_xy: tuple[int, int] = (0, 0), dst_xy: tuple[int, int] = (0, 0)) -> Any:
    """A CUDA_MEMCPY2D; src and dst are (memory type, address, pitch)."""
    p = cu.CUDA_MEMCPY2D()
    for prefix, (kind, addr, pitch), (x, y) in (("src", src, src_xy), ("dst", dst, dst_xy)):
        setattr(p, prefix + "MemoryType", kind)
        setattr(p, prefix + ("Host" if kind == MT.CU_MEMORYTYPE_HOST else "Device"), addr)
        setattr(p, prefix + "Pitch", pitch)
        setattr(p, prefix + "XInBytes", x)
        setattr(p, prefix + "Y", y)
    p.WidthInBytes, p.Height = width, height
    return p


def host(a: np.ndarray, pitch: int | None = None) -> tuple:
    return (MT.CU_MEMORYTYPE_HOST, a.ctypes.data, pitch or a.strides[0])


def device(ptr: Any, pitch: int) -> tuple:
    return (MT.CU_MEMORYTYPE_DEVICE, ptr, pitch)


def two_d(checks: dict[str, bool], stream: Any, gleam: bool) -> None:
    rows, cols = 77, 333
    src = np.arange(rows * 400, dtype=np.float32).reshape(rows, 400)  # host pitch 1600 B
    dev, pitch = ok(cu.cuMemAllocPitch(cols * 4, rows, 4))
    checks["pitch_holds_a_row"] = pitch >= cols * 4 and pitch % 4 == 0
    ok(cu.cuMemcpy2D(copy2d(cols * 4, rows, src=host(src), dst=device(dev, pitch))))
    back = np.full((rows, 400), -1, np.float32)
    ok(cu.cuMemcpy2D(copy2d(cols * 4, rows, src=device(dev, pitch), dst=host(back))))
    checks["htod_dtoh_pitched"] = bool((back[:, :cols] == src[:, :cols]).all()
                                       and (back[:, cols:] == -1).all())

    # A sub-rectangle device to device on a stream, with unified memory types.
    dev2, pitch2 = ok(cu.cuMemAllocPitch(cols * 4, rows, 4))
    ok(cu.cuMemsetD2D32Async(dev2, pitch2, 0, cols, rows, stream))
    uni = MT.CU_MEMORYTYPE_UNIFIED
    ok(cu.cuMemcpy2DAsync(copy2d(100 * 4, 40, src=(uni, dev, pitch), dst=(uni, dev2, pitch2),
                                 src_xy=(7 * 4, 3), dst_xy=(10 * 4, 5)), stream))
    packed = np.zeros((rows, cols), np.float32)
    ok(cu.cuMemcpy2DAsync(copy2d(cols * 4, rows, src=(uni, dev2, pitch2),
                                 dst=(uni, packed.ctypes.data, cols * 4)), stream))
    ok(cu.cuStreamSynchronize(stream))
    want = np.zeros((rows, cols), np.float32)
    want[5:45, 10:110] = src[3:43, 7:107]
    checks["dtod_subrect_unified"] = bool((packed == want).all())

    # Memsets of every width on a band, read back with a host-to-host-shaped view.
    ok(cu.cuMemsetD2D8(int(dev2) + 16, pitch2, 0xAB, 16, rows))
    ok(cu.cuMemsetD2D16(int(dev2) + 64, pitch2, 0x1234, 8, rows))
    ok(cu.cuMemsetD2D8Async(int(dev2) + 128, pitch2, 0x5A, 3, rows, stream))
    raw = np.zeros((rows, pitch2), np.uint8)
    ok(cu.cuMemcpyDtoH(raw.ctypes.data, dev2, raw.nbytes))
    checks["memset_2d_widths"] = bool((raw[:, 16:32] == 0xAB).all()
                                      and (raw[:, 64:80].copy().view(np.uint16) == 0x1234).all()
                                      and (raw[:, 128:131] == 0x5A).all()
                                      and (raw[:, 131:132] == packed.view(np.uint8)[:, 131:132])
                                      .all())

    # Errors: a pitch narrower than a row, an element size cuMemAllocPitch does
    # not take; on gleam also rows that run one past the allocation's end (a
    # GPU's driver need not check device extents).
    narrow = cu.cuMemcpy2D(copy2d(cols * 4, 2, src=host(src), dst=device(dev, 8)))
    checks["errors_invalid_value"] = (int(narrow[0]) == INVALID_VALUE
                                      and int(cu.cuMemAllocPitch(64, 4, 3)[0]) == INVALID_VALUE)
    if gleam:
        past = cu.cuMemcpy2D(copy2d(cols * 4, rows, src=host(src), dst=device(dev, pitch),
                                    dst_xy=(0, 1)))
        checks["past_the_end_refused"] = int(past[0]) == INVALID_VALUE
    ok(cu.cuMemFree(dev))
    ok(cu.cuMemFree(dev2))


def chunks(checks: dict[str, bool]) -> None:
    """Rows wider than a copy chunk (1 MiB), and more rows than one chunk holds."""
    wide = np.random.default_rng(1).integers(0, 255, (3, (1 << 20) + 4096 + 8), np.uint8)
    dev, pitch = ok(cu.cuMemAllocPitch(wide.shape[1] - 8, 3, 4))
    ok(cu.cuMemcpy2D(copy2d(wide.shape[1] - 8, 3, src=host(wide), dst=device(dev, pitch))))
    back = np.zeros_like(wide)
    ok(cu.cuMemcpy2D(copy2d(wide.shape[1] - 8, 3, src=device(dev, pitch), dst=host(back))))
    checks["rows_wider_than_a_chunk"] = bool((back[:, :-8] == wide[:, :-8]).all()
                                             and (back[:, -8:] == 0).all())
    ok(cu.cuMemFree(dev))
    many = np.random.default_rng(2).integers(0, 255, (9000, 300), np.uint8)
    dev, pitch = ok(cu.cuMemAllocPitch(200, 9000, 4))
    ok(cu.cuMemcpy2D(copy2d(200, 9000, src=host(many), dst=device(dev, pitch))))
    back = np.zeros((9000, 200), np.uint8)
    ok(cu.cuMemcpy2D(copy2d(200, 9000, src=device(dev, pitch), dst=host(back, 200))))
    checks["more_rows_than_a_chunk"] = bool((back == many[:, :200]).all())
    ok(cu.cuMemFree(dev))


def three_d(checks: dict[str, bool], stream: Any, gleam: bool) -> None:
    z, y, x = 6, 9, 50
    vol = np.arange(z * y * x, dtype=np.int32).reshape(z, y, x)
    # Device slices of 11 rows (2 spare), so slices do not follow each other.
    dev, pitch = ok(cu.cuMemAllocPitch(x * 4, z * 11, 4))
    p = cu.CUDA_MEMCPY3D()
    p.srcMemoryType, p.srcHost, p.srcPitch, p.srcHeight = MT.CU_MEMORYTYPE_HOST, \
        vol.ctypes.data, x * 4, y
    p.dstMemoryType, p.dstDevice, p.dstPitch, p.dstHeight = MT.CU_MEMORYTYPE_DEVICE, dev, \
        pitch, 11
    p.WidthInBytes, p.Height, p.Depth = x * 4, y, z
    ok(cu.cuMemcpy3D(p))
    back = np.full((z, y, x), -1, np.int32)
    q = cu.CUDA_MEMCPY3D()
    q.srcMemoryType, q.srcDevice, q.srcPitch, q.srcHeight = MT.CU_MEMORYTYPE_DEVICE, dev, \
        pitch, 11
    q.srcXInBytes, q.srcY, q.srcZ = 4 * 4, 1, 1
    q.dstMemoryType, q.dstHost, q.dstPitch, q.dstHeight = MT.CU_MEMORYTYPE_HOST, \
        back.ctypes.data, x * 4, y
    q.dstXInBytes, q.dstY, q.dstZ = 4 * 4, 1, 1
    q.WidthInBytes, q.Height, q.Depth = (x - 8) * 4, y - 2, z - 2
    ok(cu.cuMemcpy3DAsync(q, stream))
    ok(cu.cuStreamSynchronize(stream))
    want = np.full((z, y, x), -1, np.int32)
    want[1:-1, 1:-1, 4:-4] = vol[1:-1, 1:-1, 4:-4]
    checks["3d_gapped_slices"] = bool((back == want).all())
    # Slices that follow each other (heights equal): one 2D copy of every row.
    flat = np.zeros_like(vol)
    r = cu.CUDA_MEMCPY3D()
    r.srcMemoryType, r.srcDevice, r.srcPitch, r.srcHeight = MT.CU_MEMORYTYPE_DEVICE, dev, \
        pitch, 11
    r.dstMemoryType, r.dstHost, r.dstPitch, r.dstHeight = MT.CU_MEMORYTYPE_HOST, \
        flat.ctypes.data, x * 4, 11
    r.WidthInBytes, r.Height, r.Depth = x * 4, 11, 1
    ok(cu.cuMemcpy3D(r))
    checks["3d_one_slice"] = bool((flat.reshape(-1, x)[:y] == vol[0]).all())
    if gleam:  # a last slice past the allocation: refused before any slice is copied
        fresh = np.full((z + 1, y, x), 7, np.int32)
        p.srcHost, p.Depth = fresh.ctypes.data, z + 1
        refused = int(cu.cuMemcpy3D(p)[0]) == INVALID_VALUE
        again = np.zeros((z, y, x), np.int32)
        q.srcXInBytes = q.srcY = q.srcZ = q.dstXInBytes = q.dstY = q.dstZ = 0
        q.dstHost, q.WidthInBytes, q.Height, q.Depth = again.ctypes.data, x * 4, y, z
        ok(cu.cuMemcpy3D(q))
        checks["3d_refused_whole"] = refused and bool((again == vol).all())
    ok(cu.cuMemFree(dev))


def peer(checks: dict[str, bool], ctx: Any) -> None:
    a = np.arange(1024, dtype=np.float32)
    src, dst = ok(cu.cuMemAlloc(a.nbytes)), ok(cu.cuMemAlloc(a.nbytes))
    ok(cu.cuMemcpyHtoD(src, a.ctypes.data, a.nbytes))
    ok(cu.cuMemcpyPeer(dst, ctx, src, ctx, a.nbytes))
    back = np.zeros_like(a)
    ok(cu.cuMemcpyDtoH(back.ctypes.data, dst, a.nbytes))
    checks["peer_copy_same_device"] = bool((back == a).all())
    ok(cu.cuMemFree(src))
    ok(cu.cuMemFree(dst))


def main() -> None:
    checks: dict[str, bool] = {}
    ok(cu.cuInit(0))
    ctx = ok(cu.cuDevicePrimaryCtxRetain(ok(cu.cuDeviceGet(0))))
    ok(cu.cuCtxSetCurrent(ctx))
    stream = ok(cu.cuStreamCreate(0))
    two_d(checks, stream, "--gleam" in sys.argv[1:])
    chunks(checks)
    three_d(checks, stream, "--gleam" in sys.argv[1:])
    peer(checks, ctx)
    ok(cu.cuCtxSynchronize())
    print(json.dumps({"ok": all(checks.values()), "checks": checks}))


if __name__ == "__main__":
    main()
