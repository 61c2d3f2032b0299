/*
 * cudadev_graphs.h — the cuda backend's instantiated graphs (cudadev_graphs.c)
 * and what they need of cudadev.c.
 */
#ifndef GLEAM_CUDADEV_GRAPHS_H
#define GLEAM_CUDADEV_GRAPHS_H

#include "exec/exec_graphs.h"

extern const gl_graph_backend gl_cuda_graph_ops;

/* cudadev.c: the driver's extra entry points, the driver symbol of a wire
 * call (NULL: the driver lacks it), and the session's current context. */
const gl_cuda_extra *gl_cuda_fns(gl_exec *x);
void *gl_cuda_call(gl_exec *x, int call);
CUcontext gl_cuda_context(gl_exec *x);

#endif /* GLEAM_CUDADEV_GRAPHS_H */
