/*
 * pinned.c — "page-locked" host memory. The GPU is on another machine, so
 * there is nothing to lock: cuMemAllocHost/cuMemHostAlloc hand out
 * page-aligned host memory and remember it, so that cuMemFreeHost and the
 * pointer queries can tell it from other host memory. cuMemHostRegister
 * adds the program's own memory to the same table (owned 0: never freed
 * here), with the flags it gave.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gl_client_gen.h"
#include "internal.h"

typedef struct {
    uintptr_t base;
    size_t size;
    unsigned int flags; /* as given to cuMemHostAlloc / cuMemHostRegister */
    int owned;          /* allocated here (cuMemFreeHost frees it) */
} block;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static block *g_b;
static size_t g_n, g_cap;

/* Appends a block (lock held); -1 when out of memory. */
static int add_block(block b)
{
    if (g_n == g_cap) {
        size_t cap = g_cap ? g_cap * 2 : 32;
        block *nb = realloc(g_b, cap * sizeof *nb);
        if (nb == NULL)
            return -1;
        g_b = nb;
        g_cap = cap;
    }
    g_b[g_n++] = b;
    return 0;
}

/* Drops the block that starts at p and is (owned) or is not (!owned)
 * allocated here; whether there was one. */
static int take_block(const void *p, int owned)
{
    int found = 0;

    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_n && !found; i++) {
        if (g_b[i].base == (uintptr_t)p && g_b[i].owned == owned) {
            g_b[i] = g_b[--g_n];
            found = 1;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return found;
}

static CUresult host_alloc(void **pp, size_t bytesize, unsigned int flags)
{
    long page = sysconf(_SC_PAGESIZE);
    void *p = NULL;
    CUresult r = gl_ready();

    if (r != CUDA_SUCCESS)
        return r;
    if (pp == NULL || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (posix_memalign(&p, page > 0 ? (size_t)page : 4096, bytesize) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_lock);
    int failed = add_block((block){(uintptr_t)p, bytesize, flags, 1});
    pthread_mutex_unlock(&g_lock);
    if (failed) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult gli_cuMemAllocHost(void **pp, size_t bytesize, int ptds)
{
    (void)ptds;
    return host_alloc(pp, bytesize, 0);
}

/* Flags (portable, mapped, write-combined) change nothing for memory that
 * the remote GPU reaches only through copies. */
CUresult gli_cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags, int ptds)
{
    (void)ptds;
    return host_alloc(pp, bytesize, Flags);
}

CUresult gls_cuMemFreeHost(void *p, int ptds)
{
    (void)ptds;
    if (!take_block(p, 1))
        return CUDA_ERROR_INVALID_VALUE;
    free(p);
    return CUDA_SUCCESS;
}

int gl_pinned_find(const void *p, uintptr_t *base, size_t *size)
{
    int found = 0;

    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_n && !found; i++) {
        if ((uintptr_t)p - g_b[i].base < g_b[i].size) {
            found = 1;
            *base = g_b[i].base;
            *size = g_b[i].size;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return found;
}

/* CU_MEMHOSTREGISTER_PORTABLE, DEVICEMAP, IOMEMORY, READ_ONLY. Like pinned
 * memory, registered memory reaches the remote GPU only through copies, so
 * registering changes nothing but what the queries answer. */
#define GL_HOST_REGISTER_FLAGS 0xfu

CUresult gls_cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags, int ptds)
{
    CUresult r = CUDA_SUCCESS;

    (void)ptds;
    if (p == NULL || bytesize == 0 || (Flags & ~GL_HOST_REGISTER_FLAGS)
        || (uintptr_t)p > UINTPTR_MAX - bytesize)
        return CUDA_ERROR_INVALID_VALUE;
    r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_n && r == CUDA_SUCCESS; i++)
        if ((uintptr_t)p < g_b[i].base + g_b[i].size && g_b[i].base < (uintptr_t)p + bytesize)
            r = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    if (r == CUDA_SUCCESS && add_block((block){(uintptr_t)p, bytesize, Flags, 0}) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&g_lock);
    return r;
}

/* An address inside a registered range but not at its start is
 * CUDA_ERROR_INVALID_VALUE (the base must be the one registered, as NVIDIA
 * documents; its driver answers so), one no registration holds
 * ..._NOT_REGISTERED. */
CUresult gls_cuMemHostUnregister(void *p, int ptds)
{
    uintptr_t base;
    size_t size;

    (void)ptds;
    if (take_block(p, 0))
        return CUDA_SUCCESS;
    return gl_pinned_find(p, &base, &size) ? CUDA_ERROR_INVALID_VALUE
                                           : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

CUresult gls_cuMemHostGetFlags(unsigned int *pFlags, void *p, int ptds)
{
    CUresult r = CUDA_SUCCESS;

    (void)ptds;
    if (pFlags == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_n; i++) {
        if ((uintptr_t)p - g_b[i].base < g_b[i].size) {
            *pFlags = g_b[i].flags;
            r = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}
