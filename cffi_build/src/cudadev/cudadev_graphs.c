/*
 * cudadev_graphs.c — the cuda backend builds each stage of an instantiated
 * graph (exec_graphs.c) as a real CUDA graph with the driver, instantiates it
 * once, and launches a stage with one cuGraphLaunch. Kernel nodes take the
 * packed parameters as launches do (the `extra` buffer form), a cluster as
 * the node's cluster attribute; memsets and copies are device-to-device
 * nodes in the session's context; event nodes name the session's events.
 *
 * Separate real graphs lose CUDA's ordering of one exec's launches (each
 * launch after the one before, whatever the streams), so an event of the
 * graph's own is recorded after each stage's launch and waited for before
 * the next. An update rebuilds the stages and applies them with
 * cuGraphExecUpdate, or instantiates them again when the driver refuses.
 *
 * Ownership: a gl_sgraph's `backend` is a cuda_graph (the stages' execs and
 * the event), freed by destroy.
 */
#include <stdlib.h>
#include <string.h>

#include "cudadev_graphs.h"

#define GL_CU_EVENT_DISABLE_TIMING 2u

typedef struct { /* CUDA_KERNEL_NODE_PARAMS_v2 */
    CUfunction func;
    unsigned grid[3], block[3], shared;
    void **kernelParams, **extra;
    void *kern;
    CUcontext ctx;
} kernel_params;
typedef struct { /* CUDA_MEMSET_NODE_PARAMS */
    CUdeviceptr dst;
    size_t pitch;
    unsigned value, elementSize;
    size_t width, height;
} memset_params;
typedef union { /* CUkernelNodeAttrValue: 64 bytes */
    char bytes[64];
    unsigned clusterDim[3];
} node_attr;
typedef void *graph_t, *node_t, *exec_t;

typedef CUresult (*fn_create)(graph_t *, unsigned);
typedef CUresult (*fn_destroy)(void *);
typedef CUresult (*fn_kernel)(node_t *, graph_t, const node_t *, size_t, const kernel_params *);
typedef CUresult (*fn_attr)(node_t, int, const node_attr *);
typedef CUresult (*fn_memset)(node_t *, graph_t, const node_t *, size_t, const memset_params *,
                              CUcontext);
typedef CUresult (*fn_memcpy)(node_t *, graph_t, const node_t *, size_t, const CUDA_MEMCPY3D *,
                              CUcontext);
typedef CUresult (*fn_empty)(node_t *, graph_t, const node_t *, size_t);
typedef CUresult (*fn_event_node)(node_t *, graph_t, const node_t *, size_t, CUevent);
typedef CUresult (*fn_instantiate)(exec_t *, graph_t, unsigned long long);
typedef CUresult (*fn_update)(exec_t, graph_t, void *info);
typedef CUresult (*fn_launch)(exec_t, CUstream);
typedef CUresult (*fn_event_create)(CUevent *, unsigned);
typedef CUresult (*fn_event_record)(CUevent, CUstream);
typedef CUresult (*fn_wait)(CUstream, CUevent, unsigned);
typedef CUresult (*fn_sync)(void);

#define GL_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION_ID 4

typedef struct {
    exec_t *exec; /* per stage; NULL: no nodes */
    CUevent done; /* recorded after each stage launch */
    int recorded;
} cuda_graph;

static int usable(gl_exec *x)
{
    const gl_cuda_extra *f = gl_cuda_fns(x);
    return f->cuGraphCreate && f->cuGraphDestroy && f->cuGraphAddKernelNode_v2
           && f->cuGraphAddMemsetNode && f->cuGraphAddMemcpyNode && f->cuGraphAddEmptyNode
           && f->cuGraphAddEventRecordNode && f->cuGraphAddEventWaitNode
           && f->cuGraphInstantiateWithFlags && f->cuGraphLaunch && f->cuGraphExecDestroy
           && gl_cuda_call(x, GL_CALL_cuEventCreate) && gl_cuda_call(x, GL_CALL_cuEventRecord)
           && gl_cuda_call(x, GL_CALL_cuStreamWaitEvent)
           && gl_cuda_call(x, GL_CALL_cuEventDestroy);
}

/* One node of the real graph, after its dependencies. */
static CUresult add_node(gl_exec *x, const gl_sgraph *g, const gl_graph_node *n, void *object,
                         graph_t graph, const node_t *deps, size_t ndeps, node_t *out)
{
    const gl_cuda_extra *f = gl_cuda_fns(x);
    CUcontext ctx = gl_cuda_context(x);
    switch (n->kind) {
    case GL_GN_KERNEL: {
        size_t size = n->u.kernel.params_len;
        void *extra[] = {GL_CU_LAUNCH_PARAM_BUFFER_POINTER, g->params + n->u.kernel.params_off,
                         GL_CU_LAUNCH_PARAM_BUFFER_SIZE, &size, GL_CU_LAUNCH_PARAM_END};
        kernel_params p;
        memset(&p, 0, sizeof p);
        p.func = (CUfunction)object;
        memcpy(p.grid, n->u.kernel.grid, sizeof p.grid);
        memcpy(p.block, n->u.kernel.block, sizeof p.block);
        p.shared = n->u.kernel.shared;
        p.extra = extra; /* (the driver copies the parameters) */
        CUresult r = ((fn_kernel)f->cuGraphAddKernelNode_v2)(out, graph, deps, ndeps, &p);
        const uint32_t *c = n->u.kernel.cluster;
        if (r != CUDA_SUCCESS || (c[0] <= 1 && c[1] <= 1 && c[2] <= 1))
            return r;
        if (f->cuGraphKernelNodeSetAttribute == NULL)
            return CUDA_ERROR_NOT_SUPPORTED;
        node_attr a;
        memset(&a, 0, sizeof a);
        memcpy(a.clusterDim, c, sizeof a.clusterDim);
        return ((fn_attr)f->cuGraphKernelNodeSetAttribute)(
            *out, GL_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION_ID, &a);
    }
    case GL_GN_MEMSET:
        if (n->u.memset.width > 0 && n->u.memset.height > 0) {
            memset_params p = {n->u.memset.dst, n->u.memset.pitch, n->u.memset.value,
                               n->u.memset.elem, n->u.memset.width, n->u.memset.height};
            return ((fn_memset)f->cuGraphAddMemsetNode)(out, graph, deps, ndeps, &p, ctx);
        }
        break; /* an empty one does nothing: an empty node keeps its edges */
    case GL_GN_COPY:
        if (n->u.copy.width > 0 && n->u.copy.height > 0 && n->u.copy.depth > 0) {
            CUDA_MEMCPY3D c;
            memset(&c, 0, sizeof c);
            c.srcMemoryType = c.dstMemoryType = GL_CU_MEMORYTYPE_DEVICE;
            c.srcDevice = n->u.copy.src, c.srcPitch = n->u.copy.src_pitch;
            c.srcHeight = n->u.copy.src_height;
            c.dstDevice = n->u.copy.dst, c.dstPitch = n->u.copy.dst_pitch;
            c.dstHeight = n->u.copy.dst_height;
            c.WidthInBytes = n->u.copy.width, c.Height = n->u.copy.height;
            c.Depth = n->u.copy.depth;
            return ((fn_memcpy)f->cuGraphAddMemcpyNode)(out, graph, deps, ndeps, &c, ctx);
        }
        break;
    case GL_GN_EVENT_RECORD:
        return ((fn_event_node)f->cuGraphAddEventRecordNode)(out, graph, deps, ndeps,
                                                             (CUevent)object);
    case GL_GN_EVENT_WAIT:
        return ((fn_event_node)f->cuGraphAddEventWaitNode)(out, graph, deps, ndeps,
                                                           (CUevent)object);
    default:
        break;
    }
    return ((fn_empty)f->cuGraphAddEmptyNode)(out, graph, deps, ndeps);
}

/* Stage s of g as a real graph (*out NULL when the stage has no nodes). */
static CUresult build_stage(gl_exec *x, const gl_sgraph *g, uint32_t s, graph_t *out)
{
    const gl_cuda_extra *f = gl_cuda_fns(x);
    uint32_t lo = g->stage_start[s], hi = g->stage_start[s + 1];
    node_t *real = calloc((size_t)g->nodes + 1, sizeof *real);
    node_t *deps = calloc((size_t)g->edges + 1, sizeof *deps);
    uint32_t *first = calloc((size_t)g->nodes + 2, sizeof *first); /* incoming edges by node */
    uint32_t *from = malloc(((size_t)g->edges + 1) * sizeof *from);
    CUresult r = real && deps && first && from ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    graph_t graph = NULL;

    *out = NULL;
    for (uint32_t e = 0; r == CUDA_SUCCESS && e < g->edges; e++)
        first[g->edge[e].to + 1]++;
    for (uint32_t i = 0; r == CUDA_SUCCESS && i < g->nodes; i++)
        first[i + 1] += first[i];
    for (uint32_t e = 0; r == CUDA_SUCCESS && e < g->edges; e++)
        from[first[g->edge[e].to]++] = g->edge[e].from;
    for (uint32_t i = g->nodes; r == CUDA_SUCCESS && i > 0; i--)
        first[i] = first[i - 1];
    if (first != NULL)
        first[0] = 0;
    if (r == CUDA_SUCCESS && hi > lo)
        r = ((fn_create)f->cuGraphCreate)(&graph, 0);
    for (uint32_t k = lo; r == CUDA_SUCCESS && k < hi; k++) {
        uint32_t i = g->order[k];
        size_t nd = 0;
        void *object;
        for (uint32_t d = first[i]; d < first[i + 1]; d++) /* (ordered: each exists) */
            deps[nd++] = real[from[d]];
        r = gl_graph_check_node(x, g, &g->node[i], &object);
        if (r == CUDA_SUCCESS)
            r = add_node(x, g, &g->node[i], object, graph, deps, nd, &real[i]);
    }
    if (r == CUDA_SUCCESS)
        *out = graph;
    else if (graph != NULL)
        ((fn_destroy)f->cuGraphDestroy)(graph);
    free(real);
    free(deps);
    free(first);
    free(from);
    return r;
}

static void destroy_execs(gl_exec *x, cuda_graph *c, uint32_t stages)
{
    for (uint32_t s = 0; s < stages; s++)
        if (c->exec[s] != NULL)
            ((fn_destroy)gl_cuda_fns(x)->cuGraphExecDestroy)(c->exec[s]);
}

static void destroy(gl_exec *x, gl_sgraph *g)
{
    cuda_graph *c = g->backend;
    if (c == NULL)
        return;
    destroy_execs(x, c, g->stages);
    if (c->done != NULL)
        ((fn_destroy)gl_cuda_call(x, GL_CALL_cuEventDestroy))(c->done);
    free(c->exec);
    free(c);
    g->backend = NULL;
}

/* The execs of every stage of g (with the graph's stages and edges). */
static CUresult build_execs(gl_exec *x, const gl_sgraph *g, exec_t *exec)
{
    const gl_cuda_extra *f = gl_cuda_fns(x);
    CUresult r = CUDA_SUCCESS;
    for (uint32_t s = 0; r == CUDA_SUCCESS && s < g->stages; s++) {
        graph_t graph;
        r = build_stage(x, g, s, &graph);
        if (r == CUDA_SUCCESS && graph != NULL) {
            r = ((fn_instantiate)f->cuGraphInstantiateWithFlags)(&exec[s], graph, 0);
            ((fn_destroy)f->cuGraphDestroy)(graph);
        }
    }
    return r;
}

static CUresult instantiate(gl_exec *x, gl_sgraph *g)
{
    cuda_graph *c = calloc(1, sizeof *c);
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    if (c != NULL && (c->exec = calloc((size_t)g->stages + 1, sizeof *c->exec)) != NULL)
        r = ((fn_event_create)gl_cuda_call(x, GL_CALL_cuEventCreate))(
            &c->done, GL_CU_EVENT_DISABLE_TIMING);
    if (r == CUDA_SUCCESS)
        r = build_execs(x, g, c->exec);
    g->backend = c;
    if (r != CUDA_SUCCESS)
        destroy(x, g);
    return r;
}

/* The stages of `with` applied to g's execs in place; a stage the driver
 * refuses to update is instantiated again (after the device is idle: its old
 * exec may still run). */
static CUresult update(gl_exec *x, gl_sgraph *g, const gl_sgraph *with)
{
    const gl_cuda_extra *f = gl_cuda_fns(x);
    cuda_graph *c = g->backend;
    CUresult r = CUDA_SUCCESS;
    for (uint32_t s = 0; r == CUDA_SUCCESS && s < with->stages; s++) {
        graph_t graph;
        uint64_t info[3] = {0, 0, 0}; /* CUgraphExecUpdateResultInfo */
        r = build_stage(x, with, s, &graph);
        if (r != CUDA_SUCCESS || graph == NULL)
            continue;
        if (f->cuGraphExecUpdate_v2 == NULL
            || ((fn_update)f->cuGraphExecUpdate_v2)(c->exec[s], graph, info) != CUDA_SUCCESS) {
            ((fn_sync)gl_cuda_call(x, GL_CALL_cuCtxSynchronize))();
            ((fn_destroy)f->cuGraphExecDestroy)(c->exec[s]);
            c->exec[s] = NULL;
            r = ((fn_instantiate)f->cuGraphInstantiateWithFlags)(&c->exec[s], graph, 0);
        }
        ((fn_destroy)f->cuGraphDestroy)(graph);
    }
    return r;
}

/* The stage checked as the host device checks it (handles bound, memory the
 * session's), then one launch, ordered after this graph's launch before. */
static CUresult launch(gl_exec *x, gl_sgraph *g, uint32_t stage, CUstream stream)
{
    cuda_graph *c = g->backend;
    uint32_t kernels = 0;
    for (uint32_t k = g->stage_start[stage]; k < g->stage_start[stage + 1]; k++) {
        void *object;
        CUresult r = gl_graph_check_node(x, g, &g->node[g->order[k]], &object);
        if (r != CUDA_SUCCESS)
            return r;
        kernels += g->node[g->order[k]].kind == GL_GN_KERNEL;
    }
    if (c->exec[stage] == NULL)
        return CUDA_SUCCESS;
    CUresult r = CUDA_SUCCESS;
    if (c->recorded)
        r = ((fn_wait)gl_cuda_call(x, GL_CALL_cuStreamWaitEvent))(stream, c->done, 0);
    if (r == CUDA_SUCCESS)
        r = ((fn_launch)gl_cuda_fns(x)->cuGraphLaunch)(c->exec[stage], stream);
    if (r == CUDA_SUCCESS)
        r = ((fn_event_record)gl_cuda_call(x, GL_CALL_cuEventRecord))(c->done, stream);
    if (r == CUDA_SUCCESS) {
        c->recorded = 1;
        x->stats.launches += kernels;
    }
    return r;
}

const gl_graph_backend gl_cuda_graph_ops = {usable, instantiate, update, launch, destroy};
