/*
 * hostdev_attrs.c — what the host device says about its kernels beyond
 * hostdev_kernels.c's cuFuncGetAttribute: the same facts asked through a
 * CUkernel (cuda.core, hence numba-cuda, asks this way; cudart 12+ sets
 * attributes this way) and occupancy. No
 * state of its own; on the host device a kernel handle is the same object as
 * a function (hostdev_kernels.c).
 *
 * Occupancy: the host device runs one block per core at a time (a core is
 * what it reports as a multiprocessor), so a block that fits is 1 active
 * block per multiprocessor and one that does not fit is 0.
 */
#include "executor.h"

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
    int max_threads = 0, max_dynamic = 0;

    if (blockSize <= 0 || flags > 1) /* CU_OCCUPANCY_DEFAULT, _DISABLE_CACHING_OVERRIDE */
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = hb_cuFuncGetAttribute(&max_threads, GL_FUNC_ATTR_MAX_THREADS_PER_BLOCK, func);
    if (r == CUDA_SUCCESS)
        r = hb_cuFuncGetAttribute(&max_dynamic, FUNC_ATTR_MAX_DYNAMIC_SHARED, func);
    if (r != CUDA_SUCCESS)
        return r;
    *numBlocks = blockSize <= max_threads && dynamicSMemSize <= (size_t)max_dynamic ? 1 : 0;
    return CUDA_SUCCESS;
}

CUresult hb_cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func,
                                                        int blockSize, size_t dynamicSMemSize)
{
    return hb_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize,
                                                                   dynamicSMemSize, 0);
}
