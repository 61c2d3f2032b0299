"""Managed module variables (``.attribute(.managed)``, CUDA's ``__managed__``) through the
driver API, with NVIDIA's Python bindings, the way libNVVM's uvmlite uses them.

A module declares two managed variables with initial values and a kernel that adds to
one through a pointer parameter and to the other by name; a second kernel counts in an
array. The program finds them with ``cuModuleGetGlobal``, asks the pointer attributes
(managed, the host pointer is the device pointer), reads the initial values on its CPU,
writes, launches, synchronizes and reads the kernels' sums, three rounds; cuMemFree of a
variable is refused; a module loaded again starts from the initial values. Prints one
JSON verdict naming every check.
"""

from __future__ import annotations

import ctypes
import json
from typing import Any

import numpy as np
from cuda.bindings import driver as cu
from driver_calls import code, ok  # (this folder: the script's own)

PTX = b"""
.version 8.0
.target sm_80
.address_size 64
.global .attribute(.managed) .align 4 .u32 xxx = 10;
.global .attribute(.managed) .align 4 .u32 yyy = 100;
.global .attribute(.managed) .align 8 .u64 counts[300];
.visible .entry add(.param .u64 p)
{
    .reg .b32 %r<5>; .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [p];
    cvta.to.global.u64 %rd2, %rd1;
    ld.global.u32 %r1, [%rd2];
    add.s32 %r2, %r1, 20;
    st.global.u32 [%rd2], %r2;
    ld.global.u32 %r3, [yyy];
    add.s32 %r4, %r3, 30;
    st.global.u32 [yyy], %r4;
    ret;
}
.visible .entry count()
{
    .reg .b32 %r<2>; .reg .b64 %rd<5>;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd1, %r1, 8;
    mov.u64 %rd2, counts;
    add.s64 %rd3, %rd2, %rd1;
    ld.global.u64 %rd4, [%rd3];
    add.s64 %rd4, %rd4, 3;
    st.global.u64 [%rd3], %rd4;
    ret;
}
\0"""


def word(ptr: int, ctype: Any = ctypes.c_uint32) -> Any:
    return ctypes.cast(ptr, ctypes.POINTER(ctype))


def attr(name: str, ptr: int) -> Any:
    return ok(cu.cuPointerGetAttribute(getattr(cu.CUpointer_attribute, name), ptr))


def main() -> None:
    checks: dict[str, bool] = {}
    ok(cu.cuInit(0))
    ok(cu.cuCtxSetCurrent(ok(cu.cuDevicePrimaryCtxRetain(ok(cu.cuDeviceGet(0))))))
    for load in range(2):
        mod = ok(cu.cuModuleLoadData(PTX))
        add = ok(cu.cuModuleGetFunction(mod, b"add"))
        count = ok(cu.cuModuleGetFunction(mod, b"count"))
        x, xsize = ok(cu.cuModuleGetGlobal(mod, b"xxx"))
        y, _ = ok(cu.cuModuleGetGlobal(mod, b"yyy"))
        c, csize = ok(cu.cuModuleGetGlobal(mod, b"counts"))
        x, y, c = int(x), int(y), int(c)
        checks[f"sizes_{load}"] = (xsize, csize) == (4, 2400)
        checks[f"managed_{load}"] = all(attr("CU_POINTER_ATTRIBUTE_IS_MANAGED", p)
                                        for p in (x, y, c))
        checks[f"host_pointer_{load}"] = all(
            int(attr("CU_POINTER_ATTRIBUTE_HOST_POINTER", p)) == p for p in (x, y, c))
        checks[f"asked_again_{load}"] = int(ok(cu.cuModuleGetGlobal(mod, b"xxx"))[0]) == x
        px, py = word(x), word(y)
        counts = np.ctypeslib.as_array(word(c, ctypes.c_uint64), (300,))
        checks[f"initial_{load}"] = (px[0], py[0], int(counts.sum())) == (10, 100, 0)
        arg = np.array([x], np.uint64)
        params = np.array([arg.ctypes.data], np.uint64)
        for r in range(3):
            px[0] += 1                      # the CPU writes, a kernel reads and adds
            py[0] += 11
            counts[r] += 1000
            ok(cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, 0, params.ctypes.data, 0))
            ok(cu.cuLaunchKernel(count, 1, 1, 1, 300, 1, 1, 0, 0, 0, 0))
            ok(cu.cuCtxSynchronize())
            checks[f"round_{load}_{r}"] = (px[0], py[0]) == (10 + 21 * (r + 1), 100 + 41 * (r + 1))
            want = np.full(300, 3 * (r + 1), np.uint64)
            want[:r + 1] += 1000
            checks[f"counts_{load}_{r}"] = bool((counts == want).all())
        checks[f"free_refused_{load}"] = code(cu.cuMemFree(x)) == 1  # CUDA_ERROR_INVALID_VALUE
        ok(cu.cuModuleUnload(mod))
    print(json.dumps({"ok": all(checks.values()), "checks": checks}))


if __name__ == "__main__":
    main()
