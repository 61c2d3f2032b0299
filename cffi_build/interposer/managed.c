/*
 * managed.c — the entry points of mapped and managed memory that mirror.c
 * does not own: cuMemAllocManaged, cuMemHostGetDevicePointer,
 * cuStreamAttachMemAsync, cuMemPrefetchAsync, cuMemAdvise, the range
 * attributes, and the device attributes that say what gleam can honour.
 *
 * gleam's coherence is a device without concurrent managed access
 * (CONCURRENT_MANAGED_ACCESS 0, as on Windows or a pre-Pascal GPU): the
 * program's view and the device's copy agree at the points docs/cuda-
 * forwarding.md lists, never while a kernel runs. So the answers follow what
 * NVIDIA documents for such a device: a prefetch to the device, a preferred
 * location on it and "accessed by" it are CUDA_ERROR_INVALID_DEVICE; stream
 * attachment is kept (it changes nothing here: every stream completes in
 * order, and the views are refreshed whole). Advice is remembered per page,
 * so the range attributes answer what was advised.
 *
 * State: g_adv, the advice of each managed mirror that has any (allocated on
 * first advice, freed when the mirror goes: gl_managed_forget), under g_lock.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "internal.h"

enum {
    ADVISE_SET_READ_MOSTLY = 1, ADVISE_UNSET_READ_MOSTLY = 2,
    ADVISE_SET_PREFERRED_LOCATION = 3, ADVISE_UNSET_PREFERRED_LOCATION = 4,
    ADVISE_SET_ACCESSED_BY = 5, ADVISE_UNSET_ACCESSED_BY = 6
};
enum {
    RANGE_READ_MOSTLY = 1, RANGE_PREFERRED_LOCATION = 2, RANGE_ACCESSED_BY = 3,
    RANGE_LAST_PREFETCH_LOCATION = 4, RANGE_PREFERRED_LOCATION_TYPE = 5,
    RANGE_PREFERRED_LOCATION_ID = 6, RANGE_LAST_PREFETCH_LOCATION_TYPE = 7,
    RANGE_LAST_PREFETCH_LOCATION_ID = 8
};

/* One page's advice. Locations are a CUmemLocationType and an id. */
typedef struct {
    uint8_t read_mostly;
    uint8_t accessed_by; /* bit 0: the device, bit 1: the host */
    uint8_t pref_type, fetch_type;
    int32_t pref_id, fetch_id;
} page_advice;

typedef struct {
    uint64_t dev;
    size_t pages;
    page_advice *p;
} advice;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static advice *g_adv;
static size_t g_nadv;
static uint32_t g_capadv;

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

/* ----------------------------------------------------- device attributes */

int gl_managed_device_attribute(int attrib, int *value)
{
    switch (attrib) {
    case 19:  /* CAN_MAP_HOST_MEMORY: mapped host memory is mirrored */
    case 83:  /* MANAGED_MEMORY */
        *value = 1;
        return 1;
    case 86:  /* HOST_NATIVE_ATOMIC_SUPPORTED */
    case 88:  /* PAGEABLE_MEMORY_ACCESS */
    case 89:  /* CONCURRENT_MANAGED_ACCESS: coherent only between calls */
    case 91:  /* CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: registered memory has its own
               * device address */
    case 100: /* PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES */
    case 101: /* DIRECT_MANAGED_MEM_ACCESS_FROM_HOST */
    case 147: /* ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED */
        *value = 0;
        return 1;
    default:
        return 0;
    }
}

/* ------------------------------------------------------------ allocation */

CUresult gls_cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags, int ptds)
{
    uint64_t d;

    (void)ptds;
    if (dptr == NULL || bytesize == 0
        || (flags != GL_CU_MEM_ATTACH_GLOBAL && flags != GL_CU_MEM_ATTACH_HOST))
        return CUDA_ERROR_INVALID_VALUE;
    if (gl_ctx_current() == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult r = gl_mirror_new(GL_MIRROR_MANAGED, NULL, bytesize, flags, &d);
    if (r == CUDA_SUCCESS)
        *dptr = d;
    return r;
}

CUresult gls_cuMemHostGetDevicePointer(CUdeviceptr *pdptr, void *p, unsigned int Flags, int ptds)
{
    gl_mirror_info m;

    (void)ptds;
    if (pdptr == NULL || Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!gl_mirror_by_view(p, &m)) {
        /* Pinned memory the program did not ask to map: under unified
         * addressing NVIDIA's driver maps all of it, so it becomes mapped now
         * (pinned.c), at a device address of its own. */
        CUresult r = gl_pinned_map(p);
        if (r != CUDA_SUCCESS || !gl_mirror_by_view(p, &m))
            return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE;
    }
    if (m.kind == GL_MIRROR_MANAGED)
        return CUDA_ERROR_INVALID_VALUE; /* device memory, not host memory */
    *pdptr = m.dev + ((uintptr_t)p - (uintptr_t)m.view);
    return CUDA_SUCCESS;
}

/* ----------------------------------------------------------------- ranges */

/* The managed mirror holding [p, p + n) (n > 0), or INVALID_VALUE. */
static CUresult managed_range(uint64_t p, size_t n, gl_mirror_info *m)
{
    if (n == 0 || !gl_mirror_by_dev(p, m) || m->kind != GL_MIRROR_MANAGED
        || n > m->size - (p - m->dev))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult gls_cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr, size_t length,
                                    unsigned int flags, int ptds)
{
    gl_mirror_info m;

    (void)ptds;
    CUresult r = gl_check_handle(GL_H_STREAM, (uint64_t)(uintptr_t)hStream);
    if (r != CUDA_SUCCESS)
        return r;
    if (flags != GL_CU_MEM_ATTACH_GLOBAL && flags != GL_CU_MEM_ATTACH_HOST
        && flags != GL_CU_MEM_ATTACH_SINGLE)
        return CUDA_ERROR_INVALID_VALUE;
    /* length 0 means the whole allocation, which must then start at dptr. */
    if (!gl_mirror_by_dev(dptr, &m) || m.kind != GL_MIRROR_MANAGED
        || (length == 0 && dptr != m.dev) || length > m.size - (dptr - m.dev))
        return CUDA_ERROR_INVALID_VALUE;
    if (flags == GL_CU_MEM_ATTACH_SINGLE && (uintptr_t)hStream <= GL_CU_STREAM_PER_THREAD)
        return CUDA_ERROR_INVALID_VALUE; /* SINGLE needs a stream of its own */
    return CUDA_SUCCESS;
}

/* The advice of the mirror at dev, or NULL when it has none (g_lock held). */
static advice *find_advice(uint64_t dev)
{
    for (size_t k = 0; k < g_nadv; k++)
        if (g_adv[k].dev == dev)
            return &g_adv[k];
    return NULL;
}

/* The advice of managed mirror m, made on first use (g_lock held). */
static advice *advice_of(const gl_mirror_info *m)
{
    advice *found = find_advice(m->dev);
    if (found != NULL)
        return found;
    if (gl_grow(&g_adv, &g_capadv, g_nadv, sizeof *g_adv, 8) != 0)
        return NULL;
    size_t pages = (m->size + page_size() - 1) / page_size();
    page_advice *p = calloc(pages, sizeof *p);
    if (p == NULL)
        return NULL;
    g_adv[g_nadv] = (advice){m->dev, pages, p};
    return &g_adv[g_nadv++];
}

void gl_managed_forget(uint64_t dev)
{
    pthread_mutex_lock(&g_lock);
    for (size_t k = 0; k < g_nadv; k++) {
        if (g_adv[k].dev == dev) {
            free(g_adv[k].p);
            g_adv[k] = g_adv[--g_nadv];
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
}

/* A location as CUDA 12.2+ describes it, checked: the device (id 0) where
 * the call allows it without concurrent managed access, the host, or a host
 * NUMA node. */
static CUresult check_location(CUmemLocation *loc, int device_allowed)
{
    switch (loc->type) {
    case GL_CU_MEM_LOCATION_TYPE_DEVICE:
        if (loc->id != 0)
            return CUDA_ERROR_INVALID_DEVICE;
        return device_allowed ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    case GL_CU_MEM_LOCATION_TYPE_HOST:
        loc->id = 0; /* ignored */
        return CUDA_SUCCESS;
    case GL_CU_MEM_LOCATION_TYPE_HOST_NUMA:
        return loc->id >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case GL_CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        loc->type = GL_CU_MEM_LOCATION_TYPE_HOST_NUMA; /* one node: the first */
        loc->id = 0;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* The pages of m that [p, p + n) touches (rounded out to pages, as CUDA does). */
static void page_span(const gl_mirror_info *m, uint64_t p, size_t n, size_t *first, size_t *end)
{
    size_t page = page_size();
    *first = (size_t)(p - m->dev) / page;
    *end = ((size_t)(p - m->dev) + n + page - 1) / page;
}

CUresult gls_cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice_kind,
                            CUmemLocation location, int ptds)
{
    gl_mirror_info m;
    size_t first, end;

    (void)ptds;
    CUresult r = managed_range(devPtr, count, &m);
    if (r != CUDA_SUCCESS)
        return r;
    switch (advice_kind) {
    case ADVISE_SET_READ_MOSTLY: case ADVISE_UNSET_READ_MOSTLY:
    case ADVISE_UNSET_PREFERRED_LOCATION:
        break; /* the location is ignored */
    case ADVISE_SET_PREFERRED_LOCATION:
        r = check_location(&location, 0);
        break;
    case ADVISE_SET_ACCESSED_BY: case ADVISE_UNSET_ACCESSED_BY:
        r = location.type == GL_CU_MEM_LOCATION_TYPE_HOST ? CUDA_SUCCESS
            : location.type == GL_CU_MEM_LOCATION_TYPE_DEVICE ? check_location(&location, 0)
            : CUDA_ERROR_INVALID_VALUE;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (r != CUDA_SUCCESS)
        return r;
    page_span(&m, devPtr, count, &first, &end);
    pthread_mutex_lock(&g_lock);
    advice *a = advice_of(&m);
    for (size_t i = first; a != NULL && i < end; i++) {
        page_advice *pa = &a->p[i];
        switch (advice_kind) {
        case ADVISE_SET_READ_MOSTLY: pa->read_mostly = 1; break;
        case ADVISE_UNSET_READ_MOSTLY: pa->read_mostly = 0; break;
        case ADVISE_SET_PREFERRED_LOCATION:
            pa->pref_type = (uint8_t)location.type, pa->pref_id = location.id;
            break;
        case ADVISE_UNSET_PREFERRED_LOCATION: pa->pref_type = 0, pa->pref_id = 0; break;
        case ADVISE_SET_ACCESSED_BY: pa->accessed_by |= 2; break; /* only the host passes */
        default: pa->accessed_by &= (uint8_t)~2; break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return a != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* CUdevice form (CUDA 8): CU_DEVICE_CPU is the host. */
static CUmemLocation location_of(CUdevice device)
{
    if (device == GL_CU_DEVICE_CPU)
        return (CUmemLocation){GL_CU_MEM_LOCATION_TYPE_HOST, 0};
    return (CUmemLocation){GL_CU_MEM_LOCATION_TYPE_DEVICE, device};
}

CUresult gls_cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice_kind,
                         CUdevice device, int ptds)
{
    CUmemLocation loc = location_of(device);
    if (advice_kind >= ADVISE_SET_PREFERRED_LOCATION && advice_kind != ADVISE_UNSET_PREFERRED_LOCATION
        && device != GL_CU_DEVICE_CPU && device != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    return gls_cuMemAdvise_v2(devPtr, count, advice_kind, loc, ptds);
}

CUresult gls_cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                   unsigned int flags, CUstream hStream, int ptds)
{
    gl_mirror_info m;
    size_t first, end;

    (void)ptds;
    CUresult r = gl_check_handle(GL_H_STREAM, (uint64_t)(uintptr_t)hStream);
    if (r == CUDA_SUCCESS && flags != 0)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = managed_range(devPtr, count, &m);
    if (r == CUDA_SUCCESS)
        r = check_location(&location, 0);
    if (r != CUDA_SUCCESS)
        return r;
    /* Data needs no moving: both sides hold it, and the views catch up at the
     * next call that waits. Only the request is remembered. */
    page_span(&m, devPtr, count, &first, &end);
    pthread_mutex_lock(&g_lock);
    advice *a = advice_of(&m);
    for (size_t i = first; a != NULL && i < end; i++)
        a->p[i].fetch_type = (uint8_t)location.type, a->p[i].fetch_id = location.id;
    pthread_mutex_unlock(&g_lock);
    return a != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult gls_cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                CUstream hStream, int ptds)
{
    if (dstDevice != GL_CU_DEVICE_CPU && dstDevice != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    return gls_cuMemPrefetchAsync_v2(devPtr, count, location_of(dstDevice), 0, hStream, ptds);
}

/* -------------------------------------------------------- range attributes */

/* The value every page of [first, end) agrees on, or `mixed`. */
typedef struct {
    int32_t type, id;
} loc_value;

static loc_value agreed(const advice *a, size_t first, size_t end, int fetch)
{
    loc_value v = {GL_CU_MEM_LOCATION_TYPE_INVALID, 0};
    for (size_t i = first; a != NULL && i < end; i++) {
        loc_value pv = fetch ? (loc_value){a->p[i].fetch_type, a->p[i].fetch_id}
                             : (loc_value){a->p[i].pref_type, a->p[i].pref_id};
        if (pv.type == GL_CU_MEM_LOCATION_TYPE_INVALID || (i > first && (pv.type != v.type
                                                                     || pv.id != v.id)))
            return (loc_value){GL_CU_MEM_LOCATION_TYPE_INVALID, 0};
        v = pv;
    }
    return a != NULL ? v : (loc_value){GL_CU_MEM_LOCATION_TYPE_INVALID, 0};
}

/* The CUdevice form of a location: a device id, CU_DEVICE_CPU for the host,
 * CU_DEVICE_INVALID for none (or a host NUMA node, which it cannot say). */
static int32_t device_of(loc_value v)
{
    if (v.type == GL_CU_MEM_LOCATION_TYPE_DEVICE)
        return v.id;
    return v.type == GL_CU_MEM_LOCATION_TYPE_HOST ? GL_CU_DEVICE_CPU : GL_CU_DEVICE_INVALID;
}

/* ACCESSED_BY: the processors advised for every page of the range. Only the
 * host can be (the device would need concurrent managed access); the rest of
 * the array is CU_DEVICE_INVALID, as documented. */
static void accessed_by(const advice *a, size_t first, size_t end, int32_t *out, size_t n)
{
    int host = a != NULL;
    for (size_t i = first; a != NULL && i < end; i++)
        host = host && (a->p[i].accessed_by & 2);
    for (size_t k = 0; k < n; k++)
        out[k] = GL_CU_DEVICE_INVALID;
    if (host)
        out[0] = GL_CU_DEVICE_CPU;
}

static CUresult range_attribute(void *data, size_t size, CUmem_range_attribute attribute,
                                const gl_mirror_info *m, uint64_t p, size_t n)
{
    size_t first, end;
    int32_t v = 0;
    CUresult r = CUDA_SUCCESS;

    if (data == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (attribute == RANGE_ACCESSED_BY ? size == 0 || size % 4 != 0 : size != 4)
        return CUDA_ERROR_INVALID_VALUE;
    page_span(m, p, n, &first, &end);
    pthread_mutex_lock(&g_lock);
    const advice *a = find_advice(m->dev);
    switch (attribute) {
    case RANGE_ACCESSED_BY:
        accessed_by(a, first, end, data, size / 4);
        break;
    case RANGE_READ_MOSTLY:
        v = a != NULL;
        for (size_t i = first; a != NULL && i < end; i++)
            v = v && a->p[i].read_mostly;
        break;
    case RANGE_PREFERRED_LOCATION: v = device_of(agreed(a, first, end, 0)); break;
    case RANGE_LAST_PREFETCH_LOCATION: v = device_of(agreed(a, first, end, 1)); break;
    case RANGE_PREFERRED_LOCATION_TYPE: v = agreed(a, first, end, 0).type; break;
    case RANGE_PREFERRED_LOCATION_ID: v = agreed(a, first, end, 0).id; break;
    case RANGE_LAST_PREFETCH_LOCATION_TYPE: v = agreed(a, first, end, 1).type; break;
    case RANGE_LAST_PREFETCH_LOCATION_ID: v = agreed(a, first, end, 1).id; break;
    default:
        r = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&g_lock);
    if (r == CUDA_SUCCESS && attribute != RANGE_ACCESSED_BY)
        *(int32_t *)data = v;
    return r;
}

CUresult gls_cuMemRangeGetAttribute(void *data, size_t dataSize, CUmem_range_attribute attribute,
                                    CUdeviceptr devPtr, size_t count, int ptds)
{
    gl_mirror_info m;

    (void)ptds;
    CUresult r = managed_range(devPtr, count, &m);
    if (r != CUDA_SUCCESS)
        return r;
    return range_attribute(data, dataSize, attribute, &m, devPtr, count);
}

CUresult gls_cuMemRangeGetAttributes(void **data, size_t *dataSizes,
                                     CUmem_range_attribute *attributes, size_t numAttributes,
                                     CUdeviceptr devPtr, size_t count, int ptds)
{
    gl_mirror_info m;

    (void)ptds;
    if (data == NULL || dataSizes == NULL || attributes == NULL || numAttributes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = managed_range(devPtr, count, &m);
    for (size_t k = 0; r == CUDA_SUCCESS && k < numAttributes; k++)
        r = range_attribute(data[k], dataSizes[k], attributes[k], &m, devPtr, count);
    return r;
}
