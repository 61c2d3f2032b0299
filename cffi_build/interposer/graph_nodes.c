/*
 * graph_nodes.c — the parameters of graph nodes: adding each kind of node,
 * reading and replacing its parameters, and the generic forms
 * (cuGraphAddNode, cuGraphNodeSetParams). Parameters are checked as the
 * driver checks them when a node is made, and copied: a kernel node keeps
 * its arguments packed exactly as a launch packs them (launch.c), so a node
 * and a launch of the same kernel send the same bytes. A memcpy node keeps
 * the program's host pointers: the copy reads or writes the program's memory
 * when the graph runs, not when the node is made.
 *
 * Kernel arguments are packed before gl_graph_lock is taken (packing may ask
 * the server for a function's layout).
 */
#include <stdlib.h>
#include <string.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "gl_span.h"
#include "graph.h"
#include "graph_plan.h"

/* ---------------------------------------------------------------- kernels */

void gl_kernel_launch_free(gl_kernel_launch *k)
{
    free(k->params);
    free(k->args);
    memset(k, 0, sizeof *k);
}

/* The argument pointers GetParams hands back: into the packed copy, at the
 * function's layout (none when the layout is unknown). */
static void make_args(gl_kernel_launch *k)
{
    const gl_layout *l;
    if (gl_func_layout(k->func, &l) != CUDA_SUCCESS || l->count == 0 || l->total != k->size)
        return;
    if ((k->args = calloc(l->count, sizeof *k->args)) == NULL)
        return;
    for (uint32_t i = 0; i < l->count; i++)
        k->args[i] = k->params + l->offset[i];
    k->nargs = l->count;
}

CUresult gl_kernel_launch_packed(gl_kernel_launch *k, uint64_t func, const unsigned grid[3],
                                 const unsigned block[3], const unsigned cluster[3],
                                 unsigned shared, const void *params, size_t size)
{
    memset(k, 0, sizeof *k);
    if (size > UINT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    k->params = malloc(size + 1);
    if (k->params == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (size > 0)
        memcpy(k->params, params, size);
    k->size = (uint32_t)size;
    k->func = func;
    k->shared = shared;
    for (int i = 0; i < 3; i++)
        k->grid[i] = grid[i], k->block[i] = block[i], k->cluster[i] = cluster[i];
    return CUDA_SUCCESS;
}

CUresult gl_kernel_launch_set(gl_kernel_launch *k, const CUDA_KERNEL_NODE_PARAMS *p)
{
    uint64_t f = (uint64_t)(uintptr_t)p->func, given = f;
    uint8_t *packed;
    const void *buf;
    size_t size;
    CUresult r;

    if (f == 0)
        given = f = (uint64_t)(uintptr_t)p->kern;
    if ((r = gl_launchable(f, &f)) != CUDA_SUCCESS
        || (r = gl_check_handle(GL_H_FUNC, f)) != CUDA_SUCCESS)
        return r;
    if (!p->gridDimX || !p->gridDimY || !p->gridDimZ || !p->blockDimX || !p->blockDimY
        || !p->blockDimZ)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = gl_launch_heap(f, 0)) != CUDA_SUCCESS
        || (r = gl_launch_params(f, p->kernelParams, p->extra, &packed, &buf, &size))
               != CUDA_SUCCESS)
        return r;
    const unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ};
    const unsigned block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
    const unsigned none[3] = {0, 0, 0};
    r = gl_kernel_launch_packed(k, f, grid, block, none, p->sharedMemBytes, buf, size);
    free(packed);
    if (r == CUDA_SUCCESS) {
        k->kern = given != f ? given : 0;
        make_args(k);
    }
    return r;
}

static void kernel_get(const gl_kernel_launch *k, CUDA_KERNEL_NODE_PARAMS *p)
{
    memset(p, 0, sizeof *p);
    p->func = (CUfunction)(uintptr_t)k->func;
    p->gridDimX = k->grid[0], p->gridDimY = k->grid[1], p->gridDimZ = k->grid[2];
    p->blockDimX = k->block[0], p->blockDimY = k->block[1], p->blockDimZ = k->block[2];
    p->sharedMemBytes = k->shared;
    p->kernelParams = k->args;
    p->kern = (CUkernel)(uintptr_t)k->kern;
}

static void kernel_from_v1(CUDA_KERNEL_NODE_PARAMS *p, const CUDA_KERNEL_NODE_PARAMS_v1 *v1)
{
    memset(p, 0, sizeof *p);
    memcpy(p, v1, sizeof *v1); /* _v1 is the first members of the newer layout */
}

/* --------------------------------------------------------- other kinds */

CUresult gl_memset_check(const CUDA_MEMSET_NODE_PARAMS *p)
{
    uint64_t row, span;
    if (p == NULL || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4)
        || p->width == 0 || p->height == 0
        || __builtin_mul_overflow((uint64_t)p->width, (uint64_t)p->elementSize, &row)
        || gl_span_bytes(p->pitch, row, p->height, &span) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return gl_check_dptr(p->dst, span);
}

CUresult gl_memcpy_check(const CUDA_MEMCPY3D *p)
{
    int dev[2];
    uint64_t addr[2];
    return gl_copy3d_ends(p, dev, addr);
}

/* What a node of each kind is made from (one of these is set). */
typedef struct {
    CUDA_KERNEL_NODE_PARAMS kernel; /* packed before the lock: see below */
    gl_kernel_launch packed;
    const CUDA_MEMCPY3D *copy;
    const CUDA_MEMSET_NODE_PARAMS *memset;
    const CUDA_HOST_NODE_PARAMS *host;
    CUgraph child;
    int child_move;
    CUevent event;
    CUDA_MEM_ALLOC_NODE_PARAMS *alloc;
    CUdeviceptr free_dptr;
    CUDA_CONDITIONAL_NODE_PARAMS *cond; /* its phGraph_out is written */
} node_args;

/* Checks the arguments and writes them into n (whose parameters are empty).
 * The kernel's packed arguments move into n. */
static CUresult fill(gl_gnode *n, node_args *a)
{
    CUresult r = CUDA_SUCCESS;
    switch (n->type) {
    case GL_CU_GRAPH_NODE_TYPE_KERNEL:
        n->u.kernel = a->packed;
        memset(&a->packed, 0, sizeof a->packed);
        return CUDA_SUCCESS;
    case GL_CU_GRAPH_NODE_TYPE_MEMCPY:
        if ((r = gl_memcpy_check(a->copy)) == CUDA_SUCCESS)
            n->u.copy = *a->copy;
        return r;
    case GL_CU_GRAPH_NODE_TYPE_MEMSET:
        if ((r = gl_memset_check(a->memset)) == CUDA_SUCCESS)
            n->u.memset = *a->memset;
        return r;
    case GL_CU_GRAPH_NODE_TYPE_HOST:
        if (a->host == NULL || a->host->fn == NULL)
            return CUDA_ERROR_INVALID_VALUE;
        n->u.host = *a->host;
        return CUDA_SUCCESS;
    case GL_CU_GRAPH_NODE_TYPE_GRAPH: {
        gl_graph *c = gl_graph_of(a->child);
        if (c == NULL || c == n->graph || c->capturing)
            return CUDA_ERROR_INVALID_VALUE;
        if (a->child_move) { /* the parent takes the graph itself */
            if (c->child)
                return CUDA_ERROR_INVALID_VALUE;
            c->child = 1;
            n->u.child = c;
            return CUDA_SUCCESS;
        }
        n->u.child = gl_graph_clone_locked(c, 1);
        return n->u.child != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    case GL_CU_GRAPH_NODE_TYPE_WAIT_EVENT:
    case GL_CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        if ((r = gl_check_handle(GL_H_EVENT, (uint64_t)(uintptr_t)a->event)) == CUDA_SUCCESS)
            n->u.event = (uint64_t)(uintptr_t)a->event;
        return r;
    case GL_CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
        /* Device memory of one device (pinned, on a device): what the sample
         * programs and PyTorch ask for. */
        CUDA_MEM_ALLOC_NODE_PARAMS *p = a->alloc;
        if (p == NULL || p->bytesize == 0 || p->poolProps.allocType != 1
            || p->poolProps.location.type != 1)
            return CUDA_ERROR_INVALID_VALUE;
        if ((r = gl_graphmem_new(p->bytesize, &p->dptr)) != CUDA_SUCCESS)
            return r;
        n->u.alloc.given = *p;
        n->u.alloc.given.accessDescs = NULL;
        n->u.alloc.given.accessDescCount = 0;
        n->u.alloc.dptr = p->dptr;
        return CUDA_SUCCESS;
    }
    case GL_CU_GRAPH_NODE_TYPE_MEM_FREE:
        if (!gl_graphmem_is(a->free_dptr))
            return CUDA_ERROR_INVALID_VALUE;
        n->u.free_dptr = a->free_dptr;
        return CUDA_SUCCESS;
    case GL_CU_GRAPH_NODE_TYPE_EMPTY:
        return CUDA_SUCCESS;
    case GL_CU_GRAPH_NODE_TYPE_CONDITIONAL:
        return gl_cond_fill_locked(n, a->cond);
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* Packs a kernel node's arguments (outside the lock). */
static CUresult prepare(int type, node_args *a)
{
    if (type != GL_CU_GRAPH_NODE_TYPE_KERNEL)
        return CUDA_SUCCESS;
    return gl_kernel_launch_set(&a->packed, &a->kernel);
}

static CUresult add_node(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *deps,
                         size_t ndeps, int type, node_args *a)
{
    CUresult r;

    if (phGraphNode == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = prepare(type, a)) != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&gl_graph_lock);
    gl_graph *g = gl_graph_of(hGraph);
    gl_gnode *n = g != NULL ? gl_gnode_add_locked(g, type, deps, ndeps, &r) : NULL;
    if (g == NULL)
        r = CUDA_ERROR_INVALID_VALUE;
    if (n != NULL && (r = fill(n, a)) != CUDA_SUCCESS) {
        n->type = GL_CU_GRAPH_NODE_TYPE_EMPTY; /* it owns nothing yet */
        gl_gnode_remove_locked(n);
        n = NULL;
    }
    if (n != NULL)
        *phGraphNode = (CUgraphNode)(uintptr_t)n->handle;
    pthread_mutex_unlock(&gl_graph_lock);
    gl_kernel_launch_free(&a->packed); /* (empty unless the node was refused) */
    return r;
}

/* Replaces a node's parameters with new ones of the same kind. */
static CUresult set_node(CUgraphNode hNode, int type, node_args *a)
{
    CUresult r;

    if ((r = prepare(type, a)) != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&gl_graph_lock);
    gl_gnode *n = gl_gnode_of(hNode);
    gl_gnode tmp = {0};
    if (n == NULL || n->type != type) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        tmp.type = type;
        tmp.graph = n->graph;
        if ((r = fill(&tmp, a)) == CUDA_SUCCESS) {
            gl_gnode_params_free(n);
            n->u = tmp.u;
        }
    }
    pthread_mutex_unlock(&gl_graph_lock);
    gl_kernel_launch_free(&a->packed);
    return r;
}

/* Reads a node's parameters under the lock: the node of that kind, or NULL. */
static gl_gnode *lock_node(CUgraphNode hNode, int type, const void *out)
{
    pthread_mutex_lock(&gl_graph_lock);
    gl_gnode *n = gl_gnode_of(hNode);
    if (n == NULL || n->type != type || out == NULL) {
        pthread_mutex_unlock(&gl_graph_lock);
        return NULL;
    }
    return n;
}

/* The body of a getter: `assign` reads node n of the kind into out. */
#define READ_NODE(hNode, TYPE, out, assign)                \
    do {                                                   \
        gl_gnode *n = lock_node(hNode, TYPE, out);         \
        if (n == NULL)                                     \
            return CUDA_ERROR_INVALID_VALUE;               \
        assign;                                            \
        pthread_mutex_unlock(&gl_graph_lock);              \
        return CUDA_SUCCESS;                               \
    } while (0)

/* ------------------------------------------------------------- the API */

CUresult gls_cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                     const CUgraphNode *dependencies, size_t numDependencies,
                                     const CUDA_KERNEL_NODE_PARAMS *nodeParams, int ptds)
{
    node_args a = {0};
    (void)ptds;
    if (nodeParams == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    a.kernel = *nodeParams;
    return add_node(phGraphNode, hGraph, dependencies, numDependencies,
                    GL_CU_GRAPH_NODE_TYPE_KERNEL, &a);
}

CUresult gls_cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                  const CUgraphNode *dependencies, size_t numDependencies,
                                  const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams, int ptds)
{
    CUDA_KERNEL_NODE_PARAMS p;
    if (nodeParams == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    kernel_from_v1(&p, nodeParams);
    return gls_cuGraphAddKernelNode_v2(phGraphNode, hGraph, dependencies, numDependencies, &p,
                                       ptds);
}

CUresult gls_cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *nodeParams,
                                           int ptds)
{
    (void)ptds;
    READ_NODE(hNode, GL_CU_GRAPH_NODE_TYPE_KERNEL, nodeParams,
              kernel_get(&n->u.kernel, nodeParams));
}

CUresult gls_cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams,
                                        int ptds)
{
    CUDA_KERNEL_NODE_PARAMS p;
    CUresult r = gls_cuGraphKernelNodeGetParams_v2(hNode, nodeParams ? &p : NULL, ptds);
    if (r == CUDA_SUCCESS)
        memcpy(nodeParams, &p, sizeof *nodeParams);
    return r;
}

CUresult gls_cuGraphKernelNodeSetParams_v2(CUgraphNode hNode,
                                           const CUDA_KERNEL_NODE_PARAMS *nodeParams, int ptds)
{
    node_args a = {0};
    (void)ptds;
    if (nodeParams == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    a.kernel = *nodeParams;
    return set_node(hNode, GL_CU_GRAPH_NODE_TYPE_KERNEL, &a);
}

CUresult gls_cuGraphKernelNodeSetParams(CUgraphNode hNode,
                                        const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams, int ptds)
{
    CUDA_KERNEL_NODE_PARAMS p;
    if (nodeParams == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    kernel_from_v1(&p, nodeParams);
    return gls_cuGraphKernelNodeSetParams_v2(hNode, &p, ptds);
}

CUresult gls_cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                  const CUgraphNode *dependencies, size_t numDependencies,
                                  const CUDA_MEMCPY3D *copyParams, CUcontext ctx, int ptds)
{
    node_args a = {.copy = copyParams};
    (void)ctx, (void)ptds;
    return add_node(phGraphNode, hGraph, dependencies, numDependencies,
                    GL_CU_GRAPH_NODE_TYPE_MEMCPY, &a);
}

CUresult gls_cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                  const CUgraphNode *dependencies, size_t numDependencies,
                                  const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx,
                                  int ptds)
{
    node_args a = {.memset = memsetParams};
    (void)ctx, (void)ptds;
    return add_node(phGraphNode, hGraph, dependencies, numDependencies,
                    GL_CU_GRAPH_NODE_TYPE_MEMSET, &a);
}

CUresult gls_cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                const CUgraphNode *dependencies, size_t numDependencies,
                                const CUDA_HOST_NODE_PARAMS *nodeParams, int ptds)
{
    node_args a = {.host = nodeParams};
    (void)ptds;
    return add_node(phGraphNode, hGraph, dependencies, numDependencies,
                    GL_CU_GRAPH_NODE_TYPE_HOST, &a);
}

/* Reading and replacing the parameters of memcpy, memset and host nodes. */
#define PARAMS_CALLS(Kind, TYPE, PTYPE, field)                                                \
    CUresult gls_cuGraph##Kind##NodeGetParams(CUgraphNode hNode, PTYPE *nodeParams, int ptds)  \
    {                                                                                         \
        (void)ptds;                                                                           \
        READ_NODE(hNode, TYPE, nodeParams, *nodeParams = n->u.field);                         \
    }                                                                                         \
    CUresult gls_cuGraph##Kind##NodeSetParams(CUgraphNode hNode, const PTYPE *nodeParams,      \
                                              int ptds)                                       \
    {                                                                                         \
        node_args a = {.field = nodeParams};                                                  \
        (void)ptds;                                                                           \
        return set_node(hNode, TYPE, &a);                                                     \
    }

PARAMS_CALLS(Memcpy, GL_CU_GRAPH_NODE_TYPE_MEMCPY, CUDA_MEMCPY3D, copy)
PARAMS_CALLS(Memset, GL_CU_GRAPH_NODE_TYPE_MEMSET, CUDA_MEMSET_NODE_PARAMS, memset)
PARAMS_CALLS(Host, GL_CU_GRAPH_NODE_TYPE_HOST, CUDA_HOST_NODE_PARAMS, host)

CUresult gls_cuGraphAddChildGraphNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                      const CUgraphNode *dependencies, size_t numDependencies,
                                      CUgraph childGraph, int ptds)
{
    node_args a = {.child = childGraph};
    (void)ptds;
    return add_node(phGraphNode, hGraph, dependencies, numDependencies,
                    GL_CU_GRAPH_NODE_TYPE_GRAPH, &a);
}

CUresult gls_cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph *phGraph, int ptds)
{
    (void)ptds;
    READ_NODE(hNode, GL_CU_GRAPH_NODE_TYPE_GRAPH, phGraph,
              *phGraph = (CUgraph)(uintptr_t)n->u.child->handle);
}

CUresult gls_cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                 const CUgraphNode *dependencies, size_t numDependencies,
                                 int ptds)
{
    node_args a = {0};
    (void)ptds;
    return add_node(phGraphNode, hGraph, dependencies, numDependencies,
                    GL_CU_GRAPH_NODE_TYPE_EMPTY, &a);
}

static CUresult event_of(CUgraphNode hNode, int type, CUevent *event_out)
{
    READ_NODE(hNode, type, event_out, *event_out = (CUevent)(uintptr_t)n->u.event);
}

static CUresult event_node(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *deps,
                           size_t ndeps, CUevent event, int type)
{
    node_args a = {.event = event};
    return phGraphNode != NULL ? add_node(phGraphNode, hGraph, deps, ndeps, type, &a)
                               : set_node((CUgraphNode)hGraph, type, &a);
}

/* Event record and wait nodes: the same three calls each (a NULL node out
 * asks event_node to set the event of the node passed as the graph). */
#define EVENT_NODE_CALLS(Kind, TYPE)                                                          \
    CUresult gls_cuGraphAdd##Kind##Node(CUgraphNode *phGraphNode, CUgraph hGraph,             \
                                        const CUgraphNode *dependencies,                     \
                                        size_t numDependencies, CUevent event, int ptds)     \
    {                                                                                         \
        (void)ptds;                                                                           \
        if (phGraphNode == NULL)                                                              \
            return CUDA_ERROR_INVALID_VALUE;                                                  \
        return event_node(phGraphNode, hGraph, dependencies, numDependencies, event, TYPE);   \
    }                                                                                         \
    CUresult gls_cuGraph##Kind##NodeGetEvent(CUgraphNode hNode, CUevent *event_out, int ptds) \
    {                                                                                         \
        (void)ptds;                                                                           \
        return event_of(hNode, TYPE, event_out);                                              \
    }                                                                                         \
    CUresult gls_cuGraph##Kind##NodeSetEvent(CUgraphNode hNode, CUevent event, int ptds)      \
    {                                                                                         \
        (void)ptds;                                                                           \
        return event_node(NULL, (CUgraph)hNode, NULL, 0, event, TYPE);                        \
    }

EVENT_NODE_CALLS(EventRecord, GL_CU_GRAPH_NODE_TYPE_EVENT_RECORD)
EVENT_NODE_CALLS(EventWait, GL_CU_GRAPH_NODE_TYPE_WAIT_EVENT)

CUresult gls_cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                    const CUgraphNode *dependencies, size_t numDependencies,
                                    CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams, int ptds)
{
    node_args a = {.alloc = nodeParams};
    (void)ptds;
    return add_node(phGraphNode, hGraph, dependencies, numDependencies,
                    GL_CU_GRAPH_NODE_TYPE_MEM_ALLOC, &a);
}

CUresult gls_cuGraphMemAllocNodeGetParams(CUgraphNode hNode,
                                          CUDA_MEM_ALLOC_NODE_PARAMS *params_out, int ptds)
{
    (void)ptds;
    READ_NODE(hNode, GL_CU_GRAPH_NODE_TYPE_MEM_ALLOC, params_out,
              (*params_out = n->u.alloc.given, params_out->dptr = n->u.alloc.dptr));
}

CUresult gls_cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                   const CUgraphNode *dependencies, size_t numDependencies,
                                   CUdeviceptr dptr, int ptds)
{
    node_args a = {.free_dptr = dptr};
    (void)ptds;
    return add_node(phGraphNode, hGraph, dependencies, numDependencies,
                    GL_CU_GRAPH_NODE_TYPE_MEM_FREE, &a);
}

CUresult gls_cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr *dptr_out, int ptds)
{
    (void)ptds;
    READ_NODE(hNode, GL_CU_GRAPH_NODE_TYPE_MEM_FREE, dptr_out, *dptr_out = n->u.free_dptr);
}

/* ------------------------------------------------------ the generic forms */

/* The arguments a CUgraphNodeParams gives for its type. */
CUresult gl_node_args_of(CUgraphNodeParams *p, void *out)
{
    node_args *a = out;
    memset(a, 0, sizeof *a);
    if (p == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    switch (p->type) {
    case GL_CU_GRAPH_NODE_TYPE_KERNEL:
        a->kernel = p->kernel;
        return CUDA_SUCCESS;
    case GL_CU_GRAPH_NODE_TYPE_MEMCPY:
        a->copy = &p->memcpy.copyParams;
        return CUDA_SUCCESS;
    case GL_CU_GRAPH_NODE_TYPE_MEMSET:
        a->memset = (const CUDA_MEMSET_NODE_PARAMS *)&p->memset; /* _v2 adds ctx at the end */
        return CUDA_SUCCESS;
    case GL_CU_GRAPH_NODE_TYPE_HOST:
        a->host = &p->host;
        return CUDA_SUCCESS;
    case GL_CU_GRAPH_NODE_TYPE_GRAPH:
        a->child = p->graph.graph;
        a->child_move = p->graph.ownership == GL_CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
        return CUDA_SUCCESS;
    case GL_CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        a->event = p->eventWait.event;
        return CUDA_SUCCESS;
    case GL_CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        a->event = p->eventRecord.event;
        return CUDA_SUCCESS;
    case GL_CU_GRAPH_NODE_TYPE_MEM_ALLOC:
        a->alloc = &p->alloc;
        return CUDA_SUCCESS;
    case GL_CU_GRAPH_NODE_TYPE_MEM_FREE:
        a->free_dptr = p->free.dptr;
        return CUDA_SUCCESS;
    case GL_CU_GRAPH_NODE_TYPE_EMPTY:
        return CUDA_SUCCESS;
    case GL_CU_GRAPH_NODE_TYPE_CONDITIONAL:
        a->cond = &p->conditional;
        return CUDA_SUCCESS;
    default:
        gl_log(GL_LOG_ERROR, "cuGraphAddNode", "graph nodes of type %d are not supported; "
               "returning CUDA_ERROR_NOT_SUPPORTED", p->type);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

CUresult gls_cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                               const CUgraphNode *dependencies,
                               const CUgraphEdgeData *dependencyData, size_t numDependencies,
                               CUgraphNodeParams *nodeParams, int ptds)
{
    node_args a;
    static const CUgraphEdgeData zero;
    CUresult r = gl_node_args_of(nodeParams, &a);

    (void)ptds;
    for (size_t i = 0; dependencyData != NULL && i < numDependencies; i++)
        if (memcmp(&dependencyData[i], &zero, sizeof zero) != 0)
            return CUDA_ERROR_NOT_SUPPORTED; /* programmatic edges */
    if (r != CUDA_SUCCESS)
        return r;
    return add_node(phGraphNode, hGraph, dependencies, numDependencies, nodeParams->type, &a);
}

CUresult gls_cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                            const CUgraphNode *dependencies, size_t numDependencies,
                            CUgraphNodeParams *nodeParams, int ptds)
{
    return gls_cuGraphAddNode_v2(phGraphNode, hGraph, dependencies, NULL, numDependencies,
                                 nodeParams, ptds);
}

CUresult gls_cuGraphNodeSetParams(CUgraphNode hNode, CUgraphNodeParams *nodeParams, int ptds)
{
    node_args a;
    CUresult r = gl_node_args_of(nodeParams, &a);

    (void)ptds;
    if (r != CUDA_SUCCESS)
        return r;
    if (nodeParams->type == GL_CU_GRAPH_NODE_TYPE_GRAPH
        || nodeParams->type == GL_CU_GRAPH_NODE_TYPE_MEM_ALLOC
        || nodeParams->type == GL_CU_GRAPH_NODE_TYPE_MEM_FREE
        || nodeParams->type == GL_CU_GRAPH_NODE_TYPE_CONDITIONAL)
        return CUDA_ERROR_INVALID_VALUE; /* not changeable after creation */
    return set_node(hNode, nodeParams->type, &a);
}

/* For graph_exec.c: a node of a type made from arguments (outside the graph
 * lock: kernel arguments are packed first), to replace an exec's copy. */
CUresult gl_gnode_build(gl_gnode *n, int type, void *args)
{
    node_args *a = args;
    CUresult r = prepare(type, a);
    memset(n, 0, sizeof *n);
    n->type = type;
    if (r == CUDA_SUCCESS) {
        pthread_mutex_lock(&gl_graph_lock);
        r = fill(n, a);
        pthread_mutex_unlock(&gl_graph_lock);
    }
    gl_kernel_launch_free(&a->packed);
    return r;
}

/* The argument block graph_exec.c fills for gl_gnode_build. */
size_t gl_node_args_size(void)
{
    return sizeof(node_args);
}

void gl_node_args_kernel(void *args, const CUDA_KERNEL_NODE_PARAMS *p)
{
    memset(args, 0, sizeof(node_args));
    ((node_args *)args)->kernel = *p;
}

void gl_node_args_other(void *args, int type, const void *params, CUevent event)
{
    node_args *a = args;
    memset(a, 0, sizeof *a);
    if (type == GL_CU_GRAPH_NODE_TYPE_MEMCPY)
        a->copy = params;
    else if (type == GL_CU_GRAPH_NODE_TYPE_MEMSET)
        a->memset = params;
    else if (type == GL_CU_GRAPH_NODE_TYPE_HOST)
        a->host = params;
    else if (type == GL_CU_GRAPH_NODE_TYPE_GRAPH)
        a->child = (CUgraph)params;
    a->event = event;
}
