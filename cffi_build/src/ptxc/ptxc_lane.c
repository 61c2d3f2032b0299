/*
 * ptxc_lane.c — one lane-local instruction as C: the statement a fused lane
 * loop runs for lane l (ptxc_emit.c puts the loop around it). Each
 * expression is the one the interpreter's handler evaluates (ptx_exec.c),
 * written in terms of the same names (a, b, c loaded as the type; W, SG, WM,
 * MINV; the LD_/ST_ conversions), which the generated source's prelude
 * defines; tests/test_ptx_compile.py runs both on the same kernels and
 * compares every byte. Anything else runs through its handler (PTXC_CALL).
 * No state.
 */
#include <stdio.h>
#include <string.h>

#include "ptxc.h"

/* The six integer types of a PTX_INT6 family, in its order. */
static const char *const int6[6] = {"s16", "u16", "s32", "u32", "s64", "u64"};

typedef struct {
    int first;   /* the family's s16 member */
    int nsrc;    /* 1, 2, 3; 4: a shift (b is a u32) */
    const char *expr;
} int_form;

static const int_form int_forms[] = {
    {PTX_OP_add_s16, 2, "U64(a) + U64(b)"},
    {PTX_OP_sub_s16, 2, "U64(a) - U64(b)"},
    {PTX_OP_mullo_s16, 2, "U64(a) * U64(b)"},
    {PTX_OP_mulhi_s16, 2, "(uint64_t)(((wt)a * (wt)b) >> W)"},
    {PTX_OP_mad_s16, 3, "U64(a) * U64(b) + U64(c)"},
    {PTX_OP_madhi_s16, 3, "(uint64_t)(((wt)a * (wt)b) >> W) + U64(c)"},
    {PTX_OP_div_s16, 2,
     "b == 0 ? ~U64(0) : (SG && a == MINV && is_m1(U64(b))) ? U64(a) : U64(a / b)"},
    {PTX_OP_rem_s16, 2, "b == 0 ? U64(a) : (SG && is_m1(U64(b))) ? 0 : U64(a % b)"},
    {PTX_OP_min_s16, 2, "a < b ? a : b"},
    {PTX_OP_max_s16, 2, "a > b ? a : b"},
    {PTX_OP_neg_s16, 1, "U64(0) - U64(a)"},
    {PTX_OP_abs_s16, 1, "(SG && is_neg((int64_t)a)) ? U64(0) - U64(a) : U64(a)"},
    {PTX_OP_and_s16, 2, "U64(a) & U64(b)"},
    {PTX_OP_or_s16, 2, "U64(a) | U64(b)"},
    {PTX_OP_xor_s16, 2, "U64(a) ^ U64(b)"},
    {PTX_OP_not_s16, 1, "~U64(a)"},
    {PTX_OP_cnot_s16, 1, "a == 0 ? 1 : 0"},
    {PTX_OP_shl_s16, 4, "b >= W ? 0 : U64(a) << b"},
    {PTX_OP_shr_s16, 4, "b >= W ? ((SG && is_neg((int64_t)a)) ? ~U64(0) : 0) : U64(a >> b)"},
    {PTX_OP_popc_s16, 1, "__builtin_popcountll(U64(a) & WM)"},
    {PTX_OP_clz_s16, 1, "(U64(a) & WM) == 0 ? W : __builtin_clzll(U64(a) & WM) - (64 - W)"},
};

typedef struct {
    int op;      /* the f32 member; the f64 one follows (unless f32only/f64only) */
    int nsrc;
    int sat;     /* takes .sat (mode2 bit 0) */
    int only;    /* 0 both, 32 or 64: that type alone */
    const char *e32, *e64;
} flt_form;

static const flt_form flt_forms[] = {
    {PTX_OP_fadd_f32, 2, 1, 0, "a + b", "a + b"},
    {PTX_OP_fsub_f32, 2, 1, 0, "a - b", "a - b"},
    {PTX_OP_fmul_f32, 2, 1, 0, "a * b", "a * b"},
    {PTX_OP_fdiv_f32, 2, 1, 0, "a / b", "a / b"},
    {PTX_OP_fcopysign_f32, 2, 1, 0, "copysignf(b, a)", "copysign(b, a)"},
    {PTX_OP_ffma_f32, 3, 1, 0, "fmaf(a, b, c)", "fma(a, b, c)"},
    {PTX_OP_fneg_f32, 1, 0, 0, "-a", "-a"},
    {PTX_OP_fabs_f32, 1, 0, 0, "fabsf(a)", "fabs(a)"},
    {PTX_OP_fsqrt_f32, 1, 0, 0, "sqrtf(a)", "sqrt(a)"},
    {PTX_OP_frcp_f32, 1, 0, 0, "1.0f / a", "1.0 / a"},
    {PTX_OP_frsqrt_f32, 1, 0, 0, "1.0f / sqrtf(a)", "1.0 / sqrt(a)"},
    {PTX_OP_fsin_f32, 1, 0, 32, "sinf(a)", NULL},
    {PTX_OP_fcos_f32, 1, 0, 32, "cosf(a)", NULL},
    {PTX_OP_fex2_f32, 1, 0, 32, "exp2f(a)", NULL},
    {PTX_OP_flg2_f32, 1, 0, 32, "a < 0.0f ? NAN : log2f(a)", NULL},
    {PTX_OP_ftanh_f32, 1, 0, 32, "tanhf(a)", NULL},
    {PTX_OP_fex2_f64, 1, 0, 64, NULL, "exp2(a)"},
    {PTX_OP_flg2_f64, 1, 0, 64, NULL, "a < 0.0 ? (double)NAN : log2(a)"},
};

/* Comparisons in the parser's order (PTX_CMP_*): the integer six, then the
 * float-only ones. Float "ne" is ordered. */
static const char *const icmp[6] = {"a == b", "a != b", "a < b", "a <= b", "a > b", "a >= b"};
static const char *const fcmp[14] = {
    "a == b", "a != b && a == a && b == b", "a < b", "a <= b", "a > b", "a >= b",
    "a == b || isnan(a) || isnan(b)", "!(a == b)", "!(a >= b)", "!(a > b)", "!(a <= b)",
    "!(a < b)", "!isnan(a) && !isnan(b)", "isnan(a) || isnan(b)"};
static const int setp_int_base[6] = {PTX_OP_setp_eq_s16, PTX_OP_setp_eq_u16,
                                     PTX_OP_setp_eq_s32, PTX_OP_setp_eq_u32,
                                     PTX_OP_setp_eq_s64, PTX_OP_setp_eq_u64};

const char *ptxc_src(const ptxc_plan *p, uint32_t reg, char *buf, size_t n)
{
    static const char *const sregs[PTX_NSREG] = {
        [PTX_R_TID_X] = "(uint64_t)TX[l]", [PTX_R_TID_Y] = "(uint64_t)TY[l]",
        [PTX_R_TID_Z] = "(uint64_t)TZ[l]", [PTX_R_NTID_X] = "NTX", [PTX_R_NTID_Y] = "NTY",
        [PTX_R_NTID_Z] = "NTZ", [PTX_R_CTAID_X] = "CTX", [PTX_R_CTAID_Y] = "CTY",
        [PTX_R_CTAID_Z] = "CTZ", [PTX_R_NCTAID_X] = "NCX", [PTX_R_NCTAID_Y] = "NCY",
        [PTX_R_NCTAID_Z] = "NCZ", [PTX_R_LANEID] = "(uint64_t)l", [PTX_R_WARPID] = "WI",
        [PTX_R_NWARPID] = "NWI", [PTX_R_LM_EQ] = "(uint64_t)(1u << l)",
        [PTX_R_LM_LE] = "(uint64_t)(uint32_t)((2ull << l) - 1)",
        [PTX_R_LM_LT] = "(uint64_t)((1u << l) - 1)",
        [PTX_R_LM_GE] = "(uint64_t)(uint32_t)~((1u << l) - 1)",
        [PTX_R_LM_GT] = "(uint64_t)(uint32_t)~((2ull << l) - 1)", [PTX_R_NSMID] = "UINT64_C(1)",
        [PTX_R_DYN_SMEM] = "DSM", [PTX_R_TOTAL_SMEM] = "TSM", [PTX_R_WARPSZ] = "UINT64_C(32)",
    };
    if (reg < PTX_NSREG) /* the slots without a meaning hold 0, as the interpreter's do */
        snprintf(buf, n, "%s", sregs[reg] != NULL ? sregs[reg] : "UINT64_C(0)");
    else if (p->is_const[reg])
        snprintf(buf, n, "UINT64_C(0x%llx)", (unsigned long long)p->const_val[reg]);
    else
        snprintf(buf, n, "v%u", reg);
    return buf;
}

static const char *pred(uint32_t pr, char *buf, size_t n)
{
    if (pr == PTX_P_FALSE)
        snprintf(buf, n, "0u");
    else if (pr == PTX_P_TRUE)
        snprintf(buf, n, "1u");
    else
        snprintf(buf, n, "q%u", pr);
    return buf;
}

/* Sources 0..2 as C expressions. */
typedef struct {
    char s[4][48];
    char d[4][16];
} names;

static void name_all(const ptx_insn *i, const ptxc_plan *p, names *nm)
{
    for (int k = 0; k < 4; k++) {
        ptxc_src(p, i->s[k], nm->s[k], sizeof nm->s[k]);
        snprintf(nm->d[k], sizeof nm->d[k], "v%u", i->d[k]);
    }
}

static int family(int op, int first, int size)
{
    return op >= first && op < first + size ? op - first : -1;
}

static int int_op(ptxc_text *t, const ptx_insn *i, const names *nm)
{
    for (size_t f = 0; f < sizeof int_forms / sizeof int_forms[0]; f++) {
        int ix = family(i->op, int_forms[f].first, 6);
        if (ix < 0)
            continue;
        const char *T = int6[ix];
        const int_form *fm = &int_forms[f];
        ptxc_put(t, "{ PTXC_T(%s) ct a = LD_%s(%s);", T, T, nm->s[0]);
        if (fm->nsrc == 4)
            ptxc_put(t, " uint32_t b = (uint32_t)(%s);", nm->s[1]);
        else if (fm->nsrc >= 2)
            ptxc_put(t, " ct b = LD_%s(%s);", T, nm->s[1]);
        if (fm->nsrc == 3)
            ptxc_put(t, " ct c = LD_%s(%s);", T, nm->s[2]);
        ptxc_put(t, " %s = ST_%s(%s); }\n", nm->d[0], T, fm->expr);
        return 0;
    }
    static const char *const wtt[4] = {"int32_t", "uint32_t", "int64_t", "uint64_t"};
    static const char *const stw[4] = {"u32", "u32", "u64", "u64"};
    int ix = family(i->op, PTX_OP_mulwide_s16, 4);
    if (ix >= 0) {
        ptxc_put(t, "%s = ST_%s((%s)LW_%s(%s) * (%s)LW_%s(%s));\n", nm->d[0], stw[ix], wtt[ix],
                 int6[ix], nm->s[0], wtt[ix], int6[ix], nm->s[1]);
        return 0;
    }
    ix = family(i->op, PTX_OP_madwide_s16, 4);
    if (ix >= 0) {
        ptxc_put(t, "%s = ST_%s((uint64_t)((%s)LW_%s(%s) * (%s)LW_%s(%s)) + %s);\n", nm->d[0],
                 stw[ix], wtt[ix], int6[ix], nm->s[0], wtt[ix], int6[ix], nm->s[1], nm->s[2]);
        return 0;
    }
    return -1;
}

static int flt_op(ptxc_text *t, const ptx_insn *i, const names *nm)
{
    int x64 = -1;
    const flt_form *fm = NULL;
    for (size_t f = 0; f < sizeof flt_forms / sizeof flt_forms[0] && fm == NULL; f++) {
        const flt_form *c = &flt_forms[f];
        if (c->only == 0 && (i->op == c->op || i->op == c->op + 1))
            fm = c, x64 = i->op == c->op + 1;
        else if (c->only != 0 && i->op == c->op)
            fm = c, x64 = c->only == 64;
    }
    int minmax = i->op == PTX_OP_fmin_f32 || i->op == PTX_OP_fmin_f64
                 || i->op == PTX_OP_fmax_f32 || i->op == PTX_OP_fmax_f64;
    if ((fm == NULL && !minmax) || (i->mode & 3) != 0)
        return -1;
    const char *ft = x64 ? "double" : "float", *ld = x64 ? "f64of" : "f32of";
    char expr[96];
    int nsrc = 2, sat = 1;
    if (minmax) {
        x64 = i->op == PTX_OP_fmin_f64 || i->op == PTX_OP_fmax_f64;
        ft = x64 ? "double" : "float";
        ld = x64 ? "f64of" : "f32of";
        const char *fn = (i->op == PTX_OP_fmin_f32 || i->op == PTX_OP_fmin_f64)
                             ? (x64 ? "f64_min" : "f32_min") : (x64 ? "f64_max" : "f32_max");
        if (i->mode2 & 2) /* .NaN: a NaN operand gives NaN */
            snprintf(expr, sizeof expr, "(isnan(a) || isnan(b)) ? %s : %s(a, b)",
                     x64 ? "(double)NAN" : "NAN", fn);
        else
            snprintf(expr, sizeof expr, "%s(a, b)", fn);
    } else {
        snprintf(expr, sizeof expr, "%s", x64 ? fm->e64 : fm->e32);
        nsrc = fm->nsrc;
        sat = fm->sat;
    }
    ptxc_put(t, "{ %s a = %s(%s);", ft, ld, nm->s[0]);
    if (nsrc >= 2)
        ptxc_put(t, " %s b = %s(%s);", ft, ld, nm->s[1]);
    if (nsrc >= 3)
        ptxc_put(t, " %s c = %s(%s);", ft, ld, nm->s[2]);
    ptxc_put(t, " %s x = %s;", ft, expr);
    if (sat && (i->mode2 & 1))
        ptxc_put(t, " x = %s(x);", x64 ? "satd" : "satf");
    ptxc_put(t, " %s = %s(x); }\n", nm->d[0], x64 ? "bits64" : "bits32");
    return 0;
}

static int setp_op(ptxc_text *t, const ptx_insn *i, const ptxc_plan *p, const names *nm)
{
    const char *T = NULL, *expr = NULL;
    for (int ix = 0; ix < 6 && T == NULL; ix++) {
        int cmp = family(i->op, setp_int_base[ix], 6);
        if (cmp >= 0)
            T = int6[ix], expr = icmp[cmp];
    }
    int cf = family(i->op, PTX_OP_setp_eq_f32, 14), cd = family(i->op, PTX_OP_setp_eq_f64, 14);
    if (cf >= 0)
        T = "f32", expr = fcmp[cf];
    if (cd >= 0)
        T = "f64", expr = fcmp[cd];
    if (T == NULL)
        return -1;
    char c[16], d0[16], d1[16];
    (void)p;
    ptxc_put(t, "{ PTXC_T(%s) ct a = LD_%s(%s); ct b = LD_%s(%s); uint32_t r_ = (%s) ? 1u : 0u,"
                " n_ = r_ ^ 1u;", T, T, nm->s[0], T, nm->s[1], expr);
    int comb = i->mode & 3;
    if (comb) {
        static const char *const op[4] = {"", "&", "|", "^"};
        ptxc_put(t, " uint32_t c_ = %s%s;", pred(i->s[2], c, sizeof c),
                 (i->mode & 0x10) ? " ^ 1u" : "");
        ptxc_put(t, " r_ %s= c_; n_ %s= c_;", op[comb], op[comb]);
    }
    ptxc_put(t, " %s = r_;", pred(i->d[0], d0, sizeof d0));
    if (i->aux)
        ptxc_put(t, " %s = n_;", pred(i->d[1], d1, sizeof d1));
    ptxc_put(t, " }\n");
    return 0;
}

static int pred_op(ptxc_text *t, const ptx_insn *i)
{
    char a[16], b[16], d[16];
    pred(i->d[0], d, sizeof d);
    pred(i->s[0], a, sizeof a);
    pred(i->s[1], b, sizeof b);
    const char *op = i->op == PTX_OP_pand ? "&" : i->op == PTX_OP_por ? "|" : "^";
    switch (i->op) {
    case PTX_OP_pand:
    case PTX_OP_por:
    case PTX_OP_pxor:
        ptxc_put(t, "%s = (%s%s) %s (%s%s);\n", d, a, (i->mode & 1) ? " ^ 1u" : "", op, b,
                 (i->mode & 2) ? " ^ 1u" : "");
        return 0;
    case PTX_OP_pnot:
        ptxc_put(t, "%s = %s ^ 1u;\n", d, a);
        return 0;
    case PTX_OP_pmov:
        ptxc_put(t, "%s = %s;\n", d, a);
        return 0;
    default:
        return -1;
    }
}

/* cvt: the conversions whose handler path needs no rounding mode and no
 * helper beyond plain C casts; the rest run through the handler. */
static int cvt_op(ptxc_text *t, const ptx_insn *i, const names *nm, int emit)
{
    int dk = (int)(i->aux & 0xff), sk = (int)(i->aux >> 8), rnd = i->mode, sat = i->mode2;
    const char *d = nm->d[0], *a = nm->s[0];
    int sint = sk <= CK_S64, dint = dk <= CK_S64;
    static const char *const ldk[] = {[CK_U8] = "(uint8_t)", [CK_S8] = "(int8_t)",
                                      [CK_U16] = "(uint16_t)", [CK_S16] = "(int16_t)",
                                      [CK_U32] = "(uint32_t)", [CK_S32] = "(int32_t)",
                                      [CK_U64] = "(uint64_t)", [CK_S64] = "(int64_t)"};
    if (sk > CK_F64 || dk > CK_F64)
        return -1;
    if (dk == CK_S32 && sk == CK_F32 && !sat && (rnd == 6 || rnd == 0)) {
        if (emit)
            ptxc_put(t, "{ float f = f32of(%s); %s = isnan(f) ? 0 : f >= 2147483648.0f ? "
                        "0x7fffffffu : f < -2147483648.0f ? 0x80000000u : ST_u32((int32_t)f); }\n",
                     a, d);
        return 0;
    }
    if (sint && dint && !sat) { /* narrowing: the low bits (widening is cvt_ext) */
        if (emit)
            ptxc_put(t, "%s = (uint64_t)%s(uint64_t)(%s);\n", d,
                     dk == CK_U8 || dk == CK_S8 ? "(uint8_t)" : dk == CK_U16 || dk == CK_S16
                     ? "(uint16_t)" : dk == CK_U32 || dk == CK_S32 ? "(uint32_t)" : "", a);
        return 0;
    }
    if (rnd > 1)
        return -1;
    if (sint && (dk == CK_F32 || dk == CK_F64) && !sat) {
        if (emit)
            ptxc_put(t, "%s = %s((%s)(%s%s));\n", d, dk == CK_F32 ? "bits32" : "bits64",
                     dk == CK_F32 ? "float" : "double", ldk[sk], a);
        return 0;
    }
    if (sk == CK_F32 && dk == CK_F64) {
        if (emit)
            ptxc_put(t, "{ double x = (double)f32of(%s); %s = bits64(%s); }\n", a, d,
                     sat ? "satd(x)" : "x");
        return 0;
    }
    if (sk == CK_F64 && dk == CK_F32) {
        if (emit)
            ptxc_put(t, "{ float f = (float)f64of(%s); %s = bits32(%s); }\n", a, d,
                     sat ? "satf(f)" : "f");
        return 0;
    }
    return -1;
}

static int move_op(ptxc_text *t, const ptx_insn *i, const names *nm)
{
    const char *a = nm->s[0], *b = nm->s[1];
    switch (i->op) {
    case PTX_OP_mov:
        ptxc_put(t, "%s = %s;\n", nm->d[0], a);
        return 0;
    case PTX_OP_pack2_32:
        ptxc_put(t, "%s = (uint32_t)(%s) | (uint64_t)(uint32_t)(%s) << 32;\n", nm->d[0], a, b);
        return 0;
    case PTX_OP_pack2_16:
        ptxc_put(t, "%s = (uint16_t)(%s) | (uint64_t)(uint16_t)(%s) << 16;\n", nm->d[0], a, b);
        return 0;
    case PTX_OP_pack4_16:
        ptxc_put(t, "%s = (uint16_t)(%s) | (uint64_t)(uint16_t)(%s) << 16 | (uint64_t)(uint16_t)(%s)"
                    " << 32 | (uint64_t)(uint16_t)(%s) << 48;\n", nm->d[0], a, b, nm->s[2],
                 nm->s[3]);
        return 0;
    case PTX_OP_unpack2_32:
    case PTX_OP_unpack2_16: {
        const char *ut = i->op == PTX_OP_unpack2_32 ? "uint32_t" : "uint16_t";
        ptxc_put(t, "{ uint64_t x = %s; %s = (%s)x; %s = (%s)(x >> (8 * sizeof(%s))); }\n", a,
                 nm->d[0], ut, nm->d[1], ut, ut);
        return 0;
    }
    case PTX_OP_unpack4_16:
        ptxc_put(t, "{ uint64_t x = %s; %s = (uint16_t)x; %s = (uint16_t)(x >> 16); %s = "
                    "(uint16_t)(x >> 32); %s = (uint16_t)(x >> 48); }\n", a, nm->d[0], nm->d[1],
                 nm->d[2], nm->d[3]);
        return 0;
    case PTX_OP_cvt_ext: {
        static const char *const ext[] = {[CK_S8] = "(uint64_t)(int64_t)(int8_t)",
                                          [CK_U8] = "(uint64_t)(uint8_t)",
                                          [CK_S16] = "(uint64_t)(int64_t)(int16_t)",
                                          [CK_U16] = "(uint64_t)(uint16_t)",
                                          [CK_S32] = "(uint64_t)(int64_t)(int32_t)",
                                          [CK_U32] = "(uint64_t)(uint32_t)"};
        unsigned sk = i->aux >> 8;
        ptxc_put(t, "%s = %s(%s);\n", nm->d[0], sk < CK_U64 && ext[sk] ? ext[sk] : "", a);
        return 0;
    }
    case PTX_OP_cvta_shared:
    case PTX_OP_cvta_to_shared:
    case PTX_OP_cvta_local:
    case PTX_OP_cvta_to_local: { /* shared: offsets in the block's buffer; local: in the frame */
        int to = i->op == PTX_OP_cvta_to_shared || i->op == PTX_OP_cvta_to_local;
        int shared = i->op == PTX_OP_cvta_shared || i->op == PTX_OP_cvta_to_shared;
        ptxc_put(t, "%s = %s %c %s;\n", nm->d[0], a, to ? '-' : '+',
                 shared ? "SHB" : "LOCAL_FRAME(l)");
        return 0;
    }
    case PTX_OP_selp: {
        char c[16];
        ptxc_put(t, "%s = %s ? %s : %s;\n", nm->d[0], pred(i->s[2], c, sizeof c), a, b);
        return 0;
    }
    default:
        return -1;
    }
}

static int lane(ptxc_text *t, const ptx_insn *i, const ptxc_plan *p, int emit)
{
    names nm;
    ptxc_text scratch = {0};
    ptxc_text *out = emit ? t : &scratch;
    static const ptxc_plan none;
    if (p == NULL) { /* asked only whether it is known: any names will do */
        p = &none;
    }
    if (p->is_const == NULL) {
        for (int k = 0; k < 4; k++) {
            snprintf(nm.s[k], sizeof nm.s[k], "v%u", i->s[k]);
            snprintf(nm.d[k], sizeof nm.d[k], "v%u", i->d[k]);
        }
    } else
        name_all(i, p, &nm);
    int rc;
    if (i->op == PTX_OP_cvt)
        rc = cvt_op(out, i, &nm, emit);
    else if ((rc = int_op(out, i, &nm)) != 0 && (rc = flt_op(out, i, &nm)) != 0
             && (rc = setp_op(out, i, p, &nm)) != 0 && (rc = pred_op(out, i)) != 0)
        rc = move_op(out, i, &nm);
    ptxc_text_free(&scratch);
    return rc;
}

int ptxc_lane(ptxc_text *t, const ptx_insn *i, const ptxc_plan *p)
{
    return lane(t, i, p, 1);
}

int ptxc_lane_known(const ptx_insn *i)
{
    return lane(NULL, i, NULL, 0) == 0;
}

/* A mov's source below 2^32: a special register (each is a 32-bit value, or 0
 * in the slots without a meaning) or a constant that fits. */
static int narrow_source(const ptxc_plan *p, uint32_t reg)
{
    return reg < PTX_NSREG || (p->is_const[reg] && p->const_val[reg] >> 32 == 0);
}

/* Whether the statement ptxc_lane writes for I stores only values below 2^32:
 * its result goes through a 32-bit or narrower ST_/bits32/cast (see the forms
 * above). Anything not listed is taken as 64-bit. */
int ptxc_lane_narrow(const ptx_insn *i, const ptxc_plan *p)
{
    int op = i->op;
    for (size_t f = 0; f < sizeof int_forms / sizeof int_forms[0]; f++) {
        int ix = family(op, int_forms[f].first, 6);
        if (ix >= 0)
            return ix < 4; /* s16 u16 s32 u32 */
    }
    int wide = family(op, PTX_OP_mulwide_s16, 4);
    if (wide < 0)
        wide = family(op, PTX_OP_madwide_s16, 4);
    if (wide >= 0)
        return wide < 2; /* a 16-bit product is 32 bits */
    for (size_t f = 0; f < sizeof flt_forms / sizeof flt_forms[0]; f++) {
        const flt_form *c = &flt_forms[f];
        if (op == c->op && c->only != 64)
            return 1; /* the f32 member (or an f32-only form): bits32 */
        if (op == c->op + 1 && c->only == 0)
            return 0;
    }
    switch (op) {
    case PTX_OP_fmin_f32:
    case PTX_OP_fmax_f32:
    case PTX_OP_pack2_16:
    case PTX_OP_unpack2_32:
    case PTX_OP_unpack2_16:
    case PTX_OP_unpack4_16:
        return 1;
    case PTX_OP_mov:
        return narrow_source(p, i->s[0]);
    case PTX_OP_cvt: { /* the destination kind's width: every form cvt_op writes casts to it */
        int dk = (int)(i->aux & 0xff);
        return dk <= CK_S32 || dk == CK_F32;
    }
    case PTX_OP_cvt_ext: { /* zero-extended from an unsigned kind; signed ones extend to 64 */
        unsigned sk = i->aux >> 8;
        return sk == CK_U8 || sk == CK_U16 || sk == CK_U32;
    }
    default: { /* setp and the predicate ops write no register; the rest may write 64 bits */
        ptxc_rw rw;
        ptxc_rw_of(i, &rw);
        return rw.nwr == 0;
    }
    }
}
