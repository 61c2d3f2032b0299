"""Thread-block clusters, with NVIDIA's Python bindings.

cuBLASLt and cuDNN launch their Hopper kernels in clusters: ``cuLaunchKernelEx``
with a ``CLUSTER_DIMENSION`` attribute, after asking ``cuOccupancyMaxActiveClusters``
how many fit. This program launches a kernel in clusters of two and of four blocks
(each block writes its number), asks the occupancy of a cluster and the largest
cluster a launch could have, and checks that
shapes CUDA refuses are refused: a grid that is not a multiple of the cluster
(``CUDA_ERROR_INVALID_CLUSTER_SIZE``, reported at the launch or by the next
synchronisation, as launch errors are). On a device of capability
9.0 or more it also reads each block's rank in its cluster (``%cluster_ctarank``),
which only a real cluster gives. It prints one JSON verdict.

    python clusters.py
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
from cuda.bindings import driver as cu

INVALID_CLUSTER_SIZE = 912
# out[block] = block + 1; the sm_90 one writes the block's rank in its cluster.
BLOCKS_PTX = b"""
.version 7.8
.target %s
.address_size 64
.visible .entry %s(.param .u64 out)
{
    .reg .u32 %%r<4>;
    .reg .u64 %%rd<4>;
    ld.param.u64 %%rd1, [out];
    cvta.to.global.u64 %%rd1, %%rd1;
    mov.u32 %%r1, %%ctaid.x;
    mul.wide.u32 %%rd2, %%r1, 4;
    add.u64 %%rd3, %%rd1, %%rd2;
    %s
    st.global.u32 [%%rd3], %%r3;
    ret;
}
"""
GRID = 8


def ok(result: Any) -> Any:
    """The outputs of a bindings call, or an exception naming its error."""
    err, *rest = result
    if int(err) != 0:
        raise RuntimeError(repr(err))
    return rest[0] if len(rest) == 1 else (rest or None)


def kernel(target: bytes, name: bytes, body: bytes) -> Any:
    mod = ok(cu.cuModuleLoadData(BLOCKS_PTX % (target, name, body) + b"\0"))
    return ok(cu.cuModuleGetFunction(mod, name))


def config(grid: int, cluster: tuple[int, int, int] | None) -> Any:
    cfg = cu.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid, 1, 1
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 32, 1, 1
    cfg.sharedMemBytes = 0
    cfg.hStream = 0
    attrs = []
    if cluster is not None:
        attr = cu.CUlaunchAttribute()
        attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
        attrs.append(attr)
    cfg.attrs = attrs
    cfg.numAttrs = len(attrs)
    return cfg


def launch(func: Any, out: int, grid: int, cluster: tuple[int, int, int] | None) -> int:
    """cuLaunchKernelEx's result, then the next synchronisation's (a launch's error)."""
    arg = np.array([out], np.uint64)
    params = np.array([arg.ctypes.data], np.uint64)
    err = int(cu.cuLaunchKernelEx(config(grid, cluster), func, params.ctypes.data, 0)[0])
    return err or int(cu.cuCtxSynchronize()[0])


def written(out: int) -> list[int]:
    got = np.zeros(GRID, np.uint32)
    ok(cu.cuMemcpyDtoH(got.ctypes.data, out, got.nbytes))
    ok(cu.cuMemsetD32(out, 0, GRID))
    return [int(v) for v in got]


def main() -> None:
    ok(cu.cuInit(0))
    dev = ok(cu.cuDeviceGet(0))
    ok(cu.cuCtxSetCurrent(ok(cu.cuDevicePrimaryCtxRetain(dev))))
    major = ok(cu.cuDeviceGetAttribute(
        cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
    func = kernel(b"sm_80", b"blocks", b"add.u32 %r3, %r1, 1;")
    out = ok(cu.cuMemAlloc(GRID * 4))
    ok(cu.cuMemsetD32(out, 0, GRID))
    every = list(range(1, GRID + 1))
    checks: dict[str, bool] = {}
    checks["cluster_of_2"] = launch(func, out, GRID, (2, 1, 1)) == 0 and written(out) == every
    checks["cluster_of_4"] = launch(func, out, GRID, (4, 1, 1)) == 0 and written(out) == every
    checks["cluster_of_1_is_a_plain_launch"] = \
        launch(func, out, GRID, (1, 1, 1)) == 0 and written(out) == every
    checks["grid_not_a_multiple_refused"] = \
        launch(func, out, GRID - 1, (2, 1, 1)) == INVALID_CLUSTER_SIZE
    err, n = cu.cuOccupancyMaxActiveClusters(func, config(GRID, (2, 1, 1)))
    checks["occupancy_of_a_cluster"] = int(err) == 0 and int(n) >= 1
    err, size = cu.cuOccupancyMaxPotentialClusterSize(func, config(GRID, None))
    checks["potential_cluster_size"] = int(err) == 0 and int(size) >= 2
    if major >= 9:
        ranks = kernel(b"sm_90", b"ranks", b"mov.u32 %r3, %cluster_ctarank;")
        checks["ranks_in_clusters_of_4"] = launch(ranks, out, GRID, (4, 1, 1)) == 0 \
            and written(out) == [i % 4 for i in range(GRID)]
    ok(cu.cuMemFree(out))
    verdict = {"ok": all(checks.values()), "checks": checks}
    print(json.dumps(verdict))
    sys.exit(0 if verdict["ok"] else 1)


if __name__ == "__main__":
    main()
