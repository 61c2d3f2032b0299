/*
 * vmm.c — virtual memory management (cuMemAddressReserve, cuMemCreate,
 * cuMemMap, cuMemSetAccess, ...), checked and kept here, made real by the
 * server (src/exec/exec_vmm.c), which checks everything again.
 *
 * A reservation is a range of the session's addresses taken from gleam's
 * allocator and held (cuMemFree of it is refused); the server learns of it
 * only through the mappings placed in it. A handle is minted here; the
 * server binds its allocation to it. cuMemUnmap and cuMemSetAccess take any
 * range that whole mappings tile exactly, as vectorAddMMAP passes one range
 * made of several mappings; each mapping goes to the server on its own.
 *
 * Shareable handles (POSIX fd, fabric, Win32) are IPC, refused as gleam
 * refuses IPC; read-only access is refused (the host device's kernels cannot
 * be stopped from writing a page they can read); compression is a hint that
 * the device answers with ordinary memory (GENERIC_COMPRESSION_SUPPORTED 0).
 *
 * State: the tables below, under one lock; the server's calls are made with
 * it held, so a mapping's record and the server's agree.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "gl_client_gen.h"
#include "gl_vmm.h"
#include "internal.h"

typedef struct {
    uint64_t base, size;
} reservation;

typedef struct {
    CUmemGenericAllocationHandle id;
    uint64_t size;
    CUmemAllocationProp prop;
    unsigned refs; /* cuMemCreate's and cuMemRetainAllocationHandle's, less releases */
    unsigned maps;
} allocation;

typedef struct {
    uint64_t ptr, size;
    allocation *a;
    unsigned long long access;
} mapping;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static reservation *g_res;
static size_t g_nres;
static uint32_t g_capres;
static allocation **g_allocs;
static size_t g_nallocs;
static uint32_t g_capallocs;
static mapping *g_maps;
static size_t g_nmaps;
static uint32_t g_capmaps;
static uint64_t g_serial;

static allocation *find_alloc(CUmemGenericAllocationHandle id)
{
    for (size_t i = 0; i < g_nallocs; i++)
        if (g_allocs[i]->id == id && g_allocs[i]->refs > 0)
            return g_allocs[i];
    return NULL;
}

/* The server frees an allocation once neither a handle nor a mapping holds it:
 * it learns of the release only then, so a handle retained from a mapping
 * (cuMemRetainAllocationHandle) needs no server call. */
static CUresult drop_if_unused(allocation *a, int ptds)
{
    if (a->refs > 0 || a->maps > 0)
        return CUDA_SUCCESS;
    CUresult r = glw_glVmmRelease(a->id, ptds);
    for (size_t i = 0; i < g_nallocs; i++)
        if (g_allocs[i] == a) {
            g_allocs[i] = g_allocs[--g_nallocs];
            break;
        }
    free(a);
    return r;
}

static long find_reservation(uint64_t p, uint64_t n)
{
    for (size_t i = 0; i < g_nres; i++)
        if (p >= g_res[i].base && n <= g_res[i].size && p - g_res[i].base <= g_res[i].size - n)
            return (long)i;
    return -1;
}

static int overlaps_map(uint64_t p, uint64_t n)
{
    for (size_t i = 0; i < g_nmaps; i++)
        if (g_maps[i].ptr < p + n && p < g_maps[i].ptr + g_maps[i].size)
            return 1;
    return 0;
}

/* Whole mappings tile [p, p + n) exactly, without gaps. */
static int tiled(uint64_t p, uint64_t n)
{
    uint64_t covered = 0;
    for (size_t i = 0; i < g_nmaps; i++) {
        const mapping *m = &g_maps[i];
        if (m->ptr < p + n && p < m->ptr + m->size) {
            if (m->ptr < p || m->ptr + m->size > p + n)
                return 0;
            covered += m->size;
        }
    }
    return n > 0 && covered == n;
}

/* A device allocation of device 0, without shareable handles. */
static CUresult check_prop(const char *entry, const CUmemAllocationProp *prop)
{
    if (prop == NULL || prop->type != GL_CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    if (prop->location.type != GL_CU_MEM_LOCATION_TYPE_DEVICE) {
        gl_log(GL_LOG_ERROR, entry, "%s of host memory is not supported because the device "
               "reports host-memory VMM unsupported; returning CUDA_ERROR_NOT_SUPPORTED", entry);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (prop->location.id != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    if (prop->requestedHandleTypes != 0) {
        gl_log(GL_LOG_ERROR, entry, "%s with a shareable handle type is not supported because "
               "shareable handles are IPC, and each process has its own gleam session, which no "
               "other can reach; returning CUDA_ERROR_NOT_SUPPORTED", entry);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return CUDA_SUCCESS;
}

CUresult gls_cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                           CUmemAllocationGranularity_flags option, int ptds)
{
    (void)ptds;
    if (granularity == NULL || (option != 0 && option != 1))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_prop("cuMemGetAllocationGranularity", prop);
    if (r == CUDA_SUCCESS)
        *granularity = (size_t)GL_VMM_GRANULE;
    return r;
}

CUresult gls_cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                 CUdeviceptr addr, unsigned long long flags, int ptds)
{
    (void)ptds;
    long page = sysconf(_SC_PAGESIZE);
    /* addr is a hint (NVIDIA's documentation): gleam's allocator places it. */
    (void)addr;
    if (ptr == NULL || size == 0 || flags != 0 || page <= 0 || size % (size_t)page != 0
        || (alignment & (alignment - 1)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t align = alignment > GL_VMM_GRANULE ? alignment : GL_VMM_GRANULE, base;
    pthread_mutex_lock(&g_lock);
    CUresult r = gl_grow(&g_res, &g_capres, g_nres, sizeof *g_res, 8) != 0
                     ? CUDA_ERROR_OUT_OF_MEMORY : gl_va_alloc_aligned(size, align, &base);
    if (r == CUDA_SUCCESS) {
        gl_va_hold(base); /* cuMemFree of a reservation is the program's error */
        g_res[g_nres++] = (reservation){base, size};
        *ptr = base;
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

CUresult gls_cuMemAddressFree(CUdeviceptr ptr, size_t size, int ptds)
{
    (void)ptds;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    long i = find_reservation(ptr, size);
    /* Still mapped: refused, so no mapping outlives its addresses. */
    if (i >= 0 && g_res[i].base == ptr && g_res[i].size == size && !overlaps_map(ptr, size)) {
        r = gl_va_free(ptr);
        if (r == CUDA_SUCCESS)
            g_res[i] = g_res[--g_nres];
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

CUresult gls_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                         const CUmemAllocationProp *prop, unsigned long long flags, int ptds)
{
    if (handle == NULL || size == 0 || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_prop("cuMemCreate", prop);
    if (r != CUDA_SUCCESS)
        return r;
    if (size % GL_VMM_GRANULE != 0)
        return CUDA_ERROR_INVALID_VALUE;
    allocation *a = calloc(1, sizeof *a);
    if (a == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_lock);
    a->id = 0x6776000000000000ull | ++g_serial;
    a->size = size;
    a->refs = 1;
    a->prop = *prop;
    a->prop.allocFlags.compressionType = 0; /* ordinary memory: the device compresses none */
    r = gl_grow(&g_allocs, &g_capallocs, g_nallocs, sizeof *g_allocs, 8) != 0
            ? CUDA_ERROR_OUT_OF_MEMORY : glw_glVmmCreate(a->id, size, ptds);
    if (r == CUDA_SUCCESS) {
        g_allocs[g_nallocs++] = a;
        *handle = a->id;
    } else {
        free(a);
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

CUresult gls_cuMemRelease(CUmemGenericAllocationHandle handle, int ptds)
{
    pthread_mutex_lock(&g_lock);
    allocation *a = find_alloc(handle);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (a != NULL) {
        a->refs--;
        r = drop_if_unused(a, ptds);
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

CUresult gls_cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr,
                                         int ptds)
{
    (void)ptds;
    uint64_t p = (uint64_t)(uintptr_t)addr;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (handle == NULL)
        return r;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_nmaps; i++)
        if (p >= g_maps[i].ptr && p - g_maps[i].ptr < g_maps[i].size) {
            g_maps[i].a->refs++; /* a mapping holds it: the server has it still */
            *handle = g_maps[i].a->id;
            r = CUDA_SUCCESS;
        }
    pthread_mutex_unlock(&g_lock);
    return r;
}

CUresult gls_cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                    CUmemGenericAllocationHandle handle, int ptds)
{
    (void)ptds;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    allocation *a = find_alloc(handle);
    if (a != NULL && prop != NULL) {
        *prop = a->prop;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

CUresult gls_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                      CUmemGenericAllocationHandle handle, unsigned long long flags, int ptds)
{
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    allocation *a = find_alloc(handle);
    if (a != NULL && flags == 0 && size > 0 && ptr % GL_VMM_GRANULE == 0
        && size % GL_VMM_GRANULE == 0 && offset % GL_VMM_GRANULE == 0 && offset <= a->size
        && size <= a->size - offset && find_reservation(ptr, size) >= 0
        && !overlaps_map(ptr, size))
        r = gl_grow(&g_maps, &g_capmaps, g_nmaps, sizeof *g_maps, 8) != 0
                ? CUDA_ERROR_OUT_OF_MEMORY : glw_glVmmMap(ptr, size, offset, handle, ptds);
    if (r == CUDA_SUCCESS) {
        g_maps[g_nmaps++] = (mapping){ptr, size, a, 0};
        a->maps++;
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

CUresult gls_cuMemUnmap(CUdeviceptr ptr, size_t size, int ptds)
{
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_lock);
    if (!tiled(ptr, size))
        r = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; r == CUDA_SUCCESS && i < g_nmaps;) {
        mapping m = g_maps[i];
        if (m.ptr < ptr || m.ptr >= ptr + size) {
            i++;
            continue;
        }
        r = glw_glVmmUnmap(m.ptr, m.size, ptds);
        if (r != CUDA_SUCCESS)
            break;
        g_maps[i] = g_maps[--g_nmaps];
        m.a->maps--;
        r = drop_if_unused(m.a, ptds);
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

CUresult gls_cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                            size_t count, int ptds)
{
    if (desc == NULL || count == 0)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned long long flags = 0;
    for (size_t d = 0; d < count; d++) {
        if (desc[d].location.type != GL_CU_MEM_LOCATION_TYPE_DEVICE)
            return CUDA_ERROR_INVALID_VALUE;
        if (desc[d].location.id != 0)
            return CUDA_ERROR_INVALID_DEVICE;
        if (desc[d].flags == GL_CU_MEM_ACCESS_FLAGS_PROT_READ) {
            gl_log(GL_LOG_ERROR, "cuMemSetAccess", "cuMemSetAccess with read-only access is "
                   "not supported because the host device cannot stop a kernel writing what it "
                   "may read; returning CUDA_ERROR_NOT_SUPPORTED");
            return CUDA_ERROR_NOT_SUPPORTED;
        }
        if (desc[d].flags != 0 && desc[d].flags != GL_CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
        flags = (unsigned long long)desc[d].flags;
    }
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_lock);
    if (!tiled(ptr, size))
        r = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; r == CUDA_SUCCESS && i < g_nmaps; i++) {
        mapping *m = &g_maps[i];
        if (m->ptr < ptr || m->ptr >= ptr + size || m->access == flags)
            continue;
        r = glw_glVmmSetAccess(m->ptr, m->size, (unsigned int)flags, ptds);
        if (r == CUDA_SUCCESS)
            m->access = flags;
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

CUresult gls_cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location,
                            CUdeviceptr ptr, int ptds)
{
    (void)ptds;
    if (flags == NULL || location == NULL || location->type != GL_CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (location->id != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_nmaps; i++)
        if (ptr >= g_maps[i].ptr && ptr - g_maps[i].ptr < g_maps[i].size) {
            *flags = g_maps[i].access;
            r = CUDA_SUCCESS;
        }
    pthread_mutex_unlock(&g_lock);
    return r;
}
