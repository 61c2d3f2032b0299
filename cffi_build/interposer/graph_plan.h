/*
 * graph_plan.h — what launching an instantiated graph does in the program's
 * process (graph_launch.c): for each stage, a glGraphLaunch of its device
 * nodes (when it has any), then its process nodes in order. A plan is
 * immutable and reference counted: a launch that runs on the host-function
 * thread keeps the plan it started with, whatever the exec becomes meanwhile.
 */
#ifndef GLEAM_INTERPOSER_GRAPH_PLAN_H
#define GLEAM_INTERPOSER_GRAPH_PLAN_H

#include <stdatomic.h>
#include <stdint.h>

#include "graph.h"

/* A node the process runs: a host function, or a copy with a side in the
 * program's memory (run as cuMemcpy3DAsync on the launch's stream). */
typedef struct {
    uint32_t stage;
    int host;
    CUDA_HOST_NODE_PARAMS fn;
    CUDA_MEMCPY3D copy;
} gl_plan_node;

typedef struct gl_plan {
    atomic_int refs;
    uint32_t stages;
    uint8_t *device;     /* per stage: 1 when it has device work (one glGraphLaunch) */
    gl_plan_node *nodes; /* the process nodes, stage by stage */
    uint32_t nnodes;
    int waits;           /* a node waits for the server: a host function, a copy to the process */
    CUdeviceptr *mem;    /* graph memory: nallocs allocated, then nfrees freed by a launch */
    uint32_t nallocs, nfrees;
    int auto_free;       /* CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH */
} gl_plan;

/* A plan (one reference, the caller's) from the process nodes, the
 * description sent (whose nodes say which stages have device work) and the
 * graph memory nodes. */
CUresult gl_plan_make(gl_plan **out, const gl_plan_node *nodes, uint32_t n, uint32_t stages,
                      const uint8_t *desc, size_t len, const CUdeviceptr *mem, uint32_t nallocs,
                      uint32_t nfrees, uint64_t flags);
gl_plan *gl_plan_ref(gl_plan *p);
void gl_plan_unref(gl_plan *p);
/* A description's shape (each node's stage, then each edge's ends), which an
 * update must keep: a new array in *shape (NULL when out of memory). */
void gl_plan_shape(const uint8_t *desc, size_t len, uint32_t **shape, size_t *n);

/* graph_exec.c: the exec's plan, referenced for a launch (NULL: no such exec). */
gl_plan *gl_gexec_plan(CUgraphExec hGraphExec, uint64_t *flags);
/* graph_exec.c: the handle of the exec's copy of its graph (the lock held). */
CUgraph gl_gexec_graph(CUgraphExec hGraphExec);

/* graph_nodes.c: node arguments for graph_exec.c's updates (an opaque block
 * of gl_node_args_size() bytes). */
size_t gl_node_args_size(void);
void gl_node_args_kernel(void *args, const CUDA_KERNEL_NODE_PARAMS *p);
void gl_node_args_other(void *args, int type, const void *params, CUevent event);
CUresult gl_node_args_of(CUgraphNodeParams *p, void *args);
/* A free-standing node of type built from args (parameters checked). */
CUresult gl_gnode_build(gl_gnode *n, int type, void *args);

#endif /* GLEAM_INTERPOSER_GRAPH_PLAN_H */
