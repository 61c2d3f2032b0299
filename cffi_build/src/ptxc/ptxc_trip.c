/*
 * ptxc_trip.c — a grid-stride loop's trips with one index for the warp.
 *
 * nvcc writes `for (i = start; i < n; i += stride)` as one block that ends
 *     add.s32 x, x, u;  setp.lt.s32 p, x, n;  @p bra <the block's start>
 * with u and n the same in every lane. Lane l's x is start + l in a warp
 * whose lanes are consecutive threads, and stays x0 + l (mod 2^32) trip
 * after trip, since every lane adds the same u. Run lane by lane, each trip
 * reads the 32 indices from the register file, adds u to each, stores them
 * back and packs 32 compares into the predicate: for a histogram that was a
 * third of its time.
 *
 * So, before the block's own code, while the whole warp runs it (and no
 * merge point waits before it) and the register file holds x0 + l in lane
 * l, the block's trips run with x0 alone: the body reads x as X0_ + l, the
 * step adds u to X0_, and the loop goes on while the lane with the largest
 * index is below n, which says every lane is when the 32 indices do not
 * wrap. Each trip counts its instructions and its branch, and keeps the time
 * limit and the yield, as the block's own code does. At the first trip whose
 * lanes would not all go on (or that may wrap), x and p are written to the
 * register file as the step and setp would have left them, and the block's
 * branch runs from there (its resume label): it parks, leaves or loops as
 * before. A yield or time-out writes them first too. A fault ends the launch,
 * whose registers nobody reads.
 *
 * The body is the block's code before the step, written by the same
 * emitters (ptxc_emit_range) with x read as X0_ + l; it may not write x, u,
 * n or p, read p, or run anything that reads the register file itself
 * (handlers, warp-wide steps). No state.
 */
#include <stdio.h>

#include "ptxc.h"

const char ptxc_trip_lane[] = "PTXC_TRIPX(l)";

/* The step and bound: a constant, a register uniform in the kernel (written
 * once, read after) that is in the file, or a special register that is one
 * per block. */
static int loop_invariant(const ptxc_emitter *c, uint32_t r)
{
    const ptxc_plan *p = c->p;
    if (r < PTX_NSREG)
        return r >= PTX_R_NTID_X && r <= PTX_R_NCTAID_Z;
    return p->is_const[r] || (p->uniform[r] && c->home[r] == PTXC_HOME_FILE);
}

/* Its value (every lane's: the warp is whole, lane 0 runs). */
static const char *invariant_value(const ptxc_emitter *c, uint32_t r, char *buf, size_t n)
{
    if (r < PTX_NSREG || c->p->is_const[r])
        return ptxc_src(c->p, r, buf, n);
    snprintf(buf, n, "R[%u][0]", r);
    return buf;
}

/* Whether I reads (WRITTEN 0) or writes register-set bit BIT. */
static int touches(const ptx_insn *i, uint32_t nregs, uint32_t bit, int written)
{
    ptxc_rw rw;
    uint32_t bits[PTXC_RW_MAX];
    ptxc_rw_of(i, &rw);
    for (uint32_t q = 0, n = ptxc_bits(&rw, nregs, written, bits); q < n; q++)
        if (bits[q] == bit)
            return 1;
    return 0;
}

int ptxc_trip_find(const ptxc_emitter *c, ptxc_trip *tr)
{
    const ptxc_bb *bb = c->bb;
    const ptx_kernel *k = c->p->k;
    if (bb->end - bb->start < 3)
        return 0;
    const ptx_insn *bra = &k->code[bb->end - 1], *setp = &k->code[bb->end - 2],
                   *step = &k->code[bb->end - 3];
    if (bra->op != PTX_OP_ctl || bra->ctl != PTX_C_BRA || bra->aux != bb->start
        || bra->guard == 0 || (bra->guard & PTX_GUARD_NEG))
        return 0;
    int lt = setp->op - (PTX_OP_setp_eq_s32 + 2);
    int lt_u = setp->op - (PTX_OP_setp_eq_u32 + 2);
    if ((lt != 0 && lt_u != 0) || setp->guard || (setp->mode & 3) || setp->aux
        || setp->d[0] != bra->guard)
        return 0;
    uint32_t x = setp->s[0], bound = setp->s[1];
    int add = step->op == PTX_OP_add_s16 + 2 || step->op == PTX_OP_add_s16 + 3;
    if (!add || step->guard || step->d[0] != x || x < PTX_NSREG || c->p->is_const[x]
        || c->home[x] != PTXC_HOME_FILE)
        return 0;
    uint32_t u = step->s[0] == x ? step->s[1] : step->s[1] == x ? step->s[0] : x;
    if (u == x || !loop_invariant(c, u) || !loop_invariant(c, bound))
        return 0;
    uint32_t nregs = k->nregs, pbit = nregs + bra->guard;
    for (uint32_t pc = bb->start; pc < bb->end - 3; pc++) {
        const ptx_insn *i = &k->code[pc];
        int kind = ptxc_kind(i);
        if (kind != PTXC_LANE && kind != PTXC_NOP && kind != PTXC_MEM)
            return 0;
        if (touches(i, nregs, x, 1) || touches(i, nregs, u, 1) || touches(i, nregs, bound, 1)
            || touches(i, nregs, pbit, 1) || touches(i, nregs, pbit, 0))
            return 0;
    }
    *tr = (ptxc_trip){.x = x, .step = bb->end - 3, .setp = bb->end - 2, .bra = bb->end - 1,
                      .p = bra->guard, .is_signed = lt == 0};
    return 1;
}

/* x and p into the register file as the step and setp leave them (X0_ has
 * had its step). */
static void put_writeback(ptxc_text *t, const ptxc_trip *tr)
{
    const char *ty = tr->is_signed ? "int32_t" : "uint32_t";
    ptxc_put(t, "{ uint32_t pm_ = 0; for (int l = 0; l < 32; l++) { uint32_t xl_ = X0_ +"
                " (uint32_t)l; R[%u][l] = xl_; pm_ |= (uint32_t)((%s)xl_ < (%s)TN_) << l; }"
                " P[%u] = pm_; }", tr->x, ty, ty, tr->p);
}

int ptxc_emit_trips(ptxc_emitter *c, const ptxc_trip *tr, uint32_t unguarded)
{
    const ptx_insn *step = &c->p->k->code[tr->step], *setp = &c->p->k->code[tr->setp];
    ptxc_text *t = c->t;
    uint32_t u = step->s[0] == tr->x ? step->s[1] : step->s[0];
    const char *ty = tr->is_signed ? "int32_t" : "uint32_t";
    const char *top = tr->is_signed ? "INT32_MAX" : "UINT32_MAX";
    char uv[48], nv[48];
    ptxc_put(t, "if (m == 0xffffffffu && mpc > %uu) { /* the trips of %u..%u */"
                " const uint32_t TU_ = (uint32_t)(%s), TN_ = (uint32_t)(%s);"
                " uint32_t X0_ = (uint32_t)R[%u][0]; uint64_t tx_ = 0;"
                " for (int l = 0; l < 32; l++) tx_ |= R[%u][l] ^ (uint64_t)(uint32_t)(X0_ +"
                " (uint32_t)l);\nif (tx_ == 0) { const uint32_t m = 0xffffffffu; for (;;) {\n",
             c->bb->start, c->bb->start, tr->bra, invariant_value(c, u, uv, sizeof uv),
             invariant_value(c, setp->s[1], nv, sizeof nv), tr->x, tr->x);
    c->trip_reg = tr->x;
    int rc = ptxc_emit_range(c, c->bb->start, tr->step);
    c->trip_reg = UINT32_MAX;
    /* on while no lane's index wraps and the last lane's is below n */
    ptxc_put(t, "X0_ += TU_;\nif (((%s)X0_ > %s - 31) | ((%s)(X0_ + 31u) >= (%s)TN_)) break;\n"
                "n += 32; { uint64_t be = ++B->backedges;"
                " if ((be & 0xfff) == 0 && (rc = B->deadline(B)) != 0) { ",
             ty, top, ty, ty);
    put_writeback(t, tr);
    ptxc_put(t, " goto out; } if ((be & B->yield_mask) == 0) { ");
    put_writeback(t, tr);
    ptxc_put(t, " pc = %u; rc = %d; goto out; } }\nn += 32 * %u;\n}\n", tr->bra, PTXC_YIELD,
             unguarded);
    put_writeback(t, tr);
    ptxc_put(t, " goto R%u; } }\n", tr->bra);
    return rc;
}
