/*
 * hostdev_attrs.c — what the host device says about its kernels beyond
 * hostdev_kernels.c's cuFuncGetAttribute: the same facts asked through a
 * CUkernel (cuda.core, hence numba-cuda, asks this way; cudart 12+ sets
 * attributes this way) and occupancy. No
 * state of its own; on the host device a kernel handle is the same object as
 * a function (hostdev_kernels.c).
 *
 * Occupancy: a core (what the host device reports as a multiprocessor) runs
 * one block at a time, but keeps resident what an 8.0 device does
 * (GL_HOST_*_PER_SM: threads in whole warps, blocks, shared memory), and a
 * cooperative grid uses exactly that: all its blocks resident at once, taking
 * turns (ptx_launch.c). So the answer is an 8.0 device's, without the
 * register file (the interpreter has none to run out of): 0 for a block that
 * does not fit at all.
 */
#include "exec/executor.h"

CUresult hb_cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel,
                                 CUdevice dev)
{
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    return hb_cuFuncGetAttribute(pi, attrib, (CUfunction)kernel);
}

/* CUfunction_attribute 8: CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES. */
#define FUNC_ATTR_MAX_DYNAMIC_SHARED 8
CUresult hb_cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel,
                                 CUdevice dev)
{
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    return hb_cuFuncSetAttribute((CUfunction)kernel, attrib, val);
}

CUresult hb_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func,
                                                                 int blockSize,
                                                                 size_t dynamicSMemSize,
                                                                 unsigned int flags)
{
    int max_threads = 0, max_dynamic = 0, static_shared = 0;

    if (blockSize <= 0 || flags > 1) /* CU_OCCUPANCY_DEFAULT, _DISABLE_CACHING_OVERRIDE */
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = hb_cuFuncGetAttribute(&max_threads, GL_FUNC_ATTR_MAX_THREADS_PER_BLOCK, func);
    if (r == CUDA_SUCCESS)
        r = hb_cuFuncGetAttribute(&max_dynamic, FUNC_ATTR_MAX_DYNAMIC_SHARED, func);
    if (r == CUDA_SUCCESS)
        r = hb_cuFuncGetAttribute(&static_shared, GL_FUNC_ATTR_SHARED_SIZE_BYTES, func);
    if (r != CUDA_SUCCESS)
        return r;
    if (blockSize > max_threads || dynamicSMemSize > (size_t)max_dynamic) {
        *numBlocks = 0;
        return CUDA_SUCCESS;
    }
    uint64_t threads = ((uint64_t)blockSize + 31) / 32 * 32;
    uint64_t blocks = GL_HOST_THREADS_PER_SM / threads;
    uint64_t shared = (uint64_t)static_shared + dynamicSMemSize;
    if (shared > 0 && GL_HOST_SHARED_PER_SM / shared < blocks)
        blocks = GL_HOST_SHARED_PER_SM / shared;
    if (blocks > GL_HOST_BLOCKS_PER_SM)
        blocks = GL_HOST_BLOCKS_PER_SM;
    /* a block larger than a multiprocessor's shared memory still runs here, alone */
    *numBlocks = blocks > 0 ? (int)blocks : 1;
    return CUDA_SUCCESS;
}

CUresult hb_cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func,
                                                        int blockSize, size_t dynamicSMemSize)
{
    return hb_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize,
                                                                   dynamicSMemSize, 0);
}
