/*
 * exec_graphs.c — instantiated graphs on the server (glGraphInstantiate,
 * glGraphUpdate, glGraphLaunch, glGraphExecDestroy). A graph arrives as a
 * description (include/gl_graph.h, read by graph_desc.c) and is bound to
 * the exec handle the interposer minted. Launching stage k runs that stage's
 * nodes in dependency order: through the backend's graph support when it has
 * one (the cuda backend builds real CUDA graphs, cudadev_graphs.c), else node
 * by node through the backend's own slots for launches, memsets, copies and
 * events (the host device, which runs every call of a session in order).
 *
 * Every launch checks the stage again first: each handle a node names must
 * still be bound in the session, and each memset or copy must lie in the
 * session's memory as it is now (memory freed since instantiation is
 * refused, not written). Nothing of the stage runs when a check fails.
 *
 * A conditional node runs after its dependencies, like any node: its
 * handle's value (in the root graph's per-launch array, which the kernels'
 * cudaGraphSetConditional writes through the device runtime's scope,
 * ptx_devrt.h) chooses the body to run as a one-stage graph of its own
 * (WHILE: again while the value is not 0). A launch's first stage resets
 * the values of the handles whose flag asks for their default.
 *
 * Ownership: the session's handle table holds each gl_sgraph; destroying the
 * exec, or the session's end (gl_exec_graphs_free), frees it.
 */
#include <stdlib.h>
#include <string.h>

#include "exec_graphs.h"
#include "graph_desc.h"
#include "ptx/ptx_devrt.h"

static const gl_graph_backend *graph_ops(gl_exec *x)
{
    const gl_graph_backend *g = x->be->ops->graphs;
    return g != NULL && g->usable(x) ? g : NULL;
}

/* The description of a record: its payload, or (n == 0) the staged parts. */
static CUresult read_desc(gl_exec *x, const void *desc, size_t n, gl_sgraph **out)
{
    char err[200];
    int rc;

    if (n == 0) {
        rc = gl_graph_parse(x->staged.bytes, x->staged.len, out, err, sizeof err);
        gl_staged_free(&x->staged);
    } else {
        rc = gl_graph_parse(desc, n, out, err, sizeof err);
    }
    if (rc == -2)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != 0) {
        gl_exec_note(x, "%s: refused the graph: %s", gl_call_name(x->call), err);
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* Conditional nodes run on the host device only: on a GPU the kernels'
 * cudaGraphSetConditional would reach the real device runtime with the
 * interposer's handles, which a real conditional node (cuGraphAddNode with
 * CU_GRAPH_NODE_TYPE_CONDITIONAL) would need to be the driver's own. */
static CUresult refuse_conditionals(gl_exec *x, const gl_sgraph *g)
{
    if (x->be->ops->graphs == NULL || (g->nbodies == 0 && g->handles == 0))
        return CUDA_SUCCESS;
    gl_exec_note(x, "%s: conditional graph nodes are not supported on the cuda backend yet; "
                 "returning CUDA_ERROR_NOT_SUPPORTED", gl_call_name(x->call));
    return CUDA_ERROR_NOT_SUPPORTED;
}

static void destroy(gl_exec *x, gl_sgraph *g)
{
    const gl_graph_backend *ops = graph_ops(x);
    if (ops != NULL && g->backend != NULL)
        ops->destroy(x, g);
    gl_graph_free(g);
}

CUresult gx_glGraphInstantiate(gl_exec *x, CUgraphExec *exec, const void *desc, size_t n)
{
    gl_sgraph *g;
    CUresult r = read_desc(x, desc, n, &g);
    const gl_graph_backend *ops = graph_ops(x);

    if (r == CUDA_SUCCESS && (r = refuse_conditionals(x, g)) != CUDA_SUCCESS)
        gl_graph_free(g);
    else if (r == CUDA_SUCCESS && ops != NULL && (r = ops->instantiate(x, g)) != CUDA_SUCCESS)
        gl_graph_free(g);
    if (r == CUDA_SUCCESS)
        *exec = (CUgraphExec)g;
    return r;
}

/* New parameters for an instantiated graph of the same shape (the client
 * checked the update; the server checks the shape again). */
CUresult gx_glGraphUpdate(gl_exec *x, CUgraphExec exec, const void *desc, size_t n)
{
    gl_sgraph *g = (gl_sgraph *)exec, *with;
    CUresult r = read_desc(x, desc, n, &with);
    const gl_graph_backend *ops = graph_ops(x);

    if (r == CUDA_SUCCESS && (r = refuse_conditionals(x, with)) != CUDA_SUCCESS)
        gl_graph_free(with);
    if (r != CUDA_SUCCESS)
        return r;
    if (!gl_graph_same_shape(g, with)) {
        gl_exec_note(x, "glGraphUpdate: the new graph's nodes or edges differ");
        gl_graph_free(with);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (ops != NULL && g->backend != NULL && (r = ops->update(x, g, with)) != CUDA_SUCCESS) {
        gl_graph_free(with);
        return r;
    }
    /* The shapes match, so only node contents, parameters, conditional
     * bodies and handles change: g takes with's, with frees g's old ones. */
    gl_sgraph old = *g;
    g->node = with->node, g->params = with->params, g->nparams = with->nparams;
    g->body = with->body, g->nbodies = with->nbodies, g->body_first = with->body_first;
    g->handles = with->handles, g->handle = with->handle, g->value = with->value;
    g->key = with->key;
    with->node = old.node, with->params = old.params;
    with->body = old.body, with->nbodies = old.nbodies, with->body_first = old.body_first;
    with->handle = old.handle, with->value = old.value, with->key = old.key;
    gl_graph_free(with);
    return CUDA_SUCCESS;
}

CUresult gx_glGraphExecDestroy(gl_exec *x, CUgraphExec exec)
{
    destroy(x, (gl_sgraph *)exec);
    return CUDA_SUCCESS;
}

static void free_one(gl_exec *x, uint64_t key, void *val)
{
    if ((int)((key >> 48) & 0xff) == GL_H_GEXEC)
        destroy(x, val);
}

void gl_exec_graphs_free(gl_exec *x)
{
    gl_exec_each_handle(x, free_one);
}

/* ----------------------------------------------------------- checks */

CUresult gl_graph_check_node(gl_exec *x, const gl_sgraph *g, const gl_graph_node *n,
                             void **object)
{
    uint64_t span;

    *object = NULL;
    switch (n->kind) {
    case GL_GN_KERNEL:
        return gl_exec_handle(x, GL_H_FUNC, n->u.kernel.func, object);
    case GL_GN_EVENT_RECORD:
    case GL_GN_EVENT_WAIT:
        return gl_exec_handle(x, GL_H_EVENT, n->u.event.event, object);
    case GL_GN_MEMSET:
        /* (graph_desc.c checked that the span fits in 64 bits) */
        gl_span_bytes(n->u.memset.pitch, n->u.memset.width * n->u.memset.elem,
                      n->u.memset.height, &span);
        return span == 0 ? CUDA_SUCCESS : gl_exec_check_dptr(x, n->u.memset.dst, span);
    case GL_GN_COPY: {
        CUresult r = CUDA_SUCCESS;
        gl_graph_span3(n->u.copy.src_pitch, n->u.copy.src_height, n->u.copy.width,
                       n->u.copy.height, n->u.copy.depth, &span);
        if (span > 0)
            r = gl_exec_check_dptr(x, n->u.copy.src, span);
        gl_graph_span3(n->u.copy.dst_pitch, n->u.copy.dst_height, n->u.copy.width,
                       n->u.copy.height, n->u.copy.depth, &span);
        if (r == CUDA_SUCCESS && span > 0)
            r = gl_exec_check_dptr(x, n->u.copy.dst, span);
        return r;
    }
    case GL_GN_COND: { /* every body, as it would run */
        CUresult r = CUDA_SUCCESS;
        uint32_t first = g->body_first[n - g->node];
        for (uint32_t b = first; r == CUDA_SUCCESS && b < first + n->u.cond.size; b++)
            for (uint32_t i = 0; r == CUDA_SUCCESS && i < g->body[b]->nodes; i++)
                r = gl_graph_check_node(x, g->body[b], &g->body[b]->node[i], object);
        *object = NULL;
        return r;
    }
    default:
        return CUDA_SUCCESS;
    }
}

/* ------------------------------------------ node by node, through the slots */

static CUresult run_memset(gl_exec *x, const gl_graph_node *n, CUstream s)
{
    uint64_t rows = n->u.memset.height, count = n->u.memset.width;
    uint64_t row_bytes = count * n->u.memset.elem;
    CUresult r = CUDA_SUCCESS;

    if (rows == 0 || count == 0)
        return CUDA_SUCCESS;
    if (n->u.memset.pitch == row_bytes) { /* the rows touch: one memset */
        count *= rows;
        rows = 1;
    }
    for (uint64_t y = 0; r == CUDA_SUCCESS && y < rows; y++) {
        CUdeviceptr d = n->u.memset.dst + y * n->u.memset.pitch;
        if (n->u.memset.elem == 1)
            r = ((gl_fn_cuMemsetD8Async)gl_exec_slot(x, GL_CALL_cuMemsetD8Async))(
                d, (unsigned char)n->u.memset.value, count, s);
        else if (n->u.memset.elem == 2)
            r = ((gl_fn_cuMemsetD16Async)gl_exec_slot(x, GL_CALL_cuMemsetD16Async))(
                d, (unsigned short)n->u.memset.value, count, s);
        else
            r = ((gl_fn_cuMemsetD32Async)gl_exec_slot(x, GL_CALL_cuMemsetD32Async))(
                d, n->u.memset.value, count, s);
    }
    return r;
}

static CUresult run_copy(gl_exec *x, const gl_graph_node *n, CUstream s)
{
    CUresult r = CUDA_SUCCESS;
    uint64_t src_slice = n->u.copy.src_pitch * n->u.copy.src_height;
    uint64_t dst_slice = n->u.copy.dst_pitch * n->u.copy.dst_height;

    if (n->u.copy.width == 0 || n->u.copy.height == 0)
        return CUDA_SUCCESS;
    for (uint64_t z = 0; r == CUDA_SUCCESS && z < n->u.copy.depth; z++)
        r = ((gl_fn_glMemcpy2DDtoD)gl_exec_slot(x, GL_CALL_glMemcpy2DDtoD))(
            n->u.copy.dst + z * dst_slice, n->u.copy.dst_pitch, n->u.copy.src + z * src_slice,
            n->u.copy.src_pitch, n->u.copy.width, n->u.copy.height, s);
    return r;
}

static CUresult run_node(gl_exec *x, const gl_sgraph *g, const gl_graph_node *n, void *object,
                         CUstream s)
{
    switch (n->kind) {
    case GL_GN_KERNEL: {
        const uint32_t *gd = n->u.kernel.grid, *b = n->u.kernel.block, *c = n->u.kernel.cluster;
        const uint8_t *params = g->params + n->u.kernel.params_off;
        CUfunction f = (CUfunction)object;
        if (c[0] > 1 || c[1] > 1 || c[2] > 1)
            return ((gl_fn_glLaunchCluster)gl_exec_slot(x, GL_CALL_glLaunchCluster))(
                f, gd[0], gd[1], gd[2], b[0], b[1], b[2], n->u.kernel.shared, s, c[0], c[1],
                c[2], params, n->u.kernel.params_len);
        return ((gl_fn_glLaunch)gl_exec_slot(x, GL_CALL_glLaunch))(
            f, gd[0], gd[1], gd[2], b[0], b[1], b[2], n->u.kernel.shared, s, params,
            n->u.kernel.params_len);
    }
    case GL_GN_MEMSET:
        return run_memset(x, n, s);
    case GL_GN_COPY:
        return run_copy(x, n, s);
    case GL_GN_EVENT_RECORD:
        return ((gl_fn_cuEventRecord)gl_exec_slot(x, GL_CALL_cuEventRecord))((CUevent)object, s);
    case GL_GN_EVENT_WAIT:
        return ((gl_fn_cuStreamWaitEvent)gl_exec_slot(x, GL_CALL_cuStreamWaitEvent))(
            s, (CUevent)object, 0);
    default:
        return CUDA_SUCCESS;
    }
}

static CUresult run_stage(gl_exec *x, gl_sgraph *root, const gl_sgraph *g, uint32_t stage,
                          CUstream s);

/* A conditional node: the body its handle's value chooses (IF: the first when
 * the value is not 0, else the second if there is one; SWITCH: body k for k;
 * WHILE: the body while the value is not 0), each body a one-stage graph. */
static CUresult run_cond(gl_exec *x, gl_sgraph *root, const gl_sgraph *g, uint32_t i,
                         CUstream s)
{
    const gl_graph_node *n = &g->node[i];
    gl_sgraph *const *body = g->body + g->body_first[i];
    uint64_t *v = &root->value[n->u.cond.handle];
    uint64_t now = __atomic_load_n(v, __ATOMIC_RELAXED);
    CUresult r = CUDA_SUCCESS;

    switch (n->u.cond.type) {
    case GL_COND_IF:
        if (now != 0)
            return run_stage(x, root, body[0], 0, s);
        return n->u.cond.size == 2 ? run_stage(x, root, body[1], 0, s) : CUDA_SUCCESS;
    case GL_COND_SWITCH:
        return now < n->u.cond.size ? run_stage(x, root, body[now], 0, s) : CUDA_SUCCESS;
    default: /* WHILE: as on a GPU, a body that never sets 0 runs on */
        while (r == CUDA_SUCCESS && __atomic_load_n(v, __ATOMIC_RELAXED) != 0)
            r = run_stage(x, root, body[0], 0, s);
        return r;
    }
}

/* The stage's nodes checked, then run in order; the first failure stops it. */
static CUresult run_stage(gl_exec *x, gl_sgraph *root, const gl_sgraph *g, uint32_t stage,
                          CUstream s)
{
    uint32_t lo = g->stage_start[stage], hi = g->stage_start[stage + 1];
    void **objects = calloc((size_t)(hi - lo) + 1, sizeof *objects);
    CUresult r = objects != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;

    for (uint32_t i = lo; r == CUDA_SUCCESS && i < hi; i++)
        r = gl_graph_check_node(x, g, &g->node[g->order[i]], &objects[i - lo]);
    for (uint32_t i = lo; r == CUDA_SUCCESS && i < hi; i++) {
        if (g->node[g->order[i]].kind == GL_GN_COND) {
            r = run_cond(x, root, g, g->order[i], s);
            continue;
        }
        r = run_node(x, g, &g->node[g->order[i]], objects[i - lo], s);
        if (g->node[g->order[i]].kind == GL_GN_KERNEL && r == CUDA_SUCCESS)
            x->stats.launches++;
    }
    free(objects);
    return r;
}

CUresult gx_glGraphLaunch(gl_exec *x, CUgraphExec exec, unsigned int stage, CUstream stream)
{
    gl_sgraph *g = (gl_sgraph *)exec;
    const gl_graph_backend *ops = graph_ops(x);

    if (stage >= g->stages)
        return CUDA_ERROR_INVALID_VALUE;
    if (g->stage_start[stage] == g->stage_start[stage + 1])
        return CUDA_SUCCESS;
    if (stage == g->first_stage) /* a launch begins */
        for (uint32_t k = 0; k < g->handles; k++)
            if (g->handle[k].flags & GL_COND_ASSIGN_DEFAULT)
                g->value[k] = g->handle[k].dflt;
    if (ops != NULL && g->backend != NULL)
        return ops->launch(x, g, stage, stream);
    /* the graph's kernels set its handles' values (cudaGraphSetConditional) */
    ptx_cond_scope scope = {g->key, g->value, g->handles};
    if (x->devrt != NULL)
        ptx_devrt_set_cond_scope(x->devrt, &scope);
    CUresult r = run_stage(x, g, g, stage, stream);
    if (x->devrt != NULL)
        ptx_devrt_set_cond_scope(x->devrt, NULL);
    return r;
}
