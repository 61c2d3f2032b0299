/*
 * graph_exec.c — instantiated graphs. Instantiating copies the program's
 * graph (later changes to it do not reach the exec, as in CUDA), flattens
 * child graphs into it, orders the nodes, and splits them in two: the
 * *device* nodes (kernels, memsets, device-to-device copies, event records
 * and waits, empty and memory nodes) and the *process* nodes (host
 * functions, copies from or to the program's memory), which only the
 * program's process can run. Stages follow from the dependencies: stage k's
 * device nodes run first, then its process nodes, then stage k + 1; a
 * device node goes to the first stage after every process node it depends
 * on, a process node to the first stage whose device nodes include all it
 * depends on (see stage_of). The device nodes go to the server once, as a
 * description (include/gl_graph.h); the process nodes stay here in the
 * exec's *plan*, which graph_launch.c runs.
 *
 * Updates (cuGraphExec*SetParams, cuGraphExecUpdate, cuGraphNodeSetEnabled)
 * change the exec's copy, instantiate it again here and send the new
 * description as glGraphUpdate: it must have the same shape (nodes, stages,
 * edges), as CUDA's update rules require.
 *
 * Ownership: an exec owns its copy of the graph and holds a reference to
 * its plan; a launch in progress holds another (graph_launch.c).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "gl_toposort.h"
#include "graph.h"
#include "graph_plan.h"

/* Child graphs nest: a bound on depth keeps a hostile program's recursion finite. */
#define MAX_DEPTH 64

struct gl_gexec {
    uint64_t handle;
    uint64_t flags;
    gl_graph *graph;   /* the exec's own copy; nodes' origins are the program's nodes */
    uint8_t *disabled; /* per node of graph (top level), 1: disabled */
    gl_plan *plan;
    gl_graph_head head; /* the shape sent (updates must keep it) */
    uint32_t *shape;    /* each description node's stage, then each edge */
    size_t shape_len;
};

static gl_hmap *g_execs;

gl_gexec *gl_gexec_of(CUgraphExec e)
{
    uint64_t h = (uint64_t)(uintptr_t)e;
    if (g_execs == NULL || gl_check_handle(GL_H_GEXEC, h) != CUDA_SUCCESS)
        return NULL;
    return gl_hmap_get(g_execs, h);
}

/* ------------------------------------------------------------ flattening */

typedef struct {
    gl_gnode *node;   /* NULL: a child graph's entry or exit (empty) */
    uint32_t *deps;
    uint32_t ndeps, cap;
    int enabled;
    int client;       /* runs in the process */
    int kind;         /* GL_GN_* of a device node */
    uint32_t stage;
    uint32_t desc;    /* index among the description's nodes */
    uint32_t cond_handle, body_off, body_len; /* a conditional node's, in the description */
} flat;

typedef struct {
    flat *f;
    uint32_t n, cap;
} flats;

static int flat_new(flats *v, gl_gnode *node, uint32_t *out)
{
    if (v->n >= GL_GRAPH_MAX_NODES || gl_grow(&v->f, &v->cap, v->n, sizeof *v->f, 64) != 0)
        return -1;
    memset(&v->f[v->n], 0, sizeof v->f[v->n]);
    v->f[v->n].node = node;
    v->f[v->n].enabled = 1;
    *out = v->n++;
    return 0;
}

static int flat_dep(flats *v, uint32_t i, uint32_t dep)
{
    flat *f = &v->f[i];
    if (gl_grow(&f->deps, &f->cap, f->ndeps, sizeof *f->deps, 4) != 0)
        return -1;
    f->deps[f->ndeps++] = dep;
    return 0;
}

static void flats_free(flats *v)
{
    for (uint32_t i = 0; i < v->n; i++)
        free(v->f[i].deps);
    free(v->f);
}

/* Flattens g into v: each node's index as a dependency (out[i]) and as a
 * dependent (in[i]) — the same but for a child graph, which becomes an entry
 * node, the child's nodes, and an exit node. */
static int flatten(flats *v, const gl_graph *g, const uint8_t *disabled, int depth)
{
    uint32_t *in = calloc((size_t)g->n + 1, sizeof *in), *out = calloc((size_t)g->n + 1,
                                                                         sizeof *out);
    int rc = in != NULL && out != NULL && depth < MAX_DEPTH ? 0 : -1;

    for (uint32_t i = 0; rc == 0 && i < g->n; i++) {
        gl_gnode *n = g->nodes[i];
        if (n->type != GL_CU_GRAPH_NODE_TYPE_GRAPH) {
            rc = flat_new(v, n, &in[i]);
            out[i] = in[i];
            if (rc == 0 && disabled != NULL && disabled[i])
                v->f[in[i]].enabled = 0;
            continue;
        }
        uint32_t first;
        rc = flat_new(v, NULL, &in[i]);
        first = v->n;
        if (rc == 0)
            rc = flatten(v, n->u.child, NULL, depth + 1);
        if (rc == 0)
            rc = flat_new(v, NULL, &out[i]);
        /* The child's roots follow its entry; its exit follows every child node. */
        for (uint32_t k = first; rc == 0 && k < out[i]; k++) {
            if (v->f[k].ndeps == 0)
                rc = flat_dep(v, k, in[i]);
            if (rc == 0)
                rc = flat_dep(v, out[i], k);
        }
    }
    for (uint32_t i = 0; rc == 0 && i < g->n; i++) {
        const gl_gnode *n = g->nodes[i];
        for (uint32_t d = 0; rc == 0 && d < n->ndeps; d++)
            rc = flat_dep(v, in[i], out[n->deps[d]->index]);
    }
    free(in);
    free(out);
    return rc;
}

/* What runs a node, and where: a device node's kind, or a process node. */
static void classify(flat *f)
{
    gl_gnode *n = f->node;
    f->client = 0;
    f->kind = GL_GN_EMPTY;
    if (n == NULL || !f->enabled)
        return;
    switch (n->type) {
    case GL_CU_GRAPH_NODE_TYPE_KERNEL:
        f->kind = GL_GN_KERNEL;
        break;
    case GL_CU_GRAPH_NODE_TYPE_MEMSET:
        f->kind = GL_GN_MEMSET;
        break;
    case GL_CU_GRAPH_NODE_TYPE_MEMCPY: {
        int dev[2];
        uint64_t addr[2];
        if (gl_copy3d_ends(&n->u.copy, dev, addr) == CUDA_SUCCESS && dev[0] && dev[1])
            f->kind = GL_GN_COPY;
        else
            f->client = 1;
        break;
    }
    case GL_CU_GRAPH_NODE_TYPE_HOST:
        f->client = 1;
        break;
    case GL_CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        f->kind = GL_GN_EVENT_RECORD;
        break;
    case GL_CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        f->kind = GL_GN_EVENT_WAIT;
        break;
    case GL_CU_GRAPH_NODE_TYPE_CONDITIONAL:
        f->kind = GL_GN_COND;
        break;
    default:
        break;
    }
}

/* Kahn's order of the flattened nodes, or -1 for a cycle (-2: no memory). */
static int order(const flats *v, uint32_t *ord)
{
    uint32_t edges = 0;
    for (uint32_t i = 0; i < v->n; i++)
        edges += v->f[i].ndeps;
    gl_graph_edge *e = malloc(((size_t)edges + 1) * sizeof *e);
    if (e == NULL)
        return -2;
    edges = 0;
    for (uint32_t i = 0; i < v->n; i++)
        for (uint32_t d = 0; d < v->f[i].ndeps; d++)
            e[edges++] = (gl_graph_edge){v->f[i].deps[d], i};
    int rc = gl_toposort(v->n, e, edges, ord);
    free(e);
    return rc;
}

/* A device node runs in the first stage after every process node it depends
 * on; a process node in the stage of everything it depends on (after that
 * stage's device nodes, in dependency order among the stage's process nodes). */
static void stage_of(flats *v, const uint32_t *ord)
{
    for (uint32_t k = 0; k < v->n; k++) {
        flat *f = &v->f[ord[k]];
        uint32_t s = 0;
        for (uint32_t d = 0; d < f->ndeps; d++) {
            const flat *p = &v->f[f->deps[d]];
            uint32_t need = p->stage + (p->client && !f->client ? 1 : 0);
            if (need > s)
                s = need;
        }
        f->stage = s;
    }
}

/* ------------------------------------------------------- the description */

static void describe_node(gl_graph_node *d, const flat *f, uint32_t *params_at, uint8_t *params)
{
    const gl_gnode *n = f->node;
    memset(d, 0, sizeof *d);
    d->kind = (uint8_t)f->kind;
    d->stage = f->stage;
    switch (f->kind) {
    case GL_GN_KERNEL: {
        const gl_kernel_launch *k = &n->u.kernel;
        d->u.kernel.func = k->func;
        for (int i = 0; i < 3; i++) {
            d->u.kernel.grid[i] = k->grid[i];
            d->u.kernel.block[i] = k->block[i];
            d->u.kernel.cluster[i] = k->cluster[i];
        }
        d->u.kernel.shared = k->shared;
        d->u.kernel.params_off = *params_at;
        d->u.kernel.params_len = k->size;
        if (params != NULL && k->size > 0)
            memcpy(params + *params_at, k->params, k->size);
        *params_at += k->size;
        break;
    }
    case GL_GN_MEMSET: {
        const CUDA_MEMSET_NODE_PARAMS *m = &n->u.memset;
        d->u.memset.dst = m->dst;
        d->u.memset.pitch = m->pitch;
        d->u.memset.width = m->width;
        d->u.memset.height = m->height;
        d->u.memset.value = m->value;
        d->u.memset.elem = m->elementSize;
        break;
    }
    case GL_GN_COPY: {
        const CUDA_MEMCPY3D *c = &n->u.copy;
        int dev[2];
        uint64_t addr[2];
        gl_copy3d_ends(c, dev, addr); /* (classify checked it) */
        d->u.copy.src = addr[0], d->u.copy.dst = addr[1];
        d->u.copy.src_pitch = c->srcPitch, d->u.copy.src_height = c->srcHeight;
        d->u.copy.dst_pitch = c->dstPitch, d->u.copy.dst_height = c->dstHeight;
        d->u.copy.width = c->WidthInBytes, d->u.copy.height = c->Height;
        d->u.copy.depth = c->Depth;
        if (c->Depth <= 1) /* (a pitch only matters between rows) */
            d->u.copy.src_height = d->u.copy.dst_height = c->Height;
        break;
    }
    case GL_GN_EVENT_RECORD:
    case GL_GN_EVENT_WAIT:
        d->u.event.event = n->u.event;
        break;
    case GL_GN_COND:
        d->u.cond.handle = f->cond_handle;
        d->u.cond.type = (uint32_t)n->u.cond.type;
        d->u.cond.size = n->u.cond.size;
        d->u.cond.body_off = f->body_off;
        d->u.cond.body_len = f->body_len;
        break;
    default:
        break;
    }
}

/* ------------------------------------------------ conditional bodies */

/* The handles an exec's description carries: every one made for its graph,
 * the graphs it holds and their bodies, once each. */
typedef struct {
    gl_graph_handle *h;
    uint32_t n, cap;
} handle_table;

static int collect_handles(handle_table *t, const gl_graph *g, int depth)
{
    if (depth >= MAX_DEPTH)
        return -1;
    for (uint32_t k = 0; k < g->nconds; k++) {
        uint32_t j = 0;
        while (j < t->n && t->h[j].value != g->conds[k].value)
            j++;
        if (j < t->n)
            continue;
        if (t->n >= GL_GRAPH_MAX_HANDLES || gl_grow(&t->h, &t->cap, t->n, sizeof *t->h, 4) != 0)
            return -1;
        t->h[t->n++] = g->conds[k];
    }
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < g->n; i++) {
        const gl_gnode *n = g->nodes[i];
        if (n->type == GL_CU_GRAPH_NODE_TYPE_GRAPH)
            rc = collect_handles(t, n->u.child, depth + 1);
        for (uint32_t b = 0; n->type == GL_CU_GRAPH_NODE_TYPE_CONDITIONAL && rc == 0
                             && b < n->u.cond.size; b++)
            rc = collect_handles(t, n->u.cond.body[b], depth + 1);
    }
    return rc;
}

static CUresult describe(const flats *v, uint8_t **out, size_t *len, uint32_t stages,
                         const handle_table *t, int nest);
static int order(const flats *v, uint32_t *ord);

/* Whether a flattened body's node can run in a body on the server: what
 * CUDA takes in a body, and only device work (the condition is decided on
 * the server, between the process's stages there is no place for it). */
static CUresult body_node(const flat *f)
{
    if (f->client) {
        gl_log(GL_LOG_ERROR, "cuGraphInstantiate", "a conditional node's body holds a %s, "
               "which only the program's process can run, but the server decides the "
               "condition; returning CUDA_ERROR_NOT_SUPPORTED",
               f->node->type == GL_CU_GRAPH_NODE_TYPE_HOST ? "host function"
                                                           : "copy of the program's memory");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (f->node == NULL || !f->enabled)
        return CUDA_SUCCESS;
    switch (f->node->type) {
    case GL_CU_GRAPH_NODE_TYPE_KERNEL:
    case GL_CU_GRAPH_NODE_TYPE_EMPTY:
    case GL_CU_GRAPH_NODE_TYPE_MEMSET:
    case GL_CU_GRAPH_NODE_TYPE_MEMCPY:
    case GL_CU_GRAPH_NODE_TYPE_CONDITIONAL:
        return CUDA_SUCCESS;
    default: /* event and memory nodes, from a child graph in the body */
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* A body's description: one stage, no handles of its own. */
static CUresult describe_body(const gl_graph *g, const handle_table *t, int nest,
                              uint8_t **out, size_t *len)
{
    flats v = {0};
    uint32_t *ord = NULL;
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;

    if (nest >= GL_GRAPH_MAX_DEPTH) {
        gl_log(GL_LOG_ERROR, "cuGraphInstantiate", "conditional nodes nest deeper than %d; "
               "returning CUDA_ERROR_NOT_SUPPORTED", GL_GRAPH_MAX_DEPTH - 1);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (flatten(&v, g, NULL, 0) != 0 || (ord = malloc(((size_t)v.n + 1) * sizeof *ord)) == NULL)
        goto out;
    r = CUDA_SUCCESS;
    for (uint32_t i = 0; r == CUDA_SUCCESS && i < v.n; i++) {
        classify(&v.f[i]);
        v.f[i].desc = i;
        r = body_node(&v.f[i]);
    }
    if (r == CUDA_SUCCESS && order(&v, ord) != 0)
        r = CUDA_ERROR_INVALID_VALUE; /* a cycle (or no memory) */
    if (r == CUDA_SUCCESS)
        r = describe(&v, out, len, 1, t, nest);
out:
    free(ord);
    flats_free(&v);
    return r;
}

/* Each conditional node's bodies, described into one buffer (*bodies, *n),
 * node after node; each node's place in it and its handle's index. */
static CUresult describe_bodies(flats *v, const handle_table *t, int nest, uint8_t **bodies,
                                size_t *n)
{
    CUresult r = CUDA_SUCCESS;

    *bodies = NULL;
    *n = 0;
    for (uint32_t i = 0; r == CUDA_SUCCESS && i < v->n; i++) {
        flat *f = &v->f[i];
        if (f->client || f->kind != GL_GN_COND)
            continue;
        uint32_t k = 0;
        while (k < t->n && t->h[k].value != f->node->u.cond.handle)
            k++;
        if (k == t->n) /* a handle of another graph */
            r = CUDA_ERROR_INVALID_VALUE;
        f->cond_handle = k;
        f->body_off = (uint32_t)*n;
        for (uint32_t b = 0; r == CUDA_SUCCESS && b < f->node->u.cond.size; b++) {
            uint8_t *one;
            size_t len;
            r = describe_body(f->node->u.cond.body[b], t, nest + 1, &one, &len);
            if (r != CUDA_SUCCESS)
                break;
            uint8_t *more = *n + len <= GL_GRAPH_MAX_PARAMS ? realloc(*bodies, *n + len) : NULL;
            if (more == NULL) {
                r = CUDA_ERROR_OUT_OF_MEMORY;
            } else {
                *bodies = more;
                memcpy(*bodies + *n, one, len);
                *n += len;
            }
            free(one);
        }
        f->body_len = (uint32_t)(*n - f->body_off);
    }
    if (r != CUDA_SUCCESS) {
        free(*bodies);
        *bodies = NULL;
    }
    return r;
}

/* Two passes over the flattened graph: sizes, then the bytes. The root
 * (nest 0) carries the handle table; bodies follow the parameters. */
static CUresult describe(const flats *v, uint8_t **out, size_t *len, uint32_t stages,
                         const handle_table *t, int nest)
{
    gl_graph_head h = {GL_GRAPH_MAGIC, GL_GRAPH_VERSION, 0, 0, 0, stages, 0, 0, 0};
    uint8_t *bodies;
    size_t nbodies;
    CUresult r = describe_bodies((flats *)v, t, nest, &bodies, &nbodies);
    if (r != CUDA_SUCCESS)
        return r;
    h.handles = nest == 0 ? t->n : 0;
    h.bodies = (uint32_t)nbodies;
    for (uint32_t i = 0; i < v->n; i++) {
        const flat *f = &v->f[i];
        if (f->client)
            continue;
        h.nodes++;
        if (f->kind == GL_GN_KERNEL)
            h.params += f->node->u.kernel.size;
        for (uint32_t d = 0; d < f->ndeps; d++) {
            const flat *p = &v->f[f->deps[d]];
            h.edges += !p->client && p->stage == f->stage;
        }
    }
    size_t n = sizeof h + (size_t)h.nodes * sizeof(gl_graph_node)
               + (size_t)h.edges * sizeof(gl_graph_edge)
               + (size_t)h.handles * sizeof(gl_graph_handle) + h.params + h.bodies;
    uint8_t *b = malloc(n);
    if (b == NULL) {
        free(bodies);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memcpy(b, &h, sizeof h);
    gl_graph_node *nodes = (gl_graph_node *)(b + sizeof h);
    gl_graph_edge *edges = (gl_graph_edge *)(nodes + h.nodes);
    gl_graph_handle *handles = (gl_graph_handle *)(edges + h.edges);
    uint8_t *params = (uint8_t *)(handles + h.handles);
    if (h.handles > 0)
        memcpy(handles, t->h, (size_t)h.handles * sizeof *handles);
    if (h.bodies > 0)
        memcpy(params + h.params, bodies, h.bodies);
    free(bodies);
    uint32_t k = 0, e = 0, at = 0;
    for (uint32_t i = 0; i < v->n; i++)
        if (!v->f[i].client)
            describe_node(&nodes[k++], &v->f[i], &at, params);
    for (uint32_t i = 0; i < v->n; i++) {
        const flat *f = &v->f[i];
        for (uint32_t d = 0; !f->client && d < f->ndeps; d++) {
            const flat *p = &v->f[f->deps[d]];
            if (!p->client && p->stage == f->stage)
                edges[e++] = (gl_graph_edge){p->desc, f->desc};
        }
    }
    *out = b;
    *len = n;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------ instantiating */

typedef struct {
    uint8_t *desc;
    size_t len;
    gl_plan *plan;
} built;

/* The description and plan of g (the exec's copy), or why not. */
static CUresult build(const gl_graph *g, const uint8_t *disabled, uint64_t flags, built *b)
{
    flats v = {0};
    uint32_t *ord = NULL;
    handle_table handles = {0};
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;

    memset(b, 0, sizeof *b);
    if (flatten(&v, g, disabled, 0) != 0)
        goto out;
    if ((ord = malloc(((size_t)v.n + 1) * sizeof *ord)) == NULL)
        goto out;
    for (uint32_t i = 0; i < v.n; i++)
        classify(&v.f[i]);
    int cycle = order(&v, ord);
    if (cycle != 0) {
        r = cycle == -1 ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    stage_of(&v, ord);
    uint32_t stages = 1, desc = 0;
    for (uint32_t i = 0; i < v.n; i++) {
        if (v.f[i].stage + 1 > stages)
            stages = v.f[i].stage + 1;
        if (!v.f[i].client)
            v.f[i].desc = desc++;
    }
    if (collect_handles(&handles, g, 0) != 0)
        goto out;
    if ((r = describe(&v, &b->desc, &b->len, stages, &handles, 0)) != CUDA_SUCCESS)
        goto out;
    gl_plan_node *pn = calloc((size_t)v.n + 1, sizeof *pn);
    CUdeviceptr *mem = calloc((size_t)v.n + 1, sizeof *mem);
    uint32_t np = 0, nalloc = 0, nfree = 0;
    if (pn == NULL || mem == NULL) {
        free(pn);
        free(mem);
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    /* The plan: process nodes by stage, in dependency order within each. */
    for (uint32_t s = 0; s < stages; s++)
        for (uint32_t k = 0; k < v.n; k++) {
            const flat *f = &v.f[ord[k]];
            if (!f->client || f->stage != s)
                continue;
            pn[np].stage = s;
            pn[np].host = f->node->type == GL_CU_GRAPH_NODE_TYPE_HOST;
            if (pn[np].host)
                pn[np].fn = f->node->u.host;
            else
                pn[np].copy = f->node->u.copy;
            np++;
        }
    /* Graph memory: allocations first, then frees (mem[] from both ends). */
    for (uint32_t k = 0; k < v.n; k++) {
        const gl_gnode *n = v.f[k].node;
        if (n != NULL && n->type == GL_CU_GRAPH_NODE_TYPE_MEM_ALLOC)
            mem[nalloc++] = n->u.alloc.dptr;
    }
    for (uint32_t k = 0; k < v.n; k++) {
        const gl_gnode *n = v.f[k].node;
        if (n != NULL && n->type == GL_CU_GRAPH_NODE_TYPE_MEM_FREE)
            mem[nalloc + nfree++] = n->u.free_dptr;
    }
    r = gl_plan_make(&b->plan, pn, np, stages, b->desc, b->len, mem, nalloc, nfree, flags);
    free(pn);
    free(mem);
out:
    if (r != CUDA_SUCCESS) {
        free(b->desc);
        b->desc = NULL;
    }
    free(handles.h);
    free(ord);
    flats_free(&v);
    return r;
}

/* Sends a description: inline, or in parts staged on the server (n == 0). */
static CUresult send_desc(uint64_t exec, CUgraphExec *mint, const uint8_t *desc, size_t len)
{
    CUresult r = CUDA_SUCCESS;
    if (len <= GL_COPY_CHUNK)
        return mint != NULL ? glw_glGraphInstantiate(mint, desc, len, 0)
                            : glw_glGraphUpdate((CUgraphExec)(uintptr_t)exec, desc, len, 0);
    gl_stage_lock();
    for (size_t off = 0; r == CUDA_SUCCESS && off < len; off += GL_COPY_CHUNK) {
        size_t n = len - off < GL_COPY_CHUNK ? len - off : GL_COPY_CHUNK;
        r = glw_glImagePart(desc + off, n, 0);
    }
    if (r == CUDA_SUCCESS)
        r = mint != NULL ? glw_glGraphInstantiate(mint, NULL, 0, 0)
                         : glw_glGraphUpdate((CUgraphExec)(uintptr_t)exec, NULL, 0, 0);
    gl_stage_unlock();
    return r;
}

static void exec_free(gl_gexec *e)
{
    if (e == NULL)
        return;
    gl_plan_unref(e->plan);
    pthread_mutex_lock(&gl_graph_lock);
    gl_graph_free_locked(e->graph);
    pthread_mutex_unlock(&gl_graph_lock);
    free(e->disabled);
    free(e);
}

static CUresult instantiate(CUgraphExec *phGraphExec, CUgraph hGraph, uint64_t flags,
                            CUgraphNode *err_node)
{
    CUresult r;
    built b;

    if (phGraphExec == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~(uint64_t)(GL_CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH
                            | GL_CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD
                            | GL_CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)) {
        gl_log(GL_LOG_ERROR, "cuGraphInstantiate", "graphs for device launch are not "
               "supported; returning CUDA_ERROR_NOT_SUPPORTED");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (err_node != NULL)
        *err_node = NULL;
    gl_gexec *e = calloc(1, sizeof *e);
    if (e == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->flags = flags;
    pthread_mutex_lock(&gl_graph_lock);
    if (g_execs == NULL)
        g_execs = gl_hmap_new();
    gl_graph *g = gl_graph_of(hGraph);
    r = g == NULL ? CUDA_ERROR_INVALID_VALUE : g_execs == NULL ? CUDA_ERROR_OUT_OF_MEMORY
                                                               : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS && (e->graph = gl_graph_clone_locked(g, 1)) == NULL)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS && (e->disabled = calloc((size_t)g->n + 1, 1)) == NULL)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS)
        r = build(e->graph, e->disabled, flags, &b);
    pthread_mutex_unlock(&gl_graph_lock);
    if (r == CUDA_SUCCESS) {
        e->plan = b.plan;
        gl_plan_shape(b.desc, b.len, &e->shape, &e->shape_len);
        r = send_desc(0, phGraphExec, b.desc, b.len);
        free(b.desc);
    }
    if (r == CUDA_SUCCESS) {
        e->handle = (uint64_t)(uintptr_t)*phGraphExec;
        pthread_mutex_lock(&gl_graph_lock);
        if (gl_hmap_put(g_execs, e->handle, e) != 0)
            r = CUDA_ERROR_OUT_OF_MEMORY;
        pthread_mutex_unlock(&gl_graph_lock);
    }
    if (r != CUDA_SUCCESS) {
        free(e->shape);
        exec_free(e);
    }
    return r;
}

CUresult gls_cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                         unsigned long long flags, int ptds)
{
    (void)ptds;
    return instantiate(phGraphExec, hGraph, flags, NULL);
}

CUresult gls_cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                char *logBuffer, size_t bufferSize, int ptds)
{
    (void)ptds;
    if (logBuffer != NULL && bufferSize > 0)
        logBuffer[0] = '\0';
    return instantiate(phGraphExec, hGraph, 0, phErrorNode);
}

CUresult gls_cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                          CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams,
                                          int ptds)
{
    (void)ptds;
    if (instantiateParams == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = instantiate(phGraphExec, hGraph, instantiateParams->flags,
                             &instantiateParams->hErrNode_out);
    instantiateParams->result_out = r == CUDA_SUCCESS ? GL_CUDA_GRAPH_INSTANTIATE_SUCCESS
                                    : r == CUDA_ERROR_INVALID_VALUE
                                        ? GL_CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE
                                        : GL_CUDA_GRAPH_INSTANTIATE_ERROR;
    return r;
}

CUresult gls_cuGraphExecGetFlags(CUgraphExec hGraphExec, cuuint64_t *flags, int ptds)
{
    (void)ptds;
    pthread_mutex_lock(&gl_graph_lock);
    gl_gexec *e = gl_gexec_of(hGraphExec);
    if (e != NULL && flags != NULL)
        *flags = e->flags;
    pthread_mutex_unlock(&gl_graph_lock);
    return e != NULL && flags != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult gls_cuGraphExecDestroy(CUgraphExec hGraphExec, int ptds)
{
    (void)ptds;
    pthread_mutex_lock(&gl_graph_lock);
    gl_gexec *e = gl_gexec_of(hGraphExec);
    if (e != NULL)
        gl_hmap_take(g_execs, e->handle);
    pthread_mutex_unlock(&gl_graph_lock);
    if (e == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = glw_glGraphExecDestroy(hGraphExec, 0);
    free(e->shape);
    exec_free(e);
    return r;
}

/* The exec's plan, referenced for a launch (NULL: no such exec). */
gl_plan *gl_gexec_plan(CUgraphExec hGraphExec, uint64_t *flags)
{
    pthread_mutex_lock(&gl_graph_lock);
    gl_gexec *e = gl_gexec_of(hGraphExec);
    gl_plan *p = e != NULL ? gl_plan_ref(e->plan) : NULL;
    if (e != NULL)
        *flags = e->flags;
    pthread_mutex_unlock(&gl_graph_lock);
    return p;
}

/* A copy of the exec's graph, for a launch into a capture (a child graph). */
CUgraph gl_gexec_graph(CUgraphExec hGraphExec)
{
    gl_gexec *e = gl_gexec_of(hGraphExec);
    return e != NULL ? (CUgraph)(uintptr_t)e->graph->handle : NULL;
}

/* ------------------------------------------------------------- updates */

/* Rebuilds the exec from its (changed) copy and sends the new description;
 * with the lock held on entry, released on return. A new shape is refused
 * and nothing changes (the caller restores the copy). */
static CUresult rebuild_unlock(gl_gexec *e)
{
    built b;
    uint32_t *shape = NULL;
    size_t shape_len = 0;
    CUresult r = build(e->graph, e->disabled, e->flags, &b);
    pthread_mutex_unlock(&gl_graph_lock);
    if (r != CUDA_SUCCESS)
        return r;
    gl_plan_shape(b.desc, b.len, &shape, &shape_len);
    if (shape == NULL || shape_len != e->shape_len
        || memcmp(shape, e->shape, shape_len * sizeof *shape) != 0) {
        free(shape);
        free(b.desc);
        gl_plan_unref(b.plan);
        return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
    free(shape);
    r = send_desc(e->handle, NULL, b.desc, b.len);
    free(b.desc);
    if (r != CUDA_SUCCESS) {
        gl_plan_unref(b.plan);
        return r;
    }
    pthread_mutex_lock(&gl_graph_lock);
    gl_plan *old = e->plan;
    e->plan = b.plan;
    pthread_mutex_unlock(&gl_graph_lock);
    gl_plan_unref(old);
    return CUDA_SUCCESS;
}

/* The exec's copy of the program's node hNode (top level), or NULL. */
static gl_gnode *exec_node(gl_gexec *e, CUgraphNode hNode, uint32_t *index)
{
    for (uint32_t i = 0; i < e->graph->n; i++)
        if (e->graph->nodes[i]->origin == (uint64_t)(uintptr_t)hNode) {
            *index = i;
            return e->graph->nodes[i];
        }
    return NULL;
}

/* Replaces the parameters of the exec's copy of hNode with those of built
 * node fresh (of the same type), then rebuilds; the old parameters come back
 * when the rebuild is refused. */
static CUresult set_exec_node(CUgraphExec hGraphExec, CUgraphNode hNode, gl_gnode *fresh)
{
    uint32_t i;
    pthread_mutex_lock(&gl_graph_lock);
    gl_gexec *e = gl_gexec_of(hGraphExec);
    gl_gnode *n = e != NULL ? exec_node(e, hNode, &i) : NULL;
    if (n == NULL || n->type != fresh->type) {
        pthread_mutex_unlock(&gl_graph_lock);
        gl_gnode_params_free(fresh);
        return CUDA_ERROR_INVALID_VALUE;
    }
    gl_gnode saved = *n;
    n->u = fresh->u;
    CUresult r = rebuild_unlock(e);
    pthread_mutex_lock(&gl_graph_lock);
    if (r == CUDA_SUCCESS) {
        n->u = saved.u;
        gl_gnode_params_free(n); /* the old parameters */
        n->u = fresh->u;
    } else {
        n->u = saved.u;
        gl_gnode_params_free(fresh);
    }
    pthread_mutex_unlock(&gl_graph_lock);
    return r == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE ? CUDA_ERROR_INVALID_VALUE : r;
}

/* Builds a node of type from args (graph_nodes.c) and sets it in the exec. */
static CUresult set_exec_from(CUgraphExec hGraphExec, CUgraphNode hNode, int type, void *args)
{
    gl_gnode fresh;
    CUresult r = gl_gnode_build(&fresh, type, args);
    free(args);
    if (r != CUDA_SUCCESS)
        return r;
    return set_exec_node(hGraphExec, hNode, &fresh);
}

static void *new_args(void)
{
    return calloc(1, gl_node_args_size());
}

CUresult gls_cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                               const CUDA_KERNEL_NODE_PARAMS *nodeParams,
                                               int ptds)
{
    void *a = new_args();
    (void)ptds;
    if (a == NULL || nodeParams == NULL) {
        free(a);
        return a == NULL ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
    }
    gl_node_args_kernel(a, nodeParams);
    return set_exec_from(hGraphExec, hNode, GL_CU_GRAPH_NODE_TYPE_KERNEL, a);
}

CUresult gls_cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                            const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams,
                                            int ptds)
{
    CUDA_KERNEL_NODE_PARAMS p = {0};
    if (nodeParams == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&p, nodeParams, sizeof *nodeParams); /* _v1: the first members of the newer layout */
    return gls_cuGraphExecKernelNodeSetParams_v2(hGraphExec, hNode, &p, ptds);
}

static CUresult set_exec_other(CUgraphExec hGraphExec, CUgraphNode hNode, int type,
                               const void *params, CUevent event)
{
    void *a = new_args();
    if (a == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    gl_node_args_other(a, type, params, event);
    return set_exec_from(hGraphExec, hNode, type, a);
}

CUresult gls_cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                            const CUDA_MEMCPY3D *copyParams, CUcontext ctx,
                                            int ptds)
{
    (void)ctx, (void)ptds;
    return set_exec_other(hGraphExec, hNode, GL_CU_GRAPH_NODE_TYPE_MEMCPY, copyParams, NULL);
}

CUresult gls_cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                            const CUDA_MEMSET_NODE_PARAMS *memsetParams,
                                            CUcontext ctx, int ptds)
{
    (void)ctx, (void)ptds;
    return set_exec_other(hGraphExec, hNode, GL_CU_GRAPH_NODE_TYPE_MEMSET, memsetParams, NULL);
}

CUresult gls_cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                          const CUDA_HOST_NODE_PARAMS *nodeParams, int ptds)
{
    (void)ptds;
    return set_exec_other(hGraphExec, hNode, GL_CU_GRAPH_NODE_TYPE_HOST, nodeParams, NULL);
}

CUresult gls_cuGraphExecChildGraphNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                CUgraph childGraph, int ptds)
{
    (void)ptds;
    return set_exec_other(hGraphExec, hNode, GL_CU_GRAPH_NODE_TYPE_GRAPH, childGraph, NULL);
}

CUresult gls_cuGraphExecEventRecordNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                CUevent event, int ptds)
{
    (void)ptds;
    return set_exec_other(hGraphExec, hNode, GL_CU_GRAPH_NODE_TYPE_EVENT_RECORD, NULL, event);
}

CUresult gls_cuGraphExecEventWaitNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode,
                                              CUevent event, int ptds)
{
    (void)ptds;
    return set_exec_other(hGraphExec, hNode, GL_CU_GRAPH_NODE_TYPE_WAIT_EVENT, NULL, event);
}

CUresult gls_cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                      CUgraphNodeParams *nodeParams, int ptds)
{
    void *a = new_args();
    CUresult r = a != NULL ? gl_node_args_of(nodeParams, a) : CUDA_ERROR_OUT_OF_MEMORY;
    (void)ptds;
    if (r != CUDA_SUCCESS || nodeParams->type == GL_CU_GRAPH_NODE_TYPE_MEM_ALLOC
        || nodeParams->type == GL_CU_GRAPH_NODE_TYPE_MEM_FREE
        || nodeParams->type == GL_CU_GRAPH_NODE_TYPE_CONDITIONAL) {
        free(a);
        return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE;
    }
    return set_exec_from(hGraphExec, hNode, nodeParams->type, a);
}

static CUresult enabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned int *get,
                        unsigned int set)
{
    uint32_t i;
    pthread_mutex_lock(&gl_graph_lock);
    gl_gexec *e = gl_gexec_of(hGraphExec);
    gl_gnode *n = e != NULL ? exec_node(e, hNode, &i) : NULL;
    /* Kernel, memset and memcpy nodes may be disabled, as documented. */
    if (n == NULL || (n->type != GL_CU_GRAPH_NODE_TYPE_KERNEL
                      && n->type != GL_CU_GRAPH_NODE_TYPE_MEMSET
                      && n->type != GL_CU_GRAPH_NODE_TYPE_MEMCPY)) {
        pthread_mutex_unlock(&gl_graph_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (get != NULL) {
        *get = !e->disabled[i];
        pthread_mutex_unlock(&gl_graph_lock);
        return CUDA_SUCCESS;
    }
    uint8_t was = e->disabled[i];
    e->disabled[i] = !set;
    CUresult r = rebuild_unlock(e);
    if (r != CUDA_SUCCESS) {
        pthread_mutex_lock(&gl_graph_lock);
        e->disabled[i] = was;
        pthread_mutex_unlock(&gl_graph_lock);
    }
    return r == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE ? CUDA_ERROR_INVALID_VALUE : r;
}

CUresult gls_cuGraphNodeSetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode,
                                   unsigned int isEnabled, int ptds)
{
    (void)ptds;
    return enabled(hGraphExec, hNode, NULL, isEnabled);
}

CUresult gls_cuGraphNodeGetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode,
                                   unsigned int *isEnabled, int ptds)
{
    (void)ptds;
    if (isEnabled == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return enabled(hGraphExec, hNode, isEnabled, 0);
}

/* Pairs hGraph's nodes with the exec's by creation order (a graph captured
 * again by the same code makes its nodes in the same order), and checks
 * CUDA's topology rules on the pairs. */
static CUresult pair_graphs(const gl_graph *old, const gl_graph *g,
                            CUgraphExecUpdateResultInfo *info)
{
    info->errorNode = info->errorFromNode = NULL;
    if (old->n != g->n) {
        info->result = GL_CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
    for (uint32_t i = 0; i < g->n; i++) {
        const gl_gnode *a = old->nodes[i], *b = g->nodes[i];
        info->errorNode = (CUgraphNode)(uintptr_t)b->handle;
        if (a->type != b->type) {
            info->result = GL_CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
            return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
        }
        if (a->ndeps != b->ndeps) {
            info->result = GL_CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
            return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
        }
        for (uint32_t d = 0; d < a->ndeps; d++) {
            if (a->deps[d]->index != b->deps[d]->index) {
                info->result = GL_CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
                info->errorFromNode = (CUgraphNode)(uintptr_t)b->deps[d]->handle;
                return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
            }
        }
        if (a->type == GL_CU_GRAPH_NODE_TYPE_MEM_ALLOC || a->type == GL_CU_GRAPH_NODE_TYPE_MEM_FREE
            || a->type == GL_CU_GRAPH_NODE_TYPE_GRAPH) {
            /* (memory nodes cannot change; child graphs are compared by shape below) */
            if (a->type != GL_CU_GRAPH_NODE_TYPE_GRAPH
                && memcmp(&a->u, &b->u, sizeof a->u) != 0) {
                info->result = GL_CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
                return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
            }
        }
    }
    info->errorNode = NULL;
    info->result = GL_CU_GRAPH_EXEC_UPDATE_SUCCESS;
    return CUDA_SUCCESS;
}

CUresult gls_cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
                                  CUgraphExecUpdateResultInfo *resultInfo, int ptds)
{
    CUgraphExecUpdateResultInfo info = {GL_CU_GRAPH_EXEC_UPDATE_ERROR, NULL, NULL};
    CUresult r;

    (void)ptds;
    pthread_mutex_lock(&gl_graph_lock);
    gl_gexec *e = gl_gexec_of(hGraphExec);
    gl_graph *g = gl_graph_of(hGraph), *copy = NULL;
    r = e == NULL || g == NULL ? CUDA_ERROR_INVALID_VALUE : pair_graphs(e->graph, g, &info);
    if (r == CUDA_SUCCESS && (copy = gl_graph_clone_locked(g, 1)) == NULL)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r != CUDA_SUCCESS) {
        pthread_mutex_unlock(&gl_graph_lock);
        if (resultInfo != NULL)
            *resultInfo = info;
        return r == CUDA_ERROR_INVALID_VALUE ? CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE : r;
    }
    gl_graph *old = e->graph;
    e->graph = copy;
    r = rebuild_unlock(e);
    pthread_mutex_lock(&gl_graph_lock);
    if (r == CUDA_SUCCESS) {
        /* The exec's nodes keep naming the program's first nodes: updates of
         * single nodes name those. */
        for (uint32_t i = 0; i < copy->n; i++)
            copy->nodes[i]->origin = old->nodes[i]->origin;
        gl_graph_free_locked(old);
    } else {
        e->graph = old;
        gl_graph_free_locked(copy);
        info.result = GL_CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    }
    pthread_mutex_unlock(&gl_graph_lock);
    if (resultInfo != NULL)
        *resultInfo = info;
    return r == CUDA_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
}

CUresult gls_cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph,
                               CUgraphNode *hErrorNode_out,
                               CUgraphExecUpdateResult *updateResult_out, int ptds)
{
    CUgraphExecUpdateResultInfo info;
    CUresult r = gls_cuGraphExecUpdate_v2(hGraphExec, hGraph, &info, ptds);
    if (hErrorNode_out != NULL)
        *hErrorNode_out = info.errorNode;
    if (updateResult_out != NULL)
        *updateResult_out = info.result;
    return r;
}
