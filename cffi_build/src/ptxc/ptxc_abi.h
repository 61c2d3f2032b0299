/*
 * ptxc_abi.h — what a compiled kernel (the host device's compile tier,
 * docs/ptx-execution.md "The compile tier") sees of the runtime: two views
 * and the calls it makes back. The same declarations are compiled into gleam
 * and, as text (PTXC_ABI_TEXT), into the head of every generated source, so
 * the two cannot disagree; the text's hash is part of every cache key.
 *
 * A ptxc_warp points into the interpreter's own warp (ptx_int.h): registers
 * r[reg][lane], predicates as lane masks, the scheduling state. A compiled
 * kernel runs a warp exactly as ptx_warp_run does (until its lanes have exited
 * or wait at a barrier) and leaves the state as that would, so blocks, barriers
 * and faults stay the launcher's (ptx_launch.c), and an instruction the
 * generated code does not implement itself runs through its interpreter
 * handler (call). A ptxc_block is one per worker thread, refreshed per block.
 * Ownership: the runtime owns both views; generated code keeps no state.
 */
#ifndef GLEAM_PTXC_ABI_H
#define GLEAM_PTXC_ABI_H

#include <stdint.h>

/* Bumped when a declaration below changes meaning without changing its text. */
#define PTXC_ABI_VERSION 3
/* What a compiled kernel returns when its warp yields (ptx_int.h PTX_WARP_YIELD). */
#define PTXC_YIELD (-2)
/* What it returns to hand its warp to the interpreter where it stands: lanes
 * must hold at a warp-wide .sync instruction (hold), a rule only the
 * interpreter schedules by. */
#define PTXC_HANDOFF (-3)

#define PTXC_ABI_DECLS                                                                       \
    typedef struct ptxc_warp {                                                               \
        uint64_t (*r)[32];                                                                   \
        uint32_t *p;                                                                         \
        uint32_t *pc, *mask, *merge_pc, *live, *parked, *lpc;                                \
        uint64_t *insns;                                                                     \
        uint32_t index;                                                                      \
        void *rt;                                                                            \
    } ptxc_warp;                                                                             \
    typedef struct ptxc_block {                                                              \
        uint8_t *shared;                                                                     \
        uint64_t shared_size;                                                                \
        uint8_t *local;                                                                      \
        uint64_t local_size;                                                                 \
        const uint8_t *params;                                                               \
        uint64_t params_len;                                                                 \
        uint64_t range[8];                                                                   \
        const uint32_t *ctaid;                                                               \
        uint32_t ntid[3], nctaid[3], nwarps, dyn_smem, total_smem;                           \
        const uint32_t *tid[3];                                                              \
        uint64_t backedges;                                                                  \
        uint64_t yield_mask;                                                                 \
        const uint8_t *zero;                                                                 \
        void *rt;                                                                            \
        int (*gaddr)(struct ptxc_block *b, uint64_t a, uint64_t size);                       \
        int (*deadline)(struct ptxc_block *b);                                               \
        int (*call)(struct ptxc_block *b, ptxc_warp *w, uint32_t pc, uint32_t em);           \
        int (*fault)(struct ptxc_block *b, uint32_t pc, uint64_t addr, int code);            \
        int (*select)(struct ptxc_block *b, ptxc_warp *w, uint32_t *pc, uint32_t *m,         \
                      uint32_t *mpc);                                                        \
        void (*bar)(struct ptxc_block *b, ptxc_warp *w, uint32_t pc, uint32_t em);           \
        int (*hold)(struct ptxc_block *b, ptxc_warp *w, uint32_t pc, uint32_t em, uint32_t m); \
    } ptxc_block;                                                                            \
    typedef int (*ptxc_kernel_fn)(ptxc_block *b, ptxc_warp *w);

/* The fields, for the runtime:
 *   range      four ranges (lo, len) a generic access may touch without asking,
 *              the latest first (gaddr puts the range holding [a, a+size) in
 *              front and returns 1, or returns 0: the access faults)
 *   ctaid      the block being run; ntid, nctaid the launch; tid[k] the
 *              k-th coordinate of each thread of the block (nwarps * 32)
 *   backedges  branches back; every 4096th asks deadline (0, or the launch
 *              must stop: the code to return)
 *   yield_mask a branch back with backedges & yield_mask == 0 yields the warp
 *              (returns PTXC_YIELD, the branch runs again on resume) as the
 *              interpreter's does, so that a warp spinning on another's write
 *              lets it run
 *   zero       32 zero bytes: what a speculative load that would fault reads
 *              (a pointer the compiler cannot see through, so that the load
 *              stays a plain load and the loop vectorises)
 *   call       runs code[pc] for lanes em through its interpreter handler
 *   fault      records a fault of code[pc] at addr; returns code
 *   select     the warp's next group of lanes (ptx_warp_select): 0 when none
 *   bar        lanes em arrive at the barrier code[pc] (bar.red gathers)
 *   hold       1 when group m (lanes em run it) must wait at the warp-wide
 *              .sync instruction code[pc] for parked lanes of its member mask
 *              (ptx_sync_hold): the code returns PTXC_HANDOFF before running
 *              or counting it, and the interpreter goes on from there
 */
PTXC_ABI_DECLS

#define PTXC_STR_(...) #__VA_ARGS__
#define PTXC_STR(...) PTXC_STR_(__VA_ARGS__)
#define PTXC_ABI_TEXT PTXC_STR(PTXC_ABI_DECLS)

/* The symbols a compiled kernel's shared object exports. */
#define PTXC_SYM_KERNEL "ptxc_kernel"
#define PTXC_SYM_ABI "ptxc_abi"

#endif /* GLEAM_PTXC_ABI_H */
