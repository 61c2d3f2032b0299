/*
 * pinned.c — "page-locked" host memory. The GPU is on another machine, so
 * there is nothing to lock: cuMemAllocHost/cuMemHostAlloc hand out
 * page-aligned host memory and remember it, so that cuMemFreeHost and the
 * pointer queries can tell it from other host memory. cuMemHostRegister
 * adds the program's own memory to the same table (owned 0: never freed
 * here), with the flags it gave.
 *
 * Mapped memory (DEVICEMAP) is different: kernels reach it, so it is mirrored
 * (mirror.c). cuMemHostAlloc with DEVICEMAP hands out a mirror's view, which
 * lives at its device address (the program may hand that pointer to kernels)
 * and is not in this table. Registered and other pinned memory is mirrored, at
 * a device address of its own, when the program asks for its device pointer
 * (gl_pinned_map): before that no kernel can name it. NVIDIA's driver maps all
 * pinned memory under unified addressing, so gleam does not refuse the
 * question for memory registered or allocated without DEVICEMAP.
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
static size_t g_n;
static uint32_t g_cap;

/* Appends a block (lock held); -1 when out of memory. */
static int add_block(block b)
{
    if (gl_grow(&g_b, &g_cap, g_n, sizeof *g_b, 32) != 0)
        return -1;
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

/* Mapped memory is mirrored (mirror.c): a device address the server knows. */
static CUresult mapped_host_alloc(void **pp, size_t bytesize, unsigned int Flags)
{
    uint64_t dev;
    CUresult r = gl_ready();

    if (r != CUDA_SUCCESS)
        return r;
    if (pp == NULL || bytesize == 0 || (Flags & ~7u))
        return CUDA_ERROR_INVALID_VALUE;
    r = gl_mirror_new(GL_MIRROR_HOSTALLOC, NULL, bytesize, Flags, &dev);
    if (r == CUDA_SUCCESS)
        *pp = (void *)(uintptr_t)dev;
    return r;
}

/* Portable and write-combined change nothing for memory that the remote GPU
 * reaches only through copies. */
CUresult gli_cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags, int ptds)
{
    (void)ptds;
    if (Flags & GL_CU_MEMHOSTALLOC_DEVICEMAP)
        return mapped_host_alloc(pp, bytesize, Flags);
    return host_alloc(pp, bytesize, Flags);
}

CUresult gls_cuMemFreeHost(void *p, int ptds)
{
    (void)ptds;
    if (gl_mirror_free(GL_MIRROR_HOSTALLOC, p) == CUDA_SUCCESS)
        return CUDA_SUCCESS;
    if (!take_block(p, 1))
        return CUDA_ERROR_INVALID_VALUE;
    gl_mirror_free(GL_MIRROR_REGISTERED, p); /* mapped when its device pointer was asked */
    free(p);
    return CUDA_SUCCESS;
}

CUresult gl_pinned_map(const void *p)
{
    static pthread_mutex_t one_at_a_time = PTHREAD_MUTEX_INITIALIZER;
    gl_mirror_info m;
    uintptr_t base = 0;
    size_t size = 0;
    unsigned int flags = 0;
    uint64_t dev;
    CUresult r = CUDA_ERROR_INVALID_VALUE;

    pthread_mutex_lock(&one_at_a_time); /* one mirror per block, whoever asks */
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_n; i++) {
        if ((uintptr_t)p - g_b[i].base < g_b[i].size) {
            base = g_b[i].base, size = g_b[i].size, flags = g_b[i].flags;
            r = CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&g_lock);
    if (r == CUDA_SUCCESS && !gl_mirror_by_view((const void *)base, &m))
        r = gl_mirror_new(GL_MIRROR_REGISTERED, (void *)base, size, flags, &dev);
    pthread_mutex_unlock(&one_at_a_time);
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
    /* DEVICEMAP is honoured when the device pointer is asked for (gl_pinned_map):
     * registered memory has a device address of its own, so no kernel can reach
     * it before, and a program that only copies from it pays nothing. */
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
    if (!take_block(p, 0))
        return gl_pinned_find(p, &base, &size) ? CUDA_ERROR_INVALID_VALUE
                                               : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    /* A mapped registration hands the program what the device wrote first. */
    CUresult r = gl_mirror_free(GL_MIRROR_REGISTERED, p);
    return r == CUDA_ERROR_INVALID_VALUE ? CUDA_SUCCESS : r;
}

CUresult gls_cuMemHostGetFlags(unsigned int *pFlags, void *p, int ptds)
{
    CUresult r = CUDA_SUCCESS;

    (void)ptds;
    if (pFlags == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    gl_mirror_info m;
    if (gl_mirror_by_view(p, &m) && m.kind == GL_MIRROR_HOSTALLOC) {
        *pFlags = m.flags;
        return CUDA_SUCCESS;
    }
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
