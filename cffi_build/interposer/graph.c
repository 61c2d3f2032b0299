/*
 * graph.c — CUDA graphs as the interposer keeps them: a graph is an array of
 * nodes in creation order, each node owning its parameters and the list of
 * nodes it depends on (its incoming edges). Handles are minted (kinds graph
 * and gnode) and mapped to the objects; none of this reaches the server until
 * a graph is instantiated (graph_exec.c). The edge queries and edits, node
 * removal, cloning and the DOT dump live here; node parameters in
 * graph_nodes.c.
 *
 * Ownership: a graph owns its nodes; a child-graph node owns its child graph
 * and a conditional node its bodies (graph_cond.c; each has a handle too,
 * but cannot be destroyed by it). Everything is
 * under gl_graph_lock.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "graph.h"

pthread_mutex_t gl_graph_lock = PTHREAD_MUTEX_INITIALIZER;
static gl_hmap *g_graphs, *g_nodes; /* minted handle -> object */

static int maps(void)
{
    if (g_graphs == NULL)
        g_graphs = gl_hmap_new();
    if (g_nodes == NULL)
        g_nodes = gl_hmap_new();
    return g_graphs != NULL && g_nodes != NULL;
}

gl_graph *gl_graph_of(CUgraph g)
{
    uint64_t h = (uint64_t)(uintptr_t)g;
    if (!maps() || gl_check_handle(GL_H_GRAPH, h) != CUDA_SUCCESS)
        return NULL;
    return gl_hmap_get(g_graphs, h);
}

gl_gnode *gl_gnode_of(CUgraphNode n)
{
    uint64_t h = (uint64_t)(uintptr_t)n;
    if (!maps() || gl_check_handle(GL_H_GNODE, h) != CUDA_SUCCESS)
        return NULL;
    return gl_hmap_get(g_nodes, h);
}

gl_graph *gl_graph_new_locked(int child)
{
    gl_graph *g = calloc(1, sizeof *g);
    if (g == NULL || !maps())
        goto fail;
    g->handle = gl_mint(GL_H_GRAPH);
    g->child = child;
    if (gl_hmap_put(g_graphs, g->handle, g) != 0)
        goto fail;
    return g;
fail:
    free(g);
    return NULL;
}

void gl_gnode_params_free(gl_gnode *n)
{
    switch (n->type) {
    case GL_CU_GRAPH_NODE_TYPE_KERNEL:
        gl_kernel_launch_free(&n->u.kernel);
        break;
    case GL_CU_GRAPH_NODE_TYPE_GRAPH:
        gl_graph_free_locked(n->u.child);
        break;
    case GL_CU_GRAPH_NODE_TYPE_MEM_ALLOC:
        gl_graphmem_unref(n->u.alloc.dptr);
        break;
    case GL_CU_GRAPH_NODE_TYPE_CONDITIONAL:
        gl_cond_free_locked(n);
        break;
    default:
        break;
    }
    memset(&n->u, 0, sizeof n->u);
}

CUresult gl_gnode_params_copy(gl_gnode *dst, const gl_gnode *src)
{
    dst->u = src->u;
    switch (src->type) {
    case GL_CU_GRAPH_NODE_TYPE_KERNEL: {
        const gl_kernel_launch *k = &src->u.kernel;
        memset(&dst->u.kernel, 0, sizeof dst->u.kernel);
        return gl_kernel_launch_packed(&dst->u.kernel, k->func, k->grid, k->block, k->cluster,
                                       k->shared, k->params, k->size)
                       == CUDA_SUCCESS
                   ? (dst->u.kernel.kern = k->kern, CUDA_SUCCESS)
                   : CUDA_ERROR_OUT_OF_MEMORY;
    }
    case GL_CU_GRAPH_NODE_TYPE_GRAPH:
        dst->u.child = gl_graph_clone_locked(src->u.child, 1);
        return dst->u.child != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    case GL_CU_GRAPH_NODE_TYPE_MEM_ALLOC:
        gl_graphmem_ref(src->u.alloc.dptr);
        return CUDA_SUCCESS;
    case GL_CU_GRAPH_NODE_TYPE_CONDITIONAL:
        return gl_cond_copy_locked(dst, src);
    default:
        return CUDA_SUCCESS;
    }
}

static void node_free(gl_gnode *n)
{
    gl_gnode_params_free(n);
    if (g_nodes != NULL)
        gl_hmap_take(g_nodes, n->handle);
    free(n->deps);
    free(n);
}

void gl_graph_free_locked(gl_graph *g)
{
    if (g == NULL)
        return;
    for (uint32_t i = 0; i < g->n; i++)
        node_free(g->nodes[i]);
    gl_uobj_refs_drop_locked(g);
    if (g_graphs != NULL)
        gl_hmap_take(g_graphs, g->handle);
    free(g->nodes);
    free(g->conds);
    free(g);
}

static int add_dep(gl_gnode *n, gl_gnode *dep)
{
    if (gl_grow(&n->deps, &n->cap, n->ndeps, sizeof *n->deps, 4) != 0)
        return -1;
    n->deps[n->ndeps++] = dep;
    return 0;
}

static int has_dep(const gl_gnode *n, const gl_gnode *dep)
{
    for (uint32_t i = 0; i < n->ndeps; i++)
        if (n->deps[i] == dep)
            return 1;
    return 0;
}

gl_gnode *gl_gnode_add_nodes_locked(gl_graph *g, int type, gl_gnode *const *deps, size_t ndeps,
                                    CUresult *r)
{
    gl_gnode *n = calloc(1, sizeof *n);
    *r = CUDA_ERROR_OUT_OF_MEMORY;
    if (n == NULL || !maps() || !gl_cond_body_allows(g, type, r))
        goto fail;
    n->type = type;
    n->graph = g;
    for (size_t i = 0; i < ndeps; i++) {
        if (deps[i] == NULL || deps[i]->graph != g || has_dep(n, deps[i])) {
            *r = CUDA_ERROR_INVALID_VALUE; /* not this graph's, or twice */
            goto fail;
        }
        if (add_dep(n, deps[i]) != 0)
            goto fail;
    }
    if (gl_grow(&g->nodes, &g->cap, g->n, sizeof *g->nodes, 16) != 0)
        goto fail;
    n->handle = gl_mint(GL_H_GNODE);
    if (gl_hmap_put(g_nodes, n->handle, n) != 0)
        goto fail;
    n->index = g->n;
    g->nodes[g->n++] = n;
    *r = CUDA_SUCCESS;
    return n;
fail:
    if (n != NULL)
        free(n->deps);
    free(n);
    return NULL;
}

gl_gnode *gl_gnode_add_locked(gl_graph *g, int type, const CUgraphNode *deps, size_t ndeps,
                              CUresult *r)
{
    gl_gnode **d = calloc(ndeps + 1, sizeof *d);
    gl_gnode *n = NULL;

    *r = CUDA_ERROR_OUT_OF_MEMORY;
    if (d == NULL)
        return NULL;
    *r = ndeps > 0 && deps == NULL ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    for (size_t i = 0; *r == CUDA_SUCCESS && i < ndeps; i++)
        if ((d[i] = gl_gnode_of(deps[i])) == NULL)
            *r = CUDA_ERROR_INVALID_VALUE;
    if (*r == CUDA_SUCCESS)
        n = gl_gnode_add_nodes_locked(g, type, d, ndeps, r);
    free(d);
    return n;
}

void gl_gnode_remove_locked(gl_gnode *n)
{
    gl_graph *g = n->graph;
    uint32_t k = 0;
    for (uint32_t i = 0; i < g->n; i++) {
        gl_gnode *m = g->nodes[i];
        if (m == n)
            continue;
        uint32_t j = 0;
        for (uint32_t d = 0; d < m->ndeps; d++)
            if (m->deps[d] != n)
                m->deps[j++] = m->deps[d];
        m->ndeps = j;
        m->index = k;
        g->nodes[k++] = m;
    }
    g->n = k;
    node_free(n);
}

gl_graph *gl_graph_clone_locked(const gl_graph *src, int child)
{
    gl_graph *g = gl_graph_new_locked(child);
    CUresult r = g != NULL ? gl_cond_handles_copy(g, src) : CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS && gl_uobj_refs_copy_locked(g, src) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    for (uint32_t i = 0; r == CUDA_SUCCESS && i < src->n; i++) {
        const gl_gnode *s = src->nodes[i];
        gl_gnode *n = gl_gnode_add_nodes_locked(g, s->type, NULL, 0, &r);
        if (n == NULL)
            break;
        n->origin = s->handle;
        if ((r = gl_gnode_params_copy(n, s)) != CUDA_SUCCESS) {
            n->type = GL_CU_GRAPH_NODE_TYPE_EMPTY; /* nothing of its own to free */
            break;
        }
        /* Dependencies precede their dependents in creation order unless
         * edges were added later: every node exists before edges are copied. */
    }
    for (uint32_t i = 0; r == CUDA_SUCCESS && i < src->n; i++)
        for (uint32_t d = 0; r == CUDA_SUCCESS && d < src->nodes[i]->ndeps; d++)
            if (add_dep(g->nodes[i], g->nodes[src->nodes[i]->deps[d]->index]) != 0)
                r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r != CUDA_SUCCESS) {
        gl_graph_free_locked(g);
        return NULL;
    }
    return g;
}

/* ------------------------------------------------------------- the API */

CUresult gls_cuGraphCreate(CUgraph *phGraph, unsigned int flags, int ptds)
{
    (void)ptds;
    if (phGraph == NULL || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&gl_graph_lock);
    gl_graph *g = gl_graph_new_locked(0);
    pthread_mutex_unlock(&gl_graph_lock);
    if (g == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phGraph = (CUgraph)(uintptr_t)g->handle;
    return CUDA_SUCCESS;
}

CUresult gls_cuGraphDestroy(CUgraph hGraph, int ptds)
{
    CUresult r = CUDA_SUCCESS;

    (void)ptds;
    pthread_mutex_lock(&gl_graph_lock);
    gl_graph *g = gl_graph_of(hGraph);
    if (g == NULL || g->child)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (g->capturing || gl_cond_capturing(g))
        r = CUDA_ERROR_ILLEGAL_STATE; /* a capture still adds to it */
    else
        gl_graph_free_locked(g);
    pthread_mutex_unlock(&gl_graph_lock);
    return r;
}

CUresult gls_cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph, int ptds)
{
    CUresult r = CUDA_ERROR_INVALID_VALUE;

    (void)ptds;
    if (phGraphClone == NULL)
        return r;
    pthread_mutex_lock(&gl_graph_lock);
    gl_graph *src = gl_graph_of(originalGraph), *g = NULL;
    if (src != NULL) {
        g = gl_graph_clone_locked(src, 0);
        r = g != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (g != NULL)
        *phGraphClone = (CUgraph)(uintptr_t)g->handle;
    pthread_mutex_unlock(&gl_graph_lock);
    return r;
}

CUresult gls_cuGraphNodeFindInClone(CUgraphNode *phNode, CUgraphNode hOriginalNode,
                                    CUgraph hClonedGraph, int ptds)
{
    CUresult r = CUDA_ERROR_INVALID_VALUE;

    (void)ptds;
    if (phNode == NULL)
        return r;
    pthread_mutex_lock(&gl_graph_lock);
    gl_graph *g = gl_graph_of(hClonedGraph);
    for (uint32_t i = 0; g != NULL && i < g->n; i++)
        if (g->nodes[i]->origin == (uint64_t)(uintptr_t)hOriginalNode) {
            *phNode = (CUgraphNode)(uintptr_t)g->nodes[i]->handle;
            r = CUDA_SUCCESS;
        }
    pthread_mutex_unlock(&gl_graph_lock);
    return r;
}

CUresult gls_cuGraphDestroyNode(CUgraphNode hNode, int ptds)
{
    CUresult r = CUDA_SUCCESS;

    (void)ptds;
    pthread_mutex_lock(&gl_graph_lock);
    gl_gnode *n = gl_gnode_of(hNode);
    if (n == NULL)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (n->graph->capturing)
        r = CUDA_ERROR_ILLEGAL_STATE; /* a capture may depend on it */
    else if (gl_cond_node_capturing(n))
        r = CUDA_ERROR_ILLEGAL_STATE; /* a capture adds to a body */
    else
        gl_gnode_remove_locked(n);
    pthread_mutex_unlock(&gl_graph_lock);
    return r;
}

CUresult gls_cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type, int ptds)
{
    (void)ptds;
    pthread_mutex_lock(&gl_graph_lock);
    gl_gnode *n = gl_gnode_of(hNode);
    if (n != NULL && type != NULL)
        *type = n->type;
    pthread_mutex_unlock(&gl_graph_lock);
    return n != NULL && type != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The listing convention of the node and edge queries: with a NULL array,
 * the count; else up to *count entries, the rest of the array NULL, and the
 * count of entries given. */
typedef struct {
    CUgraphNode *a, *b;
    CUgraphEdgeData *data;
    size_t cap, n;
} listing;

static void list_one(listing *l, const gl_gnode *x, const gl_gnode *y)
{
    if (l->a != NULL && l->n < l->cap) {
        l->a[l->n] = (CUgraphNode)(uintptr_t)x->handle;
        if (l->b != NULL)
            l->b[l->n] = (CUgraphNode)(uintptr_t)y->handle;
        if (l->data != NULL)
            memset(&l->data[l->n], 0, sizeof l->data[l->n]);
    }
    l->n++;
}

static CUresult list_end(listing *l, size_t *count)
{
    if (l->a != NULL) {
        for (size_t i = l->n; i < l->cap; i++) {
            l->a[i] = NULL;
            if (l->b != NULL)
                l->b[i] = NULL;
        }
        *count = l->n < l->cap ? l->n : l->cap;
    } else {
        *count = l->n;
    }
    return CUDA_SUCCESS;
}

static CUresult list_nodes(CUgraph hGraph, CUgraphNode *nodes, size_t *num, int roots)
{
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (num == NULL)
        return r;
    listing l = {nodes, NULL, NULL, *num, 0};
    pthread_mutex_lock(&gl_graph_lock);
    gl_graph *g = gl_graph_of(hGraph);
    for (uint32_t i = 0; g != NULL && i < g->n; i++)
        if (!roots || g->nodes[i]->ndeps == 0)
            list_one(&l, g->nodes[i], NULL);
    if (g != NULL)
        r = list_end(&l, num);
    pthread_mutex_unlock(&gl_graph_lock);
    return r;
}

CUresult gls_cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes, int ptds)
{
    (void)ptds;
    return list_nodes(hGraph, nodes, numNodes, 0);
}

CUresult gls_cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *rootNodes, size_t *numRootNodes,
                                 int ptds)
{
    (void)ptds;
    return list_nodes(hGraph, rootNodes, numRootNodes, 1);
}

CUresult gls_cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
                                CUgraphEdgeData *edgeData, size_t *numEdges, int ptds)
{
    CUresult r = CUDA_ERROR_INVALID_VALUE;

    (void)ptds;
    if (numEdges == NULL || (from == NULL) != (to == NULL) || (edgeData != NULL && from == NULL))
        return r;
    listing l = {from, to, edgeData, *numEdges, 0};
    pthread_mutex_lock(&gl_graph_lock);
    gl_graph *g = gl_graph_of(hGraph);
    for (uint32_t i = 0; g != NULL && i < g->n; i++)
        for (uint32_t d = 0; d < g->nodes[i]->ndeps; d++)
            list_one(&l, g->nodes[i]->deps[d], g->nodes[i]);
    if (g != NULL)
        r = list_end(&l, numEdges);
    pthread_mutex_unlock(&gl_graph_lock);
    return r;
}

CUresult gls_cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, size_t *numEdges,
                             int ptds)
{
    return gls_cuGraphGetEdges_v2(hGraph, from, to, NULL, numEdges, ptds);
}

/* A node's dependencies (out = 0) or dependents (out = 1). */
static CUresult list_edges_of(CUgraphNode hNode, CUgraphNode *nodes, CUgraphEdgeData *data,
                              size_t *num, int out)
{
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (num == NULL || (data != NULL && nodes == NULL))
        return r;
    listing l = {nodes, NULL, data, *num, 0};
    pthread_mutex_lock(&gl_graph_lock);
    gl_gnode *n = gl_gnode_of(hNode);
    if (n != NULL && !out)
        for (uint32_t d = 0; d < n->ndeps; d++)
            list_one(&l, n->deps[d], NULL);
    for (uint32_t i = 0; n != NULL && out && i < n->graph->n; i++)
        if (has_dep(n->graph->nodes[i], n))
            list_one(&l, n->graph->nodes[i], NULL);
    if (n != NULL)
        r = list_end(&l, num);
    pthread_mutex_unlock(&gl_graph_lock);
    return r;
}

CUresult gls_cuGraphNodeGetDependencies_v2(CUgraphNode hNode, CUgraphNode *dependencies,
                                           CUgraphEdgeData *edgeData, size_t *numDependencies,
                                           int ptds)
{
    (void)ptds;
    return list_edges_of(hNode, dependencies, edgeData, numDependencies, 0);
}

CUresult gls_cuGraphNodeGetDependencies(CUgraphNode hNode, CUgraphNode *dependencies,
                                        size_t *numDependencies, int ptds)
{
    return gls_cuGraphNodeGetDependencies_v2(hNode, dependencies, NULL, numDependencies, ptds);
}

CUresult gls_cuGraphNodeGetDependentNodes_v2(CUgraphNode hNode, CUgraphNode *dependentNodes,
                                             CUgraphEdgeData *edgeData,
                                             size_t *numDependentNodes, int ptds)
{
    (void)ptds;
    return list_edges_of(hNode, dependentNodes, edgeData, numDependentNodes, 1);
}

CUresult gls_cuGraphNodeGetDependentNodes(CUgraphNode hNode, CUgraphNode *dependentNodes,
                                          size_t *numDependentNodes, int ptds)
{
    return gls_cuGraphNodeGetDependentNodes_v2(hNode, dependentNodes, NULL, numDependentNodes,
                                               ptds);
}

/* Edge data other than the default (programmatic ports) is not kept. */
static int plain_edges(const CUgraphEdgeData *data, size_t n)
{
    static const CUgraphEdgeData zero;
    for (size_t i = 0; data != NULL && i < n; i++)
        if (memcmp(&data[i], &zero, sizeof zero) != 0)
            return 0;
    return 1;
}

/* Adds (add = 1) or removes each edge from[i] -> to[i]; all are checked first. */
static CUresult edit_edges(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                           const CUgraphEdgeData *data, size_t n, int add)
{
    CUresult r = CUDA_SUCCESS;
    if (n > 0 && (from == NULL || to == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    if (!plain_edges(data, n))
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&gl_graph_lock);
    gl_graph *g = gl_graph_of(hGraph);
    if (g == NULL)
        r = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++) {
        gl_gnode *a = gl_gnode_of(from[i]), *b = gl_gnode_of(to[i]);
        if (a == NULL || b == NULL || a == b || a->graph != g || b->graph != g
            || has_dep(b, a) == add)
            r = CUDA_ERROR_INVALID_VALUE; /* (an edge added twice, or removed absent) */
        for (size_t j = 0; r == CUDA_SUCCESS && j < i; j++)
            if (from[j] == from[i] && to[j] == to[i])
                r = CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++) {
        gl_gnode *a = gl_gnode_of(from[i]), *b = gl_gnode_of(to[i]);
        if (add) {
            if (add_dep(b, a) != 0)
                r = CUDA_ERROR_OUT_OF_MEMORY;
            continue;
        }
        uint32_t k = 0;
        for (uint32_t d = 0; d < b->ndeps; d++)
            if (b->deps[d] != a)
                b->deps[k++] = b->deps[d];
        b->ndeps = k;
    }
    pthread_mutex_unlock(&gl_graph_lock);
    return r;
}

CUresult gls_cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode *from,
                                       const CUgraphNode *to, const CUgraphEdgeData *edgeData,
                                       size_t numDependencies, int ptds)
{
    (void)ptds;
    return edit_edges(hGraph, from, to, edgeData, numDependencies, 1);
}

CUresult gls_cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from,
                                    const CUgraphNode *to, size_t numDependencies, int ptds)
{
    return gls_cuGraphAddDependencies_v2(hGraph, from, to, NULL, numDependencies, ptds);
}

CUresult gls_cuGraphRemoveDependencies_v2(CUgraph hGraph, const CUgraphNode *from,
                                          const CUgraphNode *to,
                                          const CUgraphEdgeData *edgeData,
                                          size_t numDependencies, int ptds)
{
    (void)ptds;
    return edit_edges(hGraph, from, to, edgeData, numDependencies, 0);
}

CUresult gls_cuGraphRemoveDependencies(CUgraph hGraph, const CUgraphNode *from,
                                       const CUgraphNode *to, size_t numDependencies, int ptds)
{
    return gls_cuGraphRemoveDependencies_v2(hGraph, from, to, NULL, numDependencies, ptds);
}

static const char *const g_type_names[] = {
    "kernel", "memcpy", "memset", "host", "graph", "empty", "wait event", "event record",
    "semaphore signal", "semaphore wait", "mem alloc", "mem free", "batch mem op", "conditional"};

static void dot_graph(FILE *f, const gl_graph *g)
{
    for (uint32_t i = 0; i < g->n; i++) {
        const gl_gnode *n = g->nodes[i];
        fprintf(f, "  n%llx [label=\"%s\"];\n", (unsigned long long)n->handle,
                n->type >= 0 && n->type <= GL_CU_GRAPH_NODE_TYPE_CONDITIONAL
                    ? g_type_names[n->type] : "?");
        for (uint32_t d = 0; d < n->ndeps; d++)
            fprintf(f, "  n%llx -> n%llx;\n", (unsigned long long)n->deps[d]->handle,
                    (unsigned long long)n->handle);
    }
}

/* The graph's nodes and edges, in DOT (the flags' verbose details are not given). */
CUresult gls_cuGraphDebugDotPrint(CUgraph hGraph, const char *path, unsigned int flags, int ptds)
{
    CUresult r = CUDA_ERROR_INVALID_VALUE;

    (void)flags, (void)ptds;
    if (path == NULL)
        return r;
    pthread_mutex_lock(&gl_graph_lock);
    gl_graph *g = gl_graph_of(hGraph);
    FILE *f = g != NULL ? fopen(path, "w") : NULL;
    if (f != NULL) {
        fprintf(f, "digraph gleam {\n");
        dot_graph(f, g);
        fprintf(f, "}\n");
        r = fclose(f) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OPERATING_SYSTEM;
    } else if (g != NULL) {
        r = CUDA_ERROR_OPERATING_SYSTEM;
    }
    pthread_mutex_unlock(&gl_graph_lock);
    return r;
}
