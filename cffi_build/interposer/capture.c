/*
 * capture.c — stream capture: while a stream captures, the work a program
 * puts on it becomes nodes of a graph in the interposer instead of records
 * to the server. Each capturing stream has a set of dependencies (the nodes
 * the next node depends on); a captured operation becomes a node after them
 * and then the set. Work reaches capture two ways:
 *
 *   - at the record (gl_capture_record, called by batch.c for every record a
 *     program thread emits while a capture is in progress): kernel launches
 *     (their parameters already packed as for a launch), device memsets and
 *     device-to-device copies, event records and waits (fork and join);
 *   - at the call, where the record would lose what the node needs: copies
 *     with a side in the program's memory (the node reads that memory when
 *     the graph runs), 2D memsets, stream-ordered allocation, host
 *     functions, graph launches (gl_capture_begin_op / gl_capture_add_node).
 *
 * Any other record on a capturing stream is refused: it invalidates the
 * capture with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, so nothing meant for a
 * graph ever runs at once. The rules of CUDA's documentation:
 *
 *   - a stream joins a capture by waiting on an event recorded in it (fork),
 *     and must be joined back into the capture's first stream before the
 *     capture ends (CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
 *   - waiting on an event not recorded in a capture is
 *     CUDA_ERROR_STREAM_CAPTURE_ISOLATION (unless CU_EVENT_WAIT_EXTERNAL:
 *     a wait node), on one of another capture CUDA_ERROR_STREAM_CAPTURE_MERGE;
 *   - synchronizing or querying a capturing stream, or the context, is
 *     CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; a captured event,
 *     CUDA_ERROR_CAPTURED_EVENT; the legacy stream while a blocking stream
 *     captures, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
 *   - "potentially unsafe" calls (capture_rules.py: synchronous allocation,
 *     copies, memsets; waits and queries of other streams and events) follow
 *     the thread's capture mode (cuThreadExchangeStreamCaptureMode);
 *   - each of these invalidates the captures concerned: their streams refuse
 *     further work with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and ending the
 *     capture returns that error and no graph.
 *
 * State under g_lock (taken before gl_graph_lock): the captures, the streams
 * taking part, the events recorded in captures, and the streams created
 * non-blocking.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "gl_htable.h"
#include "graph.h"

typedef struct capture {
    uint64_t id;
    gl_graph *graph;
    int mode;
    pthread_t thread; /* the thread that began it */
    int invalid;
    int to_graph;     /* cuStreamBeginCaptureToGraph: the graph is the program's */
    uint64_t origin;  /* the stream that began it */
    uint32_t first;   /* nodes the graph had before (to_graph) */
    struct capture *next;
} capture;

typedef struct {
    uint64_t key; /* the stream (the per-thread stream: one key per thread) */
    capture *cap;
    gl_gnode **deps;
    uint32_t ndeps, cap_deps, cap_edges;
    CUgraphEdgeData *edges; /* all zero, parallel to deps (cuStreamGetCaptureInfo_v3) */
    CUgraphNode *shown;     /* deps' handles as cuStreamGetCaptureInfo last gave them */
    uint32_t cap_shown;
} cstream;

typedef struct {
    uint64_t event;
    capture *cap;
    gl_gnode **deps;
    uint32_t ndeps;
} cevent;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static capture *g_captures;
static cstream *g_streams;
static uint32_t g_nstreams, g_cap_streams;
static cevent *g_events;
static uint32_t g_nevents, g_cap_events;
static gl_hmap *g_nonblocking; /* stream -> 1 */
static uint64_t g_next_id;
atomic_int gl_captures_live;
static __thread int t_mode;        /* CU_STREAM_CAPTURE_MODE_GLOBAL */
static __thread cstream *t_op;     /* the operation begun by gl_capture_begin_op */

/* ------------------------------------------------------------ lookups */

/* The key of a stream as sent (gl_stream_arg): 0 for the legacy stream. */
static uint64_t key_of(uint64_t sent)
{
    if (sent == 0 || sent == GL_CU_STREAM_LEGACY)
        return 0;
    if (sent == GL_CU_STREAM_PER_THREAD)
        return (uint64_t)(uintptr_t)pthread_self() ^ (UINT64_C(0x70) << 56);
    return sent;
}

static cstream *find_stream(uint64_t key)
{
    for (uint32_t i = 0; key != 0 && i < g_nstreams; i++)
        if (g_streams[i].key == key)
            return &g_streams[i];
    return NULL;
}

static cevent *find_event(uint64_t event)
{
    for (uint32_t i = 0; i < g_nevents; i++)
        if (g_events[i].event == event)
            return &g_events[i];
    return NULL;
}

static int blocking(uint64_t key)
{
    return key != 0 && (g_nonblocking == NULL || gl_hmap_get(g_nonblocking, key) == NULL);
}

/* A capture with a blocking stream: the legacy stream is unusable meanwhile. */
static int blocking_capture(void)
{
    for (size_t i = 0; i < g_nstreams; i++)
        if (blocking(g_streams[i].key))
            return 1;
    return 0;
}

static void invalidate_blocking(void)
{
    for (size_t i = 0; i < g_nstreams; i++)
        if (blocking(g_streams[i].key))
            g_streams[i].cap->invalid = 1;
}

static void invalidate_all(void)
{
    for (capture *c = g_captures; c != NULL; c = c->next)
        c->invalid = 1;
}

/* ------------------------------------------------------- dependencies */

static int set_deps(cstream *s, gl_gnode *const *deps, size_t n, int add)
{
    if (!add)
        s->ndeps = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t k = 0;
        while (k < s->ndeps && s->deps[k] != deps[i])
            k++;
        if (k < s->ndeps)
            continue;
        if (gl_grow(&s->deps, &s->cap_deps, s->ndeps, sizeof *s->deps, 4) != 0
            || gl_grow(&s->edges, &s->cap_edges, s->ndeps, sizeof *s->edges, 4) != 0)
            return -1;
        s->deps[s->ndeps++] = deps[i];
    }
    memset(s->edges, 0, s->ndeps * sizeof *s->edges);
    return 0;
}

static cstream *add_stream(uint64_t key, capture *c)
{
    if (gl_grow(&g_streams, &g_cap_streams, g_nstreams, sizeof *g_streams, 8) != 0)
        return NULL;
    cstream *s = &g_streams[g_nstreams++];
    memset(s, 0, sizeof *s);
    s->key = key, s->cap = c;
    return s;
}

static void drop_stream(cstream *s)
{
    free(s->deps);
    free(s->edges);
    free(s->shown);
    *s = g_streams[--g_nstreams];
}

static void drop_event(cevent *e)
{
    free(e->deps);
    *e = g_events[--g_nevents];
}

/* The event now stands for the stream's dependencies in its capture. */
static CUresult record_event(uint64_t event, cstream *s)
{
    cevent *e = find_event(event);
    if (e == NULL) {
        if (gl_grow(&g_events, &g_cap_events, g_nevents, sizeof *g_events, 8) != 0)
            return CUDA_ERROR_OUT_OF_MEMORY;
        e = &g_events[g_nevents++];
        memset(e, 0, sizeof *e);
        e->event = event;
    }
    gl_gnode **d = malloc((s->ndeps + 1) * sizeof *d);
    if (d == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(d, s->deps, s->ndeps * sizeof *d);
    free(e->deps);
    e->deps = d, e->ndeps = s->ndeps, e->cap = s->cap;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ nodes */

int gl_capture_begin_op(CUstream stream, int ptds, CUresult *r)
{
    if (gl_on_host_thread() || atomic_load_explicit(&gl_captures_live, memory_order_relaxed) == 0)
        return 0;
    uint64_t key = key_of(gl_stream_arg((uint64_t)(uintptr_t)stream, ptds));
    pthread_mutex_lock(&g_lock);
    cstream *s = find_stream(key);
    if (key == 0 && blocking_capture()) {
        invalidate_blocking();
        *r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    } else if (s != NULL && s->cap->invalid) {
        *r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (s != NULL) {
        pthread_mutex_lock(&gl_graph_lock);
        t_op = s;
        return 1; /* both locks held until gl_capture_add_node */
    } else {
        pthread_mutex_unlock(&g_lock);
        return 0;
    }
    pthread_mutex_unlock(&g_lock);
    return -1;
}

CUresult gl_capture_add_node(int type, CUresult (*fill)(gl_gnode *n, void *arg), void *arg)
{
    cstream *s = t_op;
    CUresult r;
    t_op = NULL;
    gl_gnode *n = gl_gnode_add_nodes_locked(s->cap->graph, type, s->deps, s->ndeps, &r);
    if (n != NULL && (r = fill(n, arg)) != CUDA_SUCCESS) {
        memset(&n->u, 0, sizeof n->u); /* (nothing of its own yet) */
        n->type = GL_CU_GRAPH_NODE_TYPE_EMPTY;
        gl_gnode_remove_locked(n);
        n = NULL;
    }
    if (n != NULL && set_deps(s, &n, 1, 0) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r != CUDA_SUCCESS)
        s->cap->invalid = 1;
    pthread_mutex_unlock(&gl_graph_lock);
    pthread_mutex_unlock(&g_lock);
    return r;
}

static CUresult fill_copy(gl_gnode *n, void *arg)
{
    CUresult r = gl_memcpy_check(arg);
    if (r == CUDA_SUCCESS)
        n->u.copy = *(const CUDA_MEMCPY3D *)arg;
    return r;
}

static CUresult fill_memset(gl_gnode *n, void *arg)
{
    CUresult r = gl_memset_check(arg);
    if (r == CUDA_SUCCESS)
        n->u.memset = *(const CUDA_MEMSET_NODE_PARAMS *)arg;
    return r;
}

int gl_capture_memcpy(CUstream stream, int ptds, const CUDA_MEMCPY3D *p, CUresult *r)
{
    int c = gl_capture_begin_op(stream, ptds, r);
    if (c > 0)
        *r = gl_capture_add_node(GL_CU_GRAPH_NODE_TYPE_MEMCPY, fill_copy, (void *)p);
    return c != 0;
}

int gl_capture_memset(CUstream stream, int ptds, const CUDA_MEMSET_NODE_PARAMS *p, CUresult *r)
{
    int c = gl_capture_begin_op(stream, ptds, r);
    if (c > 0)
        *r = gl_capture_add_node(GL_CU_GRAPH_NODE_TYPE_MEMSET, fill_memset, (void *)p);
    return c != 0;
}

int gl_capture_linear_copy(CUstream stream, int ptds, uint64_t dst, uint64_t src, size_t n,
                           CUresult *r)
{
    CUDA_MEMCPY3D p;
    memset(&p, 0, sizeof p);
    /* Unified: each side is device memory when it lies in the session's
     * allocations, else the program's (as cuMemcpyAsync routes). */
    p.srcMemoryType = p.dstMemoryType = GL_CU_MEMORYTYPE_UNIFIED;
    p.srcDevice = src, p.dstDevice = dst;
    p.WidthInBytes = n, p.Height = p.Depth = 1;
    return gl_capture_memcpy(stream, ptds, &p, r);
}

static CUresult fill_alloc(gl_gnode *n, void *arg)
{
    CUdeviceptr *dptr = arg;
    n->u.alloc.given.bytesize = (size_t)*dptr;
    n->u.alloc.given.poolProps.allocType = 1;     /* pinned */
    n->u.alloc.given.poolProps.location.type = 1; /* on the device */
    CUresult r = gl_graphmem_new((size_t)*dptr, &n->u.alloc.dptr);
    if (r == CUDA_SUCCESS)
        *dptr = n->u.alloc.given.dptr = n->u.alloc.dptr;
    return r;
}

static CUresult fill_free(gl_gnode *n, void *arg)
{
    CUdeviceptr d = *(const CUdeviceptr *)arg;
    if (!gl_graphmem_is(d))
        return CUDA_ERROR_INVALID_VALUE;
    n->u.free_dptr = d;
    return CUDA_SUCCESS;
}

int gl_capture_alloc(CUstream stream, int ptds, CUdeviceptr *dptr, size_t bytesize, CUresult *r)
{
    int c = gl_capture_begin_op(stream, ptds, r);
    if (c > 0) {
        CUdeviceptr v = bytesize;
        if ((*r = gl_capture_add_node(GL_CU_GRAPH_NODE_TYPE_MEM_ALLOC, fill_alloc, &v))
            == CUDA_SUCCESS)
            *dptr = v;
    }
    return c != 0;
}

int gl_capture_free(CUstream stream, int ptds, CUdeviceptr dptr, CUresult *r)
{
    int c = gl_capture_begin_op(stream, ptds, r);
    if (c > 0)
        *r = gl_capture_add_node(GL_CU_GRAPH_NODE_TYPE_MEM_FREE, fill_free, &dptr);
    return c != 0;
}

int gl_capture_refuse(CUstream stream, int ptds, CUresult *r)
{
    int c = gl_capture_begin_op(stream, ptds, r);
    if (c > 0) {
        t_op->cap->invalid = 1;
        t_op = NULL;
        pthread_mutex_unlock(&gl_graph_lock);
        pthread_mutex_unlock(&g_lock);
        *r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    return c != 0;
}

/* -------------------------------------------------- records (batch.c) */

typedef struct {
    uint16_t call;
    const uint64_t *a;
    const void *payload;
    size_t len;
} rec;

static CUresult fill_record(gl_gnode *n, void *arg)
{
    const rec *x = arg;
    const uint64_t *a = x->a;
    if (x->call == GL_CALL_glLaunch || x->call == GL_CALL_glLaunchCluster) {
        /* f, grid[3], block[3], shared, stream, (cluster[3],) size: packed as launched */
        const unsigned grid[3] = {(unsigned)a[1], (unsigned)a[2], (unsigned)a[3]};
        const unsigned block[3] = {(unsigned)a[4], (unsigned)a[5], (unsigned)a[6]};
        unsigned cluster[3] = {0, 0, 0};
        if (x->call == GL_CALL_glLaunchCluster)
            cluster[0] = (unsigned)a[9], cluster[1] = (unsigned)a[10],
            cluster[2] = (unsigned)a[11];
        return gl_kernel_launch_packed(&n->u.kernel, a[0], grid, block, cluster,
                                       (unsigned)a[7], x->payload, x->len);
    }
    if (x->call == GL_CALL_cuEventRecord || x->call == GL_CALL_cuStreamWaitEvent) {
        n->u.event = x->call == GL_CALL_cuEventRecord ? a[0] : a[1];
        return CUDA_SUCCESS;
    }
    CUDA_MEMCPY3D p;
    memset(&p, 0, sizeof p);
    p.srcMemoryType = p.dstMemoryType = GL_CU_MEMORYTYPE_DEVICE;
    p.Depth = 1;
    if (x->call == GL_CALL_cuMemcpyDtoDAsync) { /* dst, src, n, stream */
        p.dstDevice = a[0], p.srcDevice = a[1], p.WidthInBytes = a[2], p.Height = 1;
    } else { /* glMemcpy2DDtoD: dst, dpitch, src, spitch, width, height, stream */
        p.dstDevice = a[0], p.dstPitch = a[1], p.srcDevice = a[2], p.srcPitch = a[3];
        p.WidthInBytes = a[4], p.Height = a[5];
    }
    return fill_copy(n, &p);
}

static CUresult fill_memset_record(gl_gnode *n, void *arg)
{
    const rec *x = arg;
    /* dst, value, count, stream */
    unsigned elem = x->call == GL_CALL_cuMemsetD8Async ? 1 : x->call == GL_CALL_cuMemsetD16Async
                                                                  ? 2 : 4;
    CUDA_MEMSET_NODE_PARAMS p = {x->a[0], x->a[2] * elem, (unsigned)x->a[1], elem, x->a[2], 1};
    return fill_memset(n, &p);
}

/* The name of a recorded call (the interposer has no table of all of them). */
static const char *call_name(uint16_t call)
{
    switch (call) {
    case GL_CALL_cuCtxSynchronize: return "cuCtxSynchronize";
    case GL_CALL_cuEventQuery: return "cuEventQuery";
    case GL_CALL_cuEventSynchronize: return "cuEventSynchronize";
    case GL_CALL_cuStreamQuery: return "cuStreamQuery";
    case GL_CALL_cuStreamSynchronize: return "cuStreamSynchronize";
    case GL_CALL_glMemcpyHtoD: case GL_CALL_glMemcpy2DHtoD: return "a copy from host memory";
    case GL_CALL_glMemcpyDtoH: case GL_CALL_glMemcpy2DDtoH: return "a copy to host memory";
    default: return call < GL_CALL_COUNT ? gl_call_api_names[call] : "a stream operation";
    }
}

/* An operation on a capturing stream, with both locks held (begin_op's). */
static CUresult capture_op(uint16_t call, rec *x)
{
    switch (call) {
    case GL_CALL_glLaunch:
    case GL_CALL_glLaunchCluster:
        return gl_capture_add_node(GL_CU_GRAPH_NODE_TYPE_KERNEL, fill_record, x);
    case GL_CALL_cuMemcpyDtoDAsync:
    case GL_CALL_glMemcpy2DDtoD:
        return gl_capture_add_node(GL_CU_GRAPH_NODE_TYPE_MEMCPY, fill_record, x);
    case GL_CALL_cuMemsetD8Async:
    case GL_CALL_cuMemsetD16Async:
    case GL_CALL_cuMemsetD32Async:
        return gl_capture_add_node(GL_CU_GRAPH_NODE_TYPE_MEMSET, fill_memset_record, x);
    default: { /* nothing else may be captured */
        cstream *s = t_op;
        t_op = NULL;
        s->cap->invalid = 1;
        pthread_mutex_unlock(&gl_graph_lock);
        pthread_mutex_unlock(&g_lock);
        gl_log(GL_LOG_ERROR, "cuStreamBeginCapture", "%s cannot be captured into a graph "
               "here; the capture is invalidated (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)",
               call_name(call));
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    }
}

/* cuEventRecord (event, stream) and cuStreamWaitEvent (stream, event, flags). */
static int event_op(uint16_t call, const uint64_t *a, CUresult *r)
{
    uint64_t event = call == GL_CALL_cuEventRecord ? a[0] : a[1];
    uint64_t key = key_of(call == GL_CALL_cuEventRecord ? a[1] : a[0]);
    int external = call == GL_CALL_cuStreamWaitEvent && (a[2] & GL_CU_EVENT_WAIT_EXTERNAL);
    *r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_lock);
    cstream *s = find_stream(key);
    cevent *e = find_event(event);
    if (key == 0 && blocking_capture()) {
        invalidate_blocking();
        *r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    } else if (s != NULL && s->cap->invalid) {
        *r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (call == GL_CALL_cuEventRecord && s != NULL) {
        *r = record_event(event, s); /* the event now stands for the stream's position */
    } else if (call == GL_CALL_cuEventRecord) {
        if (e != NULL)
            drop_event(e); /* recorded outside any capture again */
        pthread_mutex_unlock(&g_lock);
        return 0;
    } else if (external && s != NULL) {
        pthread_mutex_lock(&gl_graph_lock);
        t_op = s;
        rec x = {call, a, NULL, 0};
        return (*r = gl_capture_add_node(GL_CU_GRAPH_NODE_TYPE_WAIT_EVENT, fill_record, &x)),
               1; /* (both locks released) */
    } else if (e == NULL && s == NULL) {
        pthread_mutex_unlock(&g_lock);
        return 0; /* an ordinary wait */
    } else if (e == NULL || (s != NULL && s->cap != e->cap)) {
        /* A non-captured event, or another capture's (two graphs would merge). */
        if (s != NULL)
            s->cap->invalid = 1;
        *r = e == NULL ? CUDA_ERROR_STREAM_CAPTURE_ISOLATION : CUDA_ERROR_STREAM_CAPTURE_MERGE;
    } else if (e->cap->invalid) {
        *r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (s == NULL) { /* fork: the stream joins the event's capture */
        s = add_stream(key, e->cap);
        if (s == NULL || set_deps(s, e->deps, e->ndeps, 0) != 0)
            *r = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (set_deps(s, e->deps, e->ndeps, 1) != 0) { /* join */
        *r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&g_lock);
    return 1;
}

/* A wait or query of a stream, an event or the context. */
static int sync_op(uint16_t call, const uint64_t *a, CUresult *r)
{
    pthread_mutex_lock(&g_lock);
    *r = CUDA_SUCCESS;
    if (call == GL_CALL_cuCtxSynchronize) {
        if (g_captures != NULL) {
            invalidate_all();
            *r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    } else if (call == GL_CALL_cuEventQuery || call == GL_CALL_cuEventSynchronize) {
        cevent *e = find_event(a[0]);
        if (e != NULL) {
            e->cap->invalid = 1;
            *r = CUDA_ERROR_CAPTURED_EVENT;
        }
    } else {
        uint64_t key = key_of(a[0]);
        cstream *s = find_stream(key);
        if (key == 0 && blocking_capture()) {
            invalidate_blocking();
            *r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        } else if (s != NULL) {
            s->cap->invalid = 1;
            *r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    }
    pthread_mutex_unlock(&g_lock);
    if (*r != CUDA_SUCCESS)
        return 1;
    /* Waiting on other work is a potentially unsafe call (the thread's mode). */
    *r = gl_capture_unsafe_call(call_name(call));
    return *r != CUDA_SUCCESS;
}

static int stream_destroy_op(const uint64_t *a, CUresult *r); /* below, by the joins */

int gl_capture_record(uint16_t call, const uint64_t *args, uint8_t nargs, const void *payload,
                      size_t len)
{
    CUresult r;
    if (call == GL_CALL_cuStreamCreate || call == GL_CALL_cuStreamCreateWithPriority) {
        if (nargs >= 2 && (args[1] & GL_CU_STREAM_NON_BLOCKING)) {
            pthread_mutex_lock(&g_lock);
            if (g_nonblocking == NULL)
                g_nonblocking = gl_hmap_new();
            if (g_nonblocking != NULL)
                gl_hmap_put(g_nonblocking, args[0], (void *)1);
            pthread_mutex_unlock(&g_lock);
        }
        return GL_CAPTURE_PASS;
    }
    if (atomic_load_explicit(&gl_captures_live, memory_order_relaxed) == 0)
        return GL_CAPTURE_PASS;
    switch (call) {
    case GL_CALL_cuEventRecord:
    case GL_CALL_cuStreamWaitEvent:
        return event_op(call, args, &r) ? (int)r : GL_CAPTURE_PASS;
    case GL_CALL_cuCtxSynchronize:
    case GL_CALL_cuEventQuery:
    case GL_CALL_cuEventSynchronize:
    case GL_CALL_cuStreamQuery:
    case GL_CALL_cuStreamSynchronize:
        return sync_op(call, args, &r) ? (int)r : GL_CAPTURE_PASS;
    case GL_CALL_cuStreamDestroy:
        return stream_destroy_op(args, &r) && r != CUDA_SUCCESS ? (int)r : GL_CAPTURE_PASS;
    default:
        break;
    }
    int at = gl_call_stream_arg[call];
    if (at < 0 || at >= nargs)
        return GL_CAPTURE_PASS;
    int c = gl_capture_begin_op((CUstream)(uintptr_t)args[at], 0, &r);
    if (c <= 0)
        return c < 0 ? (int)r : GL_CAPTURE_PASS;
    rec x = {call, args, payload, len};
    return (int)capture_op(call, &x);
}

/* ------------------------------------------------- modes and unsafe calls */

CUresult gl_capture_unsafe_call(const char *name)
{
    pthread_t self = pthread_self();
    int forbidden = 0;
    if (t_mode == GL_CU_STREAM_CAPTURE_MODE_RELAXED || gl_on_host_thread())
        return CUDA_SUCCESS;
    pthread_mutex_lock(&g_lock);
    for (capture *c = g_captures; c != NULL; c = c->next) {
        int mine = pthread_equal(c->thread, self);
        if ((mine && c->mode != GL_CU_STREAM_CAPTURE_MODE_RELAXED)
            || (!mine && t_mode == GL_CU_STREAM_CAPTURE_MODE_GLOBAL
                && c->mode == GL_CU_STREAM_CAPTURE_MODE_GLOBAL)) {
            c->invalid = 1;
            forbidden = 1;
        }
    }
    pthread_mutex_unlock(&g_lock);
    if (!forbidden)
        return CUDA_SUCCESS;
    gl_log(GL_LOG_WARNING, name, "%s during a stream capture is not permitted in this thread's "
           "capture mode; the capture is invalidated (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)",
           name);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult gli_cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode, int ptds)
{
    (void)ptds;
    if (mode == NULL || *mode < 0 || *mode > GL_CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = t_mode;
    t_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------- begin and end */

static CUresult check_stream(CUstream hStream)
{
    CUresult r = gl_ready();
    return r != CUDA_SUCCESS ? r : gl_check_handle(GL_H_STREAM, (uint64_t)(uintptr_t)hStream);
}

static CUresult begin(CUstream hStream, CUgraph hGraph, const CUgraphNode *deps, size_t ndeps,
                      CUstreamCaptureMode mode, int ptds)
{
    CUresult r = check_stream(hStream);
    if (r != CUDA_SUCCESS)
        return r;
    if (mode < 0 || mode > GL_CU_STREAM_CAPTURE_MODE_RELAXED || (ndeps > 0 && deps == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t key = key_of(gl_stream_arg((uint64_t)(uintptr_t)hStream, ptds));
    if (key == 0)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* the legacy stream */
    capture *c = calloc(1, sizeof *c);
    if (c == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_lock);
    pthread_mutex_lock(&gl_graph_lock);
    cstream *s = NULL;
    gl_graph *g = hGraph != NULL ? gl_graph_of(hGraph) : gl_graph_new_locked(0);
    if (find_stream(key) != NULL)
        r = CUDA_ERROR_ILLEGAL_STATE; /* already capturing */
    /* (a child graph is its node's; a conditional node's body is the program's to fill) */
    else if (g == NULL || (hGraph != NULL && (g->capturing || (g->child && g->owner == NULL))))
        r = hGraph != NULL ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_OUT_OF_MEMORY;
    else if ((s = add_stream(key, c)) == NULL)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; r == CUDA_SUCCESS && i < ndeps; i++) {
        gl_gnode *d = gl_gnode_of(deps[i]);
        if (d == NULL || d->graph != g || set_deps(s, &d, 1, 1) != 0)
            r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        c->id = ++g_next_id;
        c->graph = g, c->mode = mode, c->thread = pthread_self();
        c->to_graph = hGraph != NULL, c->origin = key, c->first = g->n;
        g->capturing = 1;
        c->next = g_captures;
        g_captures = c;
        atomic_fetch_add(&gl_captures_live, 1);
        atomic_fetch_add(&gl_gate, 1);
    } else {
        if (s != NULL)
            drop_stream(s);
        if (hGraph == NULL && g != NULL)
            gl_graph_free_locked(g);
        free(c);
    }
    pthread_mutex_unlock(&gl_graph_lock);
    pthread_mutex_unlock(&g_lock);
    return r;
}

CUresult gli_cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode, int ptds)
{
    return begin(hStream, NULL, NULL, 0, mode, ptds);
}

CUresult gli_cuStreamBeginCapture(CUstream hStream, int ptds)
{
    return begin(hStream, NULL, NULL, 0, GL_CU_STREAM_CAPTURE_MODE_GLOBAL, ptds);
}

CUresult gls_cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                         const CUgraphNode *dependencies,
                                         const CUgraphEdgeData *dependencyData,
                                         size_t numDependencies, CUstreamCaptureMode mode,
                                         int ptds)
{
    static const CUgraphEdgeData zero;
    if (hGraph == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; dependencyData != NULL && i < numDependencies; i++)
        if (memcmp(&dependencyData[i], &zero, sizeof zero) != 0)
            return CUDA_ERROR_NOT_SUPPORTED;
    return begin(hStream, hGraph, dependencies, numDependencies, mode, ptds);
}

/* Marks n and every node it depends on (an explicit stack: graphs are deep). */
static int mark_ancestors(gl_htable *seen, gl_gnode *n, uint32_t total)
{
    gl_gnode **stack = malloc(((size_t)total + 1) * sizeof *stack);
    uint32_t top = 0;
    if (stack == NULL)
        return -1;
    if (gl_htable_find(seen, n->handle) == NULL && gl_htable_put(seen, n->handle, n) == 0)
        stack[top++] = n;
    while (top > 0) {
        gl_gnode *v = stack[--top];
        for (uint32_t d = 0; d < v->ndeps; d++)
            if (gl_htable_find(seen, v->deps[d]->handle) == NULL
                && gl_htable_put(seen, v->deps[d]->handle, v->deps[d]) == 0)
                stack[top++] = v->deps[d];
    }
    free(stack);
    return 0;
}

/* Every stream that joined the capture must have been joined back: what it
 * depends on now, the origin stream depends on (nodes left behind by direct
 * changes of dependencies do not count, as CUDA documents). */
static int joined(const capture *c, const cstream *origin, const cstream *only)
{
    gl_htable seen = {0};
    int ok = 1;
    for (uint32_t i = 0; ok && i < origin->ndeps; i++)
        ok = mark_ancestors(&seen, origin->deps[i], c->graph->n) == 0;
    for (uint32_t i = 0; ok && i < g_nstreams; i++) {
        const cstream *t = &g_streams[i];
        for (uint32_t d = 0; ok && t->cap == c && (only == NULL || t == only) && d < t->ndeps; d++)
            ok = gl_htable_find(&seen, t->deps[d]->handle) != NULL;
    }
    gl_htable_free(&seen);
    return ok;
}

/* cuStreamDestroy of a stream taking part in a capture. A stream that forked
 * from the capture and was joined back into its origin leaves it (its work
 * stays in the graph; cuda-samples' graphMemoryNodes destroys such a stream
 * before ending the capture); the record then destroys it as usual. The
 * origin, or a stream whose work the origin does not yet depend on, would
 * take the capture's bookkeeping with it: refused, invalidating the capture. */
static int stream_destroy_op(const uint64_t *a, CUresult *r)
{
    uint64_t key = key_of(a[0]);
    *r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_lock);
    pthread_mutex_lock(&gl_graph_lock);
    cstream *s = find_stream(key), *origin = NULL;
    if (s != NULL && s->cap->origin != key)
        origin = find_stream(s->cap->origin);
    if (s != NULL && origin != NULL && !s->cap->invalid && joined(s->cap, origin, s))
        drop_stream(s);
    else if (s != NULL) {
        s->cap->invalid = 1;
        *r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    pthread_mutex_unlock(&gl_graph_lock);
    pthread_mutex_unlock(&g_lock);
    if (*r != CUDA_SUCCESS)
        gl_log(GL_LOG_ERROR, "cuStreamDestroy_v2", "cuStreamDestroy_v2 of a capture's origin "
               "stream, or of a stream not joined back into it, before cuStreamEndCapture; the "
               "capture is invalidated (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)");
    return s != NULL;
}

CUresult gli_cuStreamEndCapture(CUstream hStream, CUgraph *phGraph, int ptds)
{
    CUresult r = check_stream(hStream);
    if (r != CUDA_SUCCESS)
        return r;
    if (phGraph != NULL)
        *phGraph = NULL;
    uint64_t key = key_of(gl_stream_arg((uint64_t)(uintptr_t)hStream, ptds));
    pthread_mutex_lock(&g_lock);
    pthread_mutex_lock(&gl_graph_lock);
    cstream *s = find_stream(key);
    capture *c = s != NULL ? s->cap : NULL;
    if (c == NULL)
        r = CUDA_ERROR_ILLEGAL_STATE; /* not capturing */
    else if (phGraph == NULL && !c->to_graph) /* (into the program's graph: nothing to hand back) */
        r = CUDA_ERROR_INVALID_VALUE;
    else if (c->origin != key)
        r = CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    else if (c->mode != GL_CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(c->thread,
                                                                          pthread_self()))
        r = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    if (r != CUDA_SUCCESS) {
        pthread_mutex_unlock(&gl_graph_lock);
        pthread_mutex_unlock(&g_lock);
        return r;
    }
    if (c->invalid)
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    else if (!joined(c, s, NULL))
        r = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    /* The capture ends for every stream and event in it. */
    for (uint32_t i = g_nstreams; i-- > 0;)
        if (g_streams[i].cap == c)
            drop_stream(&g_streams[i]);
    for (uint32_t i = g_nevents; i-- > 0;)
        if (g_events[i].cap == c)
            drop_event(&g_events[i]);
    for (capture **p = &g_captures; *p != NULL; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    c->graph->capturing = 0;
    if (r == CUDA_SUCCESS && phGraph != NULL)
        *phGraph = (CUgraph)(uintptr_t)c->graph->handle;
    else if (!c->to_graph)
        gl_graph_free_locked(c->graph);
    atomic_fetch_sub(&gl_captures_live, 1);
    atomic_fetch_sub(&gl_gate, 1);
    pthread_mutex_unlock(&gl_graph_lock);
    pthread_mutex_unlock(&g_lock);
    free(c);
    return r;
}

/* ------------------------------------------------------------ queries */

CUresult gli_cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                       cuuint64_t *id_out, CUgraph *graph_out,
                                       const CUgraphNode **dependencies_out,
                                       const CUgraphEdgeData **edgeData_out,
                                       size_t *numDependencies_out, int ptds)
{
    CUresult r = check_stream(hStream);
    if (r != CUDA_SUCCESS)
        return r;
    if (captureStatus_out == NULL || (edgeData_out != NULL && dependencies_out == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t key = key_of(gl_stream_arg((uint64_t)(uintptr_t)hStream, ptds));
    pthread_mutex_lock(&g_lock);
    cstream *s = find_stream(key);
    if (key == 0 && blocking_capture()) {
        pthread_mutex_unlock(&g_lock);
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT; /* (the capture is not invalidated) */
    }
    *captureStatus_out = s == NULL ? GL_CU_STREAM_CAPTURE_STATUS_NONE
                         : s->cap->invalid ? GL_CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                           : GL_CU_STREAM_CAPTURE_STATUS_ACTIVE;
    /* The other outputs are defined for an active capture; gleam zeroes them
     * otherwise. The arrays stay valid until the stream's next call. */
    if (id_out)
        *id_out = s != NULL ? s->cap->id : 0;
    if (graph_out)
        *graph_out = s != NULL ? (CUgraph)(uintptr_t)s->cap->graph->handle : NULL;
    /* (the program gets the nodes' handles, never the interposer's objects) */
    for (uint32_t i = 0; s != NULL && dependencies_out != NULL && i < s->ndeps; i++) {
        if (gl_grow(&s->shown, &s->cap_shown, i, sizeof *s->shown, 4) != 0) {
            pthread_mutex_unlock(&g_lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        s->shown[i] = (CUgraphNode)(uintptr_t)s->deps[i]->handle;
    }
    if (dependencies_out)
        *dependencies_out = s != NULL ? (const CUgraphNode *)s->shown : NULL;
    if (edgeData_out)
        *edgeData_out = s != NULL ? s->edges : NULL;
    if (numDependencies_out)
        *numDependencies_out = s != NULL ? s->ndeps : 0;
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
}

CUresult gli_cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                       cuuint64_t *id_out, CUgraph *graph_out,
                                       const CUgraphNode **dependencies_out,
                                       size_t *numDependencies_out, int ptds)
{
    return gli_cuStreamGetCaptureInfo_v3(hStream, captureStatus_out, id_out, graph_out,
                                         dependencies_out, NULL, numDependencies_out, ptds);
}

CUresult gli_cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                    cuuint64_t *id_out, int ptds)
{
    return gli_cuStreamGetCaptureInfo_v3(hStream, captureStatus_out, id_out, NULL, NULL, NULL,
                                         NULL, ptds);
}

CUresult gli_cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus,
                                 int ptds)
{
    return gli_cuStreamGetCaptureInfo_v3(hStream, captureStatus, NULL, NULL, NULL, NULL, NULL,
                                         ptds);
}

CUresult gls_cuStreamUpdateCaptureDependencies_v2(CUstream hStream, CUgraphNode *dependencies,
                                                  const CUgraphEdgeData *dependencyData,
                                                  size_t numDependencies, unsigned int flags,
                                                  int ptds)
{
    static const CUgraphEdgeData zero;
    CUresult r = gl_check_handle(GL_H_STREAM, (uint64_t)(uintptr_t)hStream);
    if (r != CUDA_SUCCESS)
        return r;
    if (flags > GL_CU_STREAM_SET_CAPTURE_DEPENDENCIES || (numDependencies > 0 && !dependencies))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; dependencyData != NULL && i < numDependencies; i++)
        if (memcmp(&dependencyData[i], &zero, sizeof zero) != 0)
            return CUDA_ERROR_NOT_SUPPORTED;
    uint64_t key = key_of(gl_stream_arg((uint64_t)(uintptr_t)hStream, ptds));
    pthread_mutex_lock(&g_lock);
    pthread_mutex_lock(&gl_graph_lock);
    cstream *s = find_stream(key);
    gl_gnode **d = calloc(numDependencies + 1, sizeof *d);
    if (s == NULL)
        r = CUDA_ERROR_ILLEGAL_STATE;
    else if (s->cap->invalid)
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    else if (d == NULL)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; r == CUDA_SUCCESS && i < numDependencies; i++)
        if ((d[i] = gl_gnode_of(dependencies[i])) == NULL || d[i]->graph != s->cap->graph)
            r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS
        && set_deps(s, d, numDependencies, flags == GL_CU_STREAM_ADD_CAPTURE_DEPENDENCIES) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&gl_graph_lock);
    pthread_mutex_unlock(&g_lock);
    free(d);
    return r;
}

CUresult gls_cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies,
                                               size_t numDependencies, unsigned int flags,
                                               int ptds)
{
    return gls_cuStreamUpdateCaptureDependencies_v2(hStream, dependencies, NULL,
                                                    numDependencies, flags, ptds);
}

/* ------------------------------------------------------ event records */

static CUresult fill_event(gl_gnode *n, void *arg)
{
    n->u.event = (uint64_t)(uintptr_t)arg;
    return CUDA_SUCCESS;
}

/* CU_EVENT_RECORD_EXTERNAL: in a capture, an event record node (the event is
 * recorded when the graph runs); otherwise the plain record. */
CUresult gli_cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags,
                                    int ptds)
{
    CUresult r;
    if (flags > GL_CU_EVENT_RECORD_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & GL_CU_EVENT_RECORD_EXTERNAL) {
        if ((r = gl_check_handle(GL_H_EVENT, (uint64_t)(uintptr_t)hEvent)) != CUDA_SUCCESS)
            return r;
        int c = gl_capture_begin_op(hStream, ptds, &r);
        if (c < 0)
            return r;
        if (c > 0)
            return gl_capture_add_node(GL_CU_GRAPH_NODE_TYPE_EVENT_RECORD, fill_event, hEvent);
    }
    return glw_cuEventRecord(hEvent, hStream, ptds);
}
