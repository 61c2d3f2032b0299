/*
 * ptxc_plan.c — what the compile tier makes of a kernel before writing C:
 * whether it can compile it at all (every instruction known, no out-of-line
 * calls, nothing falls off the end), its basic blocks, and which registers
 * are live at each block's end (a value no lane reads again is not stored
 * back into the register file).
 *
 * Liveness is the scalar one: registers are per lane, and each lane runs a
 * path of the control-flow graph (the warp only interleaves its lanes), so
 * a lane reads only values its own path wrote. The exception is shfl, which
 * reads other lanes' registers: its sources are kept everywhere.
 * Ownership: a plan owns its arrays (ptxc_plan_free); it reads the kernel.
 * No global state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx/ptx_wmma.h"
#include "ptxc.h"

/* The instructions whose interpreter handler the generated code may call:
 * each touches only registers, predicates, the carry flag and checked
 * memory, never the warp's scheduling state. */
static int runs_by_handler(int op)
{
    switch (op) {
    case PTX_OP_mul24_s32: case PTX_OP_mul24_u32: case PTX_OP_mad24_s32: case PTX_OP_mad24_u32:
    case PTX_OP_sad_s32: case PTX_OP_sad_u32: case PTX_OP_add_sat_s32: case PTX_OP_sub_sat_s32:
    case PTX_OP_carry: case PTX_OP_minmax16x2:
    case PTX_OP_bfe_s32: case PTX_OP_bfe_u32: case PTX_OP_bfe_s64: case PTX_OP_bfe_u64:
    case PTX_OP_bfi_s32: case PTX_OP_bfi_u32: case PTX_OP_bfi_s64: case PTX_OP_bfi_u64:
    case PTX_OP_bfind_s32: case PTX_OP_bfind_u32: case PTX_OP_bfind_s64: case PTX_OP_bfind_u64:
    case PTX_OP_prmt: case PTX_OP_lop3_32: case PTX_OP_lop3_64: case PTX_OP_shf_l_wrap:
    case PTX_OP_shf_l_clamp: case PTX_OP_shf_r_wrap: case PTX_OP_shf_r_clamp:
    case PTX_OP_dp4a: case PTX_OP_dp2a: case PTX_OP_bmsk_wrap: case PTX_OP_bmsk_clamp:
    case PTX_OP_ftestp_f32: case PTX_OP_ftestp_f64:
    case PTX_OP_hadd: case PTX_OP_hsub: case PTX_OP_hmul: case PTX_OP_hfma: case PTX_OP_hneg:
    case PTX_OP_habs: case PTX_OP_hmin: case PTX_OP_hmax: case PTX_OP_hsetp:
    case PTX_OP_cvt: case PTX_OP_clock: case PTX_OP_clock64: case PTX_OP_globaltimer:
    case PTX_OP_isspacep: case PTX_OP_atom_g: case PTX_OP_atom_s: case PTX_OP_cpasync:
    case PTX_OP_redux: case PTX_OP_match_any: case PTX_OP_match_all: case PTX_OP_cvt_tf32:
        return 1;
    default:
        break;
    }
    /* the integer families with a handler only: brev */
    return op >= PTX_OP_brev_s16 && op <= PTX_OP_brev_u64;
}

/* The carriers after a wmma instruction (ptx_wmma.h): one per four of its
 * fragment's registers, six for an mma; -1 for an encoding without a
 * fragment (the kernel stays interpreted, whose handler refuses it). */
static int wmma_carriers(const ptx_insn *i)
{
    if (i->op == PTX_OP_wmma_mma)
        return (int)PTX_WMMA_MMA_CARRIERS;
    if (i->op != PTX_OP_wmma_load && i->op != PTX_OP_wmma_store)
        return 0;
    ptx_wmma_frag f;
    if (ptx_wmma_frag_of((int)i->aux, (int)(i->mode & PTX_WM_KIND), i->mode2, &f) != 0)
        return -1;
    return (f.nregs + 3) / 4;
}

/* A nop that carries fields is another instruction's carrier (wmma's, or a
 * texture lookup's extra operands): it does nothing when it runs. */
static int is_carrier(const ptx_insn *i)
{
    return i->op == PTX_OP_nop && i->fk != 0;
}

/* tex, tld4 and txq run by their handlers (ptx_exec_tex.c) as any handler
 * does: their fields are results and sources as the analysis reads them.
 * Not the forms with a second instruction (tex.level, tex.grad, a residency
 * predicate: mode2 bit 3), whose nop carries sources in result fields, nor
 * suld/sust (sust's values stored sit in the result fields). */
static int texture_lookup(const ptx_insn *i)
{
    if (i->op == PTX_OP_txq)
        return 1;
    return (i->op == PTX_OP_tex || i->op == PTX_OP_tld4) && !(i->mode2 & 8);
}

/* The float ops that round: anything but .rn runs by its handler, which
 * switches the host's rounding mode (generated code keeps the default). */
/* The whitelist names opcode ranges: an opcode another change puts inside
 * one (a new width of ld, a new vote) must not be taken for a known one, so
 * a range that grows stops the build here instead (then list the new opcode
 * where it belongs, or leave it out: unknown opcodes stay interpreted). */
_Static_assert(PTX_OP_ld_p8 - PTX_OP_ld_g1 == 27, "ld/st range of ptxc_kind changed");
_Static_assert(PTX_OP_vote_ballot - PTX_OP_vote_all == 3, "vote range of ptxc_kind changed");
_Static_assert(PTX_OP_fcopysign_f64 - PTX_OP_fadd_f32 == 25, "float range of rounds changed");
_Static_assert(PTX_OP_flg2_f64 - PTX_OP_fsin_f32 == 6, "float range of rounds changed");
_Static_assert(PTX_OP_brev_u64 - PTX_OP_brev_s16 == 5, "brev range changed");

static int rounds(int op)
{
    return (op >= PTX_OP_fadd_f32 && op <= PTX_OP_fcopysign_f64)
           || (op >= PTX_OP_fsin_f32 && op <= PTX_OP_flg2_f64);
}

int ptxc_kind(const ptx_insn *i)
{
    int op = i->op;
    if (op == PTX_OP_ctl) {
        switch (i->ctl) {
        case PTX_C_BRA: case PTX_C_EXIT: case PTX_C_RET: case PTX_C_BAR: case PTX_C_TRAP:
            return PTXC_CTL;
        default:
            return PTXC_NO; /* calls: out-of-line bodies stay with the interpreter */
        }
    }
    if (op == PTX_OP_nop)
        return PTXC_NOP;
    if ((op >= PTX_OP_ld_g1 && op <= PTX_OP_ld_p8))
        return PTXC_MEM;
    if (ptxc_atom_inline(i))
        return PTXC_MEM;
    if (texture_lookup(i))
        return i->fn != NULL ? PTXC_CALL : PTXC_NO;
    if (op == PTX_OP_wmma_load || op == PTX_OP_wmma_store || op == PTX_OP_wmma_mma)
        return i->fn != NULL && wmma_carriers(i) > 0 ? PTXC_CALL : PTXC_NO;
    if (op == PTX_OP_shfl || op == PTX_OP_fence || op == PTX_OP_activemask || op == PTX_OP_warpsync
        || (op >= PTX_OP_vote_all && op <= PTX_OP_vote_ballot))
        return PTXC_WARP;
    if (rounds(op) && (i->mode & 3) != 0)
        return runs_by_handler(op) || i->fn != NULL ? PTXC_CALL : PTXC_NO;
    if (ptxc_lane_known(i))
        return PTXC_LANE;
    return runs_by_handler(op) && i->fn != NULL ? PTXC_CALL : PTXC_NO;
}

static void fields_of(const ptx_insn *i, ptxc_rw *rw)
{
    for (int f = 0; f < PTX_NFIELDS; f++) {
        int kind = (int)(i->fk >> (2 * f)) & 3;
        if (kind == PTX_FK_NONE)
            continue;
        uint32_t v = f <= PTX_F_D3 ? i->d[f] : f <= PTX_F_S3 ? i->s[f - PTX_F_S0] : i->ab;
        if (f <= PTX_F_D3) {
            if (kind == PTX_FK_REG)
                rw->wr[rw->nwr++] = v;
            else
                rw->wp[rw->nwp++] = v;
        } else if (kind == PTX_FK_REG)
            rw->r[rw->nr++] = v;
        else
            rw->p[rw->np++] = v;
    }
}

void ptxc_rw_of(const ptx_insn *i, ptxc_rw *rw)
{
    memset(rw, 0, sizeof *rw);
    if (!is_carrier(i))
        fields_of(i, rw);
    for (int c = 1; c <= wmma_carriers(i); c++)
        fields_of(i + c, rw);
    if (i->guard)
        rw->p[rw->np++] = i->guard & ~PTX_GUARD_NEG;
}

uint32_t ptxc_bits(const ptxc_rw *rw, uint32_t nregs, int written, uint32_t out[PTXC_RW_MAX])
{
    const uint32_t *r = written ? rw->wr : rw->r, *p = written ? rw->wp : rw->p;
    uint32_t nr = written ? rw->nwr : rw->nr, np = written ? rw->nwp : rw->np, n = 0;
    for (uint32_t q = 0; q < nr; q++)
        out[n++] = r[q];
    for (uint32_t q = 0; q < np; q++)
        out[n++] = nregs + p[q];
    return n;
}

static int refuse(char *why, size_t n, const char *fmt, uint32_t a, uint32_t b)
{
    if (why != NULL && n > 0)
        snprintf(why, n, fmt, a, b);
    return -1;
}

/* Registers in range, no writes to the fixed or constant slots, branch
 * targets inside the code: what the plan and the emitter rely on. */
static int check_insn(const ptx_kernel *k, const uint8_t *is_const, uint32_t pc, char *why,
                      size_t n)
{
    const ptx_insn *i = &k->code[pc];
    ptxc_rw rw;
    if (ptxc_kind(i) == PTXC_NO) {
        if (why != NULL && n > 0)
            snprintf(why, n, "instruction %u (%s) is not compiled", pc,
                     i->op == PTX_OP_ctl ? "a call" : i->op < PTX_NOPS ? ptx_op_names[i->op] : "?");
        return -1;
    }
    ptxc_rw_of(i, &rw);
    for (uint32_t q = 0; q < rw.nr; q++)
        if (rw.r[q] >= k->nregs)
            return refuse(why, n, "instruction %u reads register %u", pc, rw.r[q]);
    for (uint32_t q = 0; q < rw.np; q++)
        if (rw.p[q] >= k->npreds)
            return refuse(why, n, "instruction %u reads predicate %u", pc, rw.p[q]);
    for (uint32_t q = 0; q < rw.nwr; q++)
        if (rw.wr[q] >= k->nregs || rw.wr[q] < PTX_NSREG || is_const[rw.wr[q]])
            return refuse(why, n, "instruction %u writes register %u", pc, rw.wr[q]);
    for (uint32_t q = 0; q < rw.nwp; q++)
        if (rw.wp[q] >= k->npreds || rw.wp[q] < PTX_NSPRED)
            return refuse(why, n, "instruction %u writes predicate %u", pc, rw.wp[q]);
    if (i->op == PTX_OP_ctl && i->ctl == PTX_C_BRA && i->aux >= k->ncode)
        return refuse(why, n, "instruction %u branches to %u", pc, i->aux);
    return 0;
}

/* An instruction the warp cannot pass: the code after it is not its successor. */
static int stops(const ptx_insn *i)
{
    return i->op == PTX_OP_ctl && i->guard == 0
           && (i->ctl == PTX_C_BRA || i->ctl == PTX_C_EXIT || i->ctl == PTX_C_RET
               || i->ctl == PTX_C_TRAP);
}

static int make_blocks(ptxc_plan *p)
{
    const ptx_kernel *k = p->k;
    uint8_t *leader = calloc(k->ncode + 1, 1);
    p->bb_at = malloc(k->ncode * sizeof *p->bb_at);
    if (leader == NULL || p->bb_at == NULL) {
        free(leader);
        return -1;
    }
    leader[0] = 1;
    for (uint32_t pc = 0; pc < k->ncode; pc++) {
        const ptx_insn *i = &k->code[pc];
        if (i->op != PTX_OP_ctl)
            continue;
        leader[pc + 1] = 1; /* lanes that pass a control instruction resume after it */
        if (i->ctl == PTX_C_BRA)
            leader[i->aux] = 1;
    }
    uint32_t n = 0;
    for (uint32_t pc = 0; pc < k->ncode; pc++)
        n += leader[pc];
    p->bb = malloc(n * sizeof *p->bb);
    if (p->bb == NULL) {
        free(leader);
        return -1;
    }
    p->nbb = 0;
    for (uint32_t pc = 0; pc < k->ncode; pc++) {
        p->bb_at[pc] = -1;
        if (!leader[pc])
            continue;
        if (p->nbb > 0)
            p->bb[p->nbb - 1].end = pc;
        p->bb_at[pc] = (int32_t)p->nbb;
        p->bb[p->nbb++].start = pc;
    }
    p->bb[p->nbb - 1].end = k->ncode;
    free(leader);
    return 0;
}

uint32_t ptxc_successors(const ptxc_plan *p, uint32_t b, uint32_t out[2])
{
    const ptx_insn *last = &p->k->code[p->bb[b].end - 1];
    uint32_t n = 0;
    if (last->op == PTX_OP_ctl && last->ctl == PTX_C_BRA)
        out[n++] = (uint32_t)p->bb_at[last->aux];
    if (!stops(last) && p->bb[b].end < p->k->ncode)
        out[n++] = (uint32_t)p->bb_at[p->bb[b].end];
    return n;
}

/* live_in(B) = uses before an unguarded write, plus live_out(B) minus those writes. */
static void live_through(const ptxc_plan *p, uint32_t b, uint64_t *set)
{
    const ptx_kernel *k = p->k;
    for (uint32_t pc = p->bb[b].end; pc-- > p->bb[b].start;) {
        const ptx_insn *i = &k->code[pc];
        ptxc_rw rw;
        uint32_t bits[PTXC_RW_MAX], n;
        ptxc_rw_of(i, &rw);
        if (i->guard == 0) { /* a guarded write leaves the other lanes' values live */
            n = ptxc_bits(&rw, k->nregs, 1, bits);
            for (uint32_t q = 0; q < n; q++)
                set[bits[q] >> 6] &= ~(1ull << (bits[q] & 63));
        }
        n = ptxc_bits(&rw, k->nregs, 0, bits);
        for (uint32_t q = 0; q < n; q++)
            ptxc_set(set, bits[q]);
    }
}

static int liveness(ptxc_plan *p)
{
    uint32_t w = p->words;
    p->live_out = calloc((size_t)p->nbb * w, sizeof *p->live_out);
    uint64_t *in = calloc((size_t)p->nbb * w, sizeof *in), *tmp = malloc(w * sizeof *tmp);
    if (p->live_out == NULL || in == NULL || tmp == NULL) {
        free(in);
        free(tmp);
        return -1;
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t b = p->nbb; b-- > 0;) {
            uint64_t *out = p->live_out + (size_t)b * w;
            uint32_t succ[2], ns = ptxc_successors(p, b, succ);
            for (uint32_t s = 0; s < ns; s++)
                for (uint32_t x = 0; x < w; x++)
                    out[x] |= in[(size_t)succ[s] * w + x];
            memcpy(tmp, out, w * sizeof *tmp);
            live_through(p, b, tmp);
            uint64_t *bin = in + (size_t)b * w;
            for (uint32_t x = 0; x < w; x++)
                if ((bin[x] | tmp[x]) != bin[x]) {
                    bin[x] |= tmp[x];
                    changed = 1;
                }
        }
    }
    free(in);
    free(tmp);
    return 0;
}

int ptxc_plan_make(const ptx_kernel *k, ptxc_plan *p, char *why, size_t why_len)
{
    memset(p, 0, sizeof *p);
    p->k = k;
    if (k->nocalls > 0)
        return refuse(why, why_len, "out-of-line calls (%u) stay interpreted", k->nocalls, 0);
    if (k->ncode == 0 || k->ncode > PTXC_MAX_CODE)
        return refuse(why, why_len, "%u instructions (at most %u are compiled)", k->ncode,
                      PTXC_MAX_CODE);
    if (!stops(&k->code[k->ncode - 1]))
        return refuse(why, why_len, "the code can run past its end (%u)", k->ncode, 0);
    p->is_const = calloc(k->nregs, 1);
    p->const_val = calloc(k->nregs, sizeof *p->const_val);
    p->words = (k->nregs + k->npreds + 63) / 64;
    p->keep = calloc(p->words, sizeof *p->keep);
    if (p->is_const == NULL || p->const_val == NULL || p->keep == NULL)
        goto oom;
    for (uint32_t c = 0; c < k->nconsts; c++) {
        uint32_t r = k->consts[c].reg;
        if (r < PTX_NSREG || r >= k->nregs) {
            ptxc_plan_free(p);
            return refuse(why, why_len, "constant in register %u", r, 0);
        }
        p->is_const[r] = 1;
        p->const_val[r] = k->consts[c].value;
    }
    for (uint32_t pc = 0; pc < k->ncode; pc++) {
        if (check_insn(k, p->is_const, pc, why, why_len) != 0) {
            ptxc_plan_free(p);
            return -1;
        }
        const ptx_insn *i = &k->code[pc];
        ptxc_rw rw;
        ptxc_rw_of(i, &rw);
        if (i->op == PTX_OP_shfl)
            ptxc_set(p->keep, i->s[0]);
        /* the interpreter may take the warp over at a .sync instruction
         * (ptxc_emit.c emit_hold): it reads every slot */
        if (ptx_sync_mask_operand(i->op) >= 0)
            p->calls_read_sregs = p->calls_read_consts = 1;
        if (ptxc_kind(i) == PTXC_CALL)
            for (uint32_t q = 0; q < rw.nr; q++) {
                p->calls_read_sregs |= rw.r[q] < PTX_NSREG;
                p->calls_read_consts |= p->is_const[rw.r[q]];
            }
    }
    if (make_blocks(p) != 0 || liveness(p) != 0 || ptxc_uniform_make(p) != 0)
        goto oom;
    return 0;
oom:
    ptxc_plan_free(p);
    return refuse(why, why_len, "out of memory planning %u instructions", k->ncode, 0);
}

void ptxc_plan_free(ptxc_plan *p)
{
    free(p->bb);
    free(p->bb_at);
    free(p->live_out);
    free(p->keep);
    free(p->uniform);
    free(p->is_const);
    free(p->const_val);
    memset(p, 0, sizeof *p);
}
