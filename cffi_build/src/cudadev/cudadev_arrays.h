/*
 * cudadev_arrays.h — what the cuda backend's arrays and texture objects
 * (cudadev_arrays.c) need of the backend (cudadev.c): the driver's entry
 * points, a place in the session for their list, and a hook at close.
 */
#ifndef GLEAM_CUDADEV_ARRAYS_H
#define GLEAM_CUDADEV_ARRAYS_H

#include "exec/executor.h"

/* cudadev.c: the driver entry points Python resolved for the backend. */
const gl_cuda_extra *gl_cuda_fns(gl_exec *x);
/* cudadev.c: the session's list head, owned by cudadev_arrays.c. */
void **gl_cuda_arrays(gl_exec *x);
/* cudadev_arrays.c: destroys and frees what the session still holds. */
void gl_cuda_arrays_close(gl_exec *x);

#endif /* GLEAM_CUDADEV_ARRAYS_H */
