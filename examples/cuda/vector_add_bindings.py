"""vector_add with NVIDIA's Python driver bindings (package ``cuda-bindings``).

The same program as vector_add.c, written the way the cuda-bindings documentation writes
driver-API code: every call returns ``(CUresult, outputs...)``, kernel parameters are a
numpy array of pointers to the values. Through gleam it runs unchanged:
``gleam-peer run -- python vector_add_bindings.py``.

Usage: python vector_add_bindings.py [KERNELS.ptx|KERNELS.fatbin]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
from cuda.bindings import driver

N = 1 << 20
BLOCK = 256


class CudaError(RuntimeError):
    pass


def check(result: Any, call: str) -> Any:
    """The outputs of a driver call, or CudaError naming the call and the code."""
    err, *outputs = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        shown = name.decode() if isinstance(name, bytes) else str(name)
        raise CudaError(f"{call} failed: {int(err)} ({shown})")
    if not outputs:
        return None
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def kernels_path(argv: list[str]) -> Path:
    """argv[1], else $GLEAM_EXAMPLE_KERNELS, else the kernels.ptx shipped with gleam."""
    if len(argv) > 1:
        return Path(argv[1])
    env = os.environ.get("GLEAM_EXAMPLE_KERNELS")
    if env:
        return Path(env)
    try:
        import gleam.peer.cuda

        return Path(gleam.peer.cuda.__path__[0]) / "ptx" / "kernels.ptx"
    except ImportError:
        return Path(__file__).resolve().parents[2] / "peer" / "cuda" / "ptx" / "kernels.ptx"


def run(image_path: Path) -> dict[str, Any]:
    check(driver.cuInit(0), "cuInit")
    dev = check(driver.cuDeviceGet(0), "cuDeviceGet")
    ctx = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

    # PTX is read as a C string: append the NUL. The array must outlive the call.
    image = np.frombuffer(image_path.read_bytes() + b"\0", dtype=np.uint8)
    module = check(driver.cuModuleLoadData(image.ctypes.data), "cuModuleLoadData")
    kernel = check(driver.cuModuleGetFunction(module, b"vector_add"), "cuModuleGetFunction")

    rng = np.random.default_rng(12345)
    a = rng.uniform(-1, 1, N).astype(np.float32)
    b = rng.uniform(-1, 1, N).astype(np.float32)
    c = np.full(N, -99.0, dtype=np.float32)
    nbytes = a.nbytes

    da = check(driver.cuMemAlloc(nbytes), "cuMemAlloc")
    db = check(driver.cuMemAlloc(nbytes), "cuMemAlloc")
    dc = check(driver.cuMemAlloc(nbytes), "cuMemAlloc")
    check(driver.cuMemcpyHtoD(da, a.ctypes.data, nbytes), "cuMemcpyHtoD")
    check(driver.cuMemcpyHtoD(db, b.ctypes.data, nbytes), "cuMemcpyHtoD")

    # kernelParams: an array of pointers, each to one parameter's value.
    values = [np.array([int(p)], dtype=np.uint64) for p in (da, db, dc)]
    values.append(np.array([N], dtype=np.int32))
    params = np.array([v.ctypes.data for v in values], dtype=np.uint64)
    blocks = (N + BLOCK - 1) // BLOCK
    check(
        driver.cuLaunchKernel(kernel, blocks, 1, 1, BLOCK, 1, 1, 0, 0, params.ctypes.data, 0),
        "cuLaunchKernel",
    )
    check(driver.cuMemcpyDtoH(c.ctypes.data, dc, nbytes), "cuMemcpyDtoH")

    mismatches = int(np.count_nonzero(c != a + b))  # float32 + float32 rounds the same way

    for p in (da, db, dc):
        check(driver.cuMemFree(p), "cuMemFree")
    check(driver.cuModuleUnload(module), "cuModuleUnload")
    check(driver.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")
    return {
        "example": "vector_add_bindings",
        "ok": mismatches == 0,
        "n": N,
        "mismatches": mismatches,
    }


def main(argv: list[str]) -> int:
    try:
        result = run(kernels_path(argv))
    except (RuntimeError, OSError) as exc:  # CudaError, or no libcuda.so.1 to load
        print(exc, file=sys.stderr)
        result = {"example": "vector_add_bindings", "ok": False, "error": str(exc)}
    else:
        print(f"vector_add_bindings: {N} elements, {result['mismatches']} wrong")
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
