/*
 * gl_toposort.h — a dependency order of a graph's nodes (Kahn's algorithm),
 * for the interposer's instantiation (graph_exec.c) and the server's check
 * of a description (graph_desc.c). Header-only: both sides include it.
 * Ownership: the caller owns every array; scratch memory is freed here.
 */
#ifndef GLEAM_TOPOSORT_H
#define GLEAM_TOPOSORT_H

#include <stdint.h>
#include <stdlib.h>

#include "gl_graph.h"

/* order[0 .. n) gets the nodes 0 .. n - 1 so that every edge's from comes
 * before its to (ties in index order). 0, -1 when the edges have a cycle
 * (order then holds fewer than n), -2 when out of memory. Edge ends must be
 * below n. */
static inline int gl_toposort(uint32_t n, const gl_graph_edge *edges, uint32_t nedges,
                              uint32_t *order)
{
    uint32_t *indeg = calloc((size_t)n + 1, sizeof *indeg);
    uint32_t *start = calloc((size_t)n + 2, sizeof *start);
    uint32_t *adj = malloc(((size_t)nedges + 1) * sizeof *adj);
    int rc = -2;

    if (indeg == NULL || start == NULL || adj == NULL)
        goto out;
    /* The out-edges of each node, contiguous: start[v] .. start[v + 1]. */
    for (uint32_t e = 0; e < nedges; e++) {
        start[edges[e].from + 1]++;
        indeg[edges[e].to]++;
    }
    for (uint32_t i = 0; i < n; i++)
        start[i + 1] += start[i];
    for (uint32_t e = 0; e < nedges; e++) /* start[] walks forward, then shifts back */
        adj[start[edges[e].from]++] = edges[e].to;
    for (uint32_t i = n; i > 0; i--)
        start[i] = start[i - 1];
    start[0] = 0;
    uint32_t head = 0, tail = 0;
    for (uint32_t i = 0; i < n; i++)
        if (indeg[i] == 0)
            order[tail++] = i;
    while (head < tail) {
        uint32_t v = order[head++];
        for (uint32_t k = start[v]; k < start[v + 1]; k++)
            if (--indeg[adj[k]] == 0)
                order[tail++] = adj[k];
    }
    rc = tail == n ? 0 : -1;
out:
    free(indeg);
    free(start);
    free(adj);
    return rc;
}

#endif /* GLEAM_TOPOSORT_H */
