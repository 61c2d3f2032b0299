"""A driver-API program that makes one kernel fault on purpose (run through gleam by
tests/test_cuda_examples.py): ``oob`` writes past its allocation, ``trap`` traps, ``bad``
loads a module with an instruction gleam does not implement. It prints one JSON line:
the CUresult of each step, so the test sees what the program saw."""

from __future__ import annotations

import json
import sys

import numpy as np
from cuda.bindings import driver

PTX = b""".version 8.0
.target sm_80
.address_size 64
.visible .entry store(.param .u64 p, .param .u32 n)
{
    .reg .b32 %r<4>; .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    add.s32 %r3, %r2, %r1;
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}
.visible .entry boom() { trap; }
"""
BAD = b".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k() { frobnicate; }\n"


def code(result: object) -> int:
    return int(result[0] if isinstance(result, tuple) else result)


def main(mode: str) -> dict[str, int]:
    driver.cuInit(0)
    _, dev = driver.cuDeviceGet(0)
    _, ctx = driver.cuDevicePrimaryCtxRetain(dev)
    driver.cuCtxSetCurrent(ctx)
    out: dict[str, int] = {}
    if mode == "bad":
        image = np.frombuffer(BAD + b"\0", dtype=np.uint8)
        # Loading returns at once through gleam (its errors surface at the next
        # waiting call, as asynchronous errors do); the session itself goes on.
        out["load"] = code(driver.cuModuleLoadData(image.ctypes.data))
        out["sync"] = code(driver.cuCtxSynchronize())
        out["sync_again"] = code(driver.cuCtxSynchronize())
        return out
    image = np.frombuffer(PTX + b"\0", dtype=np.uint8)
    _, module = driver.cuModuleLoadData(image.ctypes.data)
    _, dptr = driver.cuMemAlloc(128)  # 32 u32
    host = np.zeros(32, np.uint32)
    if mode == "oob":
        _, fn = driver.cuModuleGetFunction(module, b"store")
        p = np.array([int(dptr)], dtype=np.uint64)
        n = np.array([1 << 20], dtype=np.uint32)  # 4 MiB past the allocation
        args = np.array([p.ctypes.data, n.ctypes.data], dtype=np.uint64)
    else:
        _, fn = driver.cuModuleGetFunction(module, b"boom")
        args = np.array([], dtype=np.uint64)
    out["launch"] = code(driver.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, 0, args.ctypes.data, 0))
    out["sync"] = code(driver.cuCtxSynchronize())
    # The context is lost, as on a GPU: later waiting calls keep failing.
    out["copy_after"] = code(driver.cuMemcpyDtoH(host.ctypes.data, dptr, 128))
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
