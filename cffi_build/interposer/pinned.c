/*
 * pinned.c — "page-locked" host memory. The GPU is on another machine, so
 * there is nothing to lock: cuMemAllocHost/cuMemHostAlloc hand out
 * page-aligned host memory and remember it, so that cuMemFreeHost and the
 * pointer queries can tell it from other host memory.
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
} block;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static block *g_b;
static size_t g_n, g_cap;

static CUresult host_alloc(void **pp, size_t bytesize)
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
    if (g_n == g_cap) {
        size_t cap = g_cap ? g_cap * 2 : 32;
        block *b = realloc(g_b, cap * sizeof *b);
        if (b == NULL) {
            pthread_mutex_unlock(&g_lock);
            free(p);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        g_b = b;
        g_cap = cap;
    }
    g_b[g_n++] = (block){(uintptr_t)p, bytesize};
    pthread_mutex_unlock(&g_lock);
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult gli_cuMemAllocHost(void **pp, size_t bytesize, int ptds)
{
    (void)ptds;
    return host_alloc(pp, bytesize);
}

/* Flags (portable, mapped, write-combined) change nothing for memory that
 * the remote GPU reaches only through copies. */
CUresult gli_cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags, int ptds)
{
    (void)Flags;
    (void)ptds;
    return host_alloc(pp, bytesize);
}

CUresult gli_cuMemFreeHost(void *p, int ptds)
{
    CUresult r = gl_ready();

    (void)ptds;
    if (r != CUDA_SUCCESS)
        return r;
    r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_n; i++) {
        if (g_b[i].base == (uintptr_t)p) {
            g_b[i] = g_b[--g_n];
            r = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    if (r == CUDA_SUCCESS)
        free(p);
    return r;
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
