/*
 * ptxc.h — the host device's compile tier (docs/ptx-execution.md, "The
 * compile tier"): a kernel that runs long is translated from the
 * interpreter's compact form to C, compiled once by the system's C compiler,
 * cached by content hash and loaded; the interpreter stays the fallback and
 * the reference. The parts:
 *   ptxc_plan.c   which instructions the tier knows, basic blocks, liveness
 *   ptxc_lane.c   one lane-local instruction as C
 *   ptxc_seg.c    runs of lane-local instructions and loads as fused lane loops
 *   ptxc_home.c   where a register lives in a block: the register file or a
 *                 private array of the compiled function, at its PTX width
 *   ptxc_uniform.c registers with one value in every lane (read once per loop)
 *   ptxc_mem.c    memory accesses: checked steps, speculative loads
 *   ptxc_trip.c   a grid-stride loop's trips with one index for the warp
 *   ptxc_emit.c   a kernel as C: blocks, control, warp-wide and handler steps
 *   ptxc_cc.c     the compiler, the cache (SHA-256 keyed), verified loading
 *   ptxc_tier.c   per-kernel state: when to compile, the background thread
 *   ptxc_run.c    the runtime side of ptxc_abi.h: views and callbacks
 * Generated C never holds text from the PTX: only numbers the emitter prints
 * (register indices, immediates, code indices) and its own identifiers.
 */
#ifndef GLEAM_PTXC_H
#define GLEAM_PTXC_H

#include <stddef.h>
#include <stdint.h>

#include "ptx/ptx_int.h"
#include "ptxc_abi.h"

/* Kernels larger than this stay interpreted (compile time grows with size). */
#define PTXC_MAX_CODE 60000u

/* ---- growing text (ptxc_emit.c) ---- */

typedef struct {
    char *s;
    size_t n, cap;
    int failed; /* out of memory: the text is incomplete */
} ptxc_text;

void ptxc_put(ptxc_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ptxc_text_free(ptxc_text *t);

/* ---- what the tier does with each instruction (ptxc_plan.c) ---- */

enum {
    PTXC_NO,    /* unknown to the tier: the kernel stays interpreted */
    PTXC_NOP,   /* nothing to run (counted only) */
    PTXC_LANE,  /* lane-local: fused into a loop over the lanes (ptxc_lane.c) */
    PTXC_MEM,   /* a memory access of its own (ptxc_emit.c) */
    PTXC_WARP,  /* reads other lanes: a warp-wide step (ptxc_emit.c) */
    PTXC_CALL,  /* runs through its interpreter handler */
    PTXC_CTL    /* bra, exit, ret, bar, trap: ends a basic block */
};
int ptxc_kind(const ptx_insn *i);

typedef struct {
    uint32_t start, end; /* code indices [start, end) */
} ptxc_bb;

/* A kernel's plan: blocks, which registers are live where, and what the
 * runtime must fill for the instructions that run through handlers.
 * Register bits: slot r is bit r, predicate p is bit nregs + p. */
typedef struct {
    const ptx_kernel *k;
    uint32_t nbb;
    ptxc_bb *bb;
    int32_t *bb_at;       /* code index -> its block when it starts one, else -1 */
    uint32_t words;       /* 64-bit words of one register set */
    uint64_t *live_out;   /* nbb sets */
    uint64_t *keep;       /* never left unstored: other lanes read them (shfl) */
    uint8_t *is_const;    /* per register slot: a constant (value in const_val) */
    uint64_t *const_val;
    uint8_t *uniform;     /* per register slot: the same in every lane that reads it
                           * (ptxc_uniform.c), so a lane loop reads it once */
    int calls_read_sregs; /* a handler-run instruction reads %tid ... slots */
    int calls_read_consts;
} ptxc_plan;

int ptxc_plan_make(const ptx_kernel *k, ptxc_plan *p, char *why, size_t why_len);
void ptxc_plan_free(ptxc_plan *p);
/* The blocks a lane may go to after block B (at most two). */
uint32_t ptxc_successors(const ptxc_plan *p, uint32_t b, uint32_t out[2]);

static inline int ptxc_bit(const uint64_t *set, uint32_t b)
{
    return (int)(set[b >> 6] >> (b & 63) & 1);
}
static inline void ptxc_set(uint64_t *set, uint32_t b)
{
    set[b >> 6] |= 1ull << (b & 63);
}

/* The register and predicate slots an instruction reads and writes (guard
 * included). A wmma instruction's are its own and its carriers' (the nops
 * after it that hold its fragments' registers: it reads and writes them when
 * it runs), and a carrier's are none. */
typedef struct {
    uint32_t r[32], nr, p[8], np;     /* read */
    uint32_t wr[16], nwr, wp[8], nwp; /* written */
} ptxc_rw;
#define PTXC_RW_MAX 48u /* the most slots of one kind: registers and predicates */
void ptxc_rw_of(const ptx_insn *i, ptxc_rw *rw);
/* The slots read (WRITTEN 0) or written as register-set bits (predicates after NREGS). */
uint32_t ptxc_bits(const ptxc_rw *rw, uint32_t nregs, int written, uint32_t out[PTXC_RW_MAX]);

/* ---- C text (ptxc_lane.c, ptxc_emit.c) ---- */

/* A lane-local instruction (PTXC_LANE) as C statements on the lane's
 * locals: v<reg> for registers, q<pred> for predicate bits (0 or 1); the
 * lane is l. 0, or -1: the tier does not inline it. */
int ptxc_lane(ptxc_text *t, const ptx_insn *i, const ptxc_plan *p);
int ptxc_lane_known(const ptx_insn *i);
/* The C expression of register REG's value in lane l: a local, a constant,
 * or a special register (%tid.x ...). */
const char *ptxc_src(const ptxc_plan *p, uint32_t reg, char *buf, size_t n);

/* Where a register's value lives in the block being written (ptxc_home.c). */
enum {
    PTXC_HOME_FILE,  /* the warp's register file, R[reg][lane] (64-bit lanes) */
    PTXC_HOME_WIDE,  /* a private array of the compiled function, XW<reg>[32] */
    PTXC_HOME_NARROW /* the same at 32 bits, XN<reg>[32]: every write yields < 2^32 */
};

/* The emitter's state while it writes one kernel (ptxc_emit.c). */
typedef struct {
    const ptxc_plan *p;
    ptxc_text *t;
    const ptxc_bb *bb; /* the block being written */
    uint32_t *pf_site; /* per code index: its stride-prefetch slot + 1, or 0 */
    uint8_t *home;     /* per register: PTXC_HOME_* in the block being written */
    uint8_t *declared; /* per register: 1 << PTXC_HOME_WIDE | 1 << PTXC_HOME_NARROW arrays */
    uint32_t private_bytes; /* of the arrays declared so far */
    uint32_t trip_reg; /* the trip index while a trip loop's body is written
                        * (ptxc_trip.c): read as X0_ + l; else UINT32_MAX */
} ptxc_emitter;

/* The homes of the registers in block c->bb (c->home); 0, or -1 out of memory. */
int ptxc_homes(ptxc_emitter *c);
/* The lane array of register REG in the block being written: "R[reg]", "XW<reg>" or
 * "XN<reg>" (index it with [l]). */
const char *ptxc_slot(const ptxc_emitter *c, uint32_t reg, char *buf, size_t n);
/* The private arrays every block's homes asked for, as declarations. */
void ptxc_put_private_arrays(const ptxc_emitter *c);
/* Whether every register instruction I writes holds a value below 2^32 (a lane-local
 * instruction's result, ptxc_lane.c; a load's or an atom's, ptxc_mem.c). */
int ptxc_lane_narrow(const ptx_insn *i, const ptxc_plan *p);
int ptxc_mem_narrow(const ptx_insn *i);
/* The uniform registers of plan P (p->uniform); 0, or -1 out of memory (ptxc_uniform.c). */
int ptxc_uniform_make(ptxc_plan *p);

/* Loads of generic memory that get a stride prefetch (ptxc_mem.c): the
 * first this many such loads of a kernel, each with one slot PF_[i]. */
#define PTXC_PF_SITES 64u
int ptxc_prefetched_load(const ptx_insn *i);

/* A register's value in lane l in a step (the register file, a constant or a
 * special register), and the lanes of an instruction (em: m and its guard). */
const char *ptxc_step_src(const ptxc_emitter *c, uint32_t reg, char *buf, size_t n);
void ptxc_put_em(ptxc_text *t, const ptx_insn *i);

/* Memory (ptxc_mem.c): an access as a step of its own, atom.shared, and a
 * load inside a fused lane loop (speculative: see ptxc_seg.c). */
int ptxc_is_load(const ptx_insn *i);
/* A load a lane loop runs itself: not generic memory (a step of its own,
 * where whole-warp accesses become vector copies), or one whose address is
 * the same in every lane (read once, before the loop). */
int ptxc_fusable_load(const ptx_insn *i);
int ptxc_uniform_load(const ptx_insn *i, const ptxc_plan *p);
/* The hoisted read of a uniform load U (before the loop): H<pc>_<e>. */
int ptxc_hoist_load(ptxc_text *t, const ptx_insn *i, uint32_t pc, const ptxc_plan *p);
int ptxc_emit_mem(ptxc_emitter *c, uint32_t pc);
int ptxc_atom_inline(const ptx_insn *i);
void ptxc_emit_atom_s(ptxc_emitter *c, uint32_t pc);
int ptxc_lane_load(ptxc_text *t, const ptx_insn *i, uint32_t pc, const ptxc_plan *p);
/* A gather's parts (ptxc_seg.c): its load (a step of its own today), the check
 * that the warp's 32 elements are consecutive and readable (opens two braces;
 * q_ points at them), one lane's element into its local, and an atom.shared
 * on the lane's locals. */
int ptxc_gather_load(const ptx_insn *i);
void ptxc_put_gather_head(ptxc_emitter *c, uint32_t pc);
void ptxc_put_gather_elem(ptxc_text *t, const ptx_insn *i);
void ptxc_put_atom_lane(ptxc_emitter *c, uint32_t pc);

/* A run [s, e) of lane-local instructions and loads as one lane loop (ptxc_seg.c). */
int ptxc_emit_segment(ptxc_emitter *c, uint32_t s, uint32_t e);
/* Where a gather that starts at S ends (one past its atom.shared), or 0: a
 * load of generic memory, lane-local instructions, an atom.shared, all
 * unguarded, in block BB (ptxc_seg.c). */
uint32_t ptxc_gather_end(const ptxc_plan *p, const ptxc_bb *bb, uint32_t s);
#define PTXC_GATHER_LANE_MAX 12u /* lane-local instructions between its load and atom */
/* The gather [s, e) as one loop over the lanes when the warp's loads are
 * consecutive, else as its steps. */
int ptxc_emit_gather(ptxc_emitter *c, uint32_t s, uint32_t e);
/* Whether register-set bit BIT is read after code index AFTER: later in the block
 * being written, or live out of it (or kept for other lanes). */
int ptxc_needed_after(const ptxc_emitter *c, uint32_t bit, uint32_t after);

/* The instructions [start, end) of the block being written, as lane loops
 * and steps (ptxc_emit.c). */
int ptxc_emit_range(ptxc_emitter *c, uint32_t start, uint32_t end);

/* A block that is a grid-stride loop's trip (ptxc_trip.c): x += u; p = x < n;
 * @p bra to its start, at its end; what the body before them may do. */
typedef struct {
    uint32_t x, step, setp, bra; /* the index register, and the code of the three */
    uint32_t p;                  /* the loop's predicate */
    int is_signed;               /* setp.lt.s32 (else .u32) */
} ptxc_trip;
int ptxc_trip_find(const ptxc_emitter *c, ptxc_trip *tr);
/* Before the block's own code: its trips while the warp is whole and its
 * lanes' indices are consecutive (one index for the warp), then on to the
 * block's branch. 0, or -1 (out of memory, no C form). */
int ptxc_emit_trips(ptxc_emitter *c, const ptxc_trip *tr, uint32_t unguarded);
/* The C expression of the trip index in lane l (the prelude's macro). */
extern const char ptxc_trip_lane[];

/* What a compiled kernel needs from the launcher besides its registers. */
typedef struct {
    int fill_sregs;  /* the %tid ... slots of r[] (instructions run by handlers read them) */
    int fill_consts; /* the constant registers' slots */
} ptxc_needs;

/* The whole C source of kernel K: 0, or -1 and why (it stays interpreted). */
int ptxc_emit(const ptx_kernel *k, ptxc_text *out, ptxc_needs *needs, char *why, size_t why_len);

/* ---- the compiler and the cache (ptxc_cc.c) ---- */

typedef struct {
    void *dl;          /* dlopen handle */
    int fd;            /* the memfd it was loaded from: open while loaded, so that no
                        * later load reuses its name (dlopen would answer the old object) */
    ptxc_kernel_fn fn;
    int from_cache;    /* found in the cache (not compiled now) */
} ptxc_loaded;

/* The loaded code of SOURCE: from the cache when a verified copy is there,
 * else compiled now (and kept). 0, or -1 and why. Blocks: run it off the
 * launch's path unless the launch asked to wait. */
int ptxc_cc_load(const char *source, size_t len, ptxc_loaded *out, char *why, size_t why_len);
void ptxc_cc_unload(ptxc_loaded *l);

#endif /* GLEAM_PTXC_H */
