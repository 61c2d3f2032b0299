/*
 * graph_desc.h — a graph description (include/gl_graph.h) read and checked
 * into the executor's form: the nodes, edges and parameters copied out of the
 * record, and each stage's nodes in a dependency order. Ownership: a
 * gl_sgraph owns all its arrays; gl_graph_free frees them (the backend's
 * part, `backend`, is freed by the backend first: exec_graphs.c).
 */
#ifndef GLEAM_GRAPH_DESC_H
#define GLEAM_GRAPH_DESC_H

#include <stddef.h>
#include <stdint.h>

#include "gl_graph.h"

typedef struct gl_sgraph {
    uint32_t nodes, edges, stages, nparams;
    gl_graph_node *node;
    gl_graph_edge *edge;
    uint8_t *params;
    uint32_t *order;       /* node indices: stage 0's in dependency order, then stage 1's ... */
    uint32_t *stage_start; /* stages + 1 offsets into order */
    /* Conditional nodes' bodies, node after node; node i's are body[body_first[i]
     * ...] (body_first is NULL when the graph has none). */
    struct gl_sgraph **body;
    uint32_t nbodies;
    uint32_t *body_first;
    /* The root's conditional handles, and each one's value in the launch under
     * way (set by cudaGraphSetConditional; reset to the default at a launch's
     * first stage when the handle's flag asks). Bodies have none. */
    uint32_t handles;
    gl_graph_handle *handle;
    uint64_t *key;   /* each handle's value as the program holds it */
    uint64_t *value;
    uint32_t first_stage; /* the first stage with nodes: where a launch begins */
    void *backend;         /* the cuda backend's real graphs (cudadev_graphs.c); NULL on the host */
} gl_sgraph;

/* Reads desc[0 .. len) into a new graph: 0, or -1 with err saying what is
 * wrong (nothing is kept). Out of memory is -2. Conditional bodies are read
 * as descriptions of their own (at most GL_GRAPH_MAX_DEPTH deep), each
 * handle index checked against the root's handles. */
int gl_graph_parse(const uint8_t *desc, size_t len, gl_sgraph **out, char *err, size_t err_len);
/* Whether b has a's shape: as many nodes, in the same stages, and the same
 * edges, so that its nodes may replace a's in an instantiated graph (a node's
 * kind may change: a disabled node is an empty one). */
int gl_graph_same_shape(const gl_sgraph *a, const gl_sgraph *b);
void gl_graph_free(gl_sgraph *g);
/* The bytes [start, start + *out) a copy side reaches: depth slices of height
 * rows of width bytes, rows pitch apart and slices pitch * slice_height apart.
 * -1 when it does not fit in 64 bits or rows or slices overlap. */
int gl_graph_span3(uint64_t pitch, uint64_t slice_height, uint64_t width, uint64_t height,
                   uint64_t depth, uint64_t *out);

#endif /* GLEAM_GRAPH_DESC_H */
