"""Thread-block cluster launches and their occupancy on the server: the host device's shape
rules and answers, and the cuda backend's cuLaunchKernelEx (a stand-in driver), through
real batches. ``examples/cuda/clusters.py`` runs them end to end
(tests/test_cuda_bindings.py)."""

from __future__ import annotations

import os
import struct

import pytest

from .cuda_session import FUNC, MOD, Session, mint, ptx_only_session, rec
from .stand_in_driver import build_stand_in, needs_gcc, stand_in_session

INVALID_VALUE, INVALID_CLUSTER_SIZE = 1, 912
ACTIVE, POTENTIAL_SIZE = 0, 1
BLOCKS_PTX = b"""
.version 7.8
.target sm_80
.address_size 64
.visible .entry blocks(.param .u64 out)
{
    .reg .u32 %r<4>;
    .reg .u64 %rd<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %ctaid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd3, %rd1, %rd2;
    add.u32 %r3, %r1, 1;
    st.global.u32 [%rd3], %r3;
    ret;
}
\x00"""


def cluster_launch(s: Session, fn: int, grid: int, cluster: tuple[int, int, int],
                   params: bytes, block: int = 32) -> None:
    assert s.run(rec("glLaunchCluster", fn, grid, 1, 1, block, 1, 1, 0, 0, *cluster,
                     len(params), payload=params)) is None


def occupancy(s: Session, fn: int, query: int, cluster: tuple[int, int, int],
              block: int = 32) -> tuple[int, int]:
    r = s.run(rec("glClusterOccupancy", fn, query, 8, 1, 1, block, 1, 1, 0, *cluster))
    assert r is not None
    return r[0], (r[2] or [0])[0]


def test_the_host_device_runs_a_clusters_blocks_as_any_launch():
    with ptx_only_session() as s:
        fn = s.function(s.load(BLOCKS_PTX), "blocks")
        out = s.alloc(64)
        params = struct.pack("<Q", out)
        for cluster in ((2, 1, 1), (4, 1, 1), (8, 1, 1)):
            s.run(rec("cuMemsetD32", out, 0, 16))
            cluster_launch(s, fn, 8, cluster, params)
            assert s.sync() == (0, 0)
            assert struct.unpack("<8I", s.dtoh(out, 32)) == tuple(range(1, 9))
        assert s.x.stats()["launches"] == 3


@pytest.mark.parametrize("grid,cluster", [(7, (2, 1, 1)),   # not a multiple of the cluster
                                          (9, (3, 3, 1)),   # 9 blocks: past the portable 8
                                          (8, (2, 0, 1))])  # a zero extent
def test_shapes_cuda_refuses_are_invalid_cluster_size(grid, cluster):
    with ptx_only_session() as s:
        fn = s.function(s.load(BLOCKS_PTX), "blocks")
        out = s.alloc(64)
        cluster_launch(s, fn, grid, cluster, struct.pack("<Q", out))
        assert s.sync() == (0, INVALID_CLUSTER_SIZE)  # one-way: the next wait reports it
        assert s.sync() == (0, 0)  # and it is not sticky


def test_cluster_occupancy_on_the_host_device():
    with ptx_only_session() as s:
        fn = s.function(s.load(BLOCKS_PTX), "blocks")
        cores = os.cpu_count() or 1
        assert occupancy(s, fn, ACTIVE, (2, 1, 1)) == (0, max(1, cores // 2))
        assert occupancy(s, fn, ACTIVE, (1, 1, 1)) == (0, cores)
        assert occupancy(s, fn, ACTIVE, (0, 0, 0)) == (0, cores)  # no cluster: one block each
        assert occupancy(s, fn, POTENTIAL_SIZE, (1, 1, 1)) == (0, 8)
        assert occupancy(s, fn, POTENTIAL_SIZE, (16, 1, 1)) == (0, 8)  # its cluster is ignored
        assert occupancy(s, fn, ACTIVE, (3, 3, 1))[0] == INVALID_CLUSTER_SIZE
        assert occupancy(s, fn, ACTIVE, (1 << 31, 1 << 31, 4))[0] == INVALID_CLUSTER_SIZE
        assert occupancy(s, fn, 2, (2, 1, 1))[0] == INVALID_VALUE
        assert occupancy(s, fn, ACTIVE, (2, 1, 1), block=2048)[0] == INVALID_VALUE


# The stand-in driver keeps what cuLaunchKernelEx and the occupancy queries were given,
# so the test reads back how the cuda backend built the configuration.
CLUSTER_DRIVER = r"""
typedef struct { int id; char pad[4]; union { char b[64]; unsigned c[3]; } v; } A;
typedef struct { unsigned g[3], b[3], shared; void *stream; A *attrs; unsigned n; } C;
static uint64_t last[16];
static void keep(const C *c) {
    for (int i = 0; i < 3; i++) { last[i] = c->g[i]; last[3 + i] = c->b[i]; }
    last[6] = c->shared; last[7] = c->n;
    last[8] = c->n ? (uint64_t)c->attrs[0].id : 99;
    for (int i = 0; i < 3; i++) last[9 + i] = c->n ? c->attrs[0].v.c[i] : 0;
}
CUresult cuModuleLoadData(void **m, const void *image) { *m = (void *)0x2000; return 0; }
CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
    *f = (void *)0x3000; return 0;
}
CUresult cuLaunchKernelEx(const C *c, void *f, void **params, void **extra) {
    keep(c);
    last[12] = (uint64_t)(uintptr_t)f;
    last[13] = *(const uint64_t *)extra[1];    /* the packed parameters' first 8 bytes */
    last[14] = *(const size_t *)extra[3];
    return 0;
}
CUresult cuOccupancyMaxActiveClusters(int *n, void *f, const C *c) { keep(c); *n = 5; return 0; }
CUresult cuOccupancyMaxPotentialClusterSize(int *n, void *f, const C *c) {
    keep(c); *n = 16; return 0;
}
uint64_t fake_last(int i) { return last[i]; }
"""


@needs_gcc
def test_the_cuda_backend_launches_clusters_with_the_drivers_launch_ex(tmp_path):
    so, fake = build_stand_in(tmp_path, CLUSTER_DRIVER, "uint64_t fake_last(int);")
    with stand_in_session(so) as s:
        mod, fn = mint(MOD), mint(FUNC)
        s.run(rec("glModuleLoad", mod, 4, payload=b"abcd"),
              rec("cuModuleGetFunction", fn, mod, payload=b"k\0"))
        assert s.sync() == (0, 0)
        s.run(rec("glLaunchCluster", fn, 8, 2, 1, 64, 1, 1, 128, 0, 2, 1, 1, 8,
                  payload=struct.pack("<Q", 0x1234)))
        assert s.sync() == (0, 0)
        assert [fake.fake_last(i) for i in range(15)] == [
            8, 2, 1, 64, 1, 1, 128, 1, 4, 2, 1, 1, 0x3000, 0x1234, 8]  # attribute 4: cluster
        assert occupancy(s, fn, ACTIVE, (4, 1, 1)) == (0, 5)
        assert [fake.fake_last(i) for i in (7, 8, 9)] == [1, 4, 4]
        assert occupancy(s, fn, POTENTIAL_SIZE, (1, 1, 1)) == (0, 16)
        assert [fake.fake_last(i) for i in (7, 9)] == [1, 1]  # {1, 1, 1} as the program gave it
        assert occupancy(s, fn, POTENTIAL_SIZE, (0, 0, 0)) == (0, 16)
        assert fake.fake_last(7) == 0  # no cluster dimension: no attribute
        assert occupancy(s, fn, 2, (1, 1, 1))[0] == INVALID_VALUE
