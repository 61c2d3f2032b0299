/*
 * exec_vmm.c — the server's half of virtual memory management (cuMemCreate,
 * cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease; the interposer keeps the
 * program's reservations, interposer/vmm.c).
 *
 * On the host device a physical allocation is a memfd of its size, and a
 * mapping is that memfd mmap'ed MAP_SHARED|MAP_FIXED over the session's own
 * range, so two mappings of one allocation are two views of the same pages.
 * A mapping joins x->allocs (tagged GL_EXEC_VMM_TAG) only once its access is
 * READWRITE: until then every copy and every kernel access to it fails the
 * executor's range checks, as an access without cuMemSetAccess faults on a
 * GPU. Unmapping puts the session's anonymous memory back over the range.
 *
 * Nothing from the wire is trusted: an id is looked up in this session's
 * table only (another session's id is unknown here), every range must lie in
 * the session's address range, granule-aligned, and overlap nothing the
 * session already has. On the cuda backend the same tables drive the real
 * driver's calls (cudadev_vmm.c) instead of memfds and mmap.
 *
 * Ownership: x->vmm owns its tables and each allocation's fd or driver handle; an allocation
 * lives while its handle is unreleased or a mapping uses it (CUDA's rule).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cudadev/cudadev_vmm.h"
#include "executor.h"
#include "gl_calls.h"
#include "gl_vmm.h"

typedef struct vmm_alloc {
    uint64_t id, size;
    int fd;     /* host device: the memory */
    uint64_t h; /* cuda backend: the driver's handle */
    int released;
    unsigned maps;
    struct vmm_alloc *next;
} vmm_alloc;

typedef struct vmm_map {
    uint64_t ptr, size;
    vmm_alloc *a;
    int access; /* in x->allocs */
    struct vmm_map *next;
} vmm_map;

/* Few entries (a program maps a handful of ranges): lists, searched whole. */
struct gl_vmm {
    vmm_alloc *allocs; /* each owned */
    vmm_map *maps;     /* each owned */
};

static struct gl_vmm *state(gl_exec *x)
{
    if (x->vmm == NULL)
        x->vmm = calloc(1, sizeof *x->vmm);
    return x->vmm;
}

static vmm_alloc *find_alloc(struct gl_vmm *v, uint64_t id)
{
    for (vmm_alloc *a = v != NULL ? v->allocs : NULL; a != NULL; a = a->next)
        if (a->id == id)
            return a;
    return NULL;
}

/* The link that points at the mapping of exactly [ptr, ptr + size), or NULL. */
static vmm_map **find_map(struct gl_vmm *v, uint64_t ptr, uint64_t size)
{
    for (vmm_map **m = v != NULL ? &v->maps : NULL; m != NULL && *m != NULL; m = &(*m)->next)
        if ((*m)->ptr == ptr && (*m)->size == size)
            return m;
    return NULL;
}

static int on_host(gl_exec *x)
{
    return x->be->kind == GL_BACKEND_HOST;
}

static void free_alloc(gl_exec *x, vmm_alloc *a)
{
    if (on_host(x)) {
        close(a->fd);
        x->live_bytes -= a->size;
    } else {
        gl_cuda_vmm_release(x, a->h); /* nothing to do if the driver refuses */
    }
    free(a);
}

/* Drops an allocation nobody holds any more: its memory goes back. */
static void drop_if_unused(gl_exec *x, vmm_alloc *a)
{
    if (!a->released || a->maps > 0)
        return;
    for (vmm_alloc **l = &x->vmm->allocs; *l != NULL; l = &(*l)->next)
        if (*l == a) {
            *l = a->next;
            break;
        }
    free_alloc(x, a);
}

/* [p, p + n) inside the session's range, granule-aligned, and clear of the
 * session's allocations and mappings. */
static int range_free(gl_exec *x, uint64_t p, uint64_t n)
{
    if (n == 0 || p % GL_VMM_GRANULE != 0 || n % GL_VMM_GRANULE != 0 || p < x->va_base
        || n > x->va_size || p - x->va_base > x->va_size - n)
        return 0;
    size_t i = gl_ranges_upper(&x->allocs, p);
    if (i > 0 && x->allocs.r[i - 1].base + x->allocs.r[i - 1].size > p)
        return 0;
    if (i < x->allocs.n && x->allocs.r[i].base < p + n)
        return 0;
    for (const vmm_map *m = x->vmm != NULL ? x->vmm->maps : NULL; m != NULL; m = m->next)
        if (m->ptr < p + n && p < m->ptr + m->size)
            return 0;
    return 1;
}

CUresult gx_glVmmCreate(gl_exec *x, cuuint64_t id, size_t size)
{
    struct gl_vmm *v = state(x);
    if (v == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (size == 0 || size % GL_VMM_GRANULE != 0 || find_alloc(v, id) != NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (on_host(x) && size > x->be->memory_limit - x->live_bytes)
        return CUDA_ERROR_OUT_OF_MEMORY;
    vmm_alloc *a = calloc(1, sizeof *a);
    if (a == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!on_host(x)) {
        CUresult r = gl_cuda_vmm_create(x, size, &a->h);
        if (r != CUDA_SUCCESS) {
            free(a);
            return r;
        }
        a->fd = -1;
    } else {
        /* Pages appear when touched, as the session's other memory does. */
        a->fd = memfd_create("gleam-vmm", MFD_CLOEXEC);
        if (a->fd < 0 || ftruncate(a->fd, (off_t)size) != 0) {
            if (a->fd >= 0)
                close(a->fd);
            free(a);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        x->live_bytes += size;
    }
    a->id = id;
    a->size = size;
    a->next = v->allocs;
    v->allocs = a;
    return CUDA_SUCCESS;
}

CUresult gx_glVmmRelease(gl_exec *x, cuuint64_t id)
{
    vmm_alloc *a = find_alloc(x->vmm, id);
    if (a == NULL || a->released)
        return CUDA_ERROR_INVALID_VALUE;
    a->released = 1;
    drop_if_unused(x, a);
    return CUDA_SUCCESS;
}

CUresult gx_glVmmMap(gl_exec *x, CUdeviceptr ptr, size_t size, size_t offset, cuuint64_t id)
{
    vmm_alloc *a = find_alloc(x->vmm, id);
    if (a == NULL || a->released || offset % GL_VMM_GRANULE != 0 || offset > a->size
        || size > a->size - offset || !range_free(x, ptr, size))
        return CUDA_ERROR_INVALID_VALUE;
    vmm_map *m = calloc(1, sizeof *m);
    if (m == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = CUDA_SUCCESS;
    if (!on_host(x))
        r = gl_cuda_vmm_map(x, ptr, size, offset, a->h);
    else if (mmap((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                  a->fd, (off_t)offset) == MAP_FAILED)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r != CUDA_SUCCESS) {
        free(m);
        return r;
    }
    *m = (vmm_map){ptr, size, a, 0, x->vmm->maps};
    x->vmm->maps = m;
    a->maps++;
    return CUDA_SUCCESS;
}

/* Puts the mapping into the session's allocations (READWRITE) or out (0). */
static CUresult set_access(gl_exec *x, vmm_map *m, unsigned int flags)
{
    if (flags == GL_CU_MEM_ACCESS_FLAGS_PROT_READWRITE && !m->access) {
        /* cuMemAlloc may not have placed anything over it meanwhile */
        size_t i = gl_ranges_upper(&x->allocs, m->ptr);
        if ((i > 0 && x->allocs.r[i - 1].base + x->allocs.r[i - 1].size > m->ptr)
            || (i < x->allocs.n && x->allocs.r[i].base < m->ptr + m->size))
            return CUDA_ERROR_INVALID_VALUE;
        if (gl_ranges_reserve(&x->allocs) != 0)
            return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = on_host(x) ? CUDA_SUCCESS
                                : gl_cuda_vmm_access(x, m->ptr, m->size, (int)flags);
        if (r != CUDA_SUCCESS)
            return r;
        gl_ranges_insert(&x->allocs, i, (gl_range){m->ptr, m->size, GL_EXEC_VMM_TAG});
        m->access = 1;
    } else if (flags == 0 && m->access) {
        /* out of the session's memory even if the driver kept the access */
        if (!on_host(x))
            gl_cuda_vmm_access(x, m->ptr, m->size, 0);
        long i = gl_ranges_index_of_base(&x->allocs, m->ptr);
        if (i >= 0)
            gl_ranges_remove(&x->allocs, (size_t)i);
        m->access = 0;
    } else if (flags != 0 && flags != GL_CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult gx_glVmmSetAccess(gl_exec *x, CUdeviceptr ptr, size_t size, unsigned int flags)
{
    vmm_map **m = find_map(x->vmm, ptr, size);
    return m != NULL ? set_access(x, *m, flags) : CUDA_ERROR_INVALID_VALUE;
}

CUresult gx_glVmmUnmap(gl_exec *x, CUdeviceptr ptr, size_t size)
{
    vmm_map **link = find_map(x->vmm, ptr, size);
    if (link == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    vmm_map *m = *link;
    /* Out of the session's memory first, then unmapped: if that fails, the
     * mapping stays in the tables, without access. On the host device the
     * session's own anonymous memory goes back over the range. */
    set_access(x, m, 0);
    if (!on_host(x)) {
        CUresult r = gl_cuda_vmm_unmap(x, ptr, size);
        if (r != CUDA_SUCCESS)
            return r;
    } else if (mmap((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0)
               == MAP_FAILED) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *link = m->next;
    vmm_alloc *a = m->a;
    free(m);
    a->maps--;
    drop_if_unused(x, a);
    return CUDA_SUCCESS;
}

void gl_exec_vmm_free(gl_exec *x)
{
    struct gl_vmm *v = x->vmm;
    if (v == NULL)
        return;
    /* A GPU's mappings go before the backend frees the range they lie in; the
     * host device's go with the session's range. */
    for (vmm_map *m = v->maps, *next; m != NULL; m = next) {
        next = m->next;
        if (!on_host(x))
            gl_cuda_vmm_unmap(x, m->ptr, m->size);
        free(m);
    }
    for (vmm_alloc *a = v->allocs, *next; a != NULL; a = next) {
        next = a->next;
        free_alloc(x, a);
    }
    free(v);
    x->vmm = NULL;
}
