/*
 * hostdev.c — the host backend's session lifetime and memory. A session's
 * device range is one anonymous MAP_NORESERVE mapping, so device pointers are
 * host pointers and pages exist only once touched; the executor has checked
 * every range before a call gets here.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hostdev.h"
#include "mem/vaband.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000 /* Linux 4.17; older kernels take it as a hint */
#endif

gl_hsess *gl_hsess_of(void)
{
    return gl_exec_current()->priv;
}

void *gl_hobj_new(int kind, size_t size)
{
    gl_hsess *s = gl_hsess_of();
    gl_hobj *o = calloc(1, size);
    if (o == NULL)
        return NULL;
    o->kind = kind;
    o->next = s->objs.next;
    o->prev = &s->objs;
    s->objs.next->prev = o;
    s->objs.next = o;
    return o;
}

void gl_hobj_free(void *obj)
{
    gl_hobj *o = obj;
    o->prev->next = o->next;
    o->next->prev = o->prev;
    if (o->kind == GL_H_MOD || o->kind == GL_H_LIB)
        gl_himage_free((gl_hmod *)o);
    free(o);
}

void gl_hobj_free_all(gl_hsess *s)
{
    while (s->objs.next != &s->objs)
        gl_hobj_free(s->objs.next);
}

/* A new session's range in the band (vaband.h), or MAP_FAILED. */
static void *map_in_band(uint64_t size)
{
    void *p = gl_va_band_map(size);
    return p != NULL ? p : MAP_FAILED;
}

static int host_open(gl_exec *x, char *err, size_t err_len)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t size = x->va_size ? x->va_size : x->be->memory_limit;
    size = (size + page - 1) / page * page;
    gl_hsess *s = calloc(1, sizeof *s);
    if (s == NULL) {
        gl_set_err(err, err_len, "out of memory");
        return -1;
    }
    /* A requested range (a session moving here) is mapped at that address or
     * not at all: MAP_FIXED_NOREPLACE fails where anything is mapped, and a
     * kernel without it treats the address as a hint, caught below. */
    void *want = (void *)(uintptr_t)x->va_base;
    int fixed = want != NULL ? MAP_FIXED_NOREPLACE : 0;
    void *p = want != NULL ? MAP_FAILED : map_in_band(size);
    if (p == MAP_FAILED)
        p = mmap(want, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | fixed, -1, 0);
    if (p == MAP_FAILED) {
        gl_set_err(err, err_len, "cannot reserve %llu bytes of address space%s: %s",
                   (unsigned long long)size, want ? " at the requested address" : "",
                   strerror(errno));
        free(s);
        return -1;
    }
    if (want != NULL && p != want) {
        munmap(p, size);
        gl_set_err(err, err_len, "the requested address range 0x%llx is in use on this server",
                   (unsigned long long)x->va_base);
        free(s);
        return -1;
    }
#ifdef MADV_HUGEPAGE
    /* Device memory is touched in bulk (copies, kernels): huge pages take a
     * 1 GiB upload from 262144 page faults to 512. Advice only; ignored if
     * the kernel has transparent huge pages off. */
    madvise(p, size, MADV_HUGEPAGE);
#endif
    s->objs.next = s->objs.prev = &s->objs;
    s->primary.h.kind = GL_H_CTX;
    s->primary.primary = 1;
    x->va_base = (uint64_t)(uintptr_t)p;
    x->va_size = size;
    x->priv = s;
    return 0;
}

static void host_close(gl_exec *x)
{
    gl_hsess *s = x->priv;
    gl_hobj_free_all(s);
    munmap((void *)(uintptr_t)x->va_base, x->va_size);
    free(s);
}

static CUresult host_unmap(gl_exec *x, uint64_t p, uint64_t size)
{
    (void)x;
    /* Whole pages inside the freed range go back to the OS and read as zero
     * again; the partial pages at the ends may be shared with a neighbour. */
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t lo = (p + page - 1) / page * page, hi = (p + size) / page * page;
    if (hi <= lo) {
        memset((void *)(uintptr_t)p, 0, size);
        return CUDA_SUCCESS;
    }
    madvise((void *)(uintptr_t)lo, hi - lo, MADV_DONTNEED);
    memset((void *)(uintptr_t)p, 0, lo - p);
    memset((void *)(uintptr_t)hi, 0, p + size - hi);
    return CUDA_SUCCESS;
}

/* A kernel fault loses the context, as on a GPU: from then on every waiting
 * call of the session reports the fault (the deferred error is reported and
 * cleared per reply, so it is set again before each batch). */
static void host_run_begin(gl_exec *x)
{
    gl_hsess *s = x->priv;
    if (s->sticky != CUDA_SUCCESS)
        x->deferred = s->sticky;
}

const gl_backend_ops gl_host_ops = {host_open, host_close, host_unmap, host_run_begin};

gl_backend *gl_backend_host_new(uint64_t memory_limit)
{
    gl_backend *be = calloc(1, sizeof *be);
    if (be == NULL)
        return NULL;
    be->kind = GL_BACKEND_HOST;
    be->ops = &gl_host_ops;
    be->memory_limit = memory_limit;
    memcpy(be->fns, gl_host_fns, sizeof be->fns);
    return be;
}

/* ---------------------------------------------------------------- memory */

CUresult hb_glMemAlloc(CUdeviceptr dptr, size_t bytesize)
{
    (void)dptr, (void)bytesize; /* the mapping already covers the range */
    return CUDA_SUCCESS;
}

CUresult hb_glMemFree(CUdeviceptr dptr)
{
    gl_exec *x = gl_exec_current();
    return host_unmap(x, dptr, gl_exec_alloc_size(x, dptr));
}

CUresult hb_cuMemGetInfo(size_t *free_bytes, size_t *total)
{
    gl_exec *x = gl_exec_current();
    *total = x->be->memory_limit;
    *free_bytes = x->be->memory_limit - x->live_bytes;
    return CUDA_SUCCESS;
}

CUresult hb_glMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n, CUstream stream)
{
    (void)stream;
    memcpy((void *)(uintptr_t)dst, src, n);
    return CUDA_SUCCESS;
}

CUresult hb_glMemcpyDtoH(void *dst, CUdeviceptr src, size_t n, CUstream stream)
{
    (void)stream;
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

CUresult hb_cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

CUresult hb_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream)
{
    (void)stream;
    return hb_cuMemcpyDtoD(dst, src, n);
}

/* Pitched copies: the dispatch checked each device side's whole span
 * (gl_span.h) against the session's memory and the packed side's length, so
 * no row below leaves them. */
CUresult hb_glMemcpy2DHtoD(CUdeviceptr dst, size_t dpitch, const void *src, size_t width,
                           size_t height, CUstream stream)
{
    (void)stream;
    if (width == 0)
        return CUDA_SUCCESS; /* the span check let any row count through */
    for (size_t y = 0; y < height; y++)
        memcpy((void *)(uintptr_t)(dst + y * dpitch), (const uint8_t *)src + y * width, width);
    return CUDA_SUCCESS;
}

CUresult hb_glMemcpy2DDtoH(void *dst, CUdeviceptr src, size_t spitch, size_t width,
                           size_t height, CUstream stream)
{
    (void)stream;
    if (width == 0)
        return CUDA_SUCCESS; /* the span check let any row count through */
    for (size_t y = 0; y < height; y++)
        memcpy((uint8_t *)dst + y * width, (const void *)(uintptr_t)(src + y * spitch), width);
    return CUDA_SUCCESS;
}

CUresult hb_glMemcpy2DDtoD(CUdeviceptr dst, size_t dpitch, CUdeviceptr src, size_t spitch,
                           size_t width, size_t height, CUstream stream)
{
    (void)stream;
    if (width == 0)
        return CUDA_SUCCESS; /* the span check let any row count through */
    for (size_t y = 0; y < height; y++)
        memmove((void *)(uintptr_t)(dst + y * dpitch), (const void *)(uintptr_t)(src + y * spitch),
                width);
    return CUDA_SUCCESS;
}

/* The dispatch checked N * width, which can wrap: check again without wrapping. */
static void *memset_target(CUdeviceptr dst, size_t n, size_t width)
{
    if (n > SIZE_MAX / width || dst % width != 0)
        return NULL;
    return gl_exec_host_ptr(gl_exec_current(), dst, (uint64_t)n * width);
}

CUresult hb_cuMemsetD8(CUdeviceptr dst, unsigned char uc, size_t n)
{
    uint8_t *p = memset_target(dst, n, 1);
    if (p == NULL)
        return n == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    memset(p, uc, n);
    return CUDA_SUCCESS;
}

CUresult hb_cuMemsetD16(CUdeviceptr dst, unsigned short us, size_t n)
{
    uint16_t *p = memset_target(dst, n, 2);
    if (p == NULL)
        return n == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++)
        p[i] = us;
    return CUDA_SUCCESS;
}

CUresult hb_cuMemsetD32(CUdeviceptr dst, unsigned int ui, size_t n)
{
    uint32_t *p = memset_target(dst, n, 4);
    if (p == NULL)
        return n == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++)
        p[i] = ui;
    return CUDA_SUCCESS;
}

CUresult hb_cuMemsetD8Async(CUdeviceptr dst, unsigned char uc, size_t n, CUstream stream)
{
    (void)stream;
    return hb_cuMemsetD8(dst, uc, n);
}

CUresult hb_cuMemsetD16Async(CUdeviceptr dst, unsigned short us, size_t n, CUstream stream)
{
    (void)stream;
    return hb_cuMemsetD16(dst, us, n);
}

CUresult hb_cuMemsetD32Async(CUdeviceptr dst, unsigned int ui, size_t n, CUstream stream)
{
    (void)stream;
    return hb_cuMemsetD32(dst, ui, n);
}
