/*
 * ptx_int.h — internals shared by the PTX interpreter's files:
 *   ptx_parse.c     PTX text -> per-function compact code (ptx_func): lexer,
 *                   symbols, declarations (private header ptx_parse.h)
 *   ptx_translate.c one instruction -> compact code (operands, modifiers)
 *   ptx_ops.h       the opcode table
 *   ptx_link.c      inlines .func calls: one flat kernel per entry (ptx_kernel);
 *                   recursive and indirect calls get out-of-line bodies
 *   ptx_exec.c   the handlers and a warp's dispatch loop
 *   ptx_launch.c blocks, worker threads, memory windows, the public API
 *
 * The compact form: every value lives in a register slot of 64 bits per lane
 * (SoA: r[reg][32]); immediates are constant registers filled at warp start,
 * special registers (%tid ...) fixed slots below PTX_NSREG, predicates are
 * 32-bit lane masks. An instruction names registers by index, its handler
 * and its widths are chosen at translation, branch targets are code indices.
 */
#ifndef GLEAM_PTX_INT_H
#define GLEAM_PTX_INT_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "ptx.h"
#include "ptx_ops.h"

#define PTX_LANES 32
/* A cooperative grid's workspace: the words its grid barrier counts in
 * (cooperative groups keep the count at byte 4), zero when the grid starts. */
#define PTX_GRID_WORKSPACE 64u
#define PTX_FULL 0xffffffffu

/* Fixed register slots, the same in every kernel (filled per warp). */
enum {
    PTX_R_ZERO, PTX_R_TID_X, PTX_R_TID_Y, PTX_R_TID_Z, PTX_R_NTID_X, PTX_R_NTID_Y, PTX_R_NTID_Z,
    PTX_R_CTAID_X, PTX_R_CTAID_Y, PTX_R_CTAID_Z, PTX_R_NCTAID_X, PTX_R_NCTAID_Y, PTX_R_NCTAID_Z,
    PTX_R_LANEID, PTX_R_WARPID, PTX_R_NWARPID, PTX_R_LM_EQ, PTX_R_LM_LE, PTX_R_LM_LT,
    PTX_R_LM_GE, PTX_R_LM_GT, PTX_R_SMID, PTX_R_NSMID, PTX_R_GRIDID, PTX_R_DYN_SMEM,
    PTX_R_TOTAL_SMEM, PTX_R_WARPSZ,
    /* %envreg1:%envreg2, the grid's workspace of a cooperative launch (high
     * and low halves; 0 otherwise): cooperative groups' grid barrier */
    PTX_R_ENVREG1, PTX_R_ENVREG2,
    PTX_R_AGGR_SMEM, /* %aggr_smem_size: the block's shared memory with the reserved region */
    PTX_NSREG = 32
};
/* Fixed predicate slots: always false, always true. */
enum { PTX_P_FALSE, PTX_P_TRUE, PTX_NSPRED };

/* Control kinds, run by the dispatch loop itself. */
enum { PTX_C_NONE, PTX_C_BRA, PTX_C_EXIT, PTX_C_RET, PTX_C_BAR, PTX_C_TRAP, PTX_C_CALL,
       PTX_C_OCALL, PTX_C_ORET };

/* Field kinds (2 bits each in ptx_insn.fk) tell the linker what to renumber. */
enum { PTX_FK_NONE, PTX_FK_REG, PTX_FK_PRED };
enum { PTX_F_D0, PTX_F_D1, PTX_F_D2, PTX_F_D3, PTX_F_S0, PTX_F_S1, PTX_F_S2, PTX_F_S3, PTX_F_AB,
       PTX_NFIELDS };

/* Relocations of ptx_insn.imm (and constants): local frame offsets are known
 * only once calls are inlined. */
enum { PTX_RL_NONE, PTX_RL_LOCAL, PTX_RL_ARG, PTX_RL_RET, PTX_RL_GLOBAL, PTX_RL_DYNSH,
       PTX_RL_FUNC, PTX_RL_OWNSH /* an entry's own .shared variable */,
       PTX_RL_RSVSH /* an offset in the reserved shared region (below) */ };

/* The shared memory reserved for NVIDIA's system software (%reserved_smem_*,
 * PTX ISA 7.6): 1 KiB per block, as the driver reserves on sm_80 and later
 * (RESERVED_SHARED_MEMORY_PER_BLOCK). A kernel of a module that names it gets
 * it between its static and its dynamic shared memory, zeroed at the start of
 * every block: cooperative groups keep their multi-warp barriers at
 * %reserved_smem_offset_1 and, on sm_80 and later, do not clear them (they
 * rely on the block starting with them zero). _0 is the region's start; _1
 * leaves it half, more than the 288 bytes cooperative groups use. */
#define PTX_RESERVED_SMEM 1024u
#define PTX_RESERVED_SMEM_1 512u

/* A function's address as a kernel sees it: a tag and the function's index. */
#define PTX_FUNC_TAG 0x7f7c000000000000ull

/* cvt operand kinds (ptx_insn.aux of PTX_OP_cvt: dst | src << 8). */
enum { CK_U8, CK_S8, CK_U16, CK_S16, CK_U32, CK_S32, CK_U64, CK_S64, CK_F16, CK_BF16, CK_F32,
       CK_F64 };

#define PTX_GUARD_NEG 0x80000000u

struct ptx_warp;
struct ptx_insn;
typedef int (*ptx_fn)(struct ptx_warp *w, const struct ptx_insn *i, uint32_t m);

typedef struct ptx_insn {
    ptx_fn fn;         /* handler; NULL for control */
    uint16_t op;       /* PTX_OP_* */
    uint8_t ctl;       /* PTX_C_* */
    uint8_t mode;      /* handler-specific: rounding, sub-op, sign, ... */
    uint32_t guard;    /* 0, or predicate index | PTX_GUARD_NEG */
    uint32_t d[4], s[4];
    uint32_t ab;       /* address base register */
    uint32_t aux;      /* branch target, vector count, type codes ... */
    int64_t imm;       /* address offset or immediate */
    uint32_t fk;       /* field kinds, 2 bits per PTX_F_* */
    uint8_t reloc, reloc_arg;
    uint16_t mode2;
    uint32_t line;     /* source line, for messages */
} ptx_insn;

typedef struct {
    uint32_t reg;
    uint8_t reloc, reloc_arg;
    uint64_t value;
} ptx_const;

/* A call of one of the device runtime's built-ins (vprintf, __assertfail,
 * malloc, free: ptx_devrt.h), after linking: which one, and its return and
 * argument slots in the caller's frame (frame-relative), returns first. */
#define PTX_DCALL_MAX_ARGS 8 /* the return and the arguments */
typedef struct {
    uint8_t builtin; /* PTX_BI_* */
    uint32_t nret, nargs;
    uint32_t off[PTX_DCALL_MAX_ARGS], size[PTX_DCALL_MAX_ARGS];
} ptx_dcall;

/* One call site before inlining: the caller-local offsets of its arguments. */
typedef struct {
    uint32_t callee;
    int indirect;     /* the target is the register in the call's s[0] */
    uint32_t nret, nargs;
    uint32_t off[PTX_MAX_PARAMS]; /* nret return slots, then nargs argument slots */
    uint32_t size[PTX_MAX_PARAMS];
} ptx_callsite;

/* Recursive and indirect calls cannot be inlined: the callee runs out of
 * line, in a frame of its own above the caller's (per-lane frame pointers),
 * with its registers saved in that frame. A call site after linking: */
typedef struct {
    int32_t body;     /* the callee's ptx_body, -1: indirect */
    uint32_t nret, nargs;
    uint32_t off[PTX_MAX_PARAMS]; /* the caller's slots (frame-relative): returns, then arguments */
    uint32_t size[PTX_MAX_PARAMS];
    uint32_t k;       /* the callee's frame starts k bytes above the caller's */
} ptx_ocall;

/* An out-of-line function body: frame layout [params][rets][locals][header][saves]. */
typedef struct {
    uint32_t func, entry;
    uint32_t rb, nr, pb, np; /* the registers and predicates it may clobber */
    uint32_t rets, hdr, save, frame;
} ptx_body;

typedef struct {
    char *name;
    int is_entry, defined;
    ptx_insn *code;
    uint32_t ncode, capcode;
    uint32_t nregs, npreds; /* slot counts including the fixed ones */
    ptx_const *consts;
    uint32_t nconsts, capconsts;
    uint32_t local_size;    /* own .local variables and call parameters */
    uint32_t local_align;   /* the largest .align of its .local variables */
    uint32_t shared_top, shared_align; /* an entry's own .shared variables: size, alignment */
    ptx_callsite *calls;
    uint32_t ncalls, capcalls;
    uint32_t nparams, nrets;
    uint32_t param_offsets[PTX_MAX_PARAMS], param_sizes[PTX_MAX_PARAMS];
    uint32_t params_size;
    uint32_t line;
    uint8_t linkage;   /* PTX_LK_*: how it was declared (ptx_linkage.c) */
    uint8_t hidden;    /* a weak definition that lost: kept, never a kernel */
    uint8_t signed_;   /* its parameters are known (declared or defined) */
    uint32_t rets_sig; /* its return parameters' sizes, folded: declarations must agree */
    uint16_t src;      /* the input of a link it comes from */
    uint32_t max_threads;   /* threads .maxntid or .reqntid allow (their product); 0: none */
    uint32_t maxnreg;       /* .maxnreg; 0: none */
} ptx_func;

struct ptx_kernel {
    char *name;
    ptx_insn *code;
    uint32_t ncode;
    ptx_ocall *ocalls;
    uint32_t nocalls;
    ptx_body *bodies;
    uint32_t nbodies;
    int32_t *body_of; /* function index -> body, -1; nfuncs entries */
    uint32_t nfuncs;
    uint32_t nregs, npreds;
    ptx_const *consts;
    uint32_t nconsts;
    uint32_t local_size;
    uint32_t local_align;   /* each thread's frame starts at a multiple of this */
    ptx_dcall *dcalls;      /* calls of the device runtime's built-ins */
    uint32_t ndcalls;
    uint32_t devrt_uses;    /* 1 << PTX_BI_* of the built-ins it calls */
    uint32_t static_shared; /* the module's .shared variables and its entry's own */
    uint32_t dyn_base;      /* where dynamic (extern) shared memory starts */
    uint32_t rsv_base, rsv_size; /* the reserved shared region (PTX_RESERVED_SMEM), or 0 */
    uint32_t nparams, params_size;
    uint32_t param_offsets[64], param_sizes[64];
    struct ptxc_kernel *ptxc; /* the compile tier's state (ptxc_tier.c), from the first launch */
    uint32_t max_threads, maxnreg; /* the entry's launch bounds (ptx_func) */
    uint64_t const_size;           /* the module's */
};

/* Linking directives (PTX ISA, "Linking Directives"): none is local to its
 * input; .extern declares, .visible defines for every input, .weak and
 * .common define unless a .visible definition (or a larger .common) wins. */
enum { PTX_LK_NONE, PTX_LK_EXTERN, PTX_LK_VISIBLE, PTX_LK_WEAK, PTX_LK_COMMON };

/* A module-scope .global/.const declaration. Code names a variable by its
 * index in m->globals (PTX_GREF), resolved when kernels are linked: an
 * .extern declaration has no storage of its own and binds, like every
 * declaration with a linking directive, to the definition the link chose
 * (target). */
typedef struct {
    char *name;
    uint64_t offset, size;
    int32_t target;   /* the definition references bind to; -1: none (unresolved) */
    uint8_t defined;  /* has storage */
    uint8_t linkage;  /* PTX_LK_* */
    uint8_t has_init;
    uint8_t managed;  /* .attribute(.managed): alone in PTX_MANAGED_ALIGN pages */
    uint16_t src;
} ptx_var;

/* A reference to module variable I plus a displacement in (-2^31, 2^31): what
 * an instruction's immediate (reloc PTX_RL_GLOBAL) or an initialiser's
 * address holds until the link knows where every variable lies. */
#define PTX_GREF(i) ((uint64_t)((uint64_t)(i) + 1) << 32)
#define PTX_GREF_MAX_DISP 0x7fffffffll
static inline int ptx_gref_split(uint64_t v, uint32_t nglobals, uint32_t *index, int64_t *disp)
{
    uint64_t hi = (v + 0x80000000ull) >> 32;
    if (hi == 0 || hi > nglobals)
        return -1;
    *index = (uint32_t)(hi - 1);
    *disp = (int64_t)(v - (hi << 32));
    return 0;
}

struct ptx_module {
    ptx_func *funcs;
    uint32_t nfuncs;
    ptx_kernel *kernels;
    uint32_t nkernels;
    ptx_var *globals; /* .global and .const, in storage */
    uint32_t nglobals;
    uint8_t *storage;
    uint64_t storage_size;
    uint64_t storage_mapped; /* bytes mapped in the band (managed variables), else 0 */
    int has_managed;
    uint32_t static_shared; /* the module's and .funcs' .shared variables */
    uint32_t dyn_align;     /* the largest alignment an extern .shared declaration asks */
    int has_dyn_shared;
    uint32_t target; /* .target sm_XX as XX (100 for sm_100); 0 when absent */
    int uses_reserved_smem; /* code names %reserved_smem_* or %aggr_smem_size */
    uint64_t const_size; /* bytes of module-scope .const variables */
    uint32_t *taken; /* functions whose address an initialiser holds */
    uint32_t ntaken;
    char **srcnames; /* the inputs of a link, for messages (NULL: one input) */
    uint32_t nsrcs;
};

/* Linking (ptx_link.c): builds m->kernels from m->funcs. */
int ptx_link(ptx_module *m, char *err, size_t err_len);
void ptx_func_free(ptx_func *f);

/* ---- runtime ---- */

struct ptx_launch_ctx;

typedef struct ptx_block {
    const ptx_kernel *k;
    struct ptx_launch_ctx *lc;
    uint8_t *shared;
    uint64_t shared_size;
    uint8_t *local;        /* nthreads frames of local_size bytes */
    uint64_t local_size, local_total;
    const uint8_t *params;
    uint64_t params_len;
    uint64_t c_lo, c_len;  /* the last two ranges an access hit */
    uint64_t c2_lo, c2_len;
    uint64_t backedges;
    uint64_t yield_mask;   /* a warp yields when backedges & yield_mask is 0 */
    struct ptx_devrt *rt;  /* the session's device runtime (ptx_devrt.h), or NULL */
    char why[160];         /* what a built-in said about its fault ("" if nothing) */
    uint32_t red_popc;     /* bar.red of the barrier being gathered */
    int red_all, red_any;
    int err;
    uint32_t err_line;
    uint64_t err_addr;
    uint32_t ctaid[3];         /* the block being run */
    struct ptxc_worker *ptxc;  /* the compile tier's views (ptxc_run.c), or NULL */
} ptx_block;

#define PTX_BAR_MIXED UINT32_MAX

typedef struct ptx_warp {
    uint64_t (*r)[PTX_LANES];
    uint32_t *p;
    ptx_block *b;
    uint32_t pc, mask;
    uint32_t live;         /* lanes not exited */
    uint32_t parked;       /* live lanes waiting at lpc[] */
    uint32_t atbar;        /* lanes waiting at a barrier */
    uint32_t syncwait;     /* parked lanes holding at a warp-wide .sync instruction until
                            * the other lanes of its member mask arrive (ptx_exec.c) */
    uint32_t cc;           /* the carry flag of each lane (add.cc ...) */
    uint32_t merge_pc;     /* lowest lpc of the parked lanes */
    uint32_t lpc[PTX_LANES];
    uint32_t index;        /* warp in block */
    uint32_t fp[PTX_LANES];   /* frame pointers (offsets in the lane's local memory) */
    uint32_t frames_moved;    /* a call has moved some fp (the next block clears them) */
    /* lanes that did not take an out-of-line call wait for the ones that did */
    struct { uint32_t waiting, outstanding, ret_pc; } cw[16];
    uint32_t cw_used;
    const struct ptx_insn *bar; /* the barrier its waiting lanes arrived at */
    uint32_t bar_pc;       /* where all of atbar resume (their lpc is not written), or
                            * PTX_BAR_MIXED: they arrived at different barriers (lpc is) */
    uint64_t insns;
} ptx_warp;

/* A fault of instruction I (any lane) at ADDR: the block stops with CODE and
 * the launch reports the instruction's PTX line and the address. WHY, where a
 * handler has more to say, becomes the block's note. */
static inline int ptx_fault_why(ptx_warp *w, const struct ptx_insn *i, uint64_t addr, int code,
                                const char *why)
{
    ptx_block *b = w->b;
    b->err = code;
    b->err_line = i->line;
    b->err_addr = addr;
    if (why != NULL)
        snprintf(b->why, sizeof b->why, "%s", why);
    return code;
}

static inline int ptx_fault(ptx_warp *w, const struct ptx_insn *i, uint64_t addr, int code)
{
    return ptx_fault_why(w, i, addr, code, NULL);
}

extern const ptx_fn ptx_handlers[PTX_NOPS];
/* The handlers that live outside ptx_exec.c (ptx_exec_tex.c, ptx_video.c). */
int h_tex(struct ptx_warp *w, const struct ptx_insn *i, uint32_t m);
int h_tld4(struct ptx_warp *w, const struct ptx_insn *i, uint32_t m);
int h_txq(struct ptx_warp *w, const struct ptx_insn *i, uint32_t m);
int h_suq(struct ptx_warp *w, const struct ptx_insn *i, uint32_t m);
int h_suld(struct ptx_warp *w, const struct ptx_insn *i, uint32_t m);
int h_sust(struct ptx_warp *w, const struct ptx_insn *i, uint32_t m);
/* ptx_video.c */
int h_vsimd(struct ptx_warp *w, const struct ptx_insn *i, uint32_t m);
extern const char *const ptx_op_names[PTX_NOPS];

/* Asynchronous barriers (ptx_mbarrier.c): the handlers, and the flags of
 * their ptx_insn.mode. */
int h_mbar_init(struct ptx_warp *w, const struct ptx_insn *i, uint32_t m);
int h_mbar_inval(struct ptx_warp *w, const struct ptx_insn *i, uint32_t m);
int h_mbar_arrive(struct ptx_warp *w, const struct ptx_insn *i, uint32_t m);
int h_mbar_tx(struct ptx_warp *w, const struct ptx_insn *i, uint32_t m);
int h_mbar_wait(struct ptx_warp *w, const struct ptx_insn *i, uint32_t m);
int h_mbar_pending(struct ptx_warp *w, const struct ptx_insn *i, uint32_t m);
enum { PTX_MB_GENERIC = 1, PTX_MB_PARITY = 2, PTX_MB_DROP = 4, PTX_MB_NOCOMPLETE = 8,
       PTX_MB_CP_INC = 16, PTX_MB_EXPECT_TX = 32, PTX_MB_COMPLETE_TX = 64 };

/* ptx_warp_run's answer when the warp stopped at a loop's back edge to let
 * others run (ptx_block.yield_mask); it resumes there. */
#define PTX_WARP_YIELD (-2)

/* Runs W until its lanes have all exited or wait at a barrier (0), it yields
 * (PTX_WARP_YIELD), or it fails (PTX_E_*; -1: another block failed). */
int ptx_warp_run(ptx_warp *w);
/* Picks the next group of lanes (lowest pc); 0 when none can run. */
int ptx_warp_select(ptx_warp *w);
/* Lanes EM arrive at barrier I (at PC): they wait, a bar.red gathers. */
void ptx_bar_arrive(ptx_warp *w, const struct ptx_insn *i, uint32_t em, uint32_t pc);
/* The block's barrier opens: the warp's waiting lanes (atbar) run on. */
void ptx_bar_release(ptx_warp *w);

/* The device runtime's built-ins (ptx_builtin.c): the handler of
 * PTX_OP_devcall, and the check of a call of NAME against the built-in's
 * signature: 0 and *d (its slots as the call site gives them), -1 with a
 * message (a built-in called wrongly), -2 (NAME is no built-in). */
int ptx_h_devcall(ptx_warp *w, const ptx_insn *i, uint32_t m);
int ptx_builtin_resolve(const char *name, const ptx_callsite *cs, ptx_dcall *d, char *err,
                        size_t err_len);

/* The device-side launches of the block's grid (ptx_cdp.h), NULL when its
 * kernel makes none (ptx_launch.c). */
struct ptx_cdp_grid *ptx_block_cdp(const ptx_block *b);
/* Memory classification for generic/global accesses (ptx_launch.c). */
uint8_t *ptx_gaddr_slow(ptx_block *b, uint64_t a, uint64_t size);
/* The launch's texture (surface != 0: surface) object of this value, or NULL
 * (ptx_tex.h: the launch's resolver; none resolves without one). */
const struct ptx_texref *ptx_texture_of(ptx_block *b, uint64_t value, int surface);
int ptx_deadline_check(ptx_block *b);

static inline uint8_t *ptx_gaddr(ptx_block *b, uint64_t a, uint64_t size)
{
    uint64_t off = a - b->c_lo;
    if (off < b->c_len && b->c_len - off >= size)
        return (uint8_t *)(uintptr_t)a;
    off = a - b->c2_lo;
    if (off < b->c2_len && b->c2_len - off >= size)
        return (uint8_t *)(uintptr_t)a;
    return ptx_gaddr_slow(b, a, size);
}

/* The operand of a warp-wide .sync instruction that holds its member mask;
 * -1 for every other opcode. The interpreter holds lanes there (ptx_exec.c
 * sync_must_hold); the compile tier asks it (ptx_sync_hold) before it
 * runs one. */
static inline int ptx_sync_mask_operand(int op)
{
    switch (op) {
    case PTX_OP_shfl:
        return 3;
    case PTX_OP_vote_all:
    case PTX_OP_vote_any:
    case PTX_OP_vote_uni:
    case PTX_OP_vote_ballot:
    case PTX_OP_match_any:
    case PTX_OP_match_all:
    case PTX_OP_redux:
        return 1;
    case PTX_OP_warpsync:
        return 0;
    default:
        return -1;
    }
}

/* Whether group M at the warp-wide .sync instruction I (lanes EM run it) must
 * hold there for parked lanes of its member mask (ptx_exec.c); the compile
 * tier hands the warp to the interpreter where this is 1. */
int ptx_sync_hold(const ptx_warp *w, const ptx_insn *i, uint32_t em, uint32_t m);

#endif /* GLEAM_PTX_INT_H */
