/*
 * graph_launch.c — cuGraphLaunch. A graph whose nodes all run on the device
 * is one glGraphLaunch record (a whole captured step: one one-way call). A
 * graph with process nodes runs its plan (graph_plan.h): each stage's device
 * nodes as one glGraphLaunch, then the stage's process nodes — a copy from
 * the program's memory as the copy's own records, in stream order; a copy
 * into it or a host function after the server has run everything before it.
 * Those two wait for the server, so a plan that has them runs on the
 * host-function thread (hostfn.c) behind the hold, and cuGraphLaunch returns
 * at once, as on a GPU. So does any plan launched while the hold is on, so
 * that its copies read the program's memory after the host functions before
 * it ran.
 *
 * Graph memory is accounted when the launch is made (graphmem.c).
 */
#include <stdlib.h>
#include <string.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "graph.h"
#include "graph_plan.h"

/* -------------------------------------------------------------- plans */

CUresult gl_plan_make(gl_plan **out, const gl_plan_node *nodes, uint32_t n, uint32_t stages,
                      const uint8_t *desc, size_t len, const CUdeviceptr *mem, uint32_t nallocs,
                      uint32_t nfrees, uint64_t flags)
{
    gl_graph_head h;
    gl_plan *p = calloc(1, sizeof *p);

    *out = NULL;
    if (p == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    atomic_init(&p->refs, 1);
    p->stages = stages;
    p->device = calloc(stages + 1, 1);
    p->nodes = malloc(((size_t)n + 1) * sizeof *p->nodes);
    p->mem = malloc(((size_t)nallocs + nfrees + 1) * sizeof *p->mem);
    if (p->device == NULL || p->nodes == NULL || p->mem == NULL || len < sizeof h) {
        gl_plan_unref(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memcpy(&h, desc, sizeof h);
    const gl_graph_node *dn = (const gl_graph_node *)(desc + sizeof h);
    for (uint32_t i = 0; i < h.nodes; i++)
        if (dn[i].kind != GL_GN_EMPTY)
            p->device[dn[i].stage] = 1;
    memcpy(p->nodes, nodes, n * sizeof *nodes);
    p->nnodes = n;
    for (uint32_t i = 0; i < n; i++) {
        int dev[2];
        uint64_t addr[2];
        if (nodes[i].host || (gl_copy3d_ends(&nodes[i].copy, dev, addr) == CUDA_SUCCESS
                              && dev[0] && !dev[1]))
            p->waits = 1;
    }
    memcpy(p->mem, mem, ((size_t)nallocs + nfrees) * sizeof *mem);
    p->nallocs = nallocs, p->nfrees = nfrees;
    p->auto_free = (flags & GL_CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0;
    *out = p;
    return CUDA_SUCCESS;
}

gl_plan *gl_plan_ref(gl_plan *p)
{
    if (p != NULL)
        atomic_fetch_add(&p->refs, 1);
    return p;
}

void gl_plan_unref(gl_plan *p)
{
    if (p == NULL || atomic_fetch_sub(&p->refs, 1) != 1)
        return;
    free(p->device);
    free(p->nodes);
    free(p->mem);
    free(p);
}

void gl_plan_shape(const uint8_t *desc, size_t len, uint32_t **shape, size_t *n)
{
    gl_graph_head h;
    *shape = NULL;
    *n = 0;
    if (len < sizeof h)
        return;
    memcpy(&h, desc, sizeof h);
    const gl_graph_node *dn = (const gl_graph_node *)(desc + sizeof h);
    const gl_graph_edge *de = (const gl_graph_edge *)(dn + h.nodes);
    uint32_t *s = malloc(((size_t)h.nodes + 2 * (size_t)h.edges + 1) * sizeof *s);
    if (s == NULL)
        return;
    for (uint32_t i = 0; i < h.nodes; i++)
        s[i] = dn[i].stage;
    for (uint32_t e = 0; e < h.edges; e++)
        s[h.nodes + 2 * e] = de[e].from, s[h.nodes + 2 * e + 1] = de[e].to;
    *shape = s;
    *n = (size_t)h.nodes + 2 * (size_t)h.edges;
}

/* ----------------------------------------------------------- launching */

typedef struct {
    gl_plan *plan;
    CUgraphExec exec;
    CUstream stream; /* as sent */
} launch;

/* The stages in order. On the host-function thread an error of the
 * process's own work is owed to the program's next waiting call; inline (a
 * plan without waiting nodes) it is cuGraphLaunch's result. */
static CUresult run_plan(const launch *l)
{
    const gl_plan *p = l->plan;
    CUresult r = CUDA_SUCCESS;
    uint32_t next = 0;

    for (uint32_t k = 0; r == CUDA_SUCCESS && k < p->stages; k++) {
        if (p->device[k])
            r = glw_glGraphLaunch(l->exec, k, l->stream, 0);
        CUresult status = CUDA_SUCCESS;
        int reached = 0;
        for (; r == CUDA_SUCCESS && next < p->nnodes && p->nodes[next].stage == k; next++) {
            const gl_plan_node *n = &p->nodes[next];
            if (!n->host) {
                CUresult c = gli_cuMemcpy3DAsync(&n->copy, l->stream, 0);
                if (c != CUDA_SUCCESS && gl_on_host_thread())
                    gl_owe(c);
                else
                    r = c;
                continue;
            }
            /* Once per stage: the stage's device work, and all before it. */
            if (!reached)
                status = gl_host_reach((uint64_t)(uintptr_t)l->stream);
            reached = 1;
            if (status == CUDA_SUCCESS)
                gl_host_node_run(n->fn.fn, n->fn.userData);
        }
    }
    return r;
}

static void launch_job(void *data, CUresult status)
{
    launch *l = data;
    (void)status;
    if (run_plan(l) != CUDA_SUCCESS)
        gl_owe(CUDA_ERROR_LAUNCH_FAILED);
    gl_plan_unref(l->plan);
    free(l);
}

/* Graph memory at launch: each allocation must be free (unless the exec frees
 * on launch); the graph's own frees then free theirs. Nothing changes on
 * failure. */
static CUresult account_memory(const gl_plan *p)
{
    for (uint32_t i = 0; i < p->nallocs; i++)
        if (gl_graphmem_launch_alloc(p->mem[i], p->auto_free) != CUDA_SUCCESS) {
            while (i-- > 0)
                gl_graphmem_launch_free(p->mem[i]);
            return CUDA_ERROR_INVALID_VALUE;
        }
    for (uint32_t i = 0; i < p->nfrees; i++)
        gl_graphmem_launch_free(p->mem[p->nallocs + i]);
    return CUDA_SUCCESS;
}

static CUresult fill_child(gl_gnode *n, void *arg)
{
    CUgraph g = gl_gexec_graph((CUgraphExec)arg);
    gl_graph *src = gl_graph_of(g);
    if (src == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    n->u.child = gl_graph_clone_locked(src, 1);
    return n->u.child != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult gls_cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream, int ptds)
{
    uint64_t flags;
    CUresult r = gl_check_handle(GL_H_STREAM, (uint64_t)(uintptr_t)hStream);

    if (r != CUDA_SUCCESS)
        return r;
    /* Launched into a capture, the exec's graph becomes a child graph node. */
    int c = gl_capture_begin_op(hStream, ptds, &r);
    if (c < 0)
        return r;
    if (c > 0)
        return gl_capture_add_node(GL_CU_GRAPH_NODE_TYPE_GRAPH, fill_child, hGraphExec);
    gl_plan *p = gl_gexec_plan(hGraphExec, &flags);
    if (p == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = account_memory(p)) != CUDA_SUCCESS) {
        gl_plan_unref(p);
        return r;
    }
    launch l = {p, hGraphExec, (CUstream)(uintptr_t)gl_stream_arg((uint64_t)(uintptr_t)hStream,
                                                                   ptds)};
    if (p->nnodes == 0) {
        for (uint32_t k = 0; r == CUDA_SUCCESS && k < p->stages; k++)
            if (p->device[k])
                r = glw_glGraphLaunch(hGraphExec, k, l.stream, 0);
    } else if (p->waits || gl_hold_active()) {
        launch *job = malloc(sizeof *job);
        if (job == NULL) {
            gl_plan_unref(p);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        *job = l;
        const gl_held_job j = {launch_job, job, (uint64_t)(uintptr_t)l.stream, gl_ctx_current(),
                               0};
        if ((r = gl_host_job(&j)) != CUDA_SUCCESS)
            free(job);
        return r != CUDA_SUCCESS ? (gl_plan_unref(p), r) : CUDA_SUCCESS;
    } else {
        r = run_plan(&l);
    }
    gl_plan_unref(p);
    return r;
}

/* Nothing to upload ahead: a graph's description went to the server when it
 * was instantiated. */
CUresult gls_cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream, int ptds)
{
    uint64_t flags;
    CUresult r = gl_check_handle(GL_H_STREAM, (uint64_t)(uintptr_t)hStream);

    (void)ptds;
    if (r != CUDA_SUCCESS)
        return r;
    gl_plan *p = gl_gexec_plan(hGraphExec, &flags);
    gl_plan_unref(p);
    return p != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
