/*
 * ptx_translate.c — one PTX instruction to compact code (ptx_int.h): its
 * operands resolved to register indices (immediates become constant
 * registers of the exact type), its modifiers and types to one handler of the
 * opcode table (ptx_ops.h). A modifier this file does not consume, or an
 * opcode it does not know, refuses the module by name: nothing runs with a
 * meaning that was not implemented.
 * No global state besides read-only tables; the parse state is the caller's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_parse.h"

static const struct {
    const char *name;
    int reg;
} sregs[] = {
    {"%tid.x", PTX_R_TID_X}, {"%tid.y", PTX_R_TID_Y}, {"%tid.z", PTX_R_TID_Z},
    {"%ntid.x", PTX_R_NTID_X}, {"%ntid.y", PTX_R_NTID_Y}, {"%ntid.z", PTX_R_NTID_Z},
    {"%ctaid.x", PTX_R_CTAID_X}, {"%ctaid.y", PTX_R_CTAID_Y}, {"%ctaid.z", PTX_R_CTAID_Z},
    {"%nctaid.x", PTX_R_NCTAID_X}, {"%nctaid.y", PTX_R_NCTAID_Y}, {"%nctaid.z", PTX_R_NCTAID_Z},
    {"%laneid", PTX_R_LANEID}, {"%warpid", PTX_R_WARPID}, {"%nwarpid", PTX_R_NWARPID},
    {"%lanemask_eq", PTX_R_LM_EQ}, {"%lanemask_le", PTX_R_LM_LE},
    {"%lanemask_lt", PTX_R_LM_LT}, {"%lanemask_ge", PTX_R_LM_GE},
    {"%lanemask_gt", PTX_R_LM_GT}, {"%smid", PTX_R_SMID}, {"%nsmid", PTX_R_NSMID},
    {"%gridid", PTX_R_GRIDID}, {"%dynamic_smem_size", PTX_R_DYN_SMEM},
    {"%total_smem_size", PTX_R_TOTAL_SMEM}, {"WARP_SZ", PTX_R_WARPSZ},
    {"%clock", -1}, {"%clock64", -2}, {"%globaltimer", -3}, {"%globaltimer_lo", -3},
    {"%envreg1", PTX_R_ENVREG1}, {"%envreg2", PTX_R_ENVREG2},
};

/* The reserved shared region's registers: offsets in the region (relocated
 * when a kernel is linked, PTX_RL_RSVSH) or its size. */
static const struct {
    const char *name;
    uint32_t value;
    int is_offset;
} reserved_sregs[] = {
    {"%reserved_smem_offset_begin", 0, 1}, {"%reserved_smem_offset_0", 0, 1},
    {"%reserved_smem_offset_1", PTX_RESERVED_SMEM_1, 1},
    {"%reserved_smem_offset_end", PTX_RESERVED_SMEM, 1},
    {"%reserved_smem_offset_cap", PTX_RESERVED_SMEM, 0},
};

static int reserved_sreg(ps *s, opnd *o, const tok *t)
{
    for (size_t k = 0; k < sizeof reserved_sregs / sizeof reserved_sregs[0]; k++)
        if (px_tok_is(t, reserved_sregs[k].name)) {
            s->m->uses_reserved_smem = 1;
            o->kind = reserved_sregs[k].is_offset ? O_SYM : O_INT;
            o->symkind = S_SVAR;
            o->u = reserved_sregs[k].value;
            o->reloc = reserved_sregs[k].is_offset ? PTX_RL_RSVSH : PTX_RL_NONE;
            return 1;
        }
    if (px_tok_is(t, "%aggr_smem_size")) {
        s->m->uses_reserved_smem = 1;
        o->kind = O_REG;
        o->idx = PTX_R_AGGR_SMEM;
        o->rtype = T_U32;
        return 1;
    }
    return 0;
}

/* %envreg0..31 are the driver's: 1 and 2 hold a cooperative grid's workspace
 * (what cooperative groups' grid barrier reads), the others read 0 here. */
static int other_envreg(const tok *t)
{
    if (t->n < 8 || t->n > 9 || memcmp(t->s, "%envreg", 7) != 0)
        return 0;
    unsigned v = 0;
    for (uint32_t k = 7; k < t->n; k++) {
        if (t->s[k] < '0' || t->s[k] > '9')
            return 0;
        v = v * 10 + (unsigned)(t->s[k] - '0');
    }
    return v < 32;
}

/* A name used as a value: register, predicate, special register, or the
 * address of a variable. */
static void name_operand(ps *s, opnd *o, const tok *t)
{
    for (size_t k = 0; k < sizeof sregs / sizeof sregs[0]; k++)
        if (px_tok_is(t, sregs[k].name)) {
            if (sregs[k].reg < 0) {
                o->kind = O_SYM;
                o->symkind = -1;
                o->u = (uint64_t)(-sregs[k].reg);
                return;
            }
            o->kind = O_REG;
            o->idx = (uint32_t)sregs[k].reg;
            o->rtype = T_U32;
            return;
        }
    if (reserved_sreg(s, o, t))
        return;
    if (other_envreg(t)) {
        o->kind = O_REG;
        o->idx = PTX_R_ZERO;
        o->rtype = T_U32;
        return;
    }
    psym *y = px_find(s, t->s, t->n);
    o->name = t->s;
    o->nname = t->n;
    if (y == NULL) {
        o->kind = O_LABEL; /* a label or an unknown name: the builder decides */
        return;
    }
    switch (y->kind) {
    case S_REG:
        o->kind = O_REG;
        o->idx = y->idx;
        o->rtype = y->type;
        return;
    case S_PRED:
        o->kind = O_PRED;
        o->idx = y->idx;
        return;
    case S_FUNC:
    case S_PROTO:
        o->kind = O_LABEL;
        return;
    default:
        o->kind = O_SYM;
        o->symkind = y->kind;
        o->u = y->val;
        o->rarg = (int)y->idx;
        o->reloc = y->kind == S_GVAR    ? PTX_RL_GLOBAL
                   : y->kind == S_LVAR  ? PTX_RL_LOCAL
                   : y->kind == S_DSVAR ? PTX_RL_DYNSH
                   : y->kind == S_OSVAR ? PTX_RL_OWNSH
                   : y->kind == S_FPARAM ? PTX_RL_ARG
                   : y->kind == S_FRET  ? PTX_RL_RET
                                        : PTX_RL_NONE;
    }
}

void px_parse_operand(ps *s, opnd *o)
{
    memset(o, 0, sizeof *o);
    if (px_is_p(s, '!')) {
        px_next(s);
        o->neg = 1;
    }
    int minus = 0;
    if (px_is_p(s, '-')) {
        px_next(s);
        minus = 1;
    }
    tok t = s->t;
    switch (t.kind) {
    case K_INT:
        o->kind = O_INT;
        o->u = minus ? (uint64_t)0 - t.u : t.u;
        px_next(s);
        return;
    case K_FLT:
        o->kind = O_FLT;
        o->f = minus ? -t.f : t.f;
        px_next(s);
        return;
    case K_F32:
        o->kind = O_F32;
        o->u = minus ? t.u ^ 0x80000000u : t.u;
        px_next(s);
        return;
    case K_F64:
        o->kind = O_F64;
        o->u = minus ? t.u ^ 0x8000000000000000ull : t.u;
        px_next(s);
        return;
    case K_ID:
        px_next(s);
        if (t.n == 1 && t.s[0] == '_') {
            o->kind = O_SINK;
            return;
        }
        name_operand(s, o, &t);
        if (px_is_p(s, '|')) {
            px_next(s);
            opnd b;
            tok t2 = s->t;
            if (t2.kind != K_ID) {
                px_fail(s, "expected a register after '|'");
                return;
            }
            px_next(s);
            memset(&b, 0, sizeof b);
            if (t2.n == 1 && t2.s[0] == '_')
                b.kind = O_SINK;
            else
                name_operand(s, &b, &t2);
            o->has2 = 1;
            o->kind2 = b.kind;
            o->idx2 = b.idx;
        }
        return;
    case K_PUNCT:
        break;
    default:
        px_fail(s, "unexpected operand '%.*s'", (int)(t.n > 40 ? 40 : t.n), t.s);
        return;
    }
    if (t.s[0] == '{') {
        px_next(s);
        o->kind = O_VEC;
        while (!s->failed && !px_is_p(s, '}')) {
            if (o->nvec == 4) {
                px_fail(s, "vector operand longer than 4");
                return;
            }
            if (s->t.kind == K_INT) { /* an immediate member: {0, %rs1} */
                o->vsink[o->nvec] = 2;
                o->vval[o->nvec++] = s->t.u;
                px_next(s);
                if (px_is_p(s, ','))
                    px_next(s);
                continue;
            }
            if (s->t.kind != K_ID) {
                px_fail(s, "expected a register in a vector operand");
                return;
            }
            tok r = s->t;
            px_next(s);
            if (r.n == 1 && r.s[0] == '_') {
                o->vsink[o->nvec++] = 1;
            } else {
                opnd e;
                memset(&e, 0, sizeof e);
                name_operand(s, &e, &r);
                if (e.kind != O_REG) {
                    px_fail(s, "vector operands must be registers");
                    return;
                }
                o->vec[o->nvec++] = e.idx;
            }
            if (px_is_p(s, ','))
                px_next(s);
        }
        px_expect(s, '}');
        return;
    }
    if (t.s[0] == '[') {
        px_next(s);
        o->kind = O_ADDR;
        if (s->t.kind == K_ID) {
            opnd b;
            tok bt = s->t;
            px_next(s);
            memset(&b, 0, sizeof b);
            name_operand(s, &b, &bt);
            if (b.kind == O_REG) {
                o->has_base = 1;
                o->base = b.idx;
            } else if (b.kind == O_SYM && b.symkind >= 0) {
                o->symkind = b.symkind;
                o->u = b.u;
                o->reloc = b.reloc;
                o->rarg = b.rarg;
            } else {
                px_fail(s, "bad address '%.*s'", (int)(bt.n > 40 ? 40 : bt.n), bt.s);
                return;
            }
            if (px_is_p(s, '+') || px_is_p(s, '-')) {
                int sub = px_is_p(s, '-');
                px_next(s);
                int neg = 0;
                if (px_is_p(s, '-')) {
                    neg = 1;
                    px_next(s);
                }
                uint64_t v = px_expect_int(s);
                o->off = (int64_t)((sub ^ neg) ? (uint64_t)0 - v : v);
                /* a module variable's reference keeps its displacement in 32 bits */
                if (o->reloc == PTX_RL_GLOBAL && v > PTX_GREF_MAX_DISP) {
                    px_fail(s, "address offset too large");
                    return;
                }
            }
        } else if (s->t.kind == K_INT) {
            o->off = (int64_t)s->t.u;
            px_next(s);
        } else {
            px_fail(s, "bad address");
            return;
        }
        px_expect(s, ']');
        return;
    }
    px_fail(s, "unexpected '%c'", t.s[0]);
}

/* The register that holds operand O's value as type T. */
static uint32_t src(ps *s, const opnd *o, int t)
{
    switch (o->kind) {
    case O_REG:
        return o->idx;
    case O_INT:
        if (t == T_F32) {
            float v = (float)(int64_t)o->u;
            uint32_t b;
            memcpy(&b, &v, 4);
            return px_cst(s, b, 0, 0);
        }
        if (t == T_F64) {
            double v = (double)(int64_t)o->u;
            uint64_t b;
            memcpy(&b, &v, 8);
            return px_cst(s, b, 0, 0);
        }
        return px_cst(s, o->u, 0, 0);
    case O_FLT:
    case O_F32:
    case O_F64: {
        double v;
        if (o->kind == O_FLT)
            v = o->f;
        else if (o->kind == O_F32) {
            uint32_t b = (uint32_t)o->u;
            float fv;
            memcpy(&fv, &b, 4);
            v = fv;
        } else
            memcpy(&v, &o->u, 8);
        if (t == T_F64) {
            uint64_t b;
            if (o->kind == O_F64)
                return px_cst(s, o->u, 0, 0);
            memcpy(&b, &v, 8);
            return px_cst(s, b, 0, 0);
        }
        if (t == T_F32 || t == T_B32 || t == T_U32 || t == T_S32) {
            if (o->kind == O_F32)
                return px_cst(s, o->u, 0, 0);
            float fv = (float)v;
            uint32_t b;
            memcpy(&b, &fv, 4);
            return px_cst(s, b, 0, 0);
        }
        if (t == T_B64 || t == T_U64 || t == T_S64) {
            uint64_t b;
            memcpy(&b, &v, 8);
            return px_cst(s, o->kind == O_F64 ? o->u : b, 0, 0);
        }
        px_fail(s, "floating-point literal for a %s operand", type_names[t]);
        return PTX_R_ZERO;
    }
    case O_SYM:
        if (o->symkind < 0)
            break;
        if (o->symkind == S_KPARAM || o->symkind == S_FPARAM || o->symkind == S_FRET) {
            px_fail(s, "the address of a parameter is not supported (%.*s)", (int)o->nname, o->name);
            return PTX_R_ZERO;
        }
        return px_cst(s, o->u, o->reloc, o->rarg);
    default:
        break;
    }
    px_fail(s, "expected a value operand");
    return PTX_R_ZERO;
}

/* A writable register of the file KIND (indices below FIRST are the special,
 * read-only ones) or the sink "_"; else a failure and BAD. */
static uint32_t dest_in(ps *s, const opnd *o, int kind, uint32_t first, uint32_t sink,
                        const char *expected, uint32_t bad)
{
    if (o->kind == kind && o->idx >= first)
        return o->idx;
    if (o->kind == O_SINK)
        return sink;
    px_fail(s, "expected a destination %s", expected);
    return bad;
}

static uint32_t dst(ps *s, const opnd *o)
{
    return dest_in(s, o, O_REG, PTX_NSREG, s->sink, "register", s->sink);
}

static uint32_t psrc(ps *s, const opnd *o, int *neg)
{
    if (neg != NULL)
        *neg = o->neg;
    else if (o->neg)
        px_fail(s, "a negated predicate is not allowed here");
    if (o->kind == O_PRED)
        return o->idx;
    if (o->kind == O_INT)
        return o->u ? PTX_P_TRUE : PTX_P_FALSE;
    px_fail(s, "expected a predicate");
    return PTX_P_FALSE;
}

static uint32_t pdst(ps *s, const opnd *o)
{
    return dest_in(s, o, O_PRED, PTX_NSPRED, s->psink, "predicate", PTX_P_FALSE);
}

/* ------------------------------------------------------------ modifiers */

typedef px_mods mods;

static int take(mods *m, const char *w)
{
    size_t l = strlen(w);
    for (int k = 1; k < m->cnt; k++)
        if (!m->used[k] && m->n[k] == l && memcmp(m->p[k], w, l) == 0) {
            m->used[k] = 1;
            return 1;
        }
    return 0;
}

/* The first unused type modifier (T_NONE if none). */
static int take_type(mods *m)
{
    for (int k = 1; k < m->cnt; k++) {
        if (m->used[k])
            continue;
        for (int t = 1; t < NTYPES; t++)
            if (m->n[k] == strlen(type_names[t]) && memcmp(m->p[k], type_names[t], m->n[k]) == 0) {
                m->used[k] = 1;
                return t;
            }
    }
    return T_NONE;
}

static void take_ignorable(mods *m)
{
    static const char *const ign[] = {
        "nc", "ca", "cg", "cs", "lu", "cv", "wb", "wt", "volatile", "relaxed", "acquire",
        "release", "acq_rel", "sc", "weak", "gpu", "sys", "cta", "cluster", "uni", "sync",
        "aligned", "ftz", "noftz", "L1::evict_normal", "L1::evict_last", "L1::evict_first",
        "L1::no_allocate", "L1::evict_unchanged", "L2::64B", "L2::128B", "L2::256B",
        "L2::evict_normal", "L2::evict_first", "L2::evict_last", "L2::cache_hint", "mmio"};
    for (size_t k = 0; k < sizeof ign / sizeof ign[0]; k++)
        while (take(m, ign[k]))
            ;
}

static int unsupported(ps *s, const mods *m)
{
    px_fail(s, "unsupported PTX instruction '%.*s'", (int)(m->nfull > 60 ? 60 : m->nfull), m->full);
    return -1;
}

static int finish(ps *s, const mods *m)
{
    for (int k = 1; k < m->cnt; k++)
        if (!m->used[k])
            return unsupported(s, m);
    return 0;
}

/* ------------------------------------------------------------- builders */

typedef struct {
    ps *s;
    mods *m;
    opnd *o;
    int n;
    uint32_t guard;
} ictx;

#define NEEDN(k)                                                                              \
    do {                                                                                      \
        if (c->n != (k)) {                                                                    \
            px_fail(c->s, "'%.*s' takes %d operands", (int)c->m->nfull, c->m->full, (k));         \
            return -1;                                                                        \
        }                                                                                     \
    } while (0)

static int rounding(mods *m)
{
    if (take(m, "rn")) return 0;
    if (take(m, "rz")) return 1;
    if (take(m, "rm")) return 2;
    if (take(m, "rp")) return 3;
    return 0;
}

/* Integer and float arithmetic with 2 or 3 sources. */
static int b_arith(ictx *c, const char *base)
{
    ps *s = c->s;
    mods *m = c->m;
    int hi = take(m, "hi"), lo = take(m, "lo"), wide = take(m, "wide"); /* .lo: the default */
    int sat = take(m, "sat");
    int approx = take(m, "approx"), full = take(m, "full");
    int rnd = rounding(m);
    take(m, "ftz");
    int cc = take(m, "cc");
    int minmax = !strcmp(base, "min") || !strcmp(base, "max");
    int nanp = minmax && take(m, "NaN");
    int relu = take(m, "relu");
    int t = take_type(m);
    int half = t == T_F16 || t == T_BF16 || t == T_F16X2 || t == T_BF16X2;
    if (finish(s, m) != 0)
        return -1;
    /* fma.rn.relu of halves (numba's bf16 helpers): a negative result is 0, NaN canonical */
    if (relu && half && strcmp(base, "fma") != 0)
        return unsupported(s, m);
    if (t == T_S16X2 || t == T_U16X2 || (relu && !half)) { /* packed halves (CUB's 16-bit reductions) */
        if (!minmax || (t != T_S16X2 && t != T_U16X2) || (relu && t != T_S16X2) || nanp)
            return unsupported(s, m);
        NEEDN(3);
        ptx_insn *i = px_emit(s, PTX_OP_minmax16x2, c->guard);
        if (i == NULL)
            return -1;
        i->mode = (uint8_t)((base[1] == 'a') | (t == T_S16X2) << 1 | relu << 2);
        SD(i, 0, dst(s, &c->o[0]));
        SS(i, 0, src(s, &c->o[1], T_U32));
        SS(i, 1, src(s, &c->o[2], T_U32));
        return 0;
    }
    int withc = !strcmp(base, "addc") || !strcmp(base, "subc") || !strcmp(base, "madc");
    int three = !strcmp(base, "mad") || !strcmp(base, "fma") || !strcmp(base, "mad24")
                || !strcmp(base, "sad") || !strcmp(base, "madc");
    int unary = !strcmp(base, "neg") || !strcmp(base, "abs");
    NEEDN(unary ? 2 : three ? 4 : 3);
    int op = -1, srct = t;
    int ix = ix_int6(t), fx = t == T_F32 ? 0 : t == T_F64 ? 1 : -1;
    if (withc || cc) { /* extended-precision arithmetic through the carry flag */
        int kind = base[0] == 'a' ? 0 : base[0] == 's' ? 1 : hi ? 3 : 2;
        if (ix < 2 || sat || wide || (base[0] == 'm' && !hi && !lo))
            return unsupported(s, m);
        ptx_insn *i = px_emit(s, PTX_OP_carry, c->guard);
        if (i == NULL)
            return -1;
        i->mode = (uint8_t)(kind | (withc ? 0x10 : 0) | (cc ? 0x20 : 0) | (tsize(t) == 8 ? 0x40 : 0));
        SD(i, 0, dst(s, &c->o[0]));
        for (int k = 1; k < c->n; k++)
            SS(i, k - 1, src(s, &c->o[k], t));
        return 0;
    }
    if (half) {
        static const char *const hn[] = {"add", "sub", "mul", "fma", "neg", "abs", "min", "max"};
        for (int k = 0; k < 8; k++)
            if (!strcmp(base, hn[k]))
                op = PTX_OP_hadd + k;
        if (!strcmp(base, "mad"))
            op = PTX_OP_hfma;
        if (op < 0 || sat)
            return unsupported(s, m);
    } else if (fx >= 0) {
        if (cc || hi || wide)
            return unsupported(s, m);
        if (!strcmp(base, "add")) op = PTX_OP_fadd_f32 + fx;
        else if (!strcmp(base, "sub")) op = PTX_OP_fsub_f32 + fx;
        else if (!strcmp(base, "mul")) op = PTX_OP_fmul_f32 + fx;
        else if (!strcmp(base, "fma") || !strcmp(base, "mad")) op = PTX_OP_ffma_f32 + fx;
        else if (!strcmp(base, "div")) op = PTX_OP_fdiv_f32 + fx;
        else if (!strcmp(base, "min")) op = PTX_OP_fmin_f32 + fx;
        else if (!strcmp(base, "max")) op = PTX_OP_fmax_f32 + fx;
        else if (!strcmp(base, "neg")) op = PTX_OP_fneg_f32 + fx;
        else if (!strcmp(base, "abs")) op = PTX_OP_fabs_f32 + fx;
        else
            return unsupported(s, m);
        /* .approx and .full allow less precision than IEEE division: exact is fine */
    } else if (ix >= 0) {
        if (approx || full || rnd)
            return unsupported(s, m);
        if (!strcmp(base, "add") || !strcmp(base, "sub")) {
            if (sat) {
                if (t != T_S32)
                    return unsupported(s, m);
                op = base[0] == 'a' ? PTX_OP_add_sat_s32 : PTX_OP_sub_sat_s32;
                sat = 0;
            } else if (cc) {
                return unsupported(s, m);
            } else
                op = (base[0] == 'a' ? PTX_OP_add_s16 : PTX_OP_sub_s16) + ix;
        } else if (!strcmp(base, "mul") || !strcmp(base, "mad")) {
            int mad = base[1] == 'a';
            if (wide) {
                if (ix > 3)
                    return unsupported(s, m);
                op = (mad ? PTX_OP_madwide_s16 : PTX_OP_mulwide_s16) + ix;
            } else if (hi)
                op = (mad ? PTX_OP_madhi_s16 : PTX_OP_mulhi_s16) + ix;
            else
                op = (mad ? PTX_OP_mad_s16 : PTX_OP_mullo_s16) + ix;
            if (sat || cc)
                return unsupported(s, m);
        } else if (!strcmp(base, "mul24") || !strcmp(base, "mad24")) {
            if ((t != T_S32 && t != T_U32) || hi)
                return unsupported(s, m);
            op = (base[1] == 'u' ? PTX_OP_mul24_s32 : PTX_OP_mad24_s32) + (t == T_U32);
        } else if (!strcmp(base, "div")) op = PTX_OP_div_s16 + ix;
        else if (!strcmp(base, "rem")) op = PTX_OP_rem_s16 + ix;
        else if (!strcmp(base, "min")) op = PTX_OP_min_s16 + ix;
        else if (!strcmp(base, "max")) op = PTX_OP_max_s16 + ix;
        else if (!strcmp(base, "neg")) op = PTX_OP_neg_s16 + ix;
        else if (!strcmp(base, "abs")) op = PTX_OP_abs_s16 + ix;
        else if (!strcmp(base, "sad")) {
            if (t != T_S32 && t != T_U32)
                return unsupported(s, m);
            op = PTX_OP_sad_s32 + (t == T_U32);
        } else
            return unsupported(s, m);
        if (sat)
            return unsupported(s, m);
    } else
        return unsupported(s, m);
    ptx_insn *i = px_emit(s, op, c->guard);
    if (i == NULL)
        return -1;
    if (nanp && fx < 0 && !half)
        return unsupported(s, m);
    i->mode = (uint8_t)rnd;
    i->mode2 = (uint16_t)(sat | nanp << 1 | relu << 2);
    if (half)
        i->aux = (uint32_t)((t == T_BF16 || t == T_BF16X2) | (t == T_F16X2 || t == T_BF16X2) << 1);
    SD(i, 0, dst(s, &c->o[0]));
    for (int k = 1; k < c->n; k++) {
        int st = srct;
        if (wide && k == 3) /* mad.wide's addend is the wide type */
            st = tsize(t) == 2 ? T_U32 : T_U64;
        SS(i, k - 1, src(s, &c->o[k], st));
    }
    return 0;
}

static int b_bits(ictx *c, const char *base)
{
    ps *s = c->s;
    mods *m = c->m;
    int t = take_type(m);
    int ix = ix_int6(t);
    int op = -1;
    if (t == T_PRED) {
        int pop = !strcmp(base, "and") ? PTX_OP_pand : !strcmp(base, "or") ? PTX_OP_por
                  : !strcmp(base, "xor") ? PTX_OP_pxor : !strcmp(base, "not") ? PTX_OP_pnot : -1;
        if (pop < 0 || finish(s, m) != 0)
            return unsupported(s, m);
        NEEDN(pop == PTX_OP_pnot ? 2 : 3);
        ptx_insn *i = px_emit(s, pop, c->guard);
        if (i == NULL)
            return -1;
        SDP(i, 0, pdst(s, &c->o[0]));
        for (int k = 1; k < c->n; k++) {
            int neg;
            SSP(i, k - 1, psrc(s, &c->o[k], &neg));
            i->mode |= (uint8_t)(neg << (k - 1));
        }
        return 0;
    }
    if (!strcmp(base, "shf")) {
        int l = take(m, "l"), r = take(m, "r"), wrap = take(m, "wrap"), clamp = take(m, "clamp");
        if (t != T_B32 || l == r || wrap == clamp || finish(s, m) != 0)
            return unsupported(s, m);
        NEEDN(4);
        op = l ? (wrap ? PTX_OP_shf_l_wrap : PTX_OP_shf_l_clamp)
               : (wrap ? PTX_OP_shf_r_wrap : PTX_OP_shf_r_clamp);
    } else if (!strcmp(base, "bmsk")) {
        int wrap = take(m, "wrap"), clamp = take(m, "clamp");
        if (t != T_B32 || wrap == clamp || finish(s, m) != 0)
            return unsupported(s, m);
        NEEDN(3);
        op = wrap ? PTX_OP_bmsk_wrap : PTX_OP_bmsk_clamp;
    } else if (!strcmp(base, "prmt")) {
        static const char *const pm[] = {"f4e", "b4e", "rc8", "ecl", "ecr", "rc16"};
        int mode = 0;
        for (int k = 0; k < 6; k++)
            if (take(m, pm[k]))
                mode = k + 1;
        if (t != T_B32 || finish(s, m) != 0)
            return unsupported(s, m);
        NEEDN(4);
        op = PTX_OP_prmt;
        ptx_insn *i = px_emit(s, op, c->guard);
        if (i == NULL)
            return -1;
        i->mode = (uint8_t)mode;
        SD(i, 0, dst(s, &c->o[0]));
        for (int k = 1; k < 4; k++)
            SS(i, k - 1, src(s, &c->o[k], T_B32));
        return 0;
    } else if (!strcmp(base, "lop3")) {
        if ((t != T_B32 && t != T_B64) || finish(s, m) != 0)
            return unsupported(s, m);
        NEEDN(5);
        if (c->o[4].kind != O_INT) {
            px_fail(s, "lop3 needs an immediate lookup table");
            return -1;
        }
        ptx_insn *i = px_emit(s, t == T_B32 ? PTX_OP_lop3_32 : PTX_OP_lop3_64, c->guard);
        if (i == NULL)
            return -1;
        i->mode = (uint8_t)c->o[4].u;
        SD(i, 0, dst(s, &c->o[0]));
        for (int k = 1; k < 4; k++)
            SS(i, k - 1, src(s, &c->o[k], t));
        return 0;
    } else {
        int shiftamt = !strcmp(base, "bfind") && take(m, "shiftamt");
        if (finish(s, m) != 0)
            return -1;
        if (shiftamt) {
            int t2 = t == T_S32 ? 0 : (t == T_U32 || t == T_B32) ? 1 : t == T_S64 ? 2 : 3;
            ptx_insn *i = px_emit(s, PTX_OP_bfind_s32 + t2, c->guard);
            if (i == NULL || c->n != 2)
                return i == NULL ? -1 : unsupported(s, m);
            i->mode = 1;
            SD(i, 0, dst(s, &c->o[0]));
            SS(i, 0, src(s, &c->o[1], t));
            return 0;
        }
        int i32_64 = t == T_S32 ? 0 : (t == T_U32 || t == T_B32) ? 1 : t == T_S64 ? 2
                     : (t == T_U64 || t == T_B64) ? 3 : -1;
        if (ix < 0)
            return unsupported(s, m);
        if (!strcmp(base, "and")) op = PTX_OP_and_s16 + ix;
        else if (!strcmp(base, "or")) op = PTX_OP_or_s16 + ix;
        else if (!strcmp(base, "xor")) op = PTX_OP_xor_s16 + ix;
        else if (!strcmp(base, "not")) op = PTX_OP_not_s16 + ix;
        else if (!strcmp(base, "cnot")) op = PTX_OP_cnot_s16 + ix;
        else if (!strcmp(base, "shl")) op = PTX_OP_shl_s16 + ix;
        else if (!strcmp(base, "shr")) op = PTX_OP_shr_s16 + ix;
        else if (!strcmp(base, "popc")) op = PTX_OP_popc_s16 + ix;
        else if (!strcmp(base, "clz")) op = PTX_OP_clz_s16 + ix;
        else if (!strcmp(base, "brev")) op = PTX_OP_brev_s16 + ix;
        else if (i32_64 >= 0 && !strcmp(base, "bfe")) op = PTX_OP_bfe_s32 + i32_64;
        else if (i32_64 >= 0 && !strcmp(base, "bfi")) op = PTX_OP_bfi_s32 + i32_64;
        else if (i32_64 >= 0 && !strcmp(base, "bfind")) op = PTX_OP_bfind_s32 + i32_64;
        else
            return unsupported(s, m);
    }
    ptx_insn *i = px_emit(s, op, c->guard);
    if (i == NULL)
        return -1;
    SD(i, 0, dst(s, &c->o[0]));
    int nsrc = c->n - 1;
    int want = (!strcmp(base, "not") || !strcmp(base, "cnot") || !strcmp(base, "popc")
                || !strcmp(base, "clz") || !strcmp(base, "brev") || !strcmp(base, "bfind"))
                   ? 1 : !strcmp(base, "bfe") ? 3 : !strcmp(base, "bfi") ? 4
                   : !strcmp(base, "shf") ? 3 : 2;
    if (nsrc != want) {
        px_fail(s, "'%.*s' takes %d operands", (int)m->nfull, m->full, want + 1);
        return -1;
    }
    for (int k = 0; k < nsrc; k++) {
        int st = t;
        if ((!strcmp(base, "shl") || !strcmp(base, "shr")) && k == 1)
            st = T_U32;
        if (!strcmp(base, "bfe") && k > 0)
            st = T_U32;
        if (!strcmp(base, "bfi") && k > 1)
            st = T_U32;
        if (!strcmp(base, "shf"))
            st = T_U32;
        SS(i, k, src(s, &c->o[k + 1], st));
    }
    return 0;
}

static int b_fmath(ictx *c, const char *base)
{
    ps *s = c->s;
    mods *m = c->m;
    int approx = take(m, "approx"), full = take(m, "full");
    int rnd = rounding(m);
    take(m, "ftz");
    int t = take_type(m);
    if (finish(s, m) != 0)
        return -1;
    int fx = t == T_F32 ? 0 : t == T_F64 ? 1 : -1;
    int op = -1;
    (void)approx, (void)full;
    if (fx < 0)
        return unsupported(s, m);
    if (!strcmp(base, "sqrt")) op = PTX_OP_fsqrt_f32 + fx;
    else if (!strcmp(base, "rcp")) op = PTX_OP_frcp_f32 + fx;
    else if (!strcmp(base, "rsqrt")) op = PTX_OP_frsqrt_f32 + fx;
    else if (!strcmp(base, "ex2")) op = fx ? PTX_OP_fex2_f64 : PTX_OP_fex2_f32;
    else if (!strcmp(base, "lg2")) op = fx ? PTX_OP_flg2_f64 : PTX_OP_flg2_f32;
    else if (fx == 0 && !strcmp(base, "sin")) op = PTX_OP_fsin_f32;
    else if (fx == 0 && !strcmp(base, "cos")) op = PTX_OP_fcos_f32;
    else if (fx == 0 && !strcmp(base, "tanh")) op = PTX_OP_ftanh_f32;
    else
        return unsupported(s, m);
    NEEDN(2);
    ptx_insn *i = px_emit(s, op, c->guard);
    if (i == NULL)
        return -1;
    i->mode = (uint8_t)rnd;
    SD(i, 0, dst(s, &c->o[0]));
    SS(i, 0, src(s, &c->o[1], t));
    return 0;
}

static int b_copysign(ictx *c)
{
    int t = take_type(c->m);
    if (finish(c->s, c->m) != 0 || !tfloat(t))
        return unsupported(c->s, c->m);
    NEEDN(3);
    ptx_insn *i = px_emit(c->s, PTX_OP_fcopysign_f32 + (t == T_F64), c->guard);
    if (i == NULL)
        return -1;
    SD(i, 0, dst(c->s, &c->o[0]));
    SS(i, 0, src(c->s, &c->o[1], t));
    SS(i, 1, src(c->s, &c->o[2], t));
    return 0;
}

static int b_testp(ictx *c)
{
    static const char *const tn[] = {"finite", "infinite", "number", "notanumber", "normal",
                                     "subnormal"};
    int mode = -1;
    for (int k = 0; k < 6; k++)
        if (take(c->m, tn[k]))
            mode = k;
    int t = take_type(c->m);
    if (mode < 0 || !tfloat(t) || finish(c->s, c->m) != 0)
        return unsupported(c->s, c->m);
    NEEDN(2);
    ptx_insn *i = px_emit(c->s, PTX_OP_ftestp_f32 + (t == T_F64), c->guard);
    if (i == NULL)
        return -1;
    i->mode = (uint8_t)mode;
    SDP(i, 0, pdst(c->s, &c->o[0]));
    SS(i, 0, src(c->s, &c->o[1], t));
    return 0;
}

/* setp, and set (a setp into a scratch predicate, then a selp of all ones
 * or 1.0f). */
static int b_setp(ictx *c, int is_set)
{
    ps *s = c->s;
    mods *m = c->m;
    static const char *const cmps[] = {"eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu",
                                       "leu", "gtu", "geu", "num", "nan", "lo", "ls", "hi", "hs"};
    int cmp = -1;
    for (int k = 0; k < 18 && cmp < 0; k++)
        if (take(m, cmps[k]))
            cmp = k;
    int comb = take(m, "and") ? 1 : take(m, "or") ? 2 : take(m, "xor") ? 3 : 0;
    take(m, "ftz");
    int dt = is_set ? take_type(m) : T_NONE;
    int t = take_type(m);
    int half_dt = dt == T_F16 || dt == T_BF16;
    if (cmp < 0 || finish(s, m) != 0
        || (is_set && dt != T_U32 && dt != T_S32 && dt != T_B32 && dt != T_F32 && !half_dt))
        return unsupported(s, m);
    if (cmp >= 14)
        cmp -= 12; /* lo ls hi hs: the unsigned types already compare unsigned */
    int op;
    if (tfloat(t)) {
        op = (t == T_F32 ? PTX_OP_setp_eq_f32 : PTX_OP_setp_eq_f64) + cmp;
    } else if (t == T_F16 || t == T_BF16) {
        op = PTX_OP_hsetp;
    } else {
        int ix = ix_int6(t);
        if (ix < 0 || cmp >= 6)
            return unsupported(s, m);
        op = PTX_OP_setp_eq_s16 + ix * 6 + cmp;
    }
    if (c->n != (comb ? 4 : 3)) {
        px_fail(s, "'%.*s' takes %d operands", (int)m->nfull, m->full, comb ? 4 : 3);
        return -1;
    }
    uint32_t tmp = 0;
    if (is_set) {
        if (s->f->npreds >= PTX_MAX_REGS || c->o[0].has2) {
            px_fail(s, "malformed set");
            return -1;
        }
        tmp = s->f->npreds++;
    }
    ptx_insn *i = px_emit(s, op, c->guard);
    if (i == NULL)
        return -1;
    i->mode = (uint8_t)comb;
    i->mode2 = (uint16_t)(cmp | (t == T_BF16 ? 0x100 : 0));
    SDP(i, 0, is_set ? tmp : pdst(s, &c->o[0]));
    if (c->o[0].has2) {
        if (c->o[0].kind2 != O_PRED && c->o[0].kind2 != O_SINK) {
            px_fail(s, "setp's second destination must be a predicate");
            return -1;
        }
        SDP(i, 1, c->o[0].kind2 == O_PRED ? c->o[0].idx2 : c->s->psink);
        i->aux = 1;
    }
    SS(i, 0, src(s, &c->o[1], t));
    SS(i, 1, src(s, &c->o[2], t));
    if (comb) {
        int neg;
        SSP(i, 2, psrc(s, &c->o[3], &neg));
        i->mode |= (uint8_t)(neg << 4);
    }
    if (is_set) {
        ptx_insn *sel = px_emit(s, PTX_OP_selp, c->guard);
        if (sel == NULL)
            return -1;
        SD(sel, 0, dst(s, &c->o[0]));
        /* 1.0 in the destination's float type, else all ones */
        uint32_t one = dt == T_F32 ? 0x3f800000u : dt == T_F16 ? 0x3c00u
                     : dt == T_BF16 ? 0x3f80u : 0xffffffffu;
        SS(sel, 0, px_cst(s, one, 0, 0));
        SS(sel, 1, PTX_R_ZERO);
        SSP(sel, 2, tmp);
    }
    return 0;
}

static int b_selp(ictx *c)
{
    int t = take_type(c->m);
    if (finish(c->s, c->m) != 0 || t == T_NONE)
        return unsupported(c->s, c->m);
    NEEDN(4);
    ptx_insn *i = px_emit(c->s, PTX_OP_selp, c->guard);
    if (i == NULL)
        return -1;
    SD(i, 0, dst(c->s, &c->o[0]));
    SS(i, 0, src(c->s, &c->o[1], t));
    SS(i, 1, src(c->s, &c->o[2], t));
    SSP(i, 2, psrc(c->s, &c->o[3], NULL));
    return 0;
}

static int b_mov(ictx *c)
{
    ps *s = c->s;
    int t = take_type(c->m);
    if (finish(s, c->m) != 0 || t == T_NONE)
        return unsupported(s, c->m);
    NEEDN(2);
    opnd *d = &c->o[0], *a = &c->o[1];
    if (t == T_PRED) {
        ptx_insn *i = px_emit(s, PTX_OP_pmov, c->guard);
        if (i == NULL)
            return -1;
        SDP(i, 0, pdst(s, d));
        SSP(i, 0, psrc(s, a, NULL));
        return 0;
    }
    if (d->kind == O_VEC || a->kind == O_VEC) {
        opnd *v = d->kind == O_VEC ? d : a;
        int pack = a->kind == O_VEC;
        int op;
        if (t == T_B64 && v->nvec == 2) op = pack ? PTX_OP_pack2_32 : PTX_OP_unpack2_32;
        else if (t == T_B32 && v->nvec == 2) op = pack ? PTX_OP_pack2_16 : PTX_OP_unpack2_16;
        else if (t == T_B64 && v->nvec == 4) op = pack ? PTX_OP_pack4_16 : PTX_OP_unpack4_16;
        else
            return unsupported(s, c->m);
        ptx_insn *i = px_emit(s, op, c->guard);
        if (i == NULL)
            return -1;
        for (int k = 0; k < v->nvec; k++) {
            uint32_t r = v->vsink[k] == 2 ? px_cst(s, v->vval[k], 0, 0)
                         : v->vsink[k] ? s->sink : v->vec[k];
            if (!pack && v->vsink[k] == 2) {
                px_fail(s, "an immediate cannot be a destination");
                return -1;
            }
            if (pack)
                SS(i, k, r);
            else
                SD(i, k, r);
        }
        if (pack)
            SD(i, 0, dst(s, d));
        else
            SS(i, 0, src(s, a, t));
        return 0;
    }
    if (a->kind == O_SYM && a->symkind < 0) { /* %clock, %clock64, %globaltimer */
        int op = a->u == 1 ? PTX_OP_clock : a->u == 2 ? PTX_OP_clock64 : PTX_OP_globaltimer;
        ptx_insn *i = px_emit(s, op, c->guard);
        if (i == NULL)
            return -1;
        SD(i, 0, dst(s, d));
        return 0;
    }
    if (a->kind == O_LABEL) { /* the address of a function (for an indirect call) */
        psym *y = px_find(s, a->name, a->nname);
        if (y == NULL || y->kind != S_FUNC) {
            px_fail(s, "'%.*s' is not a variable or function", (int)(a->nname > 40 ? 40 : a->nname),
                 a->name);
            return -1;
        }
        ptx_insn *i = px_emit(s, PTX_OP_mov, c->guard);
        if (i == NULL)
            return -1;
        SD(i, 0, dst(s, d));
        SS(i, 0, px_cst(s, y->idx, PTX_RL_FUNC, 0));
        return 0;
    }
    if (a->kind == O_SYM && a->symkind == S_KPARAM) {
        /* the address of a kernel parameter: its offset in the param space */
        ptx_insn *i = px_emit(s, PTX_OP_mov, c->guard);
        if (i == NULL)
            return -1;
        SD(i, 0, dst(s, d));
        SS(i, 0, px_cst(s, a->u, 0, 0));
        i->mode2 = 1; /* marks a param-space address: cvta.param is refused */
        return 0;
    }
    ptx_insn *i = px_emit(s, PTX_OP_mov, c->guard);
    if (i == NULL)
        return -1;
    SD(i, 0, dst(s, d));
    SS(i, 0, src(s, a, t));
    return 0;
}

static int b_cvt(ictx *c)
{
    ps *s = c->s;
    mods *m = c->m;
    int rna = take(m, "rna");
    int rnd = take(m, "rn") ? 1 : take(m, "rz") ? 2 : take(m, "rm") ? 3 : take(m, "rp") ? 4
              : take(m, "rni") ? 5 : take(m, "rzi") ? 6 : take(m, "rmi") ? 7
              : take(m, "rpi") ? 8 : rna ? 1 : 0;
    int sat = take(m, "sat");
    take(m, "ftz");
    int dt = take_type(m), st = take_type(m);
    if (finish(s, m) != 0)
        return -1;
    if ((dt == T_F16X2 || dt == T_BF16X2) && st == T_F32 && c->n == 3) {
        /* two conversions into halves, packed: a in the upper half */
        uint32_t h[2];
        for (int k = 0; k < 2; k++) {
            ptx_insn *i = px_emit(s, PTX_OP_cvt, c->guard);
            if (i == NULL)
                return -1;
            i->mode = (uint8_t)(rnd ? rnd : 1);
            i->mode2 = (uint16_t)sat;
            i->aux = (uint32_t)((dt == T_F16X2 ? CK_F16 : CK_BF16) | CK_F32 << 8);
            h[k] = px_new_reg(s);
            SD(i, 0, h[k]);
            SS(i, 0, src(s, &c->o[2 - k], T_F32));
        }
        ptx_insn *i = px_emit(s, PTX_OP_pack2_16, c->guard);
        if (i == NULL)
            return -1;
        SD(i, 0, dst(s, &c->o[0]));
        SS(i, 0, h[0]);
        SS(i, 1, h[1]);
        return 0;
    }
    if (dt == T_TF32) { /* cvt.{rna,rn,rz}.tf32.f32: ptx_exec_wmma.c */
        if (st != T_F32 || sat || (rnd != 1 && rnd != 2))
            return unsupported(s, m);
        NEEDN(2);
        ptx_insn *i = px_emit(s, PTX_OP_cvt_tf32, c->guard);
        if (i == NULL)
            return -1;
        i->mode = (uint8_t)(rna ? 0 : rnd);
        SD(i, 0, dst(s, &c->o[0]));
        SS(i, 0, src(s, &c->o[1], T_F32));
        return 0;
    }
    int dk = cvt_kind(dt), sk = cvt_kind(st);
    if (dk < 0 || sk < 0)
        return unsupported(s, m);
    NEEDN(2);
    int ints = dk <= CK_S64 && sk <= CK_S64;
    int op = ints && !sat && tsize(dt) >= tsize(st) ? PTX_OP_cvt_ext : PTX_OP_cvt;
    ptx_insn *i = px_emit(s, op, c->guard);
    if (i == NULL)
        return -1;
    i->mode = (uint8_t)rnd;
    i->mode2 = (uint16_t)sat;
    i->aux = (uint32_t)(dk | sk << 8);
    SD(i, 0, dst(s, &c->o[0]));
    SS(i, 0, src(s, &c->o[1], st));
    return 0;
}

static int b_cvta(ictx *c)
{
    ps *s = c->s;
    mods *m = c->m;
    int to = take(m, "to");
    int sp = take(m, "global") ? 1 : take(m, "shared") ? 2 : take(m, "local") ? 3
             : take(m, "const") ? 1 : take(m, "param") ? 4 : 0;
    int t = take_type(m);
    if (sp == 0 || sp == 4 || (t != T_U64 && t != T_U32) || finish(s, m) != 0)
        return unsupported(s, m);
    NEEDN(2);
    int op = sp == 1 ? PTX_OP_mov
             : sp == 2 ? (to ? PTX_OP_cvta_to_shared : PTX_OP_cvta_shared)
                       : (to ? PTX_OP_cvta_to_local : PTX_OP_cvta_local);
    ptx_insn *i = px_emit(s, op, c->guard);
    if (i == NULL)
        return -1;
    SD(i, 0, dst(s, &c->o[0]));
    SS(i, 0, src(s, &c->o[1], t));
    return 0;
}

static int b_isspacep(ictx *c)
{
    int sp = take(c->m, "global") ? 1 : take(c->m, "shared") ? 2 : take(c->m, "local") ? 3 : 0;
    if (sp == 0 || finish(c->s, c->m) != 0)
        return unsupported(c->s, c->m);
    NEEDN(2);
    ptx_insn *i = px_emit(c->s, PTX_OP_isspacep, c->guard);
    if (i == NULL)
        return -1;
    i->mode = (uint8_t)sp;
    SDP(i, 0, pdst(c->s, &c->o[0]));
    SS(i, 0, src(c->s, &c->o[1], T_U64));
    return 0;
}

/* The state space of a memory instruction: 0 generic/global/const, 1 shared,
 * 2 local, 3 param; -1 an unsupported one. */
static int space(mods *m)
{
    if (take(m, "global") || take(m, "const"))
        return 0;
    if (take(m, "shared") || take(m, "shared::cta"))
        return 1;
    if (take(m, "local"))
        return 2;
    if (take(m, "param"))
        return 3;
    if (take(m, "tex") || take(m, "shared::cluster"))
        return -1;
    return 0;
}

/* The space an address really lies in: .param of a .func and call
 * parameters live in the thread's local frame. */
static int resolve_space(ps *s, int sp, const opnd *a)
{
    if (sp != 3)
        return sp;
    if (a->has_base)
        return s->f->is_entry ? 3 : 2;
    if (a->symkind == S_KPARAM)
        return 3;
    if (a->symkind == S_FPARAM || a->symkind == S_FRET || a->symkind == S_LVAR)
        return 2;
    return -1;
}

static void set_addr(ps *s, ptx_insn *i, const opnd *a)
{
    if (a->has_base)
        px_setf(i, PTX_F_AB, PTX_FK_REG, a->base);
    else
        px_setf(i, PTX_F_AB, PTX_FK_NONE, PTX_R_ZERO);
    i->imm = (int64_t)((uint64_t)a->off + (a->has_base ? 0 : a->u));
    i->reloc = (uint8_t)a->reloc;
    i->reloc_arg = (uint8_t)a->rarg;
    (void)s;
}

static int b_ldst(ictx *c, int store)
{
    ps *s = c->s;
    mods *m = c->m;
    int sp = space(m);
    take_ignorable(m);
    int vec = take(m, "v2") ? 2 : take(m, "v4") ? 4 : 1;
    int t = take_type(m);
    if (sp < 0 || t == T_NONE || t == T_PRED || tsize(t) > 8 || finish(s, m) != 0)
        return unsupported(s, m);
    NEEDN(2);
    opnd *a = &c->o[store ? 0 : 1], *v = &c->o[store ? 1 : 0];
    if (a->kind != O_ADDR) {
        px_fail(s, "expected an address operand [..]");
        return -1;
    }
    if ((vec > 1) != (v->kind == O_VEC) || (vec > 1 && v->nvec != vec)) {
        px_fail(s, "vector width does not match the operand");
        return -1;
    }
    sp = resolve_space(s, sp, a);
    if (sp < 0 || (sp == 3 && store)) {
        px_fail(s, "unsupported parameter access");
        return -1;
    }
    if (a->symkind == S_SVAR || a->symkind == S_OSVAR || a->symkind == S_DSVAR) {
        if (sp == 0) {
            px_fail(s, "a shared variable addressed as global memory");
            return -1;
        }
    }
    int sz = tsize(t);
    int lg = sz == 1 ? 0 : sz == 2 ? 1 : sz == 4 ? 2 : 3;
    int op = store ? (sp == 0 ? PTX_OP_st_g1 : sp == 1 ? PTX_OP_st_s1 : PTX_OP_st_l1)
                   : (sp == 0 ? PTX_OP_ld_g1 : sp == 1 ? PTX_OP_ld_s1 : sp == 2 ? PTX_OP_ld_l1
                                                                              : PTX_OP_ld_p1);
    ptx_insn *i = px_emit(s, op + lg, c->guard);
    if (i == NULL)
        return -1;
    i->aux = (uint32_t)vec;
    i->mode = (uint8_t)(tsigned(t) ? 1 : 0);
    set_addr(s, i, a);
    for (int k = 0; k < vec; k++) {
        if (store) {
            uint32_t r;
            if (vec > 1)
                r = v->vsink[k] == 2 ? px_cst(s, v->vval[k], 0, 0)
                    : v->vsink[k] ? PTX_R_ZERO : v->vec[k];
            else
                r = src(s, v, t);
            SS(i, k, r);
        } else {
            if (vec > 1 && v->vsink[k] == 2) {
                px_fail(s, "an immediate cannot be a destination");
                return -1;
            }
            uint32_t r = vec > 1 ? (v->vsink[k] ? s->sink : v->vec[k]) : dst(s, v);
            SD(i, k, r);
        }
    }
    return 0;
}

static int b_atom(ictx *c, int red)
{
    ps *s = c->s;
    mods *m = c->m;
    int sp = space(m);
    take_ignorable(m);
    static const char *const an[] = {"add", "min", "max", "inc", "dec", "and", "or", "xor",
                                     "exch", "cas"};
    int aop = -1;
    for (int k = 0; k < 10 && aop < 0; k++)
        if (take(m, an[k]))
            aop = k;
    take_ignorable(m);
    int t = take_type(m);
    if (aop < 0 || (sp != 0 && sp != 1) || finish(s, m) != 0)
        return unsupported(s, m);
    int tk = t == T_U32 || t == T_B32 ? 0 : t == T_S32 ? 1 : t == T_U64 || t == T_B64 ? 2
             : t == T_S64 ? 3 : t == T_F32 ? 4 : t == T_F64 ? 5 : -1;
    if (tk < 0 || (tk >= 4 && aop != 0 && aop != 8 && aop != 1 && aop != 2))
        return unsupported(s, m);
    int nsrc = aop == 9 ? 2 : 1;
    if (c->n != (red ? 1 : 2) + nsrc) {
        px_fail(s, "wrong number of operands for '%.*s'", (int)m->nfull, m->full);
        return -1;
    }
    opnd *a = &c->o[red ? 0 : 1];
    if (a->kind != O_ADDR) {
        px_fail(s, "expected an address operand [..]");
        return -1;
    }
    ptx_insn *i = px_emit(s, sp == 1 ? PTX_OP_atom_s : PTX_OP_atom_g, c->guard);
    if (i == NULL)
        return -1;
    i->mode = (uint8_t)aop;
    i->aux = (uint32_t)tk;
    set_addr(s, i, a);
    SD(i, 0, red ? s->sink : dst(s, &c->o[0]));
    for (int k = 0; k < nsrc; k++)
        SS(i, k, src(s, &c->o[(red ? 1 : 2) + k], t));
    return 0;
}

static int b_shfl(ictx *c)
{
    ps *s = c->s;
    mods *m = c->m;
    take(m, "sync");
    int mode = take(m, "up") ? 0 : take(m, "down") ? 1 : take(m, "bfly") ? 2 : take(m, "idx") ? 3
                                                                                          : -1;
    int t = take_type(m);
    if (mode < 0 || (t != T_B32 && t != T_F32 && t != T_U32 && t != T_S32) || finish(s, m) != 0)
        return unsupported(s, m);
    if (c->n != 5 && c->n != 4) {
        px_fail(s, "shfl takes 4 or 5 operands");
        return -1;
    }
    ptx_insn *i = px_emit(s, PTX_OP_shfl, c->guard);
    if (i == NULL)
        return -1;
    i->mode = (uint8_t)mode;
    SD(i, 0, dst(s, &c->o[0]));
    if (c->o[0].has2) {
        SDP(i, 1, c->o[0].kind2 == O_PRED ? c->o[0].idx2 : c->s->psink);
        i->mode2 = 1;
    }
    for (int k = 1; k < c->n; k++)
        SS(i, k - 1, src(s, &c->o[k], T_B32));
    if (c->n == 4)
        SS(i, 3, px_cst(s, PTX_FULL, 0, 0));
    return 0;
}

static int b_vote(ictx *c)
{
    ps *s = c->s;
    mods *m = c->m;
    take(m, "sync");
    int mode = take(m, "all") ? 0 : take(m, "any") ? 1 : take(m, "uni") ? 2
               : take(m, "ballot") ? 3 : -1;
    int t = take_type(m);
    if (mode < 0 || (mode == 3 ? t != T_B32 : t != T_PRED) || finish(s, m) != 0)
        return unsupported(s, m);
    if (c->n != 3 && c->n != 2) {
        px_fail(s, "vote takes 2 or 3 operands");
        return -1;
    }
    ptx_insn *i = px_emit(s, PTX_OP_vote_all + mode, c->guard);
    if (i == NULL)
        return -1;
    if (mode == 3)
        SD(i, 0, dst(s, &c->o[0]));
    else
        SDP(i, 0, pdst(s, &c->o[0]));
    int neg;
    SSP(i, 0, psrc(s, &c->o[1], &neg));
    i->mode = (uint8_t)neg;
    SS(i, 1, c->n == 3 ? src(s, &c->o[2], T_B32) : px_cst(s, PTX_FULL, 0, 0));
    return 0;
}

static int b_match(ictx *c)
{
    ps *s = c->s;
    mods *m = c->m;
    take(m, "sync");
    int all = take(m, "all"), any = take(m, "any");
    int t = take_type(m);
    if (all == any || (t != T_B32 && t != T_B64) || finish(s, m) != 0)
        return unsupported(s, m);
    NEEDN(3);
    ptx_insn *i = px_emit(s, all ? PTX_OP_match_all : PTX_OP_match_any, c->guard);
    if (i == NULL)
        return -1;
    i->mode = (uint8_t)(t == T_B64);
    SD(i, 0, dst(s, &c->o[0]));
    if (c->o[0].has2)
        SDP(i, 1, c->o[0].kind2 == O_PRED ? c->o[0].idx2 : c->s->psink);
    SS(i, 0, src(s, &c->o[1], t));
    SS(i, 1, src(s, &c->o[2], T_B32));
    return 0;
}

static int b_redux(ictx *c)
{
    ps *s = c->s;
    mods *m = c->m;
    take(m, "sync");
    static const char *const ops[] = {"add", "min", "max", "and", "or", "xor"};
    int op = -1;
    for (int k = 0; k < 6 && op < 0; k++)
        if (take(m, ops[k]))
            op = k;
    int t = take_type(m);
    if (op < 0 || (t != T_U32 && t != T_S32 && t != T_B32) || finish(s, m) != 0)
        return unsupported(s, m);
    NEEDN(3);
    ptx_insn *i = px_emit(s, PTX_OP_redux, c->guard);
    if (i == NULL)
        return -1;
    i->mode = (uint8_t)(op | (t == T_S32 ? 8 : 0));
    SD(i, 0, dst(s, &c->o[0]));
    SS(i, 0, src(s, &c->o[1], T_U32));
    SS(i, 1, src(s, &c->o[2], T_U32));
    return 0;
}

/* cp.async.{ca,cg}.shared.global [dst], [src], size{, src-size}: the copy
 * happens at once, so commit_group / wait_group / wait_all have nothing to wait for. */
static int b_cpasync(ictx *c)
{
    ps *s = c->s;
    mods *m = c->m;
    if (take(m, "commit_group") || take(m, "wait_group") || take(m, "wait_all")) {
        if (finish(s, m) != 0)
            return -1;
        return px_emit(s, PTX_OP_nop, c->guard) ? 0 : -1;
    }
    take(m, "ca");
    take(m, "cg");
    int sg = take(m, "shared") + take(m, "shared::cta");
    int gl = take(m, "global");
    take_ignorable(m);
    if (!sg || !gl || finish(s, m) != 0)
        return unsupported(s, m);
    if (c->n != 3 && c->n != 4) {
        fail_n:
        px_fail(s, "cp.async takes 3 or 4 operands");
        return -1;
    }
    opnd *d = &c->o[0], *a = &c->o[1], *n = &c->o[2];
    if (d->kind != O_ADDR || a->kind != O_ADDR || n->kind != O_INT
        || (n->u != 4 && n->u != 8 && n->u != 16))
        goto fail_n;
    ptx_insn *i = px_emit(s, PTX_OP_cpasync, c->guard);
    if (i == NULL)
        return -1;
    set_addr(s, i, a);
    if (!d->has_base && d->reloc != PTX_RL_NONE) {
        /* a variable placed when the kernel is linked: its address is a
         * relocated constant */
        SS(i, 0, px_cst(s, d->u + (uint64_t)d->off, d->reloc, d->rarg));
        i->aux = 0;
    } else {
        SS(i, 0, d->has_base ? d->base : PTX_R_ZERO);
        /* a signed 32-bit displacement (the handler sign-extends it) */
        i->aux = (uint32_t)((uint64_t)d->off + (d->has_base ? 0 : d->u));
    }
    i->mode = (uint8_t)n->u;
    SS(i, 1, c->n == 4 ? src(s, &c->o[3], T_U32) : px_cst(s, n->u, 0, 0));
    return 0;
}

static int b_dp(ictx *c, int four)
{
    ps *s = c->s;
    mods *m = c->m;
    int hi = take(m, "hi"), lo = take(m, "lo");
    int ta = take_type(m), tb = take_type(m);
    if ((ta != T_U32 && ta != T_S32) || (tb != T_U32 && tb != T_S32) || finish(s, m) != 0
        || (!four && hi == lo))
        return unsupported(s, m);
    NEEDN(4);
    ptx_insn *i = px_emit(s, four ? PTX_OP_dp4a : PTX_OP_dp2a, c->guard);
    if (i == NULL)
        return -1;
    i->mode = (uint8_t)((ta == T_S32) | (tb == T_S32) << 1 | hi << 2);
    SD(i, 0, dst(s, &c->o[0]));
    for (int k = 1; k < 4; k++)
        SS(i, k - 1, src(s, &c->o[k], T_U32));
    return 0;
}

static int b_simple(ictx *c, int op, int want_dst)
{
    take_ignorable(c->m);
    take(c->m, "b32");
    if (finish(c->s, c->m) != 0)
        return -1;
    ptx_insn *i = px_emit(c->s, op, c->guard);
    if (i == NULL)
        return -1;
    if (want_dst) {
        NEEDN(1);
        SD(i, 0, dst(c->s, &c->o[0]));
    }
    return 0;
}

static int b_ctl(ictx *c, int ctl)
{
    ps *s = c->s;
    take(c->m, "uni");
    if (ctl == PTX_C_BAR) {
        take(c->m, "sync");
        take(c->m, "aligned");
        int arrive = take(c->m, "arrive");
        if (take(c->m, "red")) { /* __syncthreads_count / _and / _or */
            int kind = take(c->m, "popc") ? 1 : take(c->m, "and") ? 2 : take(c->m, "or") ? 3 : 0;
            int t = take_type(c->m);
            if (kind == 0 || (kind == 1 ? t != T_U32 : t != T_PRED) || finish(s, c->m) != 0)
                return unsupported(s, c->m);
            if (c->n != 3 && c->n != 4) {
                px_fail(s, "bar.red takes 3 or 4 operands");
                return -1;
            }
            ptx_insn *i = px_emit(s, PTX_OP_ctl, c->guard);
            if (i == NULL)
                return -1;
            i->ctl = PTX_C_BAR;
            int neg;
            SSP(i, 2, psrc(s, &c->o[c->n - 1], &neg));
            i->mode = (uint8_t)(kind | neg << 4);
            if (kind == 1)
                SD(i, 0, dst(s, &c->o[0]));
            else
                SDP(i, 0, pdst(s, &c->o[0]));
            return 0;
        }
        if (finish(s, c->m) != 0)
            return -1;
        if (c->n < 1 || c->n > 2) {
            px_fail(s, "barrier takes 1 or 2 operands");
            return -1;
        }
        if (arrive) /* no waiting: a release for the others, which we get anyway */
            return px_emit(s, PTX_OP_fence, c->guard) ? 0 : -1;
    } else if (finish(s, c->m) != 0)
        return -1;
    ptx_insn *i = px_emit(s, PTX_OP_ctl, c->guard);
    if (i == NULL)
        return -1;
    i->ctl = (uint8_t)ctl;
    if (ctl == PTX_C_BRA) {
        if (c->n != 1 || c->o[0].kind != O_LABEL) {
            px_fail(s, "bra needs a label");
            return -1;
        }
        i->aux = px_label_id(s, c->o[0].name, c->o[0].nname);
    }
    return 0;
}

/* A parenthesised list of .param variable names: their frame offsets and sizes. */
static int call_list(ps *s, uint32_t *off, uint32_t *size, uint32_t *n)
{
    px_expect(s, '(');
    *n = 0;
    while (!s->failed && !px_is_p(s, ')')) {
        if (s->t.kind != K_ID) {
            px_fail(s, "call arguments must be .param variables");
            return -1;
        }
        if (*n >= PTX_MAX_PARAMS) {
            px_fail(s, "too many call arguments");
            return -1;
        }
        psym *p = px_find(s, s->t.s, s->t.n);
        if (p == NULL || p->kind != S_LVAR) {
            px_fail(s, "call argument '%.*s' is not a .param variable", (int)(s->t.n > 40 ? 40 : s->t.n),
                 s->t.s);
            return -1;
        }
        off[*n] = (uint32_t)p->val;
        size[(*n)++] = p->idx;
        px_next(s);
        if (px_is_p(s, ','))
            px_next(s);
    }
    px_expect(s, ')');
    return s->failed ? -1 : 0;
}

/* call{.uni} [(rets),] target[, (args)][, prototype]; the target is a
 * function or (an indirect call) a register holding a function's address. */
static int b_call(ps *s, mods *m, uint32_t guard)
{
    take(m, "uni");
    if (finish(s, m) != 0)
        return -1;
    ptx_callsite cs = {0};
    uint32_t roff[PTX_MAX_PARAMS], rsize[PTX_MAX_PARAMS], aoff[PTX_MAX_PARAMS],
        asize[PTX_MAX_PARAMS], nr = 0, na = 0;
    if (px_is_p(s, '(')) {
        if (call_list(s, roff, rsize, &nr) != 0)
            return -1;
        px_expect(s, ',');
    }
    if (s->t.kind != K_ID) {
        px_fail(s, "malformed call");
        return -1;
    }
    tok fn = s->t;
    px_next(s);
    psym *y = px_find(s, fn.s, fn.n);
    uint32_t target = 0;
    if (y != NULL && y->kind == S_FUNC)
        cs.callee = y->idx;
    else if (y != NULL && y->kind == S_REG) {
        cs.indirect = 1;
        target = y->idx;
    } else {
        px_fail(s, "call of '%.*s': not a function", (int)(fn.n > 60 ? 60 : fn.n), fn.s);
        return -1;
    }
    if (px_is_p(s, ',')) {
        px_next(s);
        if (px_is_p(s, '(')) {
            if (call_list(s, aoff, asize, &na) != 0)
                return -1;
            if (px_is_p(s, ',')) {
                px_next(s);
                if (s->t.kind != K_ID) { /* the prototype of an indirect call */
                    px_fail(s, "malformed call");
                    return -1;
                }
                px_next(s);
            }
        } else if (s->t.kind == K_ID)
            px_next(s); /* a prototype, no arguments */
    }
    px_expect(s, ';');
    if (s->failed)
        return -1;
    cs.nret = nr;
    cs.nargs = na;
    for (uint32_t k = 0; k < nr; k++)
        cs.off[k] = roff[k], cs.size[k] = rsize[k];
    for (uint32_t k = 0; k < na; k++)
        cs.off[nr + k] = aoff[k], cs.size[nr + k] = asize[k];
    if (nr + na > PTX_MAX_PARAMS) {
        px_fail(s, "too many call arguments");
        return -1;
    }
    ptx_func *f = s->f;
    if (f->ncalls == f->capcalls) {
        uint32_t cap = f->capcalls ? f->capcalls * 2 : 16;
        ptx_callsite *nc = realloc(f->calls, cap * sizeof *nc);
        if (nc == NULL) {
            px_fail(s, "out of memory");
            return -1;
        }
        f->calls = nc;
        f->capcalls = cap;
    }
    f->calls[f->ncalls] = cs;
    ptx_insn *i = px_emit(s, PTX_OP_ctl, guard);
    if (i == NULL)
        return -1;
    i->ctl = PTX_C_CALL;
    i->aux = f->ncalls++;
    if (cs.indirect)
        SS(i, 0, target);
    return 0;
}

/* The modifier helpers, for ptx_translate_tex.c. */
int px_take(px_mods *m, const char *w) { return take(m, w); }
int px_take_type(px_mods *m) { return take_type(m); }
int px_finish(ps *s, const px_mods *m) { return finish(s, m); }
int px_unsupported(ps *s, const px_mods *m) { return unsupported(s, m); }
uint32_t px_src(ps *s, const opnd *o, int t) { return src(s, o, t); }
uint32_t px_dst(ps *s, const opnd *o) { return dst(s, o); }
uint32_t px_pdst(ps *s, const opnd *o) { return pdst(s, o); }
void px_set_addr(ps *s, ptx_insn *i, const opnd *a) { set_addr(s, i, a); }

static int instruction_(ps *s, uint32_t guard);

int px_instruction(ps *s, uint32_t guard)
{
    s->iline = s->t.line;
    s->in_insn = 1;
    int rc = instruction_(s, guard);
    s->in_insn = 0;
    return rc;
}

static int instruction_(ps *s, uint32_t guard)
{
    mods m = {.full = s->t.s, .nfull = s->t.n};
    const char *p = s->t.s, *e = s->t.s + s->t.n;
    while (p < e && m.cnt < 16) {
        const char *q = p;
        while (q < e && *q != '.')
            q++;
        m.p[m.cnt] = p;
        m.n[m.cnt++] = (uint8_t)(q - p > 255 ? 255 : q - p);
        p = q < e ? q + 1 : q;
    }
    if (p < e)
        return unsupported(s, &m);
    char base[16];
    size_t bl = m.n[0] < sizeof base - 1 ? m.n[0] : sizeof base - 1;
    memcpy(base, m.p[0], bl);
    base[bl] = 0;
    static const char *const known[] = {
        "add", "sub", "mul", "mad", "fma", "div", "rem", "min", "max", "neg", "abs", "mul24",
        "mad24", "sad", "addc", "subc", "madc", "and", "or", "xor", "not", "cnot", "shl", "shr",
        "popc", "clz", "brev", "bfe", "bfi", "bfind", "bmsk", "prmt", "lop3", "shf", "sqrt", "rcp",
        "rsqrt", "ex2", "lg2", "sin", "cos", "tanh", "copysign", "testp", "setp", "selp", "mov",
        "cvt", "cvta", "isspacep", "set", "redux", "cp", "ld", "ldu", "st", "atom", "red", "shfl", "vote", "match",
        "dp4a", "dp2a", "activemask", "membar", "fence", "prefetch", "prefetchu", "nanosleep",
        "pmevent", "bra", "ret", "exit", "trap", "bar", "barrier", "call", "griddepcontrol",
        "mbarrier"};
    int is_known = 0;
    for (size_t k = 0; k < sizeof known / sizeof known[0] && !is_known; k++)
        is_known = !strcmp(base, known[k]);
    if (px_is_texture(base)) { /* addresses with coordinate vectors: their own parser */
        px_next(s);
        return px_texture(s, &m, guard);
    }
    if (!strcmp(base, "wmma")) { /* fragments of up to 8 registers: their own parser */
        px_next(s);
        return px_wmma(s, &m, guard);
    }
    if (px_is_video(base)) { /* selectors and masks ride on the operands */
        px_next(s);
        return px_video(s, &m, guard);
    }
    if (!is_known) /* refuse by name before its operands can confuse the message */
        return unsupported(s, &m);
    px_next(s);
    if (!strcmp(base, "call"))
        return b_call(s, &m, guard);
    opnd o[8];
    int n = 0;
    while (!s->failed && !px_is_p(s, ';') && s->t.kind != K_EOF) {
        if (n == 8) {
            px_fail(s, "too many operands");
            return -1;
        }
        px_parse_operand(s, &o[n++]);
        if (px_is_p(s, ','))
            px_next(s);
        else if (!px_is_p(s, ';')) {
            px_fail(s, "expected ',' or ';' near '%.*s'", (int)(s->t.n > 40 ? 40 : s->t.n), s->t.s);
            return -1;
        }
    }
    if (s->failed)
        return -1;
    px_expect(s, ';');
    ictx c = {s, &m, o, n, guard};
    static const char *const arith[] = {"add", "sub", "mul", "mad", "fma", "div", "rem", "min",
                                        "max", "neg", "abs", "mul24", "mad24", "sad", "addc",
                                        "subc", "madc"};
    for (size_t k = 0; k < sizeof arith / sizeof arith[0]; k++)
        if (!strcmp(base, arith[k]))
            return b_arith(&c, base);
    static const char *const bits[] = {"and", "or", "xor", "not", "cnot", "shl", "shr", "popc",
                                       "clz", "brev", "bfe", "bfi", "bfind", "bmsk", "prmt", "lop3",
                                       "shf"};
    for (size_t k = 0; k < sizeof bits / sizeof bits[0]; k++)
        if (!strcmp(base, bits[k]))
            return b_bits(&c, base);
    static const char *const fm[] = {"sqrt", "rcp", "rsqrt", "ex2", "lg2", "sin", "cos", "tanh"};
    for (size_t k = 0; k < sizeof fm / sizeof fm[0]; k++)
        if (!strcmp(base, fm[k]))
            return b_fmath(&c, base);
    if (!strcmp(base, "copysign")) return b_copysign(&c);
    if (!strcmp(base, "testp")) return b_testp(&c);
    if (!strcmp(base, "setp")) return b_setp(&c, 0);
    if (!strcmp(base, "set")) return b_setp(&c, 1);
    if (!strcmp(base, "selp")) return b_selp(&c);
    if (!strcmp(base, "mov")) return b_mov(&c);
    if (!strcmp(base, "cvt")) return b_cvt(&c);
    if (!strcmp(base, "cvta")) return b_cvta(&c);
    if (!strcmp(base, "isspacep")) return b_isspacep(&c);
    if (!strcmp(base, "ld") || !strcmp(base, "ldu")) return b_ldst(&c, 0);
    if (!strcmp(base, "st")) return b_ldst(&c, 1);
    if (!strcmp(base, "atom")) return b_atom(&c, 0);
    if (!strcmp(base, "red")) return b_atom(&c, 1);
    if (!strcmp(base, "shfl")) return b_shfl(&c);
    if (!strcmp(base, "vote")) return b_vote(&c);
    if (!strcmp(base, "match")) return b_match(&c);
    if (!strcmp(base, "redux")) return b_redux(&c);
    if (!strcmp(base, "cp")) {
        if (m.cnt < 2 || m.n[1] != 5 || memcmp(m.p[1], "async", 5) != 0)
            return unsupported(s, &m);
        m.used[1] = 1;
        if (take(&m, "mbarrier"))
            return px_mbarrier(s, &m, o, n, guard, 1);
        return b_cpasync(&c);
    }
    if (!strcmp(base, "mbarrier")) return px_mbarrier(s, &m, o, n, guard, 0);
    if (!strcmp(base, "dp4a")) return b_dp(&c, 1);
    if (!strcmp(base, "dp2a")) return b_dp(&c, 0);
    if (!strcmp(base, "activemask")) return b_simple(&c, PTX_OP_activemask, 1);
    if (!strcmp(base, "membar") || !strcmp(base, "fence") || !strcmp(base, "prefetch")
        || !strcmp(base, "prefetchu") || !strcmp(base, "nanosleep") || !strcmp(base, "pmevent")) {
        for (int k = 1; k < m.cnt; k++)
            m.used[k] = 1; /* scopes, spaces and hints: a full fence covers them all */
        return px_emit(s, PTX_OP_fence, guard) ? 0 : -1;
    }
    if (!strcmp(base, "griddepcontrol")) {
        /* Programmatic dependent launch: a grid here starts only after the
         * stream's earlier grids ended, so waiting and signalling are no-ops. */
        if (!(take(&m, "wait") || take(&m, "launch_dependents")) || finish(s, &m) != 0 || n != 0)
            return unsupported(s, &m);
        return px_emit(s, PTX_OP_nop, guard) ? 0 : -1;
    }
    if (!strcmp(base, "bra")) return b_ctl(&c, PTX_C_BRA);
    if (!strcmp(base, "ret")) return b_ctl(&c, PTX_C_RET);
    if (!strcmp(base, "exit")) return b_ctl(&c, PTX_C_EXIT);
    if (!strcmp(base, "trap")) return b_ctl(&c, PTX_C_TRAP);
    if (!strcmp(base, "bar") || !strcmp(base, "barrier")) {
        if (take(&m, "warp")) { /* __syncwarp(mask): the lanes of its mask meet there */
            take(&m, "sync");
            if (finish(s, &m) != 0)
                return -1;
            if (n != 1) {
                px_fail(s, "bar.warp.sync takes 1 operand (the member mask)");
                return -1;
            }
            ptx_insn *i = px_emit(s, PTX_OP_warpsync, guard);
            if (i == NULL)
                return -1;
            SS(i, 0, src(s, &o[0], T_U32));
            return 0;
        }
        return b_ctl(&c, PTX_C_BAR);
    }
    return unsupported(s, &m);
}

