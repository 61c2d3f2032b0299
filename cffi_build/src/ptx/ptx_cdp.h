/*
 * ptx_cdp.h — CUDA dynamic parallelism (CDP2, CUDA 12's model) on the host
 * device: a kernel launches kernels. The device runtime's entry points
 * (cudaGetParameterBuffer(V2), cudaLaunchDevice(V2), the device's streams,
 * cudaGetLastError, cudaMemcpyAsync and cudaMemsetAsync, in their
 * __cudaCDP2* spellings too) are built-ins (ptx_builtin.c) that reach the
 * functions below.
 *
 * A grid whose kernel calls one of them gets a ptx_cdp_grid: its queue of
 * device-side work (kernel launches, copies, sets), the parameter buffers
 * its threads fill (an arena the kernel may write, ptx_launch.c admits it to
 * generic accesses), the streams it created and its threads' last errors.
 * When the grid's blocks have all ended, ptx_cdp_run runs the queue: the
 * ordinary and fire-and-forget work in the order it was queued, each child
 * grid with its own children before the next item (a child finishes before
 * its parent, as CUDA says), then the tail launches. Queue order is stream
 * order for every stream, so the schedule is one CUDA allows; CDP2 has no
 * device-side synchronisation, so a parent cannot observe that its children
 * ran after it (docs/ptx-execution.md, "Dynamic parallelism").
 *
 * Limits (CUDA's): 24 levels of grids (the host's grid is the first; a
 * launch deeper fails with cudaErrorLaunchMaxDepthExceeded); at most
 * CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT launches of one host launch's
 * tree waiting at once (cudaErrorLaunchPendingCountExceeded).
 *
 * Threads: the entry points run on a grid's worker threads at once (the
 * grid's lock); ptx_cdp_run and the rest on the launching thread.
 * Ownership: a ptx_cdp_grid owns its queue, its copies of parameters and
 * its arena; the tree (pending count) is the host launch's grid's.
 */
#ifndef GLEAM_PTX_CDP_H
#define GLEAM_PTX_CDP_H

#include <stddef.h>
#include <stdint.h>

#include "ptx.h"

typedef struct ptx_cdp_grid ptx_cdp_grid;
typedef struct ptx_cdp_tree ptx_cdp_tree;
struct ptx_block;

#define PTX_CDP_MAX_DEPTH 24u          /* levels of grids, the host's included */
#define PTX_CDP_ARENA (8u << 20)       /* bytes of parameter buffers per grid */
#define PTX_CDP_PARAMS_MAX 32764u      /* a kernel's parameters, as on the host */

/* The device runtime's stream handles CDP2 names (cuda_device_runtime_api.h). */
#define PTX_CDP_STREAM_TAIL 0x3u
#define PTX_CDP_STREAM_FIRE_AND_FORGET 0x4u

/* cudaError_t values the device runtime returns to kernels. */
enum {
    PTX_CDP_OK = 0,
    PTX_CDP_INVALID_VALUE = 1,
    PTX_CDP_MEMORY_ALLOCATION = 2,
    PTX_CDP_INVALID_CONFIGURATION = 9,
    PTX_CDP_MAX_DEPTH_EXCEEDED = 65,
    PTX_CDP_PENDING_COUNT_EXCEEDED = 69,
    PTX_CDP_INVALID_DEVICE_FUNCTION = 98,
    PTX_CDP_INVALID_RESOURCE_HANDLE = 400,
};

/* A grid of kernel K at DEPTH (0: launched by the host) in TREE (NULL: this
 * grid starts one, with PENDING_LIMIT launches). NULL when out of memory. */
ptx_cdp_grid *ptx_cdp_grid_new(const ptx_module *m, const ptx_kernel *k, ptx_cdp_tree *tree,
                               unsigned depth, uint32_t pending_limit);
void ptx_cdp_grid_free(ptx_cdp_grid *g);
/* The parameter buffers' window: [*base, *base + *len), len 0 when none yet. */
void ptx_cdp_arena(const ptx_cdp_grid *g, uint64_t *base, uint64_t *len);

/* One call of a dynamic-parallelism built-in by one thread: BUILTIN
 * (PTX_BI_*), its arguments (up to 16 bytes each, as the call passes them),
 * the calling thread's block and position. 0 and *ret (the call's result),
 * or a PTX_E_* fault with *fault its address (ptx_devrt_why says why). */
int ptx_cdp_call(ptx_cdp_grid *g, struct ptx_block *b, int builtin, const uint64_t (*arg)[2],
                 const uint32_t pos[6], uint64_t *ret, uint64_t *fault);

/* Runs the grid's queued work after its blocks ended (the parent's launch
 * args give memory, runtime, threads and time): PTX_OK, or the first
 * failure of a child with its message in parent->err. */
int ptx_cdp_run(ptx_cdp_grid *g, ptx_launch_args *parent, uint64_t deadline_ns);

#endif /* GLEAM_PTX_CDP_H */
