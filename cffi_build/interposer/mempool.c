/*
 * mempool.c — memory pools and stream-ordered allocation. gleam's devices
 * finish every stream's work in order before a later call runs (host
 * backend) or forward calls in one ordered stream (cuda backend), so an
 * allocation "in stream order" is an ordinary sub-allocation made at once
 * and freed in the batch's order; a pool is the accounting CUDA reports for
 * it (used and reserved bytes, their high-water marks, the reuse flags and
 * release threshold as set). Pools are the interposer's alone: their handles
 * (kind pool) never reach the server.
 *
 * State, under one mutex: the pools (a list), each device's current and
 * default pool, and a map from each pool allocation's address to its pool.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "graph.h"
#include "internal.h"

#define GL_POOL_DEVICES 64

/* CUmemPool_attribute, as numbered in cuda.h. */
enum {
    GL_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1,
    GL_POOL_REUSE_ALLOW_OPPORTUNISTIC = 2,
    GL_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3,
    GL_POOL_RELEASE_THRESHOLD = 4,
    GL_POOL_RESERVED_MEM_CURRENT = 5,
    GL_POOL_RESERVED_MEM_HIGH = 6,
    GL_POOL_USED_MEM_CURRENT = 7,
    GL_POOL_USED_MEM_HIGH = 8
};

typedef struct gl_pool {
    uint64_t handle;
    int reuse[4]; /* indexed by the three reuse attributes */
    uint64_t release_threshold, used, used_high;
    struct gl_pool *next;
} gl_pool;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static gl_pool *g_pools;
static gl_pool *g_default[GL_POOL_DEVICES], *g_current[GL_POOL_DEVICES];
static gl_hmap *g_owner; /* allocation address -> its pool's handle */

static gl_pool *pool_new(void)
{
    gl_pool *p = calloc(1, sizeof *p);

    if (p == NULL)
        return NULL;
    p->handle = gl_mint(GL_H_POOL);
    /* NVIDIA's defaults: every reuse allowed, threshold 0. */
    p->reuse[1] = p->reuse[2] = p->reuse[3] = 1;
    p->next = g_pools;
    g_pools = p;
    return p;
}

static gl_pool *pool_find(CUmemoryPool pool)
{
    for (gl_pool *p = g_pools; p != NULL; p = p->next)
        if (p->handle == (uint64_t)(uintptr_t)pool)
            return p;
    return NULL;
}

static CUresult check_dev(CUdevice dev)
{
    int count = 0;
    CUresult r = gl_ready();

    if (r != CUDA_SUCCESS)
        return r;
    if ((r = gli_cuDeviceGetCount(&count, 0)) != CUDA_SUCCESS)
        return r;
    return dev >= 0 && dev < count && dev < GL_POOL_DEVICES ? CUDA_SUCCESS
                                                             : CUDA_ERROR_INVALID_DEVICE;
}

/* The device's default pool, made on first use (lock held). */
static gl_pool *default_pool(CUdevice dev)
{
    if (g_default[dev] == NULL)
        g_default[dev] = pool_new();
    return g_default[dev];
}

CUresult gli_cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev, int ptds)
{
    CUresult r = check_dev(dev);

    (void)ptds;
    if (r != CUDA_SUCCESS)
        return r;
    if (pool_out == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    gl_pool *p = default_pool(dev);
    pthread_mutex_unlock(&g_lock);
    if (p == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *pool_out = (CUmemoryPool)(uintptr_t)p->handle;
    return CUDA_SUCCESS;
}

CUresult gli_cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev, int ptds)
{
    CUresult r = check_dev(dev);

    (void)ptds;
    if (r != CUDA_SUCCESS)
        return r;
    if (pool == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    gl_pool *p = g_current[dev] != NULL ? g_current[dev] : default_pool(dev);
    pthread_mutex_unlock(&g_lock);
    if (p == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *pool = (CUmemoryPool)(uintptr_t)p->handle;
    return CUDA_SUCCESS;
}

CUresult gli_cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool, int ptds)
{
    CUresult r = check_dev(dev);

    (void)ptds;
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_lock);
    gl_pool *p = pool_find(pool);
    if (p != NULL)
        g_current[dev] = p;
    pthread_mutex_unlock(&g_lock);
    return p != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The properties (allocation type, location, handle types) describe device
 * memory of the one device gleam serves; nothing in them changes how the
 * sub-allocator works, so they are only required to be given. */
CUresult gls_cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps, int ptds)
{
    (void)ptds;
    if (pool == NULL || poolProps == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    gl_pool *p = pool_new();
    pthread_mutex_unlock(&g_lock);
    if (p == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *pool = (CUmemoryPool)(uintptr_t)p->handle;
    return CUDA_SUCCESS;
}

/* A default pool cannot be destroyed; a pool still current for a device
 * stops being so (the device falls back to its default, as CUDA does). */
CUresult gls_cuMemPoolDestroy(CUmemoryPool pool, int ptds)
{
    CUresult r = CUDA_SUCCESS;

    (void)ptds;
    r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    for (gl_pool **pp = &g_pools; *pp != NULL; pp = &(*pp)->next) {
        gl_pool *p = *pp;
        if (p->handle != (uint64_t)(uintptr_t)pool)
            continue;
        int is_default = 0;
        for (int d = 0; d < GL_POOL_DEVICES; d++)
            is_default |= g_default[d] == p;
        if (is_default)
            break;
        for (int d = 0; d < GL_POOL_DEVICES; d++)
            if (g_current[d] == p)
                g_current[d] = NULL;
        /* Its allocations stay in the owner map under its handle, which is
         * never minted again; freed, they count nowhere. */
        *pp = p->next;
        free(p);
        r = CUDA_SUCCESS;
        break;
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

/* Reads (set == 0) or writes one attribute. As CUDA documents, the
 * high-water marks can only be reset (set to 0), and reserved equals used:
 * sub-allocations reserve exactly what they use. */
static CUresult pool_attribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value,
                               int set)
{
    CUresult r = gl_ready();

    if (r != CUDA_SUCCESS)
        return r;
    if (value == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    int is_reuse = attr >= GL_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES
                   && attr <= GL_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES;
    int is_high = attr == GL_POOL_RESERVED_MEM_HIGH || attr == GL_POOL_USED_MEM_HIGH;
    int is_current = attr == GL_POOL_RESERVED_MEM_CURRENT || attr == GL_POOL_USED_MEM_CURRENT;
    cuuint64_t *u64 = value;
    r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_lock);
    gl_pool *p = pool_find(pool);
    if (p == NULL)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (is_reuse && set)
        p->reuse[attr] = *(int *)value != 0;
    else if (is_reuse)
        *(int *)value = p->reuse[attr];
    else if (attr == GL_POOL_RELEASE_THRESHOLD && set)
        p->release_threshold = *u64;
    else if (attr == GL_POOL_RELEASE_THRESHOLD)
        *u64 = p->release_threshold;
    else if (is_high && set && *u64 == 0)
        p->used_high = p->used;
    else if ((is_high || is_current) && !set)
        *u64 = is_high ? p->used_high : p->used;
    else
        r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&g_lock);
    return r;
}

CUresult gli_cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value,
                                   int ptds)
{
    (void)ptds;
    return pool_attribute(pool, attr, value, 0);
}

CUresult gli_cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value,
                                   int ptds)
{
    (void)ptds;
    return pool_attribute(pool, attr, value, 1);
}

/* Nothing is held beyond what is in use, so there is nothing to trim. */
CUresult gls_cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep, int ptds)
{
    CUresult r = CUDA_SUCCESS;

    (void)minBytesToKeep;
    (void)ptds;
    pthread_mutex_lock(&g_lock);
    r = pool_find(pool) != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&g_lock);
    return r;
}

static CUresult alloc_from(CUdeviceptr *dptr, size_t bytesize, uint64_t pool_handle,
                           CUstream hStream, int ptds)
{
    CUresult r = gl_check_handle(GL_H_STREAM, (uint64_t)(uintptr_t)hStream);

    if (r != CUDA_SUCCESS)
        return r;
    if (dptr == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    /* Allocated in a capture: a memory alloc node, its address fixed now. */
    if (gl_capture_alloc(hStream, ptds, dptr, bytesize, &r))
        return r;
    pthread_mutex_lock(&g_lock);
    if (g_owner == NULL)
        g_owner = gl_hmap_new();
    gl_pool *p = pool_find((CUmemoryPool)(uintptr_t)pool_handle);
    pthread_mutex_unlock(&g_lock);
    if (g_owner == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (p == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = gli_cuMemAlloc(dptr, bytesize, ptds)) != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_lock);
    if (gl_hmap_put(g_owner, *dptr, (void *)(uintptr_t)p->handle) != 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        p->used += bytesize;
        if (p->used > p->used_high)
            p->used_high = p->used;
    }
    pthread_mutex_unlock(&g_lock);
    if (r != CUDA_SUCCESS)
        gli_cuMemFree(*dptr, ptds);
    return r;
}

CUresult gli_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream, int ptds)
{
    CUdevice dev;
    CUmemoryPool pool;
    CUresult r = gli_cuCtxGetDevice(&dev, ptds);

    if (r != CUDA_SUCCESS)
        return r;
    if ((r = gli_cuDeviceGetMemPool(&pool, dev, ptds)) != CUDA_SUCCESS)
        return r;
    return alloc_from(dptr, bytesize, (uint64_t)(uintptr_t)pool, hStream, ptds);
}

CUresult gls_cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                     CUstream hStream, int ptds)
{
    return alloc_from(dptr, bytesize, (uint64_t)(uintptr_t)pool, hStream, ptds);
}

/* Any allocation may be freed in stream order, a cuMemAlloc one too. */
CUresult gls_cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream, int ptds)
{
    uint64_t base, size;
    CUresult r = CUDA_SUCCESS;

    if ((r = gl_check_handle(GL_H_STREAM, (uint64_t)(uintptr_t)hStream)) != CUDA_SUCCESS)
        return r;
    if (gl_capture_free(hStream, ptds, dptr, &r))
        return r; /* a memory free node */
    if (gl_graphmem_program_free(dptr))
        return CUDA_SUCCESS; /* a graph's memory: freed, its address kept for the graph */
    if (!gl_va_is_base(dptr) || !gl_va_find(dptr, &base, &size))
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = gli_cuMemFree(dptr, ptds)) != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_lock);
    void *owner = g_owner != NULL ? gl_hmap_take(g_owner, dptr) : NULL;
    /* The pool may have been destroyed since: count only a live one. */
    gl_pool *p = owner != NULL ? pool_find((CUmemoryPool)owner) : NULL;
    if (p != NULL)
        p->used -= size < p->used ? size : p->used;
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
}
