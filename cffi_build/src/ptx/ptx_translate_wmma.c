/*
 * ptx_translate_wmma.c — wmma.load, wmma.store and wmma.mma to compact code
 * (the encoding and the fragments: ptx_wmma.h). Their register vectors hold
 * up to 8 registers, so they have their own operand parser.
 *
 * Translated: the shapes and types the PTX ISA gives wmma with f16, bf16,
 * tf32, u8/s8 and f64 multiplicands at m16n16k16 (m16n16k8 for tf32, m8n8k4
 * for f64), row and column layouts, .global, .shared and generic addresses,
 * an optional stride, .satfinite for integers, .rn for f64. Refused by
 * name: the m32n8k16 and m8n32k16 shapes, sub-byte (.s4/.u4/.b1) fragments,
 * f64's other rounding modes, and every other matrix instruction (mma,
 * ldmatrix, ...: not "wmma", so the instruction table refuses them).
 * No state; the parse state is the caller's.
 */
#include <string.h>

#include "ptx_parse.h"
#include "ptx_wmma.h"

/* The element type modifier W as PTX_WT_*, or -1. */
static int wtype(const char *w, uint8_t n)
{
    static const char *const names[] = {"f16", "bf16", "tf32", "u8", "s8", "f32", "s32", "f64"};
    for (int k = 0; k < 8; k++)
        if (strlen(names[k]) == n && memcmp(names[k], w, n) == 0)
            return k;
    return -1;
}

/* The unused modifiers that are element types, in order: their count. */
static int types_in_order(px_mods *m, int *types, int max)
{
    int n = 0;
    for (int k = 1; k < m->cnt; k++) {
        int t = m->used[k] ? -1 : wtype(m->p[k], m->n[k]);
        if (t < 0)
            continue;
        if (n == max)
            return -1;
        m->used[k] = 1;
        types[n++] = t;
    }
    return n;
}

static int shape_of(px_mods *m)
{
    return px_take(m, "m16n16k16") ? PTX_WS_M16N16K16 : px_take(m, "m16n16k8") ? PTX_WS_M16N16K8
           : px_take(m, "m8n8k4")  ? PTX_WS_M8N8K4 : -1;
}

/* {r0, ..., rN-1}: exactly N registers (destinations when DST). */
static int reg_vector(ps *s, unsigned n, int dst, uint32_t *regs)
{
    px_expect(s, '{');
    unsigned k = 0;
    while (!s->failed && !px_is_p(s, '}')) {
        opnd e;
        px_parse_operand(s, &e);
        if (s->failed)
            return -1;
        if (k == n || e.kind != O_REG || (dst && e.idx < PTX_NSREG)) {
            px_fail(s, "a wmma fragment is a vector of %u registers", n);
            return -1;
        }
        regs[k++] = e.idx;
        if (px_is_p(s, ','))
            px_next(s);
        else if (!px_is_p(s, '}'))
            px_fail(s, "expected ',' or '}' in a fragment");
    }
    px_expect(s, '}');
    if (!s->failed && k != n)
        px_fail(s, "a wmma fragment is a vector of %u registers", n);
    return s->failed ? -1 : 0;
}

static int comma(ps *s)
{
    px_expect(s, ',');
    return s->failed ? -1 : 0;
}

/* Carriers after the instruction just emitted: registers REGS in d[] or s[],
 * four per carrier, from carrier FIRST (those missing are emitted). */
static int carry(ps *s, uint32_t at, unsigned first, int dst, const uint32_t *regs, unsigned n)
{
    for (unsigned k = 0; k < n; k++) {
        while (s->f->ncode <= at + 1 + first + k / 4)
            if (px_emit(s, PTX_OP_nop, 0) == NULL)
                return -1;
        ptx_insn *c = &s->f->code[at + 1 + first + k / 4];
        px_setf(c, (dst ? PTX_F_D0 : PTX_F_S0) + (int)(k % 4), PTX_FK_REG, regs[k]);
    }
    return 0;
}

/* The address [a], and the stride when one follows: its register, else a
 * constant holding the default (the leading dimension's length). */
static int address_and_stride(ps *s, ptx_insn *i, const opnd *a, opnd *stride, int has_stride,
                              uint32_t deflt)
{
    if (a->kind != O_ADDR) {
        px_fail(s, "expected an address operand [..]");
        return -1;
    }
    if (a->symkind == S_KPARAM || a->symkind == S_FPARAM || a->symkind == S_FRET
        || a->symkind == S_LVAR) {
        px_fail(s, "wmma accesses global or shared memory");
        return -1;
    }
    if (!(i->mode & PTX_WM_SHARED)
        && (a->symkind == S_SVAR || a->symkind == S_OSVAR || a->symkind == S_DSVAR)) {
        px_fail(s, "a shared variable addressed as global memory");
        return -1;
    }
    px_setf(i, PTX_F_AB, a->has_base ? PTX_FK_REG : PTX_FK_NONE,
            a->has_base ? a->base : PTX_R_ZERO);
    i->imm = (int64_t)((uint64_t)a->off + (a->has_base ? 0 : a->u));
    i->reloc = (uint8_t)a->reloc;
    i->reloc_arg = (uint8_t)a->rarg;
    uint32_t r;
    if (!has_stride)
        r = px_cst(s, deflt, 0, 0);
    else if (stride->kind == O_REG)
        r = stride->idx;
    else if (stride->kind == O_INT)
        r = px_cst(s, stride->u, 0, 0);
    else {
        px_fail(s, "wmma's stride is a register or an integer");
        return -1;
    }
    px_setf(i, PTX_F_S0, PTX_FK_REG, r);
    return 0;
}

/* wmma.load.{a,b,c} r, [p]{, stride} and wmma.store.d [p], r{, stride}. */
static int load_store(ps *s, px_mods *m, uint32_t guard, int store)
{
    int kind = store ? (px_take(m, "d") ? PTX_WM_C : -1)
               : px_take(m, "a") ? PTX_WM_A : px_take(m, "b") ? PTX_WM_B
               : px_take(m, "c") ? PTX_WM_C : -1;
    int sync = px_take(m, "sync"), aligned = px_take(m, "aligned");
    int row = px_take(m, "row"), col = px_take(m, "col");
    int shape = shape_of(m);
    int shared = px_take(m, "shared") + px_take(m, "shared::cta");
    int global = px_take(m, "global");
    int type[1];
    ptx_wmma_frag f;
    if (kind < 0 || !sync || !aligned || row == col || shape < 0 || shared + global > 1
        || types_in_order(m, type, 1) != 1 || px_finish(s, m) != 0
        || ptx_wmma_frag_of(shape, kind, type[0], &f) != 0)
        return px_unsupported(s, m);
    uint32_t regs[PTX_WMMA_MAX_REGS];
    opnd a, stride;
    int has_stride = 0;
    if (store) {
        px_parse_operand(s, &a);
        if (comma(s) != 0 || reg_vector(s, f.nregs, 0, regs) != 0)
            return -1;
    } else if (reg_vector(s, f.nregs, 1, regs) != 0 || comma(s) != 0) {
        return -1;
    } else {
        px_parse_operand(s, &a);
    }
    if (!s->failed && px_is_p(s, ',')) {
        px_next(s);
        px_parse_operand(s, &stride);
        has_stride = 1;
    }
    px_expect(s, ';');
    if (s->failed)
        return -1;
    uint32_t at = s->f->ncode;
    ptx_insn *i = px_emit(s, store ? PTX_OP_wmma_store : PTX_OP_wmma_load, guard);
    if (i == NULL)
        return -1;
    i->mode = (uint8_t)(kind | (col ? PTX_WM_COL : 0) | (shared ? PTX_WM_SHARED : 0));
    i->mode2 = (uint16_t)type[0];
    i->aux = (uint32_t)shape;
    if (address_and_stride(s, i, &a, &stride, has_stride, col ? f.rows : f.cols) != 0)
        return -1;
    return carry(s, at, 0, !store, regs, f.nregs);
}

/* wmma.mma.sync.aligned.alayout.blayout.shape.dtype.ctype d, a, b, c (f16)
 * or .dtype.atype.btype.ctype (the others); .satfinite, .rn for f64. */
static int mma(ps *s, px_mods *m, uint32_t guard)
{
    int sync = px_take(m, "sync"), aligned = px_take(m, "aligned");
    int lay = 0, cols = 0; /* A's layout, then B's, in order */
    for (int k = 1; k < m->cnt && lay < 2; k++) {
        int row = m->n[k] == 3 && !memcmp(m->p[k], "row", 3);
        int col = m->n[k] == 3 && !memcmp(m->p[k], "col", 3);
        if (row || col) {
            m->used[k] = 1;
            cols |= col << lay++;
        }
    }
    int shape = shape_of(m);
    int sat = px_take(m, "satfinite"), rn = px_take(m, "rn");
    int t[4], nt = types_in_order(m, t, 4);
    int at, bt, ct, dt;
    if (nt == 2) { /* .dtype.ctype: f16 multiplicands */
        dt = t[0], ct = t[1], at = bt = PTX_WT_F16;
    } else if (nt == 4) {
        dt = t[0], at = t[1], bt = t[2], ct = t[3];
    } else {
        return px_unsupported(s, m);
    }
    int ints = (at == PTX_WT_U8 || at == PTX_WT_S8) && (bt == PTX_WT_U8 || bt == PTX_WT_S8);
    /* one mode byte names both multiplicands: integers of mixed signs are refused */
    ptx_wmma_frag fa, fb, fc, fd;
    if (!sync || !aligned || lay != 2 || shape < 0 || px_finish(s, m) != 0 || at != bt
        || (sat && !ints) || (at == PTX_WT_F64) != rn
        || (ints && (ct != PTX_WT_S32 || dt != PTX_WT_S32))
        || (!ints && at != PTX_WT_F16 && (ct != dt))
        || ((at == PTX_WT_BF16 || at == PTX_WT_F16) && (ct == PTX_WT_S32 || dt == PTX_WT_S32))
        || (at == PTX_WT_BF16 && ct != PTX_WT_F32)
        || ptx_wmma_frag_of(shape, PTX_WM_A, at, &fa) || ptx_wmma_frag_of(shape, PTX_WM_B, bt, &fb)
        || ptx_wmma_frag_of(shape, PTX_WM_C, ct, &fc) || ptx_wmma_frag_of(shape, PTX_WM_C, dt, &fd))
        return px_unsupported(s, m);
    uint32_t rd[8], ra[8], rb[8], rc[8];
    if (reg_vector(s, fd.nregs, 1, rd) || comma(s) || reg_vector(s, fa.nregs, 0, ra) || comma(s)
        || reg_vector(s, fb.nregs, 0, rb) || comma(s) || reg_vector(s, fc.nregs, 0, rc))
        return -1;
    px_expect(s, ';');
    if (s->failed)
        return -1;
    uint32_t here = s->f->ncode;
    ptx_insn *i = px_emit(s, PTX_OP_wmma_mma, guard);
    if (i == NULL)
        return -1;
    i->mode = (uint8_t)at;
    i->mode2 = (uint16_t)(ct | dt << 4 | (sat ? PTX_WM_SATFINITE : 0)
                          | (cols & 1 ? PTX_WM_A_COL : 0) | (cols & 2 ? PTX_WM_B_COL : 0));
    i->aux = (uint32_t)shape;
    if (carry(s, here, 0, 1, rd, fd.nregs) || carry(s, here, 0, 0, ra, fa.nregs)
        || carry(s, here, 2, 0, rb, fb.nregs) || carry(s, here, 4, 0, rc, fc.nregs))
        return -1;
    /* always six carriers, so the handler finds B and C where it looks */
    while (s->f->ncode < here + 1 + PTX_WMMA_MMA_CARRIERS)
        if (px_emit(s, PTX_OP_nop, 0) == NULL)
            return -1;
    return 0;
}

int px_wmma(ps *s, px_mods *m, uint32_t guard)
{
    if (px_take(m, "load"))
        return load_store(s, m, guard, 0);
    if (px_take(m, "store"))
        return load_store(s, m, guard, 1);
    if (px_take(m, "mma"))
        return mma(s, m, guard);
    return px_unsupported(s, m);
}
