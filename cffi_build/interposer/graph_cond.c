/*
 * graph_cond.c — conditional graph nodes in the interposer: the handles a
 * graph makes (cuGraphConditionalHandleCreate: a value the program passes
 * to its kernels, a default and its flag) and the nodes that use them, each
 * owning the body graphs it was made with (1 for WHILE, 1 or 2 for IF, n for
 * SWITCH). The decision is the server's: a kernel sets the value there
 * (cudaGraphSetConditional), so an instantiated graph sends each body as a
 * description nested in its node's (graph_exec.c, include/gl_graph.h).
 *
 * Ownership: a graph owns its handle table; a conditional node owns its
 * bodies (in the handle map, so the program can fill them, but not
 * destroyable by cuGraphDestroy) and the array of their handles it hands
 * out as phGraph_out. Everything is under gl_graph_lock.
 */
#include <stdlib.h>
#include <string.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "graph.h"

/* Handles are numbers the program passes to kernels: minted apart from
 * other handles ("glcn" above a count), never reused in a process. */
#define COND_HANDLE_TAG 0x676c636e00000000ull
static uint64_t g_minted;

CUresult gls_cuGraphConditionalHandleCreate(CUgraphConditionalHandle *pHandle_out,
                                            CUgraph hGraph, CUcontext ctx,
                                            unsigned int defaultLaunchValue, unsigned int flags,
                                            int ptds)
{
    CUresult r = CUDA_SUCCESS;

    (void)ctx, (void)ptds; /* one context per session */
    if (pHandle_out == NULL || (flags & ~GL_COND_ASSIGN_DEFAULT) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&gl_graph_lock);
    gl_graph *g = gl_graph_of(hGraph);
    if (g == NULL)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (g->nconds >= GL_GRAPH_MAX_HANDLES
             || gl_grow(&g->conds, &g->ccap, g->nconds, sizeof *g->conds, 4) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        gl_graph_handle *h = &g->conds[g->nconds++];
        h->value = COND_HANDLE_TAG | ++g_minted;
        h->dflt = defaultLaunchValue;
        h->flags = flags;
        *pHandle_out = h->value;
    }
    pthread_mutex_unlock(&gl_graph_lock);
    return r;
}

/* Whether handle was made for g or a graph holding it (through bodies). */
static int handle_reaches(const gl_graph *g, uint64_t handle)
{
    for (; g != NULL; g = g->owner != NULL ? g->owner->graph : NULL)
        for (uint32_t k = 0; k < g->nconds; k++)
            if (g->conds[k].value == handle)
                return 1;
    return 0;
}

static CUresult make_bodies(gl_gnode *n, uint32_t size)
{
    n->u.cond.body = calloc(size, sizeof *n->u.cond.body);
    n->u.cond.out = calloc(size, sizeof *n->u.cond.out);
    n->u.cond.size = 0;
    if (n->u.cond.body == NULL || n->u.cond.out == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return CUDA_SUCCESS;
}

static void add_body(gl_gnode *n, gl_graph *b)
{
    b->owner = n;
    n->u.cond.body[n->u.cond.size] = b;
    n->u.cond.out[n->u.cond.size++] = (CUgraph)(uintptr_t)b->handle;
}

CUresult gl_cond_fill_locked(gl_gnode *n, CUDA_CONDITIONAL_NODE_PARAMS *p)
{
    if (p == NULL || !handle_reaches(n->graph, p->handle))
        return CUDA_ERROR_INVALID_VALUE;
    /* the bodies CUDA documents for each type: WHILE 1, IF 1 or 2, SWITCH n > 0 */
    if (p->size == 0 || p->size > GL_GRAPH_MAX_NODES
        || (p->type == GL_COND_WHILE && p->size != 1) || (p->type == GL_COND_IF && p->size > 2)
        || (p->type != GL_COND_IF && p->type != GL_COND_WHILE && p->type != GL_COND_SWITCH))
        return CUDA_ERROR_INVALID_VALUE;
    n->u.cond.handle = p->handle;
    n->u.cond.type = p->type;
    CUresult r = make_bodies(n, p->size);
    for (uint32_t k = 0; r == CUDA_SUCCESS && k < p->size; k++) {
        gl_graph *b = gl_graph_new_locked(1);
        if (b == NULL)
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else
            add_body(n, b);
    }
    if (r != CUDA_SUCCESS) {
        gl_cond_free_locked(n);
        return r;
    }
    p->phGraph_out = n->u.cond.out;
    return CUDA_SUCCESS;
}

void gl_cond_free_locked(gl_gnode *n)
{
    for (uint32_t k = 0; n->u.cond.body != NULL && k < n->u.cond.size; k++)
        gl_graph_free_locked(n->u.cond.body[k]);
    free(n->u.cond.body);
    free(n->u.cond.out);
    n->u.cond.body = NULL;
    n->u.cond.out = NULL;
    n->u.cond.size = 0;
}

CUresult gl_cond_copy_locked(gl_gnode *dst, const gl_gnode *src)
{
    CUresult r = make_bodies(dst, src->u.cond.size);
    for (uint32_t k = 0; r == CUDA_SUCCESS && k < src->u.cond.size; k++) {
        gl_graph *b = gl_graph_clone_locked(src->u.cond.body[k], 1);
        if (b == NULL)
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else
            add_body(dst, b);
    }
    if (r != CUDA_SUCCESS)
        gl_cond_free_locked(dst);
    return r;
}

CUresult gl_cond_handles_copy(gl_graph *dst, const gl_graph *src)
{
    if (src->nconds == 0)
        return CUDA_SUCCESS;
    dst->conds = malloc((size_t)src->nconds * sizeof *dst->conds);
    if (dst->conds == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(dst->conds, src->conds, (size_t)src->nconds * sizeof *dst->conds);
    dst->nconds = dst->ccap = src->nconds;
    return CUDA_SUCCESS;
}

int gl_cond_body_allows(const gl_graph *g, int type, CUresult *r)
{
    if (g->owner == NULL)
        return 1;
    switch (type) {
    case GL_CU_GRAPH_NODE_TYPE_KERNEL:
    case GL_CU_GRAPH_NODE_TYPE_EMPTY:
    case GL_CU_GRAPH_NODE_TYPE_MEMSET:
    case GL_CU_GRAPH_NODE_TYPE_MEMCPY:
    case GL_CU_GRAPH_NODE_TYPE_GRAPH:
    case GL_CU_GRAPH_NODE_TYPE_CONDITIONAL:
        return 1;
    case GL_CU_GRAPH_NODE_TYPE_HOST:
        gl_log(GL_LOG_ERROR, "cuGraphAddNode", "a host function in a conditional node's body "
               "is not supported (the server decides the condition); returning "
               "CUDA_ERROR_NOT_SUPPORTED");
        *r = CUDA_ERROR_NOT_SUPPORTED;
        return 0;
    default: /* event and memory nodes: CUDA does not take them in a body */
        *r = CUDA_ERROR_INVALID_VALUE;
        return 0;
    }
}

int gl_cond_node_capturing(const gl_gnode *n)
{
    for (uint32_t k = 0; n->type == GL_CU_GRAPH_NODE_TYPE_CONDITIONAL && k < n->u.cond.size; k++)
        if (n->u.cond.body[k]->capturing || gl_cond_capturing(n->u.cond.body[k]))
            return 1;
    return 0;
}

int gl_cond_capturing(const gl_graph *g)
{
    for (uint32_t i = 0; i < g->n; i++)
        if (gl_cond_node_capturing(g->nodes[i]))
            return 1;
    return 0;
}
