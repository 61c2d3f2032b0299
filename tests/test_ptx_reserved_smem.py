"""The shared memory reserved for NVIDIA's system software (PTX ISA 7.6:
``%reserved_smem_offset_begin/end/cap/_0/_1``, ``%total_smem_size``,
``%aggr_smem_size``) on the host device.

Cooperative groups keep the barriers of a tile wider than a warp at
``%reserved_smem_offset_1`` and on sm_80 and later never clear them: the block
must start with the region zero (cuda-samples' reduction stopped at this register).
Checked: every block (the worker's shared memory is reused block after block) starts
with the region zero, it overlaps neither the static nor the dynamic shared memory,
the registers' values; and cooperative groups' multi-warp ``reduce`` built by nvcc
gives numpy's sums.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gleam.peer.nativelib import ffi, lib

from .test_ptx_fuzz import load

RESERVED = 1024


def launch(text: str, entry: str, grid: int, block: int, dynamic: int, params: bytes,
           buffers: list[np.ndarray]) -> None:
    m = load(text)
    ranges = ffi.new("uint64_t[]", [v for b in buffers for v in (b.ctypes.data, b.nbytes)])
    g, b = ffi.new("unsigned[3]", [grid, 1, 1]), ffi.new("unsigned[3]", [block, 1, 1])
    insns, err = ffi.new("uint64_t *"), ffi.new("char[256]")
    rc = lib.gl_ptx_run(m, entry.encode(), g, b, dynamic, params, len(params), ranges,
                        len(buffers), 2, insns, err, 256)
    assert rc == 0, ffi.string(err).decode()


# Each of 256 threads reads word tid of the reserved region, then fills it, its
# static word and its dynamic word; after a barrier it reads its static and
# dynamic words back. Thread 0 of each block also stores the registers.
REGION = """
.version 8.0
.target sm_80
.address_size 64
.extern .shared .align 16 .b8 dyn[];
.visible .entry k(.param .u64 seen, .param .u64 back, .param .u64 regs)
{
    .shared .align 4 .b8 stat[1028];
    .reg .pred %p<2>; .reg .b32 %r<20>; .reg .b64 %rd<20>;
    ld.param.u64 %rd1, [seen]; ld.param.u64 %rd2, [back]; ld.param.u64 %rd3, [regs];
    mov.u32 %r1, %tid.x; mov.u32 %r2, %ctaid.x;
    mad.lo.s32 %r3, %r2, 256, %r1;
    mul.wide.u32 %rd4, %r3, 4;
    mul.wide.u32 %rd5, %r1, 4;
    mov.u32 %r4, %reserved_smem_offset_begin;
    cvt.u64.u32 %rd6, %r4;
    add.s64 %rd7, %rd6, %rd5;
    ld.shared.u32 %r5, [%rd7];
    add.s64 %rd8, %rd1, %rd4;
    st.global.u32 [%rd8], %r5;
    bar.sync 0;
    st.shared.u32 [%rd7], -1;
    mov.u64 %rd9, stat;
    add.s64 %rd10, %rd9, %rd5;
    st.shared.u32 [%rd10], %r3;
    mov.u64 %rd11, dyn;
    add.s64 %rd12, %rd11, %rd5;
    add.s32 %r6, %r3, 7;
    st.shared.u32 [%rd12], %r6;
    bar.sync 0;
    ld.shared.u32 %r7, [%rd10];
    ld.shared.u32 %r8, [%rd12];
    mul.wide.u32 %rd13, %r3, 8;
    add.s64 %rd14, %rd2, %rd13;
    st.global.v2.u32 [%rd14], {%r7, %r8};
    setp.ne.s32 %p1, %r3, 0;
    @%p1 bra DONE;
    mov.u32 %r9, %reserved_smem_offset_end;
    mov.u32 %r10, %reserved_smem_offset_cap;
    mov.u32 %r11, %reserved_smem_offset_0;
    mov.u32 %r12, %reserved_smem_offset_1;
    mov.u32 %r13, %total_smem_size;
    mov.u32 %r14, %aggr_smem_size;
    mov.u32 %r15, %dynamic_smem_size;
    cvt.u32.u64 %r16, %rd11;
    st.global.v4.u32 [%rd3], {%r4, %r9, %r10, %r11};
    st.global.v4.u32 [%rd3+16], {%r12, %r13, %r14, %r15};
    st.global.u32 [%rd3+32], %r16;
DONE:
    ret;
}
"""


def test_every_block_starts_with_the_region_zero_apart_from_its_other_shared_memory():
    blocks, dynamic = 16, 1024
    seen = np.full(blocks * 256, 0x5A5A5A5A, np.uint32)
    back = np.zeros((blocks * 256, 2), np.uint32)
    regs = np.zeros(9, np.uint32)
    params = struct.pack("<QQQ", seen.ctypes.data, back.ctypes.data, regs.ctypes.data)
    launch(REGION, "k", blocks, 256, dynamic, params, [seen, back, regs])
    assert not seen.any()  # no block saw an earlier block's -1
    ids = np.arange(blocks * 256, dtype=np.uint32)
    assert (back[:, 0] == ids).all() and (back[:, 1] == ids + 7).all()
    begin, end, cap, r0, r1, total, aggr, dyn_size, dyn_at = regs.tolist()
    assert (end - begin, cap, r0, dyn_size) == (RESERVED, RESERVED, begin, dynamic)
    assert begin <= r1 and r1 + 288 <= end  # cooperative groups' scratch fits
    assert begin >= 1028 and dyn_at >= end  # after the static memory, before the dynamic
    assert aggr == total + RESERVED and total >= 1028 + dynamic


def test_a_module_without_the_registers_reserves_nothing():
    text = REGION.replace("%reserved_smem_offset_begin", "0").replace(
        "mov.u32 %r9, %reserved_smem_offset_end;", "").replace(
        "mov.u32 %r10, %reserved_smem_offset_cap;", "").replace(
        "mov.u32 %r11, %reserved_smem_offset_0;", "").replace(
        "mov.u32 %r12, %reserved_smem_offset_1;", "").replace(
        "mov.u32 %r14, %aggr_smem_size;", "")
    seen = np.zeros(256, np.uint32)
    back = np.zeros((256, 2), np.uint32)
    regs = np.zeros(9, np.uint32)
    params = struct.pack("<QQQ", seen.ctypes.data, back.ctypes.data, regs.ctypes.data)
    launch(text, "k", 1, 256, 1024, params, [seen, back, regs])
    assert regs[8] == 1040  # the dynamic memory right after the static (1028, aligned)


CG = r"""
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

template <unsigned Tile>
__device__ void tile_sums(const int *in, long long *out) {
    cg::thread_block cta = cg::this_thread_block();
    cg::thread_block_tile<Tile> tile = cg::tiled_partition<Tile>(cta);
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = cg::reduce(tile, in[i], cg::plus<int>());
    tile.sync();
    int w = cg::reduce(tile, in[i] & 0xff, cg::plus<int>());
    if (tile.thread_rank() == 0)
        out[i / Tile] = (long long)v * 1000000 + w;
}

extern "C" __global__ void sums64(const int *in, long long *out) { tile_sums<64>(in, out); }
extern "C" __global__ void sums256(const int *in, long long *out) { tile_sums<256>(in, out); }
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc builds cooperative groups")
@pytest.mark.parametrize("tile", [64, 256])
def test_cooperative_groups_multi_warp_reduce(tmp_path: Path, tile: int):
    (tmp_path / "cg.cu").write_text(CG)
    subprocess.run(["nvcc", "-arch=sm_80", "-ptx", "-O3", "cg.cu", "-o", "cg.ptx"],
                   cwd=tmp_path, check=True, capture_output=True)
    text = (tmp_path / "cg.ptx").read_text()
    assert "%reserved_smem_offset_1" in text
    blocks, threads = 12, 512
    rng = np.random.default_rng(3)
    data = rng.integers(-1000, 1000, blocks * threads).astype(np.int32)
    out = np.zeros(blocks * threads // tile, np.int64)
    launch(text, f"sums{tile}", blocks, threads, 0,
           struct.pack("<QQ", data.ctypes.data, out.ctypes.data), [data, out])
    groups = data.reshape(-1, tile).astype(np.int64)
    want = groups.sum(1) * 1000000 + (groups & 0xFF).sum(1)
    assert out.tolist() == want.tolist()
