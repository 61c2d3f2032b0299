/*
 * ptx_cudadevrt.c — what the host device gives a link in place of libcudadevrt,
 * the CUDA device runtime archive. Its objects are SASS the interpreter
 * cannot run (its PTX calls the driver's private syscalls), so the entry
 * points that cooperative groups call from it are written here, in PTX, and
 * linked as one more input: numba-cuda's grid sync calls
 * cudaCGGetIntrinsicHandle and cudaCGSynchronize; older cooperative-groups
 * headers call cudaCGSynchronizeGrid, cudaCGGetSize and cudaCGGetRank
 * (cuda_device_runtime_api.h declares all five). Every one is .weak, so a
 * program's own definition stands. Dynamic parallelism (cudaLaunchDevice and
 * the rest of ptx_cdp.h) is not here: those calls are built-ins of every
 * link (ptx_builtin.c); one the host device lacks (a kernel's cudaMalloc,
 * events) fails to link, naming the function.
 *
 * The grid's handle is its workspace (%envreg1:%envreg2, which the
 * interpreter fills for a cooperative launch and leaves 0 otherwise), and the
 * barrier counts at its byte 4 as nvcc's inlined grid.sync() does, so both
 * kinds of code can meet at one barrier: block 0 adds 0x80000001 - nblocks,
 * every other block 1, which flips bit 31 once all have arrived; each block
 * waits until it sees bit 31 differ from what it read when it arrived. A
 * grid sync outside a cooperative launch traps (CUDA_ERROR_LAUNCH_FAILED):
 * going on unsynchronised would give wrong results silently.
 *
 * No state; the text is a constant.
 */
#include "ptx.h"

/* cudaCGGetSize and cudaCGGetRank: both gleam_grid_facts, RANK telling which. */
#define GRID_FACTS(NAME, A, B, RANK)                                                       \
    ".weak .func (.param .b32 result) " NAME "(.param .b64 " A ", .param .b64 " B          \
    ", .param .b64 handle)\n"                                                              \
    "{\n"                                                                                  \
    "    .reg .b64 %rd<3>;\n"                                                              \
    "    ld.param.u64 %rd1, [" A "];\n"                                                    \
    "    ld.param.u64 %rd2, [" B "];\n"                                                    \
    "    {\n"                                                                              \
    "    .param .b64 pa;\n"                                                                \
    "    .param .b64 pb;\n"                                                                \
    "    .param .b32 rank;\n"                                                              \
    "    st.param.b64 [pa], %rd1;\n"                                                       \
    "    st.param.b64 [pb], %rd2;\n"                                                       \
    "    st.param.b32 [rank], " RANK ";\n"                                                 \
    "    call.uni gleam_grid_facts, (pa, pb, rank);\n"                                     \
    "    }\n"                                                                              \
    "    st.param.b32 [result], 0;\n"                                                      \
    "    ret;\n"                                                                           \
    "}\n\n"

static const char devrt[] =
    "// gleam's device runtime for the host device (cffi_build/src/ptx/ptx_cudadevrt.c)\n"
    ".address_size 64\n"
    "\n"
    ".weak .func (.param .b64 handle) cudaCGGetIntrinsicHandle(.param .b32 scope)\n"
    "{\n"
    "    .reg .b32 %r<4>;\n"
    "    .reg .b64 %rd<2>;\n"
    "    .reg .pred %p<2>;\n"
    "    ld.param.u32 %r1, [scope];\n"
    "    mov.u64 %rd1, 0;\n"
    "    setp.ne.u32 %p1, %r1, 1; // cudaCGScopeGrid\n"
    "    @%p1 bra DONE;\n"
    "    mov.u32 %r2, %envreg1;\n"
    "    mov.u32 %r3, %envreg2;\n"
    "    mov.b64 %rd1, {%r3, %r2};\n"
    "DONE:\n"
    "    st.param.b64 [handle], %rd1;\n"
    "    ret;\n"
    "}\n"
    "\n"
    ".weak .func (.param .b32 result) cudaCGSynchronize(.param .b64 handle, .param .b32 flags)\n"
    "{\n"
    "    .reg .b32 %r<14>;\n"
    "    .reg .b64 %rd<3>;\n"
    "    .reg .pred %p<4>;\n"
    "    ld.param.u64 %rd1, [handle];\n"
    "    setp.eq.u64 %p1, %rd1, 0;\n"
    "    @%p1 trap; // not a cooperative launch\n"
    "    barrier.sync 0;\n"
    "    mov.u32 %r1, %tid.x;\n"
    "    mov.u32 %r2, %tid.y;\n"
    "    or.b32 %r1, %r1, %r2;\n"
    "    mov.u32 %r2, %tid.z;\n"
    "    or.b32 %r1, %r1, %r2;\n"
    "    setp.ne.u32 %p2, %r1, 0;\n"
    "    @%p2 bra ARRIVED; // thread 0 arrives for its block\n"
    "    mov.u32 %r3, %nctaid.x;\n"
    "    mov.u32 %r4, %nctaid.y;\n"
    "    mul.lo.u32 %r3, %r3, %r4;\n"
    "    mov.u32 %r4, %nctaid.z;\n"
    "    mul.lo.u32 %r3, %r3, %r4;\n"
    "    mov.u32 %r5, %ctaid.x;\n"
    "    mov.u32 %r6, %ctaid.y;\n"
    "    or.b32 %r5, %r5, %r6;\n"
    "    mov.u32 %r6, %ctaid.z;\n"
    "    or.b32 %r5, %r5, %r6;\n"
    "    setp.eq.u32 %p3, %r5, 0;\n"
    "    sub.u32 %r7, -2147483647, %r3;\n"
    "    selp.b32 %r8, %r7, 1, %p3;\n"
    "    add.u64 %rd2, %rd1, 4;\n"
    "    atom.add.release.gpu.u32 %r9, [%rd2], %r8;\n"
    "SPIN:\n"
    "    ld.acquire.gpu.u32 %r10, [%rd2];\n"
    "    xor.b32 %r11, %r10, %r9;\n"
    "    setp.gt.s32 %p2, %r11, -1;\n"
    "    @%p2 bra SPIN;\n"
    "ARRIVED:\n"
    "    barrier.sync 0;\n"
    "    st.param.b32 [result], 0;\n"
    "    ret;\n"
    "}\n"
    "\n"
    ".weak .func (.param .b32 result) cudaCGSynchronizeGrid(.param .b64 handle, "
    ".param .b32 flags)\n"
    "{\n"
    "    .reg .b32 %r<3>;\n"
    "    .reg .b64 %rd<2>;\n"
    "    ld.param.u64 %rd1, [handle];\n"
    "    ld.param.u32 %r1, [flags];\n"
    "    {\n"
    "    .param .b64 h;\n"
    "    .param .b32 f;\n"
    "    .param .b32 r;\n"
    "    st.param.b64 [h], %rd1;\n"
    "    st.param.b32 [f], %r1;\n"
    "    call.uni (r), cudaCGSynchronize, (h, f);\n"
    "    ld.param.b32 %r2, [r];\n"
    "    }\n"
    "    st.param.b32 [result], %r2;\n"
    "    ret;\n"
    "}\n"
    "\n"
    "// cudaCGGetSize (rank 0): the grid's threads and 1 grid; cudaCGGetRank\n"
    "// (rank 1): the thread's rank in the grid and grid 0. Stored through the\n"
    "// pointers that are not null.\n"
    ".func gleam_grid_facts(.param .b64 pa, .param .b64 pb, .param .b32 rank)\n"
    "{\n"
    "    .reg .b32 %r<14>;\n"
    "    .reg .b64 %rd<3>;\n"
    "    .reg .pred %p<4>;\n"
    "    mov.u32 %r1, %ntid.x;\n"
    "    mov.u32 %r2, %ntid.y;\n"
    "    mov.u32 %r3, %ntid.z;\n"
    "    mul.lo.u32 %r4, %r1, %r2;\n"
    "    mul.lo.u32 %r4, %r4, %r3; // threads per block\n"
    "    mov.u32 %r5, %nctaid.x;\n"
    "    mov.u32 %r6, %nctaid.y;\n"
    "    mov.u32 %r7, %ctaid.z;\n"
    "    mul.lo.u32 %r8, %r7, %r6;\n"
    "    mov.u32 %r9, %ctaid.y;\n"
    "    add.u32 %r8, %r8, %r9;\n"
    "    mov.u32 %r9, %ctaid.x;\n"
    "    mad.lo.u32 %r8, %r8, %r5, %r9; // block rank\n"
    "    mov.u32 %r9, %tid.z;\n"
    "    mov.u32 %r10, %tid.y;\n"
    "    mad.lo.u32 %r9, %r9, %r2, %r10;\n"
    "    mov.u32 %r10, %tid.x;\n"
    "    mad.lo.u32 %r9, %r9, %r1, %r10; // thread rank in its block\n"
    "    mad.lo.u32 %r11, %r8, %r4, %r9; // thread rank in the grid\n"
    "    mul.lo.u32 %r5, %r5, %r6;\n"
    "    mov.u32 %r6, %nctaid.z;\n"
    "    mul.lo.u32 %r5, %r5, %r6;\n"
    "    mul.lo.u32 %r5, %r5, %r4; // threads in the grid\n"
    "    ld.param.u32 %r12, [rank];\n"
    "    setp.ne.u32 %p3, %r12, 0;\n"
    "    selp.b32 %r12, %r11, %r5, %p3;\n"
    "    selp.b32 %r13, 0, 1, %p3;\n"
    "    ld.param.u64 %rd1, [pa];\n"
    "    ld.param.u64 %rd2, [pb];\n"
    "    setp.eq.u64 %p1, %rd1, 0;\n"
    "    setp.eq.u64 %p2, %rd2, 0;\n"
    "    @!%p1 st.u32 [%rd1], %r12;\n"
    "    @!%p2 st.u32 [%rd2], %r13;\n"
    "    ret;\n"
    "}\n"
    "\n"
    GRID_FACTS("cudaCGGetSize", "numThreads", "numGrids", "0")
    GRID_FACTS("cudaCGGetRank", "threadRank", "gridRank", "1");

ptx_source ptx_cudadevrt_source(void)
{
    return (ptx_source){devrt, sizeof devrt - 1, "libcudadevrt (the host device's stand-in)"};
}
