/*
 * hostfn.c — host functions (cuLaunchHostFunc, cuStreamAddCallback, graph
 * host nodes) run in the program's process, on one host-function thread of
 * the interposer, in the order the program enqueued them.
 *
 * A host function is a *job* behind which batch.c holds the program's later
 * records: the thread waits until the server has run everything sent before
 * the job (a cuStreamSynchronize of the job's stream: the documented "same
 * effect as synchronizing an event recorded in the same stream immediately
 * prior"), calls the function, then moves the held records on. So the
 * function runs after all earlier work of its stream and before any later
 * work of any stream; CUDA allows that much order ("host functions without a
 * mandated order ... may be serialized", and they must not wait for work not
 * mandated to run before them). The thread holds no interposer lock while the
 * function runs, and a CUDA call the function makes gets
 * CUDA_ERROR_NOT_PERMITTED (the gate in every exported stub).
 *
 * Errors: cuLaunchHostFunc's function is skipped when the context has a
 * device error (as documented); a cuStreamAddCallback callback always runs,
 * with that error as its status. Errors of the thread's own waits stay owed
 * to the program's next waiting call (batch.c).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "graph.h"
#include "internal.h"

/* Why a stub takes its slow path: tracing, a capture, a host function running. */
atomic_int gl_gate;
static __thread int t_in_host_fn;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_started;

/* Errors that leave the context unusable (device faults), and a lost server:
 * host functions do not run after them, callbacks are told. */
static int context_error(CUresult r)
{
    return r == CUDA_ERROR_ILLEGAL_ADDRESS || (r >= 702 && r <= 719 && r != 712 && r != 713)
           || r == CUDA_ERROR_DEVICE_UNAVAILABLE;
}

CUresult gl_host_reach(uint64_t stream)
{
    CUresult status = glw_cuStreamSynchronize((CUstream)(uintptr_t)stream, 0);
    CUresult deferred = gl_hold_last_deferred();
    if (status == CUDA_SUCCESS && context_error(deferred))
        status = deferred;
    return status;
}

static void *host_thread(void *unused)
{
    (void)unused;
    gl_hold_become_host_thread();
    for (;;) {
        gl_held_job job;
        gl_hold_next_job(&job);
        if (job.ctx != 0)
            gli_cuCtxSetCurrent((CUcontext)(uintptr_t)job.ctx, 0);
        job.fn(job.data, job.reach ? gl_host_reach(job.stream) : CUDA_SUCCESS);
    }
    return NULL;
}

static void start(void)
{
    pthread_t t;
    sigset_t all, old;

    /* Signals go to the program's own threads, as without gleam. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pthread_create(&t, NULL, host_thread, NULL) == 0) {
        pthread_detach(t);
        g_started = 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

CUresult gl_host_job(const gl_held_job *job)
{
    pthread_once(&g_once, start);
    if (!g_started)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return gl_hold_job(job);
}

/* Runs a program's function with the gate closed to it. */
static void call_program(void (*run)(void *), void *arg)
{
    atomic_fetch_add(&gl_gate, 1);
    t_in_host_fn = 1;
    run(arg);
    t_in_host_fn = 0;
    atomic_fetch_sub(&gl_gate, 1);
}

CUresult gl_gate_check(const char *name, int cls)
{
    if (t_in_host_fn && !(cls & GL_GATE_ANY_TIME)) {
        gl_log(GL_LOG_WARNING, name, "%s called from a host function (CUDA calls are not "
               "permitted there); returning CUDA_ERROR_NOT_PERMITTED", name);
        return CUDA_ERROR_NOT_PERMITTED;
    }
    if ((cls & GL_GATE_UNSAFE) && atomic_load_explicit(&gl_captures_live, memory_order_relaxed))
        return gl_capture_unsafe_call(name);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------- cuLaunchHostFunc */

typedef struct {
    CUhostFn fn;
    void *data;
    CUstreamCallback callback; /* cuStreamAddCallback */
    CUstream stream;           /* as the program named it */
    CUresult status;
} host_call;

static void run_fn(void *arg)
{
    host_call *c = arg;
    if (c->callback != NULL)
        c->callback(c->stream, c->status, c->data);
    else
        c->fn(c->data);
}

static void host_call_job(void *data, CUresult status)
{
    host_call *c = data;
    c->status = status;
    /* A host function is skipped after a device error; a callback is told. */
    if (c->callback != NULL || status == CUDA_SUCCESS)
        call_program(run_fn, c);
    free(c);
}

static CUresult enqueue(CUstream hStream, host_call *c, int ptds)
{
    uint64_t ctx = gl_ctx_current();
    if (ctx == 0) {
        free(c);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    const gl_held_job job = {host_call_job, c, gl_stream_arg((uint64_t)(uintptr_t)hStream, ptds),
                             ctx, 1};
    CUresult r = gl_host_job(&job);
    if (r != CUDA_SUCCESS)
        free(c);
    return r;
}

static CUresult fill_host(gl_gnode *n, void *arg)
{
    n->u.host = *(const CUDA_HOST_NODE_PARAMS *)arg;
    return CUDA_SUCCESS;
}

CUresult gls_cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData, int ptds)
{
    CUresult r = gl_check_handle(GL_H_STREAM, (uint64_t)(uintptr_t)hStream);

    if (r != CUDA_SUCCESS)
        return r;
    if (fn == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    int c = gl_capture_begin_op(hStream, ptds, &r);
    if (c < 0)
        return r;
    if (c > 0) {
        CUDA_HOST_NODE_PARAMS p = {fn, userData};
        return gl_capture_add_node(GL_CU_GRAPH_NODE_TYPE_HOST, fill_host, &p);
    }
    host_call *hc = calloc(1, sizeof *hc);
    if (hc == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    hc->fn = fn, hc->data = userData;
    return enqueue(hStream, hc, ptds);
}

CUresult gls_cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData,
                                 unsigned int flags, int ptds)
{
    CUresult r = gl_check_handle(GL_H_STREAM, (uint64_t)(uintptr_t)hStream);

    if (r != CUDA_SUCCESS)
        return r;
    if (callback == NULL || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* Not captured, as documented: a capturing stream refuses it. */
    if (gl_capture_refuse(hStream, ptds, &r))
        return r;
    host_call *hc = calloc(1, sizeof *hc);
    if (hc == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    hc->callback = callback, hc->data = userData, hc->stream = hStream;
    return enqueue(hStream, hc, ptds);
}

/* ---------------------------------------------- graph host nodes */

typedef struct {
    CUhostFn fn;
    void *data;
} plain_call;

static void run_plain(void *arg)
{
    plain_call *p = arg;
    p->fn(p->data);
}

void gl_host_node_run(CUhostFn fn, void *data)
{
    plain_call p = {fn, data};
    call_program(run_plain, &p);
}
