/*
 * context.c — contexts as the program sees them: a per-thread stack (the
 * executor learns the calling thread's context through glCtxSetCurrent
 * records, see batch.c), the context -> device map behind cuCtxGetDevice, and
 * primary contexts (one minted handle per device, reference counted here so
 * that only the first retain and the last release reach the server).
 */
#include <pthread.h>
#include <stdint.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "internal.h"

#define GL_CTX_DEPTH 32

static __thread uint64_t t_stack[GL_CTX_DEPTH];
static __thread int t_depth;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static gl_hmap *g_devices; /* minted ctx -> (device + 1) */

typedef struct {
    uint64_t handle;
    int refs;
    unsigned int flags;
} primary;

static pthread_mutex_t g_plock = PTHREAD_MUTEX_INITIALIZER;
static primary g_primary[GL_MAX_DEVICES];

static void make_map(void)
{
    g_devices = gl_hmap_new();
}

/* Bumped whenever g_devices changes, so that a thread's cached answer of
 * cuCtxGetDevice (asked on every launch, for its limits) is dropped when the
 * context it names is destroyed. */
static uint64_t g_devices_gen; /* atomic */
static __thread struct {
    uint64_t ctx, gen;
    CUdevice dev;
} t_device;

static void note_device(uint64_t ctx, CUdevice dev)
{
    pthread_once(&g_once, make_map);
    if (g_devices)
        gl_hmap_put(g_devices, ctx, (void *)(uintptr_t)(dev + 1));
    __atomic_add_fetch(&g_devices_gen, 1, __ATOMIC_RELEASE);
}

uint64_t gl_ctx_current(void)
{
    return t_depth > 0 ? t_stack[t_depth - 1] : 0;
}

static CUresult check_device(CUdevice dev)
{
    const gl_session_hello *h = gl_session();

    return h != NULL && dev >= 0 && dev < h->device_count ? CUDA_SUCCESS
                                                          : CUDA_ERROR_INVALID_DEVICE;
}

static CUresult check_ctx(CUcontext ctx)
{
    return gl_check_handle(GL_H_CTX, (uint64_t)(uintptr_t)ctx) == CUDA_SUCCESS
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_CONTEXT;
}

/* ------------------------------------------------------------ the stack */

CUresult gls_cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev, int ptds)
{
    CUresult r = CUDA_SUCCESS;

    if ((r = check_device(dev)) != CUDA_SUCCESS)
        return r;
    if (t_depth == GL_CTX_DEPTH)
        return CUDA_ERROR_INVALID_VALUE;
    r = glw_cuCtxCreate(pctx, flags, dev, ptds);
    if (r != CUDA_SUCCESS)
        return r;
    note_device((uint64_t)(uintptr_t)*pctx, dev);
    t_stack[t_depth++] = (uint64_t)(uintptr_t)*pctx;
    return CUDA_SUCCESS;
}

/* Execution affinity and CIG have no meaning for a forwarded device; only
 * "no parameters" is accepted. */
CUresult gli_cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                            unsigned int flags, CUdevice dev, int ptds)
{
    if (ctxCreateParams != NULL &&
        (ctxCreateParams->execAffinityParams != NULL ||
         ctxCreateParams->numExecAffinityParams != 0 || ctxCreateParams->cigParams != NULL))
        return CUDA_ERROR_NOT_SUPPORTED;
    return gli_cuCtxCreate(pctx, flags, dev, ptds);
}

CUresult gls_cuCtxDestroy(CUcontext ctx, int ptds)
{
    uint64_t c = (uint64_t)(uintptr_t)ctx;
    CUresult r = CUDA_SUCCESS;
    int k = 0;

    if ((r = check_ctx(ctx)) != CUDA_SUCCESS)
        return r;
    gl_cls_context_gone(c);
    r = glw_cuCtxDestroy(ctx, ptds);
    if (r != CUDA_SUCCESS)
        return r;
    for (int i = 0; i < t_depth; i++)
        if (t_stack[i] != c)
            t_stack[k++] = t_stack[i];
    t_depth = k;
    if (g_devices)
        gl_hmap_take(g_devices, c);
    __atomic_add_fetch(&g_devices_gen, 1, __ATOMIC_RELEASE);
    return CUDA_SUCCESS;
}

CUresult gls_cuCtxSetCurrent(CUcontext ctx, int ptds)
{
    CUresult r = CUDA_SUCCESS;

    (void)ptds;
    if (ctx == NULL) {
        if (t_depth > 0)
            t_depth--;
        return CUDA_SUCCESS;
    }
    if ((r = check_ctx(ctx)) != CUDA_SUCCESS)
        return r;
    if (t_depth == 0)
        t_depth = 1;
    t_stack[t_depth - 1] = (uint64_t)(uintptr_t)ctx;
    return CUDA_SUCCESS;
}

CUresult gls_cuCtxGetCurrent(CUcontext *pctx, int ptds)
{
    (void)ptds;
    if (pctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = (CUcontext)(uintptr_t)gl_ctx_current();
    return CUDA_SUCCESS;
}

CUresult gls_cuCtxPushCurrent(CUcontext ctx, int ptds)
{
    CUresult r = CUDA_SUCCESS;

    (void)ptds;
    if ((r = check_ctx(ctx)) != CUDA_SUCCESS)
        return r;
    if (t_depth == GL_CTX_DEPTH)
        return CUDA_ERROR_INVALID_VALUE;
    t_stack[t_depth++] = (uint64_t)(uintptr_t)ctx;
    return CUDA_SUCCESS;
}

CUresult gls_cuCtxPopCurrent(CUcontext *pctx, int ptds)
{
    (void)ptds;
    if (t_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    t_depth--;
    if (pctx)
        *pctx = (CUcontext)(uintptr_t)t_stack[t_depth];
    return CUDA_SUCCESS;
}

CUresult gls_cuCtxGetDevice(CUdevice *device, int ptds)
{
    uint64_t ctx = gl_ctx_current();
    /* Read before the map: a change after it makes the next call look again. */
    uint64_t gen = __atomic_load_n(&g_devices_gen, __ATOMIC_ACQUIRE);

    (void)ptds;
    if (device == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (ctx != 0 && ctx == t_device.ctx && gen == t_device.gen) {
        *device = t_device.dev;
        return CUDA_SUCCESS;
    }
    uintptr_t v = ctx && g_devices ? (uintptr_t)gl_hmap_get(g_devices, ctx) : 0;
    if (v == 0) {
        if (ctx == 0) /* cudart asks before it makes one, as of NVIDIA's driver */
            gl_trace_as_driver();
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *device = (CUdevice)(v - 1);
    t_device.ctx = ctx;
    t_device.gen = gen;
    t_device.dev = *device;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------ primary contexts */

CUresult gls_cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev, int ptds)
{
    CUresult r = CUDA_SUCCESS;

    (void)ptds;
    if (pctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = check_device(dev)) != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_plock);
    primary *p = &g_primary[dev];
    if (p->handle == 0) {
        p->handle = gl_mint(GL_H_CTX);
        note_device(p->handle, dev);
    }
    if (p->refs == 0) {
        const uint64_t a[2] = {p->handle, (uint64_t)dev};
        r = gl_emit(GL_CALL_cuDevicePrimaryCtxRetain, 0, a, 2, NULL, 0);
    }
    if (r == CUDA_SUCCESS) {
        p->refs++;
        *pctx = (CUcontext)(uintptr_t)p->handle;
    }
    pthread_mutex_unlock(&g_plock);
    return r;
}

/* Only the last release reaches the server. The table still lists the row
 * as auto (every release forwarded); once it is marked custom, the exported
 * symbols land here. Declared here until the generator declares it. */
CUresult gli_cuDevicePrimaryCtxRelease(CUdevice dev, int ptds);
CUresult gls_cuDevicePrimaryCtxRelease(CUdevice dev, int ptds)
{
    CUresult r = CUDA_SUCCESS;

    if ((r = check_device(dev)) != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_plock);
    primary *p = &g_primary[dev];
    if (p->refs == 0) {
        r = CUDA_ERROR_INVALID_CONTEXT;
    } else if (p->refs == 1) {
        const uint64_t a[1] = {(uint64_t)dev};
        (void)ptds;
        r = gl_emit_ctx(GL_CALL_cuDevicePrimaryCtxRelease, 0, a, 1, NULL, 0, 0, p->handle);
    }
    if (r == CUDA_SUCCESS)
        p->refs--;
    int gone = r == CUDA_SUCCESS && p->refs == 0;
    uint64_t handle = p->handle;
    pthread_mutex_unlock(&g_plock);
    if (gone) /* the primary context ends with its last release */
        gl_cls_context_gone(handle);
    return r;
}

CUresult gls_cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags, int ptds)
{
    CUresult r = CUDA_SUCCESS;

    if ((r = check_device(dev)) != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_plock);
    g_primary[dev].flags = flags;
    pthread_mutex_unlock(&g_plock);
    return glw_cuDevicePrimaryCtxSetFlags(dev, flags, ptds);
}

CUresult gls_cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active, int ptds)
{
    CUresult r = CUDA_SUCCESS;

    (void)ptds;
    if (flags == NULL || active == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = check_device(dev)) != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_plock);
    *flags = g_primary[dev].flags;
    *active = g_primary[dev].refs > 0;
    pthread_mutex_unlock(&g_plock);
    return CUDA_SUCCESS;
}

CUresult gls_cuDevicePrimaryCtxReset(CUdevice dev, int ptds)
{
    CUresult r = CUDA_SUCCESS;

    (void)ptds;
    if ((r = check_device(dev)) != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_plock);
    uint64_t handle = g_primary[dev].handle;
    pthread_mutex_unlock(&g_plock);
    gl_cls_context_gone(handle); /* cudart's destructors may call back in */
    pthread_mutex_lock(&g_plock);
    const uint64_t a[1] = {(uint64_t)dev};
    /* The executor's current context may be the one reset: forget it. */
    r = gl_emit_ctx(GL_CALL_cuDevicePrimaryCtxReset, 0, a, 1, NULL, 0, 0, g_primary[dev].handle);
    if (r == CUDA_SUCCESS)
        g_primary[dev].refs = 0;
    pthread_mutex_unlock(&g_plock);
    return r;
}
