/*
 * stream_attrs.c — stream attributes (cuStreamSetAttribute, GetAttribute,
 * CopyAttributes), access policy windows and the persisting L2 calls,
 * answered in the interposer.
 *
 * Every attribute a stream can hold is a scheduling or cache hint: an access
 * policy window only says which lines of the device's L2 should persist, a
 * synchronization policy how a host thread waits, a priority which stream's
 * blocks go first. None changes what a kernel computes, so neither device
 * needs them to give the right answer; the interposer checks each value as
 * CUDA documents (docs/cuda-forwarding.md, "Persisting L2 and access policy
 * windows") and keeps it for the stream, so reading it back answers what was
 * set, and forwards it to the serving device: the host device takes it as
 * the hint it is, the cuda backend hands it to the GPU's driver. The window's
 * limit is the device's MAX_ACCESS_POLICY_WINDOW_SIZE: the host device's table
 * (peer/cuda/server/host_identity.py), the real GPU's on the cuda backend.
 *
 * Ownership: g_attrs maps a stream's handle to a malloc'd stream_attrs owned
 * by the map for the life of the process (handles are minted once and never
 * reused, so a destroyed stream's entry is never read again; one per stream
 * that was given an attribute). g_lock guards the map's values.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "internal.h"

/* CUstreamAttrID values (CUDA's launch attribute ids a stream accepts). */
enum {
    ATTR_ACCESS_POLICY_WINDOW = GL_CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW,
    ATTR_SYNCHRONIZATION_POLICY = GL_CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY,
    ATTR_PRIORITY = GL_CU_LAUNCH_ATTRIBUTE_PRIORITY
};
/* CUsynchronizationPolicy: AUTO .. BLOCKING_SYNC; AUTO is a stream's own. */
enum { SYNC_POLICY_AUTO = 1, SYNC_POLICY_BLOCKING_SYNC = 4 };

typedef struct {
    CUaccessPolicyWindow window;
    int sync_policy;
} stream_attrs;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static gl_hmap *g_attrs;

/* A fresh stream's attributes: no window, the automatic policy. */
static stream_attrs defaults(void)
{
    stream_attrs a;
    memset(&a, 0, sizeof a);
    a.sync_policy = SYNC_POLICY_AUTO;
    return a;
}

/* The map's key of a stream as the program named it: the NULL stream is the
 * legacy one unless per-thread semantics make it the thread's (the map has no
 * key 0). */
static uint64_t stream_key(CUstream s, int ptds)
{
    uint64_t h = gl_stream_arg((uint64_t)(uintptr_t)s, ptds);
    return h == 0 ? GL_CU_STREAM_LEGACY : h;
}

static CUresult device_limit(int attribute, size_t *limit, int ptds)
{
    CUdevice dev;
    int value = 0;
    CUresult r = gli_cuCtxGetDevice(&dev, ptds);

    if (r == CUDA_SUCCESS)
        r = gli_cuDeviceGetAttribute(&value, attribute, dev, ptds);
    *limit = value > 0 ? (size_t)value : 0;
    return r;
}

CUresult gl_access_window_check(const CUaccessPolicyWindow *w, const char *entry)
{
    size_t max_bytes;
    CUresult r = device_limit(GL_ATTR_MAX_ACCESS_POLICY_WINDOW_SIZE, &max_bytes, 0);

    if (r != CUDA_SUCCESS)
        return r;
    /* hitRatio is a fraction (NaN is none); missProp may only be NORMAL or
     * STREAMING; num_bytes is bounded by the device's window size. */
    if (!(w->hitRatio >= 0.0f && w->hitRatio <= 1.0f) || w->hitProp < 0 ||
        w->hitProp > GL_CU_ACCESS_PROPERTY_PERSISTING ||
        (w->missProp != GL_CU_ACCESS_PROPERTY_NORMAL &&
         w->missProp != GL_CU_ACCESS_PROPERTY_STREAMING) ||
        w->num_bytes > max_bytes) {
        gl_log(GL_LOG_ERROR, entry, "%s: access policy window refused: hitRatio %g "
               "(0..1), hitProp %d (0..2), missProp %d (NORMAL 0 or STREAMING 1), num_bytes %zu "
               "(at most MAX_ACCESS_POLICY_WINDOW_SIZE, %zu)", entry, (double)w->hitRatio,
               w->hitProp,
               w->missProp, w->num_bytes, max_bytes);
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* A copy of the stream's attributes (the defaults when none were set). */
static stream_attrs read_attrs(uint64_t key)
{
    stream_attrs a = defaults();
    pthread_mutex_lock(&g_lock);
    const stream_attrs *kept = g_attrs != NULL ? gl_hmap_get(g_attrs, key) : NULL;
    if (kept != NULL)
        a = *kept;
    pthread_mutex_unlock(&g_lock);
    return a;
}

static CUresult write_attrs(uint64_t key, const stream_attrs *a)
{
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_lock);
    if (g_attrs == NULL)
        g_attrs = gl_hmap_new();
    stream_attrs *kept = g_attrs != NULL ? gl_hmap_get(g_attrs, key) : NULL;
    if (kept == NULL && g_attrs != NULL) {
        kept = malloc(sizeof *kept);
        if (kept != NULL && gl_hmap_put(g_attrs, key, kept) != 0) {
            free(kept);
            kept = NULL;
        }
    }
    if (kept != NULL)
        *kept = *a;
    else
        r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&g_lock);
    return r;
}

static CUresult check_stream(CUstream s)
{
    if (gl_ctx_current() == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    return gl_check_handle(GL_H_STREAM, (uint64_t)(uintptr_t)s);
}

/* A stream being captured keeps its attributes here only: a forwarded record
 * on it would be taken for work to capture (capture.c), and the captured
 * kernel nodes then run without the hint, which changes no result. */
static int capturing(CUstream s, int ptds)
{
    CUstreamCaptureStatus status = 0;
    return gli_cuStreamIsCapturing(s, &status, ptds) != CUDA_SUCCESS || status != 0;
}

CUresult gls_cuStreamGetAttribute(CUstream hStream, CUstreamAttrID attr,
                                  CUstreamAttrValue *value, int ptds)
{
    CUresult r = check_stream(hStream);
    if (r != CUDA_SUCCESS)
        return r;
    if (value == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    stream_attrs a = read_attrs(stream_key(hStream, ptds));
    switch (attr) {
    case ATTR_ACCESS_POLICY_WINDOW:
        value->accessPolicyWindow = a.window;
        return CUDA_SUCCESS;
    case ATTR_SYNCHRONIZATION_POLICY:
        value->syncPolicy = a.sync_policy;
        return CUDA_SUCCESS;
    case ATTR_PRIORITY:
        return gli_cuStreamGetPriority(hStream, &value->priority, ptds);
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult gls_cuStreamSetAttribute(CUstream hStream, CUstreamAttrID attr,
                                  const CUstreamAttrValue *value, int ptds)
{
    CUresult r = check_stream(hStream);
    if (r != CUDA_SUCCESS)
        return r;
    if (value == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t key = stream_key(hStream, ptds);
    stream_attrs a = read_attrs(key);
    switch (attr) {
    case ATTR_ACCESS_POLICY_WINDOW:
        if ((r = gl_access_window_check(&value->accessPolicyWindow,
                                        "cuStreamSetAttribute")) != CUDA_SUCCESS)
            return r;
        a.window = value->accessPolicyWindow;
        break;
    case ATTR_SYNCHRONIZATION_POLICY:
        if (value->syncPolicy < SYNC_POLICY_AUTO || value->syncPolicy > SYNC_POLICY_BLOCKING_SYNC)
            return CUDA_ERROR_INVALID_VALUE;
        a.sync_policy = value->syncPolicy;
        break;
    case ATTR_PRIORITY:
        /* The device has one priority, 0, and NVIDIA's driver clamps a
         * priority into the range (runtime.c): nothing to keep. */
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    if ((r = write_attrs(key, &a)) != CUDA_SUCCESS)
        return r;
    return capturing(hStream, ptds) ? CUDA_SUCCESS
                                    : glw_glStreamSetAttribute(hStream, attr, value, ptds);
}

CUresult gls_cuStreamCopyAttributes(CUstream dst, CUstream src, int ptds)
{
    CUresult r = check_stream(dst);
    if (r == CUDA_SUCCESS)
        r = check_stream(src);
    if (r != CUDA_SUCCESS)
        return r;
    stream_attrs a = read_attrs(stream_key(src, ptds));
    if ((r = write_attrs(stream_key(dst, ptds), &a)) != CUDA_SUCCESS)
        return r;
    return capturing(dst, ptds) || capturing(src, ptds)
               ? CUDA_SUCCESS : glw_glStreamCopyAttributes(dst, src, ptds);
}

/* Demotes persisting lines to normal: the serving device's (the host
 * device's caches are the server CPU's, which have none). */
CUresult gls_cuCtxResetPersistingL2Cache(int ptds)
{
    if (gl_ctx_current() == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    return glw_glCtxResetPersistingL2Cache(ptds);
}

CUresult gl_persisting_l2_clamp(size_t *value, int ptds)
{
    size_t max_bytes = 0;
    CUresult r = device_limit(GL_ATTR_MAX_PERSISTING_L2_CACHE_SIZE, &max_bytes, ptds);
    if (r == CUDA_SUCCESS && *value > max_bytes)
        *value = max_bytes;
    return r;
}
