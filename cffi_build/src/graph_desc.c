/*
 * graph_desc.c — reads a graph description from the wire (gl_graph.h). The
 * bytes come from a client, so everything is checked before anything is
 * kept: the exact length, every count against its bound, each node's kind,
 * stage and extents, each edge's ends, and that the edges have no cycle
 * (Kahn's algorithm gives the run order at the same time).
 */
#include "graph_desc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gl_span.h"
#include "gl_toposort.h"

static int fail(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t err_len, const char *fmt, ...)
{
    if (err != NULL && err_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int gl_graph_span3(uint64_t pitch, uint64_t slice_height, uint64_t width, uint64_t height,
                   uint64_t depth, uint64_t *out)
{
    uint64_t slice, stride, lead;

    if (width == 0 || height == 0 || depth == 0) {
        *out = 0;
        return 0;
    }
    /* With pitch >= width >= 1 and slice_height >= height >= 1 every row and
     * slice starts past the one before, so the extent bounds the work. */
    if ((height > 1 || depth > 1) && pitch < width)
        return -1;
    if (depth > 1 && slice_height < height)
        return -1;
    if (gl_span_bytes(pitch, width, height, &slice) != 0)
        return -1;
    if (depth == 1) {
        *out = slice;
        return 0;
    }
    if (__builtin_mul_overflow(pitch, slice_height, &stride)
        || __builtin_mul_overflow(stride, depth - 1, &lead)
        || __builtin_add_overflow(lead, slice, out))
        return -1;
    return 0;
}

static int zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0)
            return 0;
    return 1;
}

static int check_node(const gl_graph_node *n, uint32_t i, const gl_graph_head *h, char *err,
                      size_t err_len)
{
    uint64_t span, row;

    if (n->kind >= GL_GN_KINDS || !zero(n->reserved, sizeof n->reserved))
        return fail(err, err_len, "node %u: unknown kind %u", i, n->kind);
    if (n->stage >= h->stages)
        return fail(err, err_len, "node %u: stage %u of %u", i, n->stage, h->stages);
    switch (n->kind) {
    case GL_GN_KERNEL: {
        const uint32_t *g = n->u.kernel.grid, *b = n->u.kernel.block;
        if ((uint64_t)n->u.kernel.params_off + n->u.kernel.params_len > h->params)
            return fail(err, err_len, "node %u: parameters outside the description", i);
        if (!g[0] || !g[1] || !g[2] || !b[0] || !b[1] || !b[2])
            return fail(err, err_len, "node %u: an empty grid or block", i);
        return 0;
    }
    case GL_GN_MEMSET:
        if (n->u.memset.elem != 1 && n->u.memset.elem != 2 && n->u.memset.elem != 4)
            return fail(err, err_len, "node %u: memset element of %u bytes", i,
                        n->u.memset.elem);
        if (__builtin_mul_overflow(n->u.memset.width, (uint64_t)n->u.memset.elem, &row)
            || gl_span_bytes(n->u.memset.pitch, row, n->u.memset.height, &span) != 0)
            return fail(err, err_len, "node %u: memset rows overlap or wrap", i);
        return 0;
    case GL_GN_COPY:
        if (gl_graph_span3(n->u.copy.src_pitch, n->u.copy.src_height, n->u.copy.width,
                           n->u.copy.height, n->u.copy.depth, &span) != 0
            || gl_graph_span3(n->u.copy.dst_pitch, n->u.copy.dst_height, n->u.copy.width,
                              n->u.copy.height, n->u.copy.depth, &span) != 0)
            return fail(err, err_len, "node %u: copy rows or slices overlap or wrap", i);
        return 0;
    case GL_GN_EMPTY:
        return zero(n->u.bytes, sizeof n->u.bytes)
                   ? 0 : fail(err, err_len, "node %u: an empty node with contents", i);
    default: /* events: the handle is checked at every launch */
        return 0;
    }
}

/* Kahn's order of the edges (all within stages), then grouped by stage,
 * stably: a dependency order of each stage. */
static int order_nodes(gl_sgraph *g, char *err, size_t err_len)
{
    uint32_t n = g->nodes, *queue = malloc(((size_t)n + 1) * sizeof *queue), *cursor = NULL;
    int rc = -2;

    g->order = malloc(((size_t)n + 1) * sizeof *g->order);
    g->stage_start = calloc((size_t)g->stages + 1, sizeof *g->stage_start);
    cursor = malloc(((size_t)g->stages + 1) * sizeof *cursor);
    if (queue == NULL || g->order == NULL || g->stage_start == NULL || cursor == NULL)
        goto out;
    rc = gl_toposort(n, g->edge, g->edges, queue);
    if (rc == -1)
        rc = fail(err, err_len, "the graph has a cycle");
    if (rc != 0)
        goto out;
    for (uint32_t i = 0; i < n; i++)
        g->stage_start[g->node[i].stage + 1]++;
    for (uint32_t s = 0; s < g->stages; s++)
        g->stage_start[s + 1] += g->stage_start[s];
    memcpy(cursor, g->stage_start, (size_t)g->stages * sizeof *cursor);
    for (uint32_t k = 0; k < n; k++) /* stable: each stage keeps Kahn's order */
        g->order[cursor[g->node[queue[k]].stage]++] = queue[k];
out:
    free(queue);
    free(cursor);
    return rc;
}

void gl_graph_free(gl_sgraph *g)
{
    if (g == NULL)
        return;
    free(g->node);
    free(g->edge);
    free(g->params);
    free(g->order);
    free(g->stage_start);
    free(g);
}

int gl_graph_parse(const uint8_t *desc, size_t len, gl_sgraph **out, char *err, size_t err_len)
{
    gl_graph_head h;

    *out = NULL;
    if (desc == NULL || len < sizeof h)
        return fail(err, err_len, "a graph description of %zu bytes", len);
    memcpy(&h, desc, sizeof h);
    if (h.magic != GL_GRAPH_MAGIC || h.version != GL_GRAPH_VERSION || h.reserved != 0
        || h.reserved2 != 0)
        return fail(err, err_len, "not a graph description of version %d", GL_GRAPH_VERSION);
    if (h.nodes > GL_GRAPH_MAX_NODES || h.edges > GL_GRAPH_MAX_EDGES
        || h.params > GL_GRAPH_MAX_PARAMS || h.stages > GL_GRAPH_MAX_NODES
        || (h.nodes > 0 && h.stages == 0))
        return fail(err, err_len, "a graph of %u nodes, %u edges, %u stages and %u parameter "
                    "bytes is beyond the bounds", h.nodes, h.edges, h.stages, h.params);
    uint64_t want = sizeof h + (uint64_t)h.nodes * sizeof(gl_graph_node)
                    + (uint64_t)h.edges * sizeof(gl_graph_edge) + h.params;
    if (want != len)
        return fail(err, err_len, "a graph description of %zu bytes where its counts make "
                    "%llu", len, (unsigned long long)want);
    gl_sgraph *g = calloc(1, sizeof *g);
    if (g == NULL)
        return -2;
    g->nodes = h.nodes, g->edges = h.edges, g->stages = h.stages, g->nparams = h.params;
    g->node = malloc(((size_t)h.nodes + 1) * sizeof *g->node);
    g->edge = malloc(((size_t)h.edges + 1) * sizeof *g->edge);
    g->params = malloc((size_t)h.params + 1);
    if (!g->node || !g->edge || !g->params) {
        gl_graph_free(g);
        return -2;
    }
    const uint8_t *p = desc + sizeof h;
    memcpy(g->node, p, (size_t)h.nodes * sizeof *g->node);
    p += (size_t)h.nodes * sizeof *g->node;
    memcpy(g->edge, p, (size_t)h.edges * sizeof *g->edge);
    p += (size_t)h.edges * sizeof *g->edge;
    memcpy(g->params, p, h.params);
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < h.nodes; i++)
        rc = check_node(&g->node[i], i, &h, err, err_len);
    for (uint32_t e = 0; rc == 0 && e < h.edges; e++) {
        const gl_graph_edge *d = &g->edge[e];
        if (d->from >= h.nodes || d->to >= h.nodes || d->from == d->to)
            rc = fail(err, err_len, "edge %u: %u -> %u in a graph of %u nodes", e, d->from,
                      d->to, h.nodes);
        else if (g->node[d->from].stage != g->node[d->to].stage)
            rc = fail(err, err_len, "edge %u joins stages %u and %u", e,
                      g->node[d->from].stage, g->node[d->to].stage);
    }
    if (rc == 0)
        rc = order_nodes(g, err, err_len);
    if (rc != 0) {
        gl_graph_free(g);
        return rc;
    }
    *out = g;
    return 0;
}

/* Kinds may change: a disabled node is an empty one (cuGraphNodeSetEnabled). */
int gl_graph_same_shape(const gl_sgraph *a, const gl_sgraph *b)
{
    if (a->nodes != b->nodes || a->edges != b->edges || a->stages != b->stages)
        return 0;
    for (uint32_t i = 0; i < a->nodes; i++)
        if (a->node[i].stage != b->node[i].stage)
            return 0;
    return memcmp(a->edge, b->edge, (size_t)a->edges * sizeof *a->edge) == 0;
}
