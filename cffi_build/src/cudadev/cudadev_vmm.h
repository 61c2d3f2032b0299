/*
 * cudadev_vmm.h — the cuda backend's half of the program's virtual memory
 * management (cudadev_vmm.c), called by src/exec/exec_vmm.c, which keeps the
 * tables and checks every range first.
 */
#ifndef GLEAM_CUDADEV_VMM_H
#define GLEAM_CUDADEV_VMM_H

#include <stddef.h>
#include <stdint.h>

#include "exec/executor.h"

/* The backend's device ordinal and the granule it maps the session's own
 * memory in (cudadev.c). */
int gl_cuda_device(gl_exec *x);
size_t gl_cuda_granule(gl_exec *x);

/* The real driver's cuMemCreate (pinned memory of the backend's device),
 * cuMemRelease, cuMemMap, cuMemUnmap and cuMemSetAccess (flags 0 or
 * READWRITE, for the backend's device). */
CUresult gl_cuda_vmm_create(gl_exec *x, size_t size, uint64_t *handle);
CUresult gl_cuda_vmm_release(gl_exec *x, uint64_t handle);
CUresult gl_cuda_vmm_map(gl_exec *x, uint64_t ptr, size_t size, size_t offset, uint64_t handle);
CUresult gl_cuda_vmm_unmap(gl_exec *x, uint64_t ptr, size_t size);
CUresult gl_cuda_vmm_access(gl_exec *x, uint64_t ptr, size_t size, int flags);

#endif /* GLEAM_CUDADEV_VMM_H */
