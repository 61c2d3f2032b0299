/*
 * ptxc_mem.c — memory in the compile tier's C. Two forms of an access:
 *  - a step of its own (stores, atomics, and loads on the exact path): all
 *    its lanes' addresses are checked at once (their span inside one window:
 *    the fast path), else lane by lane in the interpreter's order, so the
 *    first bad lane faults with the interpreter's code, line and address and
 *    the lanes before it have done their access;
 *  - a load inside a fused lane loop (ptxc_seg.c): checked without a branch
 *    out of the loop; a lane whose access would fault reads zeros instead and
 *    marks the run bad, and a bad run is thrown away and done again as steps.
 * Windows: shared memory is the block's buffer (offsets), local memory the
 * lane's frame (offsets), kernel parameters the parameter buffer, and a
 * generic address any range the launch allows (ptxc_block.range, then the
 * launch's lookup). No state.
 */
#include <stdio.h>
#include <string.h>

#include "ptxc.h"

enum { SP_GENERIC, SP_SHARED, SP_LOCAL, SP_PARAM };

/* Loaded values as registers: sign- or zero-extended; the C type of n bytes. */
static const char *const sx[9] = {[1] = "(uint64_t)(int64_t)(int8_t)",
                                  [2] = "(uint64_t)(int64_t)(int16_t)",
                                  [4] = "(uint64_t)(int64_t)(int32_t)", [8] = "(uint64_t)"};
static const char *const zx[9] = {[1] = "(uint64_t)(uint8_t)", [2] = "(uint64_t)(uint16_t)",
                                  [4] = "(uint64_t)(uint32_t)", [8] = "(uint64_t)"};
static const char *const ut[9] = {[1] = "uint8_t", [2] = "uint16_t", [4] = "uint32_t",
                                  [8] = "uint64_t"};


static unsigned load_size(const ptx_insn *i, unsigned *n);

/* The length of each space's window in the generated function (generic
 * memory has ranges instead). */
static const char *const space_len[] = {[SP_SHARED] = "SHSZ", [SP_LOCAL] = "LSZ",
                                        [SP_PARAM] = "PLEN"};

static int mem_space(int op)
{
    if (op >= PTX_OP_ld_s1 && op <= PTX_OP_st_s8)
        return SP_SHARED;
    if (op >= PTX_OP_ld_l1 && op <= PTX_OP_st_l8)
        return SP_LOCAL;
    if (op >= PTX_OP_ld_p1 && op <= PTX_OP_ld_p8)
        return SP_PARAM;
    return SP_GENERIC;
}

/* The C expression of I's address in lane l, in a step: its base register's
 * slot plus the immediate. */
static const char *step_address(const ptxc_emitter *c, const ptx_insn *i, char *buf, size_t n)
{
    char ab[48];
    snprintf(buf, n, "%s + UINT64_C(0x%llx)", ptxc_step_src(c, i->ab, ab, sizeof ab),
             (unsigned long long)i->imm);
    return buf;
}

/* Whether [A, A+S) lies where a space's access may go (S 0: unknown, no). */
static void put_fits(ptxc_text *t, int space, const char *a, const char *s)
{
    if (space == SP_GENERIC)
        ptxc_put(t, "(%s != 0 && ptxc_have(B, %s, %s))", s, a, s);
    else
        ptxc_put(t, "ptxc_window(%s, %s, %s)", a, s, space_len[space]);
}

/* The host pointer of address a in lane l (checked before). */
static const char *mem_where(int space)
{
    switch (space) {
    case SP_SHARED: return "(SHP + a)";
    case SP_LOCAL: return "((uint8_t *)(uintptr_t)LOCAL_FRAME(l) + a)";
    case SP_PARAM: return "((uint8_t *)(uintptr_t)B->params + a)";
    default: return "((uint8_t *)(uintptr_t)a)";
    }
}

/* One lane's check of [a, a+SIZE), as the interpreter makes it: alignment,
 * then the space (generic: the cached ranges, else the launch's lookup). A
 * window's check is one branch on a good lane, its bound the loop's
 * constant: a loop of atoms runs at the rate the CPU takes branches, and a
 * second branch a lane cost a histogram a third of its time. */
static void put_lane_check(ptxc_text *t, int space, uint32_t pc, unsigned size)
{
    char sz[24];
    snprintf(sz, sizeof sz, "UINT64_C(%u)", size);
    if (space == SP_GENERIC) {
        ptxc_put(t, " if (a & %u) FAULT(%u, a, %d);", size - 1, pc, PTX_E_MISALIGNED);
        ptxc_put(t, " if (!ptxc_have(B, a, %s) && !B->gaddr(B, a, %s)) FAULT(%u, a, %d);", sz,
                 sz, pc, PTX_E_ILLEGAL_ADDRESS);
        return;
    }
    /* a good a is below LEN - SIZE + 1; with LEN < SIZE none is (the bound 0) */
    const char *len = space_len[space];
    ptxc_put(t, " if ((a & %u) | (a >= (%s >= %u ? %s - %u : 0))) { if (a & %u) FAULT(%u, a, %d);"
                " FAULT(%u, a, %d); }", size - 1, len, size, len, size - 1, size - 1, pc,
             PTX_E_MISALIGNED, pc, PTX_E_ILLEGAL_ADDRESS);
}

/* The access of one lane at p_ (checked): vec elements of n bytes. */
static void mem_access(ptxc_emitter *c, const ptx_insn *i, int store, unsigned n)
{
    char v[48], d[24];
    for (unsigned e = 0; e < i->aux; e++) {
        if (store)
            ptxc_put(c->t, " { %s x = (%s)(%s); memcpy(p_ + %u, &x, %u); }", ut[n], ut[n],
                     ptxc_step_src(c, i->s[e], v, sizeof v), e * n, n);
        else
            ptxc_put(c->t, " { %s x; memcpy(&x, p_ + %u, %u); %s[l] = %s(x); }", ut[n],
                     e * n, n, ptxc_slot(c, i->d[e], d, sizeof d), i->mode ? sx[n] : zx[n]);
    }
}

/* The head of a whole warp's access to consecutive elements (lane l at
 * a0 + l*n, the common coalesced access): when every lane runs and the 32
 * addresses are a0_, a0_ + n, ... (one OR of differences, which gcc keeps in
 * vector registers), aligned and inside one window, q_ points at them. The
 * caller closes the two braces it opens. */
static void put_lin_head(ptxc_emitter *c, const ptx_insn *i, int store, unsigned n,
                         const char *a, uint32_t pf)
{
    ptxc_text *t = c->t;
    int space = mem_space(i->op);
    char span[32];
    snprintf(span, sizeof span, "UINT64_C(%u)", 32 * n);
    ptxc_put(t, "if (em == 0xffffffffu) { uint64_t a0_; { const int l = 0; a0_ = %s; }"
                " uint64_t dx_ = 0; for (int l = 0; l < 32; l++) dx_ |= (%s) ^ (a0_ + "
                "(uint64_t)l * %u);\nif ((dx_ == 0) & ((a0_ & %u) == 0) & ", a, a, n, n - 1);
    put_fits(t, space, "a0_", span);
    ptxc_put(t, ") {");
    if (pf)
        ptxc_put(t, " ptxc_prefetch(&PF_[%u], a0_, %u);", pf - 1, 32 * n);
    ptxc_put(t, " %s%s *q_ = (%s%s *)(uintptr_t)(%s);", store ? "" : "const ", ut[n],
             store ? "" : "const ", ut[n], space == SP_SHARED ? "SHB + a0_" : "a0_");
}

/* A whole warp reading or writing consecutive elements: one check of the 32
 * elements (put_lin_head), then a plain loop over them that gcc turns into
 * vector loads or stores. */
static void put_contiguous(ptxc_emitter *c, const ptx_insn *i, int store, unsigned n,
                           const char *a, uint32_t pf)
{
    ptxc_text *t = c->t;
    char v[48], d[24];
    put_lin_head(c, i, store, n, a, pf);
    if (store)
        ptxc_put(t, " for (int l = 0; l < 32; l++) q_[l] = (%s)(%s);", ut[n],
                 ptxc_step_src(c, i->s[0], v, sizeof v));
    else
        ptxc_put(t, " for (int l = 0; l < 32; l++) %s[l] = %s(q_[l]);",
                 ptxc_slot(c, i->d[0], d, sizeof d), i->mode ? sx[n] : zx[n]);
    ptxc_put(t, " done_ = 1; } }\n");
}

/* A load of generic memory of one element a lane, a step of its own: the
 * first instruction of a gather (ptxc_seg.c). */
int ptxc_gather_load(const ptx_insn *i)
{
    unsigned n;
    return ptxc_prefetched_load(i) && i->aux == 1 && i->guard == 0 && load_size(i, &n) != 0;
}

void ptxc_put_gather_head(ptxc_emitter *c, uint32_t pc)
{
    const ptx_insn *i = &c->p->k->code[pc];
    unsigned n;
    char a[96];
    load_size(i, &n);
    put_lin_head(c, i, 0, n, step_address(c, i, a, sizeof a),
                 c->pf_site != NULL ? c->pf_site[pc] : 0);
}

void ptxc_put_gather_elem(ptxc_text *t, const ptx_insn *i)
{
    unsigned n;
    load_size(i, &n);
    ptxc_put(t, "{ v%u = %s(q_[l]); }\n", i->d[0], i->mode ? sx[n] : zx[n]);
}

int ptxc_emit_mem(ptxc_emitter *c, uint32_t pc)
{
    const ptx_insn *i = &c->p->k->code[pc];
    ptxc_text *t = c->t;
    int op = i->op, space = mem_space(op);
    static const unsigned bytes[4] = {1, 2, 4, 8};
    int base = space == SP_PARAM ? op - PTX_OP_ld_p1 : (op - PTX_OP_ld_g1) % 8;
    int store = space != SP_PARAM && base >= 4;
    unsigned n = bytes[base % 4];
    if (i->aux < 1 || i->aux > 4 || (i->aux & (i->aux - 1)) != 0)
        return -1;
    unsigned size = n * i->aux;
    char a[96];
    step_address(c, i, a, sizeof a);
    ptxc_put(t, "{ /* %u */ ", pc);
    ptxc_put_em(t, i);
    ptxc_put(t, " if (em) { int done_ = 0;\n");
    uint32_t pf = c->pf_site != NULL ? c->pf_site[pc] : 0;
    if (i->aux == 1 && (space == SP_GENERIC || space == SP_SHARED))
        put_contiguous(c, i, store, n, a, pf);
    ptxc_put(t, "if (!done_) {\n"
                "uint64_t lo_ = ~UINT64_C(0), hi_ = 0, or_ = 0;\n"
                "PTXC_LANES(em, uint64_t a = %s; lo_ = a < lo_ ? a : lo_;"
                " hi_ = a > hi_ ? a : hi_; or_ |= a;);\n"
                "uint64_t span_ = ptxc_span(lo_, hi_, %u);\n"
                "if ((or_ & %u) == 0 && ", a, size, size - 1);
    put_fits(t, space, "lo_", "span_");
    ptxc_put(t, ") {\n");
    if (pf)
        ptxc_put(t, "ptxc_prefetch(&PF_[%u], lo_, span_);\n", pf - 1);
    ptxc_put(t, "PTXC_LANES(em, uint64_t a = %s; uint8_t *p_ = %s;", a, mem_where(space));
    mem_access(c, i, store, n);
    ptxc_put(t, ");\n} else {\nPTXC_LANES(em, uint64_t a = %s;", a);
    put_lane_check(t, space, pc, size);
    ptxc_put(t, " uint8_t *p_ = %s;", mem_where(space));
    mem_access(c, i, store, n);
    ptxc_put(t, ");\n} } } }\n");
    return 0;
}

/* atom.shared: a plain read-modify-write (a block's shared memory is its
 * worker's alone), with the arithmetic of ptx_exec.c's atom1. */
int ptxc_atom_inline(const ptx_insn *i)
{
    return i->op == PTX_OP_atom_s && i->aux <= 5 && i->mode <= 9;
}

/* The new value of an atom.shared from old and bv (C: the compare value). */
static void atom_expr(const ptx_insn *i, const char *cx, char *nv, size_t n)
{
    int tk = (int)i->aux, op = i->mode, w32 = tk == 0 || tk == 1 || tk == 4;
    const char *ut = w32 ? "uint32_t" : "uint64_t", *st = w32 ? "int32_t" : "int64_t";
    const char *fo = w32 ? "f32of" : "f64of", *fb = w32 ? "(uint32_t)bits32" : "bits64";
    int sg = tk == 1 || tk == 3, fl = tk >= 4;
    switch (op) {
    case 0:
        snprintf(nv, n, fl ? "%s(%s(old) + %s(bv))" : "old + bv", fb, fo, fo);
        return;
    case 1:
    case 2: {
        const char *cmp = op == 1 ? "<" : ">", *ffn = op == 1 ? (w32 ? "f32_min" : "f64_min")
                                                              : (w32 ? "f32_max" : "f64_max");
        if (fl)
            snprintf(nv, n, "%s(%s(%s(old), %s(bv)))", fb, ffn, fo, fo);
        else if (sg)
            snprintf(nv, n, "(%s)bv %s (%s)old ? bv : old", st, cmp, st);
        else
            snprintf(nv, n, "bv %s old ? bv : old", cmp);
        return;
    }
    case 3: snprintf(nv, n, "old >= bv ? 0 : old + 1"); return;
    case 4: snprintf(nv, n, "(old == 0 || old > bv) ? bv : old - 1"); return;
    case 5: snprintf(nv, n, "old & bv"); return;
    case 6: snprintf(nv, n, "old | bv"); return;
    case 7: snprintf(nv, n, "old ^ bv"); return;
    case 8: snprintf(nv, n, "bv"); return;
    default: snprintf(nv, n, "old == bv ? (%s)(%s) : old", ut, cx); return;
    }
}

/* One lane's atom.shared at a (put_lane_check first): its sources are the
 * lane's locals in a fused loop (LOCAL), else its slots in a step. */
static void put_atom_op(ptxc_emitter *c, const ptx_insn *i, uint32_t pc, int local)
{
    unsigned n = i->aux == 0 || i->aux == 1 || i->aux == 4 ? 4 : 8;
    const char *ty = n == 4 ? "uint32_t" : "uint64_t";
    char bx[48], cx[48], nv[200], keep[40] = "", d[24];
    const char *b = local ? ptxc_src(c->p, i->s[0], bx, sizeof bx)
                          : ptxc_step_src(c, i->s[0], bx, sizeof bx);
    atom_expr(i, local ? ptxc_src(c->p, i->s[1], cx, sizeof cx)
                       : ptxc_step_src(c, i->s[1], cx, sizeof cx), nv, sizeof nv);
    if (local)
        snprintf(keep, sizeof keep, " v%u = old;", i->d[0]);
    else if (ptxc_needed_after(c, i->d[0], pc + 1)) /* else the old value is never read */
        snprintf(keep, sizeof keep, " %s[l] = old;", ptxc_slot(c, i->d[0], d, sizeof d));
    put_lane_check(c->t, SP_SHARED, pc, n);
    ptxc_put(c->t, " uint8_t *p_ = SHP + a; %s old, bv = (%s)(%s), nv;"
                   " memcpy(&old, p_, %u); nv = (%s)(%s); memcpy(p_, &nv, %u);%s",
             ty, ty, b, n, ty, nv, n, keep);
}

/* atom.shared as a step: lane by lane in lane order, each lane's address
 * checked as the interpreter checks it (one branch a good lane; a pass over
 * the lanes to check them all at once cost more than it saved), so the first
 * bad lane faults with the lanes before it done. */
void ptxc_emit_atom_s(ptxc_emitter *c, uint32_t pc)
{
    const ptx_insn *i = &c->p->k->code[pc];
    ptxc_text *t = c->t;
    char a[96];
    ptxc_put(t, "{ /* %u */ ", pc);
    ptxc_put_em(t, i);
    ptxc_put(t, " if (em) {\nPTXC_LANES(em, uint64_t a = %s;", step_address(c, i, a, sizeof a));
    put_atom_op(c, i, pc, 0);
    ptxc_put(t, ");\n} }\n");
}

/* atom.shared inside a fused loop (ptxc_seg.c's gather), on the lane's locals. */
void ptxc_put_atom_lane(ptxc_emitter *c, uint32_t pc)
{
    const ptx_insn *i = &c->p->k->code[pc];
    char ab[48];
    ptxc_put(c->t, "{ uint64_t a = %s + UINT64_C(0x%llx);",
             ptxc_src(c->p, i->ab, ab, sizeof ab), (unsigned long long)i->imm);
    put_atom_op(c, i, pc, 1);
    ptxc_put(c->t, " }\n");
}

int ptxc_is_load(const ptx_insn *i)
{
    return (i->op >= PTX_OP_ld_g1 && i->op <= PTX_OP_ld_g8)
           || (i->op >= PTX_OP_ld_s1 && i->op <= PTX_OP_ld_s8)
           || (i->op >= PTX_OP_ld_l1 && i->op <= PTX_OP_ld_l8)
           || (i->op >= PTX_OP_ld_p1 && i->op <= PTX_OP_ld_p8);
}

/* Element size and the load's vector width, or 0 when the form is not known. */
static unsigned load_size(const ptx_insn *i, unsigned *n)
{
    static const unsigned bytes[4] = {1, 2, 4, 8};
    int space = mem_space(i->op);
    int base = space == SP_PARAM ? i->op - PTX_OP_ld_p1 : (i->op - PTX_OP_ld_g1) % 8;
    *n = bytes[base % 4];
    if (i->aux < 1 || i->aux > 4 || (i->aux & (i->aux - 1)) != 0)
        return 0;
    return *n * i->aux;
}

int ptxc_fusable_load(const ptx_insn *i)
{
    return ptxc_is_load(i) && (mem_space(i->op) != SP_GENERIC || i->ab == PTX_R_ZERO);
}

/* A load of generic memory that is a step of its own: where a strided warp
 * waits on DRAM, so it gets a stride prefetch (ptxc_prefetch). */
int ptxc_prefetched_load(const ptx_insn *i)
{
    return ptxc_is_load(i) && !ptxc_fusable_load(i) && mem_space(i->op) == SP_GENERIC;
}

/* The same address in every lane: no register, a constant, or a special
 * register that is the same in a block (not local memory: each lane has its
 * own frame). */
int ptxc_uniform_load(const ptx_insn *i, const ptxc_plan *p)
{
    int r = i->ab;
    int same = r == PTX_R_ZERO || (r >= PTX_NSREG && p->is_const[r])
               || (r >= PTX_R_NTID_X && r <= PTX_R_NCTAID_Z);
    return ptxc_is_load(i) && same && mem_space(i->op) != SP_LOCAL;
}

/* ok_ and the host pointer p_ of the lane's access at a (the run's copy of
 * generic ranges is G0_..G7_): a bad access reads zeros and marks the run. */
static void put_spec_access(ptxc_text *t, int space, unsigned size)
{
    ptxc_put(t, " uint32_t ok_ = ((a & %u) == 0) & ", size - 1);
    if (space == SP_GENERIC)
        ptxc_put(t, "PTXC_IN4(a, %u);", size);
    else
        ptxc_put(t, "(%s >= %u) & (a <= %s - %u);", space_len[space], size, space_len[space],
                 size);
    ptxc_put(t, " bad_ |= ok_ ^ 1u; const uint8_t *p_ = ok_ ? %s : ZP;", mem_where(space));
}

/* A uniform load, read once before the loop into H<pc>_<element>. */
int ptxc_hoist_load(ptxc_text *t, const ptx_insn *i, uint32_t pc, const ptxc_plan *p)
{
    unsigned n, size = load_size(i, &n);
    char ab[48];
    if (size == 0)
        return -1;
    ptxc_put(t, " uint64_t");
    for (unsigned e = 0; e < i->aux; e++)
        ptxc_put(t, "%s H%u_%u", e ? "," : "", pc, e);
    ptxc_put(t, "; { const int l = 0; uint64_t a = %s + UINT64_C(0x%llx);",
             ptxc_src(p, i->ab, ab, sizeof ab), (unsigned long long)i->imm);
    put_spec_access(t, mem_space(i->op), size);
    for (unsigned e = 0; e < i->aux; e++)
        ptxc_put(t, " { %s x; memcpy(&x, p_ + %u, %u); H%u_%u = %s(x); }", ut[n], e * n, n, pc,
                 e, i->mode ? sx[n] : zx[n]);
    ptxc_put(t, " (void)l; }\n");
    return 0;
}

/* A load in a fused lane loop: checked without leaving the loop (ok_); a
 * lane whose access would fault reads zeros (ptxc_block.zero) and marks the
 * run bad (bad_). A uniform load takes the value read before the loop. */
int ptxc_lane_load(ptxc_text *t, const ptx_insn *i, uint32_t pc, const ptxc_plan *p)
{
    unsigned n, size = load_size(i, &n);
    char ab[48];
    if (size == 0)
        return -1;
    if (ptxc_uniform_load(i, p)) {
        ptxc_put(t, "{");
        for (unsigned e = 0; e < i->aux; e++)
            ptxc_put(t, " v%u = H%u_%u;", i->d[e], pc, e);
        ptxc_put(t, " }\n");
        return 0;
    }
    ptxc_put(t, "{ uint64_t a = %s + UINT64_C(0x%llx);", ptxc_src(p, i->ab, ab, sizeof ab),
             (unsigned long long)i->imm);
    put_spec_access(t, mem_space(i->op), size);
    for (unsigned e = 0; e < i->aux; e++)
        ptxc_put(t, " { %s x; memcpy(&x, p_ + %u, %u); v%u = %s(x); }", ut[n], e * n, n,
                 i->d[e], i->mode ? sx[n] : zx[n]);
    ptxc_put(t, " }\n");
    return 0;
}

/* Whether every register I writes holds a value below 2^32: a load of
 * elements of at most 4 bytes, zero-extended; atom.shared's 32-bit old value.
 * Stores write none. */
int ptxc_mem_narrow(const ptx_insn *i)
{
    unsigned n;
    if (i->op == PTX_OP_atom_s)
        return i->aux == 0 || i->aux == 1 || i->aux == 4;
    if (!ptxc_is_load(i))
        return 1;
    return load_size(i, &n) != 0 && n <= 4 && i->mode == 0;
}
