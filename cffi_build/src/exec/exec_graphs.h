/*
 * exec_graphs.h — what the executor's graph rows (exec_graphs.c) ask of a
 * backend that runs graphs itself. A backend without it (the host device)
 * has each stage run node by node through its slots.
 */
#ifndef GLEAM_EXEC_GRAPHS_H
#define GLEAM_EXEC_GRAPHS_H

#include "executor.h"
#include "gl_span.h"
#include "graph_desc.h"

struct gl_graph_backend {
    /* Whether this session's backend can build graphs (its driver has the
     * entry points); if not, stages run node by node. */
    int (*usable)(gl_exec *x);
    /* Builds g->backend from g (checked, ordered); g stays the caller's. */
    CUresult (*instantiate)(gl_exec *x, gl_sgraph *g);
    /* g takes with's node contents (same shape): the backend's part of g is
     * updated in place; with is the caller's. */
    CUresult (*update)(gl_exec *x, gl_sgraph *g, const gl_sgraph *with);
    /* Runs stage s of g on the stream, after checking it (gl_graph_check_node). */
    CUresult (*launch)(gl_exec *x, gl_sgraph *g, uint32_t stage, CUstream stream);
    /* Frees g->backend. */
    void (*destroy)(gl_exec *x, gl_sgraph *g);
};

/* Checks node n of g against the session as it is now: its handle bound (the
 * backend's object in *object) and its memory in the session's allocations. */
CUresult gl_graph_check_node(gl_exec *x, const gl_sgraph *g, const gl_graph_node *n,
                             void **object);
/* Frees every instantiated graph of the session (before the backend closes). */
void gl_exec_graphs_free(gl_exec *x);

#endif /* GLEAM_EXEC_GRAPHS_H */
