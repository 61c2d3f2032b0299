/*
 * gl_launch_bounds.h — how many threads a block of a kernel may have, and how
 * many registers it reports, from the launch bounds of its PTX (.maxntid,
 * .reqntid, .maxnreg). One rule for the host device (its function
 * attributes and its launch check) and the interposer (which refuses an
 * oversized launch at once, the launch being one-way). Plain C, no state.
 */
#ifndef GLEAM_LAUNCH_BOUNDS_H
#define GLEAM_LAUNCH_BOUNDS_H

#include <stdint.h>

#define GL_BLOCK_THREADS_MAX 1024u   /* threads per block of every device gleam models */
#define GL_BLOCK_REGISTERS 65536u    /* registers per block of an 8.0 device */
#define GL_THREAD_REGISTERS_MAX 255u /* registers per thread of an 8.0 device */

/* MAX_THREADS_PER_BLOCK: the device's limit, lowered by .maxntid/.reqntid
 * (bound: their product, 0 for none) and, as a GPU's register file does, by
 * .maxnreg (0 for none) to whole warps of that many registers each. */
static inline uint32_t gl_kernel_max_threads(uint32_t bound, uint32_t maxnreg)
{
    uint32_t n = GL_BLOCK_THREADS_MAX;
    if (bound != 0 && bound < n)
        n = bound;
    if (maxnreg != 0) {
        uint32_t by_regs = GL_BLOCK_REGISTERS / maxnreg / 32 * 32;
        if (by_regs < n)
            n = by_regs > 0 ? by_regs : 32;
    }
    return n;
}

/* NUM_REGS: the registers the kernel holds live at once (the interpreter
 * allocates none, so this estimate is what a program sizing its occupancy
 * reads), at least 2 and at most what .maxnreg, the register file over the
 * block's largest size, and a thread's limit allow. */
static inline uint32_t gl_kernel_num_regs(uint32_t live, uint32_t bound, uint32_t maxnreg)
{
    uint32_t n = live < 2 ? 2 : live;
    uint32_t cap = GL_BLOCK_REGISTERS / gl_kernel_max_threads(bound, maxnreg);
    if (cap > GL_THREAD_REGISTERS_MAX)
        cap = GL_THREAD_REGISTERS_MAX;
    if (maxnreg != 0 && maxnreg < cap)
        cap = maxnreg;
    return n < cap ? n : cap;
}

#endif
