/*
 * ptxc_tier.h — the compile tier as the launcher (ptx_launch.c) and the
 * module (ptx_parse.c) see it: per kernel, whether compiled code is ready;
 * per worker, the views that run it; the tier's settings and counters.
 *
 * When a kernel is compiled (docs/ptx-execution.md, "The compile tier"):
 * once the interpreter has run GLEAM_PTX_JIT_AFTER thread-instructions of it
 * (default 2^25, about 30 ms of one core), over any number of launches, its
 * C is written and looked up in the cache; a miss is compiled by a
 * background thread while the interpreter goes on, and the launch's
 * remaining blocks (and every later launch) run compiled code as soon as it
 * is loaded. A launch may also ask for one tier (tests, the benchmark).
 */
#ifndef GLEAM_PTXC_TIER_H
#define GLEAM_PTXC_TIER_H

#include <stdint.h>

#include "ptx/ptx_int.h"
#include "ptxc_abi.h"

/* ptx_launch_args.tier */
enum { PTX_TIER_AUTO = 0, PTX_TIER_INTERP = 1, PTX_TIER_COMPILED = 2 };
/* ptx_launch_args.ran: the tiers its blocks ran on */
enum { PTX_RAN_INTERP = 1, PTX_RAN_COMPILED = 2 };

/* A kernel's loaded code: immutable once published. */
typedef struct ptxc_code {
    ptxc_kernel_fn fn;
    int fill_sregs, fill_consts; /* slots the handlers it calls read (ptxc_needs) */
} ptxc_code;

typedef struct ptxc_kernel ptxc_kernel;
typedef struct ptxc_worker ptxc_worker;

/* ---- per kernel (ptxc_tier.c) ---- */

/* A launch's rule, read once at its start. */
typedef struct {
    int tier;       /* PTX_TIER_* the launch asked for */
    int mode;       /* GLEAM_PTX_JIT: 0 off, 1 in the background, 2 wait for the compile */
    uint64_t after; /* GLEAM_PTX_JIT_AFTER: interpreted thread-instructions before compiling */
} ptxc_policy;

/* Before a launch's workers start: reads the settings; with PTX_TIER_COMPILED
 * (or GLEAM_PTX_JIT=wait past the threshold) compiles the kernel first. */
void ptxc_launch_begin(const ptx_kernel *k, int tier, ptxc_policy *pol);
/* The code to run the next block with; NULL: interpret it. */
const ptxc_code *ptxc_code_for(const ptx_kernel *k, const ptxc_policy *pol);
/* An interpreted block ran INSNS thread-instructions: may start a compile. */
void ptxc_note_interpreted(const ptx_kernel *k, uint64_t insns, const ptxc_policy *pol);
/* A launch's blocks, by tier (the process's counters). */
void ptxc_count_blocks(uint64_t compiled, uint64_t interpreted);
/* The module lets go of a kernel's state (ptx_module_free). */
void ptxc_kernel_release(ptxc_kernel *s);
/* Why the kernel is not compiled ("" when it is, or has not been tried). */
const char *ptxc_kernel_why(const ptx_kernel *k);

/* ---- per worker (ptxc_run.c) ---- */

int ptxc_worker_bind(ptx_block *b, ptx_warp *warps, uint32_t nwarps, const ptx_launch_args *a,
                     const ptxc_code *code);
int ptxc_warp_run(ptx_block *b, uint32_t wi);
void ptxc_worker_free(ptx_block *b);

#endif /* GLEAM_PTXC_TIER_H */
