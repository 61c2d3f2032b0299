/*
 * occupancy.c — cuOccupancy* and cuFuncGetAttribute, which CUDA 12 lets take
 * a CUkernel cast to CUfunction (numba-cuda passes its CUkernel): the handle
 * becomes its function (module.c, gl_launchable) before the call goes out.
 * cuOccupancyMaxPotentialBlockSize runs here, as cudart's helper of the same
 * name does: it asks the serving device for the active blocks of each
 * candidate block size (the program's callback, which lives in this process,
 * gives each one's dynamic shared memory) and keeps the best. Also the
 * attribute and cache-configuration setters. State: the context's cache
 * preference (one per process, atomic).
 */
#include "gl_calls.h"
#include "gl_client_gen.h"
#include "internal.h"

static CUresult as_func(CUfunction *f)
{
    uint64_t h;
    CUresult r = gl_ready();

    if (r != CUDA_SUCCESS)
        return r;
    if ((r = gl_launchable((uint64_t)(uintptr_t)*f, &h)) != CUDA_SUCCESS)
        return r;
    *f = (CUfunction)(uintptr_t)h;
    return CUDA_SUCCESS;
}

CUresult gli_cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc, int ptds)
{
    CUresult r = as_func(&hfunc);
    return r != CUDA_SUCCESS ? r : glw_cuFuncGetAttribute(pi, attrib, hfunc, ptds);
}

CUresult gli_cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func,
                                                         int blockSize, size_t dynamicSMemSize,
                                                         int ptds)
{
    CUresult r = as_func(&func);
    return r != CUDA_SUCCESS ? r
                             : glw_cuOccupancyMaxActiveBlocksPerMultiprocessor(
                                   numBlocks, func, blockSize, dynamicSMemSize, ptds);
}

CUresult gli_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func,
                                                                  int blockSize,
                                                                  size_t dynamicSMemSize,
                                                                  unsigned int flags, int ptds)
{
    CUresult r = as_func(&func);
    return r != CUDA_SUCCESS ? r
                             : glw_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
                                   numBlocks, func, blockSize, dynamicSMemSize, flags, ptds);
}

CUresult gli_cuOccupancyMaxPotentialBlockSizeWithFlags(int *minGridSize, int *blockSize,
                                                       CUfunction func,
                                                       CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                       size_t dynamicSMemSize, int blockSizeLimit,
                                                       unsigned int flags, int ptds)
{
    int max_threads = 0, warp = 0, sms = 0;
    CUdevice dev;
    CUresult r = as_func(&func);

    if (r != CUDA_SUCCESS)
        return r;
    if (minGridSize == NULL || blockSize == NULL || blockSizeLimit < 0)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = glw_cuFuncGetAttribute(&max_threads, GL_FUNC_ATTR_MAX_THREADS_PER_BLOCK, func,
                                    ptds)) != CUDA_SUCCESS
        || (r = gli_cuCtxGetDevice(&dev, ptds)) != CUDA_SUCCESS
        || (r = gli_cuDeviceGetAttribute(&warp, GL_ATTR_WARP_SIZE, dev, ptds)) != CUDA_SUCCESS
        || (r = gli_cuDeviceGetAttribute(&sms, GL_ATTR_MULTIPROCESSOR_COUNT, dev, ptds))
               != CUDA_SUCCESS)
        return r;
    if (warp <= 0)
        warp = 32;
    int limit = blockSizeLimit > 0 && blockSizeLimit < max_threads ? blockSizeLimit : max_threads;
    int best_threads = 0, best_block = 0, best_active = 0;
    /* From the largest warp multiple down; the first size that reaches the
     * best occupancy wins, so larger blocks are preferred on ties. */
    for (int size = (limit + warp - 1) / warp * warp; size > 0; size -= warp) {
        int b = size < limit ? size : limit, active = 0;
        size_t dyn = blockSizeToDynamicSMemSize ? blockSizeToDynamicSMemSize(b) : dynamicSMemSize;
        r = glw_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&active, func, b, dyn, flags,
                                                                     ptds);
        if (r != CUDA_SUCCESS)
            return r;
        if (active * b > best_threads) {
            best_threads = active * b;
            best_block = b;
            best_active = active;
        }
    }
    *blockSize = best_block;
    *minGridSize = best_active * sms;
    return CUDA_SUCCESS;
}

CUresult gli_cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
                                              CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                              size_t dynamicSMemSize, int blockSizeLimit,
                                              int ptds)
{
    return gli_cuOccupancyMaxPotentialBlockSizeWithFlags(
        minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize,
        blockSizeLimit, 0, ptds);
}

CUresult gli_cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value,
                                int ptds)
{
    CUresult r = as_func(&hfunc);
    return r != CUDA_SUCCESS ? r : glw_cuFuncSetAttribute(hfunc, attrib, value, ptds);
}

/* CU_FUNC_CACHE_PREFER_NONE .. PREFER_EQUAL. The split between L1 and shared
 * memory is a hint that no result depends on; gleam keeps the context's
 * preference so that reading it back gives what was set. */
#define GL_FUNC_CACHE_MAX 3
static _Atomic int g_ctx_cache_config;

static CUresult check_cache_config(CUfunc_cache config)
{
    CUresult r = gl_ready();

    if (r != CUDA_SUCCESS)
        return r;
    return config >= 0 && config <= GL_FUNC_CACHE_MAX ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult gli_cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config, int ptds)
{
    CUresult r = check_cache_config(config);

    (void)ptds;
    return r != CUDA_SUCCESS ? r : as_func(&hfunc);
}

CUresult gli_cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice dev, int ptds)
{
    CUresult r = check_cache_config(config);

    (void)dev;
    (void)ptds;
    return r != CUDA_SUCCESS ? r : gl_check_handle(GL_H_KERNEL, (uint64_t)(uintptr_t)kernel);
}

CUresult gli_cuCtxSetCacheConfig(CUfunc_cache config, int ptds)
{
    CUresult r = check_cache_config(config);

    (void)ptds;
    if (r == CUDA_SUCCESS)
        g_ctx_cache_config = config;
    return r;
}

CUresult gls_cuCtxGetCacheConfig(CUfunc_cache *pconfig, int ptds)
{
    (void)ptds;
    if (pconfig == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *pconfig = g_ctx_cache_config;
    return CUDA_SUCCESS;
}
