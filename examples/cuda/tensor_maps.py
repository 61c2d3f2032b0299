"""Hopper's tensor maps (TMA descriptors), with NVIDIA's Python bindings.

cuBLASLt and cuDNN encode one per operand before each TMA kernel on a 9.0+
device. This program encodes tiled and im2col maps, replaces a map's address,
and checks that arguments NVIDIA's rules refuse (cuda.h, CUDA 13.0) give
``CUDA_ERROR_INVALID_VALUE``. On a device of capability 9.0 or more it also
runs a TMA kernel (``peer/cuda/ptx/tma_tile.ptx``, from examples/cuda/tma_tile.cu):
a 16x16 tile loaded through the map, one that crosses the tensor's edge
(zero-filled), and one through the replaced map. It prints one JSON verdict.

``--gleam`` adds what only gleam answers: a tensor outside the session's memory
is refused, and on gleam's host device (capability 8.0) the map's own layout
(its start address where the layout puts it) and the wide im2col form.

    python tensor_maps.py [--gleam] [PTX]
"""

from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from cuda.bindings import driver as cu

INVALID_VALUE = 1
ROWS, COLS, TILE = 32, 64, 16
DEFAULT_PTX = Path(__file__).resolve().parents[2] / "peer" / "cuda" / "ptx" / "tma_tile.ptx"
T = cu.CUtensorMapDataType
IL = cu.CUtensorMapInterleave
SW = cu.CUtensorMapSwizzle
L2 = cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE
OOB = cu.CUtensorMapFloatOOBfill


def ok(result: Any) -> Any:
    """The outputs of a bindings call, or an exception naming its error."""
    err, *rest = result
    if int(err) != 0:
        raise RuntimeError(repr(err))
    return rest[0] if len(rest) == 1 else (rest or None)


def tiled(address: int, *, dtype: Any = T.CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
          dims: tuple[int, ...] = (COLS, ROWS), strides: tuple[int, ...] = (COLS * 4,),
          box: tuple[int, ...] = (TILE, TILE), estrides: tuple[int, ...] = (1, 1),
          interleave: Any = IL.CU_TENSOR_MAP_INTERLEAVE_NONE,
          swizzle: Any = SW.CU_TENSOR_MAP_SWIZZLE_NONE,
          oob: Any = OOB.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) -> tuple[int, Any]:
    """cuTensorMapEncodeTiled of a row-major matrix of COLS x ROWS floats by default."""
    err, tmap = cu.cuTensorMapEncodeTiled(
        dtype, len(dims), address, [cu.cuuint64_t(d) for d in dims],
        [cu.cuuint64_t(s) for s in strides], [cu.cuuint32_t(b) for b in box],
        [cu.cuuint32_t(e) for e in estrides], interleave, swizzle, L2, oob)
    return int(err), tmap


def im2col(address: int, lower: tuple[int, int] = (-1, -1),
           upper: tuple[int, int] = (-1, -1)) -> int:
    """An NHWC half-precision activation (N 2, H 8, W 8, C 64), as a 3x3 convolution reads it."""
    c, w, h, n = 64, 8, 8, 2
    err, _ = cu.cuTensorMapEncodeIm2col(
        T.CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, address,
        [cu.cuuint64_t(v) for v in (c, w, h, n)],
        [cu.cuuint64_t(v) for v in (c * 2, c * 2 * w, c * 2 * w * h)], list(lower), list(upper),
        c, 64, [cu.cuuint32_t(1)] * 4, IL.CU_TENSOR_MAP_INTERLEAVE_NONE,
        SW.CU_TENSOR_MAP_SWIZZLE_128B, L2, OOB.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    return int(err)


def rank_six(d: int) -> int:
    """A rank the bindings will not pass (their arrays hold five), through the C symbol."""
    u64s, u32s = ctypes.c_uint64 * 6, ctypes.c_uint32 * 6
    tmap = (ctypes.c_uint64 * 32)()  # room for a 64-byte aligned map of 16 words
    at = (ctypes.addressof(tmap) + 63) // 64 * 64
    encode = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
    return int(encode(ctypes.c_void_p(at), 7, 6, ctypes.c_void_p(d), u64s(*[4] * 6),
                      u64s(*[16] * 6), u32s(*[4] * 6), u32s(*[1] * 6), 0, 0, 0, 0))


def refusals(d: int) -> dict[str, bool]:
    """Arguments that break one of NVIDIA's rules each."""
    cases = {
        "misaligned_address": tiled(d + 4),
        "stride_not_16": tiled(d, strides=(100,)),
        "box_over_256": tiled(d, box=(TILE, 257)),
        "box_row_not_16_bytes": tiled(d, box=(2, TILE)),
        "element_stride_over_8": tiled(d, estrides=(1, 9)),
        "nan_fill_of_integers": tiled(d, dtype=T.CU_TENSOR_MAP_DATA_TYPE_UINT32,
                                      oob=OOB.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA),
        "swizzle_span_too_small": tiled(d, swizzle=SW.CU_TENSOR_MAP_SWIZZLE_32B),
        "interleave_32_needs_swizzle_32": tiled(
            d, dims=(8, 8, 8), strides=(32, 256), box=(8, 8, 8), estrides=(1, 1, 1),
            interleave=IL.CU_TENSOR_MAP_INTERLEAVE_32B),
    }
    checks = {f"refuses_{name}": err == INVALID_VALUE for name, (err, _) in cases.items()}
    checks["refuses_im2col_corner_out_of_range"] = im2col(d, lower=(-129, -1)) == INVALID_VALUE
    checks["refuses_rank_over_5"] = rank_six(d) == INVALID_VALUE
    return checks


def load(ptx: Path) -> Any:
    mod = ok(cu.cuModuleLoadData(ptx.read_bytes() + b"\0"))
    return ok(cu.cuModuleGetFunction(mod, b"tma_tile"))


def tile_through(func: Any, tmap: Any, out: int, x: int, y: int) -> np.ndarray:
    """One TILE x TILE tile at column x, row y, loaded by the TMA kernel."""
    args = [np.array([int(out)], np.uint64), np.array([x], np.int32), np.array([y], np.int32)]
    params = np.array([int(tmap.getPtr()), *(a.ctypes.data for a in args)], np.uint64)
    ok(cu.cuLaunchKernel(func, 1, 1, 1, 128, 1, 1, 0, 0, params.ctypes.data, 0))
    got = np.empty(TILE * TILE, np.float32)
    ok(cu.cuMemcpyDtoH(got.ctypes.data, out, got.nbytes))
    return got.reshape(TILE, TILE)


def expected(m: np.ndarray, x: int, y: int) -> np.ndarray:
    """The tile as TMA gives it: elements past the tensor's edge are zero."""
    padded = np.zeros((ROWS + TILE, COLS + TILE), np.float32)
    padded[:ROWS, :COLS] = m
    return padded[y:y + TILE, x:x + TILE]


def tma_kernel(checks: dict[str, bool], ptx: Path, d: int, d2: int, a: np.ndarray,
               b: np.ndarray) -> None:
    func = load(ptx)
    out = ok(cu.cuMemAlloc(TILE * TILE * 4))
    err, tmap = tiled(d)
    checks["tma_tile"] = err == 0 and bool(np.array_equal(tile_through(func, tmap, out, 16, 8),
                                                           expected(a, 16, 8)))
    checks["tma_edge_zero_filled"] = bool(np.array_equal(tile_through(func, tmap, out, 56, 24),
                                                         expected(a, 56, 24)))
    ok(cu.cuTensorMapReplaceAddress(tmap, d2))
    checks["tma_replaced"] = bool(np.array_equal(tile_through(func, tmap, out, 0, 0),
                                                 expected(b, 0, 0)))
    ok(cu.cuMemFree(out))


def gleam_only(checks: dict[str, bool], d: int, host: np.ndarray, capability: tuple) -> None:
    checks["refuses_memory_outside_the_session"] = tiled(host.ctypes.data)[0] == INVALID_VALUE
    checks["refuses_tensor_past_its_allocation"] = \
        tiled(d, dims=(COLS, ROWS * 4))[0] == INVALID_VALUE
    if capability >= (9, 0):
        return
    # The host device's layout (src/hostdev/hostdev_tensormap.c): its magic, then the start.
    err, tmap = tiled(d)
    ok(cu.cuTensorMapReplaceAddress(tmap, d + 256))
    words = [int(w) for w in tmap.opaque]
    checks["host_layout"] = err == 0 and words[0] & 0xFFFFFFFF == 0x4D544C47 \
        and words[2] == d + 256
    wide = [cu.cuuint64_t(v) for v in (64, 8, 8, 2)], [cu.cuuint64_t(v) for v in (128, 1024, 8192)]
    for mode, name in ((0, "host_im2col_wide"), (7, "host_im2col_wide_bad_mode")):
        err, _ = cu.cuTensorMapEncodeIm2colWide(
            T.CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, d, *wide, -1, -1, 64, 64,
            [cu.cuuint32_t(1)] * 4, IL.CU_TENSOR_MAP_INTERLEAVE_NONE,
            cu.CUtensorMapIm2ColWideMode(mode) if mode < 2 else mode,
            SW.CU_TENSOR_MAP_SWIZZLE_128B, L2, OOB.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
        checks[name] = int(err) == (0 if mode == 0 else INVALID_VALUE)


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--gleam"]
    ptx = Path(args[0]) if args else DEFAULT_PTX
    ok(cu.cuInit(0))
    dev = ok(cu.cuDeviceGet(0))
    ok(cu.cuCtxSetCurrent(ok(cu.cuDevicePrimaryCtxRetain(dev))))
    attr = cu.CUdevice_attribute
    capability = (ok(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                             dev)),
                  ok(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                             dev)))
    a = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS)
    b = -a
    d = ok(cu.cuMemAlloc(a.nbytes * 2))  # a, then b
    d2 = int(d) + a.nbytes
    ok(cu.cuMemcpyHtoD(d, a.ctypes.data, a.nbytes))
    ok(cu.cuMemcpyHtoD(d2, b.ctypes.data, b.nbytes))
    checks: dict[str, bool] = {}
    err, tmap = tiled(int(d))
    checks["tiled_encodes"] = err == 0
    checks["im2col_encodes"] = im2col(int(d)) == 0
    checks["replace_address"] = int(cu.cuTensorMapReplaceAddress(tmap, d2)[0]) == 0
    checks["replace_misaligned_refused"] = \
        int(cu.cuTensorMapReplaceAddress(tmap, d2 + 8)[0]) == INVALID_VALUE
    checks.update(refusals(int(d)))
    if capability >= (9, 0):
        tma_kernel(checks, ptx, int(d), d2, a, b)
    if "--gleam" in sys.argv[1:]:
        gleam_only(checks, int(d), a, capability)
    ok(cu.cuMemFree(d))
    verdict = {"ok": all(checks.values()), "checks": checks}
    print(json.dumps(verdict))
    sys.exit(0 if verdict["ok"] else 1)


if __name__ == "__main__":
    main()
