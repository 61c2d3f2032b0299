/*
 * graphmem.c — memory that graphs allocate (memory alloc nodes, and
 * cuMemAllocAsync captured into a graph). CUDA fixes such an allocation's
 * address when the node is made and lets the memory exist from the alloc
 * node's run until a free node, cuMemFreeAsync or cuMemFree frees it. gleam
 * gives the address at once too, and backs it at once (an ordinary
 * sub-allocation and mem_alloc record, so both backends treat it as any
 * memory): the memory stays until no node names it any more and it is not
 * allocated by a launch; the server's alloc and free nodes are empty.
 *
 * What CUDA lets a program observe is kept: launching a graph whose
 * allocation is still allocated from an earlier launch fails with
 * CUDA_ERROR_INVALID_VALUE (unless instantiated to free it on launch), and
 * cuDeviceGetGraphMemAttribute reports the bytes allocated by launches
 * (used) and the bytes backing graph allocations (reserved), with their
 * high-water marks.
 *
 * State under one mutex: a map from each graph allocation's address to its
 * record.
 */
#include <pthread.h>
#include <stdlib.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "graph.h"

typedef struct {
    CUdeviceptr dptr;
    size_t size;
    int refs; /* nodes (of graphs and execs) that name it */
    int live; /* allocated by a launch, not yet freed */
} gmem;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static gl_hmap *g_mem;
static uint64_t g_used, g_used_high, g_reserved, g_reserved_high;

static gmem *find_locked(CUdeviceptr dptr)
{
    return g_mem != NULL ? gl_hmap_get(g_mem, dptr) : NULL;
}

/* Gives the memory back once nothing holds it (with the lock). */
static void settle_locked(gmem *m)
{
    if (m->refs > 0 || m->live)
        return;
    gl_hmap_take(g_mem, m->dptr);
    g_reserved -= m->size;
    if (glw_glMemFree(m->dptr, 0) == CUDA_SUCCESS)
        gl_va_free(m->dptr);
    free(m);
}

CUresult gl_graphmem_new(size_t bytesize, CUdeviceptr *dptr)
{
    uint64_t d;
    CUresult r;
    gmem *m = calloc(1, sizeof *m);

    if (m == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_lock);
    if (g_mem == NULL && (g_mem = gl_hmap_new()) == NULL) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    if ((r = gl_va_alloc(bytesize, &d)) != CUDA_SUCCESS)
        goto out;
    if ((r = glw_glMemAlloc(d, bytesize, 0)) != CUDA_SUCCESS) {
        gl_va_free(d);
        goto out;
    }
    m->dptr = d, m->size = bytesize, m->refs = 1;
    if (gl_hmap_put(g_mem, d, m) != 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        m->refs = 0;
        settle_locked(m);
        m = NULL;
        goto out;
    }
    g_reserved += bytesize;
    if (g_reserved > g_reserved_high)
        g_reserved_high = g_reserved;
    *dptr = d;
    m = NULL;
out:
    pthread_mutex_unlock(&g_lock);
    free(m);
    return r;
}

void gl_graphmem_ref(CUdeviceptr dptr)
{
    pthread_mutex_lock(&g_lock);
    gmem *m = find_locked(dptr);
    if (m != NULL)
        m->refs++;
    pthread_mutex_unlock(&g_lock);
}

void gl_graphmem_unref(CUdeviceptr dptr)
{
    pthread_mutex_lock(&g_lock);
    gmem *m = find_locked(dptr);
    if (m != NULL && m->refs > 0) {
        m->refs--;
        settle_locked(m);
    }
    pthread_mutex_unlock(&g_lock);
}

int gl_graphmem_is(CUdeviceptr dptr)
{
    pthread_mutex_lock(&g_lock);
    int is = find_locked(dptr) != NULL;
    pthread_mutex_unlock(&g_lock);
    return is;
}

static void freed_locked(gmem *m)
{
    if (!m->live)
        return;
    m->live = 0;
    g_used -= m->size;
    settle_locked(m);
}

CUresult gl_graphmem_launch_alloc(CUdeviceptr dptr, int auto_free)
{
    CUresult r = CUDA_SUCCESS;

    pthread_mutex_lock(&g_lock);
    gmem *m = find_locked(dptr);
    if (m == NULL || (m->live && !auto_free)) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if (!m->live) {
        m->live = 1;
        g_used += m->size;
        if (g_used > g_used_high)
            g_used_high = g_used;
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

void gl_graphmem_launch_free(CUdeviceptr dptr)
{
    pthread_mutex_lock(&g_lock);
    gmem *m = find_locked(dptr);
    if (m != NULL)
        freed_locked(m);
    pthread_mutex_unlock(&g_lock);
}

int gl_graphmem_program_free(CUdeviceptr dptr)
{
    pthread_mutex_lock(&g_lock);
    gmem *m = find_locked(dptr);
    if (m != NULL)
        freed_locked(m);
    pthread_mutex_unlock(&g_lock);
    return m != NULL;
}

/* ------------------------------------------------------------- the API */

/* A device and a value to read or write. */
static CUresult check_args(CUdevice device, const void *value)
{
    CUresult r;
    if (gl_device(device, &r) == NULL)
        return r;
    return value != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult gls_cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                          void *value, int ptds)
{
    CUresult r = check_args(device, value);

    (void)ptds;
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_lock);
    uint64_t v = attr == GL_CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT       ? g_used
                 : attr == GL_CU_GRAPH_MEM_ATTR_USED_MEM_HIGH        ? g_used_high
                 : attr == GL_CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT ? g_reserved
                                                                     : g_reserved_high;
    pthread_mutex_unlock(&g_lock);
    if (attr < GL_CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT || attr > GL_CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)
        return CUDA_ERROR_INVALID_VALUE;
    *(cuuint64_t *)value = v;
    return CUDA_SUCCESS;
}

/* Only the high-water marks may be set, and only to 0 (which resets them to
 * the current value, as for pools). */
CUresult gls_cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                          void *value, int ptds)
{
    CUresult r = check_args(device, value);

    (void)ptds;
    if (r != CUDA_SUCCESS)
        return r;
    if (*(const cuuint64_t *)value != 0
        || (attr != GL_CU_GRAPH_MEM_ATTR_USED_MEM_HIGH
            && attr != GL_CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    if (attr == GL_CU_GRAPH_MEM_ATTR_USED_MEM_HIGH)
        g_used_high = g_used;
    else
        g_reserved_high = g_reserved;
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
}

/* Nothing is held beyond what graphs name (settle_locked gives it back). */
CUresult gls_cuDeviceGraphMemTrim(CUdevice device, int ptds)
{
    (void)ptds;
    return check_args(device, "");
}
