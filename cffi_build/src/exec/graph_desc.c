/*
 * graph_desc.c — reads a graph description from the wire (gl_graph.h). The
 * bytes come from a client, so everything is checked before anything is
 * kept: the exact length, every count against its bound, each node's kind,
 * stage and extents, each edge's ends, and that the edges have no cycle
 * (Kahn's algorithm gives the run order at the same time). A conditional
 * node's bodies are descriptions nested in the bodies bytes, read the same
 * way (depth bounded, each byte read once: the nodes' body ranges follow one
 * another and cover the bodies bytes exactly).
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

static int check_node(const gl_graph_node *n, uint32_t i, const gl_graph_head *h,
                      uint32_t root_handles, char *err, size_t err_len)
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
    case GL_GN_COND: {
        uint32_t t = n->u.cond.type, size = n->u.cond.size;
        if (n->u.cond.handle >= root_handles)
            return fail(err, err_len, "node %u: handle %u of %u", i, n->u.cond.handle,
                        root_handles);
        if (t > GL_COND_SWITCH || size == 0 || (t == GL_COND_WHILE && size != 1)
            || (t == GL_COND_IF && size > 2) || size > GL_GRAPH_MAX_NODES)
            return fail(err, err_len, "node %u: a conditional of type %u with %u bodies", i, t,
                        size);
        if (!zero(n->u.bytes + 20, sizeof n->u.bytes - 20))
            return fail(err, err_len, "node %u: a conditional node with contents", i);
        return 0;
    }
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
    for (uint32_t b = 0; b < g->nbodies; b++)
        gl_graph_free(g->body[b]);
    free(g->body);
    free(g->body_first);
    free(g->handle);
    free(g->key);
    free(g->value);
    free(g->node);
    free(g->edge);
    free(g->params);
    free(g->order);
    free(g->stage_start);
    free(g);
}

/* The length a description's header gives (0: beyond the bounds). */
static uint64_t desc_length(const gl_graph_head *h)
{
    if (h->nodes > GL_GRAPH_MAX_NODES || h->edges > GL_GRAPH_MAX_EDGES
        || h->params > GL_GRAPH_MAX_PARAMS || h->stages > GL_GRAPH_MAX_NODES
        || h->handles > GL_GRAPH_MAX_HANDLES || h->bodies > GL_GRAPH_MAX_PARAMS
        || (h->nodes > 0 && h->stages == 0))
        return 0;
    return sizeof *h + (uint64_t)h->nodes * sizeof(gl_graph_node)
           + (uint64_t)h->edges * sizeof(gl_graph_edge)
           + (uint64_t)h->handles * sizeof(gl_graph_handle) + h->params + h->bodies;
}

static int parse_at(const uint8_t *desc, size_t len, uint32_t depth, uint32_t root_handles,
                    gl_sgraph **out, char *err, size_t err_len);

/* Reads the bodies of g's conditional nodes from bodies[0 .. len): node
 * after node, each node's `size` descriptions filling its range exactly. */
static int parse_bodies(gl_sgraph *g, const uint8_t *bodies, uint32_t len, uint32_t depth,
                        uint32_t root_handles, char *err, size_t err_len)
{
    uint64_t at = 0, count = 0;

    for (uint32_t i = 0; i < g->nodes; i++)
        if (g->node[i].kind == GL_GN_COND)
            count += g->node[i].u.cond.size;
    if (count == 0)
        return len == 0 ? 0 : fail(err, err_len, "%u bytes of bodies and no conditional node",
                                   len);
    if (depth + 1 >= GL_GRAPH_MAX_DEPTH)
        return fail(err, err_len, "conditional bodies nest deeper than %d", GL_GRAPH_MAX_DEPTH);
    /* each body is at least a header: the count is bounded by the bytes */
    if (count > len / sizeof(gl_graph_head))
        return fail(err, err_len, "%llu bodies in %u bytes", (unsigned long long)count, len);
    g->body = calloc((size_t)count + 1, sizeof *g->body);
    g->body_first = calloc((size_t)g->nodes + 1, sizeof *g->body_first);
    if (g->body == NULL || g->body_first == NULL)
        return -2;
    for (uint32_t i = 0; i < g->nodes; i++) {
        const gl_graph_node *n = &g->node[i];
        g->body_first[i] = g->nbodies;
        if (n->kind != GL_GN_COND)
            continue;
        if (n->u.cond.body_off != at || (uint64_t)n->u.cond.body_off + n->u.cond.body_len > len)
            return fail(err, err_len, "node %u: bodies at [%u, +%u) where %llu of %u follow", i,
                        n->u.cond.body_off, n->u.cond.body_len, (unsigned long long)at, len);
        uint64_t end = at + n->u.cond.body_len;
        for (uint32_t k = 0; k < n->u.cond.size; k++) {
            gl_graph_head h;
            if (end - at < sizeof h)
                return fail(err, err_len, "node %u: body %u outside its range", i, k);
            memcpy(&h, bodies + at, sizeof h);
            uint64_t want = desc_length(&h);
            if (want == 0 || want > end - at)
                return fail(err, err_len, "node %u: body %u outside its range", i, k);
            int rc = parse_at(bodies + at, (size_t)want, depth + 1, root_handles,
                              &g->body[g->nbodies], err, err_len);
            if (rc != 0)
                return rc;
            g->nbodies++;
            at += want;
        }
        if (at != end)
            return fail(err, err_len, "node %u: %llu bytes after its bodies", i,
                        (unsigned long long)(end - at));
    }
    return at == len ? 0 : fail(err, err_len, "bodies end at %llu of %u bytes",
                                (unsigned long long)at, len);
}

/* The root's handles: their values start at the defaults. */
static int take_handles(gl_sgraph *g, const uint8_t *p, char *err, size_t err_len)
{
    g->handle = malloc(((size_t)g->handles + 1) * sizeof *g->handle);
    g->value = calloc((size_t)g->handles + 1, sizeof *g->value);
    g->key = calloc((size_t)g->handles + 1, sizeof *g->key);
    if (g->handle == NULL || g->value == NULL || g->key == NULL)
        return -2;
    memcpy(g->handle, p, (size_t)g->handles * sizeof *g->handle);
    for (uint32_t k = 0; k < g->handles; k++) {
        g->key[k] = g->handle[k].value;
        if (g->handle[k].flags & ~GL_COND_ASSIGN_DEFAULT)
            return fail(err, err_len, "handle %u: flags %#x", k, g->handle[k].flags);
        g->value[k] = g->handle[k].dflt;
    }
    return 0;
}

static int parse_at(const uint8_t *desc, size_t len, uint32_t depth, uint32_t root_handles,
                    gl_sgraph **out, char *err, size_t err_len)
{
    gl_graph_head h;

    *out = NULL;
    if (desc == NULL || len < sizeof h)
        return fail(err, err_len, "a graph description of %zu bytes", len);
    memcpy(&h, desc, sizeof h);
    if (h.magic != GL_GRAPH_MAGIC || h.version != GL_GRAPH_VERSION || h.reserved != 0)
        return fail(err, err_len, "not a graph description of version %d", GL_GRAPH_VERSION);
    uint64_t want = desc_length(&h);
    if (want == 0)
        return fail(err, err_len, "a graph of %u nodes, %u edges, %u stages, %u handles, %u "
                    "parameter bytes and %u body bytes is beyond the bounds", h.nodes, h.edges,
                    h.stages, h.handles, h.params, h.bodies);
    if (want != len)
        return fail(err, err_len, "a graph description of %zu bytes where its counts make "
                    "%llu", len, (unsigned long long)want);
    if (depth > 0 && (h.handles != 0 || h.stages != 1))
        return fail(err, err_len, "a conditional body of %u stages with %u handles", h.stages,
                    h.handles);
    if (depth == 0)
        root_handles = h.handles;
    gl_sgraph *g = calloc(1, sizeof *g);
    if (g == NULL)
        return -2;
    g->nodes = h.nodes, g->edges = h.edges, g->stages = h.stages, g->nparams = h.params;
    g->handles = h.handles;
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
    int rc = take_handles(g, p, err, err_len);
    p += (size_t)h.handles * sizeof(gl_graph_handle);
    memcpy(g->params, p, h.params);
    p += h.params;
    for (uint32_t i = 0; rc == 0 && i < h.nodes; i++)
        rc = check_node(&g->node[i], i, &h, root_handles, err, err_len);
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
    if (rc == 0)
        rc = parse_bodies(g, p, h.bodies, depth, root_handles, err, err_len);
    if (rc != 0) {
        gl_graph_free(g);
        return rc;
    }
    while (g->first_stage < g->stages
           && g->stage_start[g->first_stage] == g->stage_start[g->first_stage + 1])
        g->first_stage++;
    *out = g;
    return 0;
}

int gl_graph_parse(const uint8_t *desc, size_t len, gl_sgraph **out, char *err, size_t err_len)
{
    return parse_at(desc, len, 0, 0, out, err, err_len);
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
