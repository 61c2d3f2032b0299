/*
 * ptxc_emit.c — a kernel's compact form as one C function that runs a warp
 * exactly as the interpreter's ptx_warp_run does (ptx_exec.c): the same
 * lane groups, the same reconvergence (parked lanes rejoin when the group
 * reaches their pc), the same barrier arrivals, faults at the same
 * instruction, lane and address, the same thread-instruction count.
 *
 * Shape: one label per basic block, entered with the group's mask m. A run
 * of lane-local instructions becomes one loop over the lanes (registers in
 * C locals, loaded from and stored to the register file only where the plan
 * says a value crosses the run; with a full mask gcc vectorises it). A
 * memory access, a warp-wide instruction or one run by its handler is a
 * step of its own between those loops, so memory is touched in the
 * interpreter's order (instruction by instruction, lane by lane). A memory
 * step first checks the span of all its lanes' addresses once (fast path)
 * and otherwise checks lane by lane, faulting at the first bad lane as the
 * interpreter does. Control (bra, exit, bar, trap) ends a block; branches
 * back count towards the time limit.
 *
 * The text is built only from fixed strings and numbers printed here; no
 * name or text of the PTX reaches it. No global state.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptxc.h"

void ptxc_put(ptxc_text *t, const char *fmt, ...)
{
    if (t->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = t->cap - t->n;
        int w = vsnprintf(t->s != NULL ? t->s + t->n : NULL, room, fmt, ap);
        va_end(ap);
        if (w < 0) {
            t->failed = 1;
            return;
        }
        if ((size_t)w < room) {
            t->n += (size_t)w;
            return;
        }
        size_t cap = (t->cap + (size_t)w + 1) * 2;
        char *s = realloc(t->s, cap);
        if (s == NULL) {
            t->failed = 1;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
}

void ptxc_text_free(ptxc_text *t)
{
    free(t->s);
    memset(t, 0, sizeof *t);
}

/* Everything a generated source starts with; the ABI declarations follow it. */
static const char prelude_head[] =
    "/* gleam: a kernel compiled by the host device's compile tier (generated). */\n"
    "#include <math.h>\n#include <stdint.h>\n#include <string.h>\n";

static const char prelude_body[] =
    "#define U64(x) ((uint64_t)(x))\n"
    "static inline int is_m1(uint64_t v) { return v == ~(uint64_t)0; }\n"
    "static inline int is_neg(int64_t v) { return v < 0; }\n"
    "static inline float f32of(uint64_t v) { uint32_t b = (uint32_t)v; float f; "
    "memcpy(&f, &b, 4); return f; }\n"
    "static inline uint64_t bits32(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }\n"
    "static inline double f64of(uint64_t v) { double d; memcpy(&d, &v, 8); return d; }\n"
    "static inline uint64_t bits64(double d) { uint64_t b; memcpy(&b, &d, 8); return b; }\n"
    "static inline float satf(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }\n"
    "static inline double satd(double x) { return x > 0.0 ? (x < 1.0 ? x : 1.0) : 0.0; }\n"
    "#define LD_s16(v) ((int16_t)(uint16_t)(v))\n#define LD_u16(v) ((uint16_t)(v))\n"
    "#define LD_s32(v) ((int32_t)(uint32_t)(v))\n#define LD_u32(v) ((uint32_t)(v))\n"
    "#define LD_s64(v) ((int64_t)(v))\n#define LD_u64(v) ((uint64_t)(v))\n"
    "#define LD_f32(v) f32of(v)\n#define LD_f64(v) f64of(v)\n"
    "#define ST_s16(x) ((uint64_t)(uint16_t)(x))\n#define ST_u16(x) ((uint64_t)(uint16_t)(x))\n"
    "#define ST_s32(x) ((uint64_t)(uint32_t)(x))\n#define ST_u32(x) ((uint64_t)(uint32_t)(x))\n"
    "#define ST_s64(x) ((uint64_t)(x))\n#define ST_u64(x) ((uint64_t)(x))\n"
    "#define PTXC_T(T) PTXC_T_##T\n"
    "#define PTXC_T_s16 typedef int16_t ct; typedef int64_t wt; enum { W = 16, SG = 1 }; "
    "const uint64_t WM = 0xffffu; const ct MINV = INT16_MIN;\n"
    "#define PTXC_T_u16 typedef uint16_t ct; typedef uint64_t wt; enum { W = 16, SG = 0 }; "
    "const uint64_t WM = 0xffffu; const ct MINV = 0;\n"
    "#define PTXC_T_s32 typedef int32_t ct; typedef int64_t wt; enum { W = 32, SG = 1 }; "
    "const uint64_t WM = 0xffffffffu; const ct MINV = INT32_MIN;\n"
    "#define PTXC_T_u32 typedef uint32_t ct; typedef uint64_t wt; enum { W = 32, SG = 0 }; "
    "const uint64_t WM = 0xffffffffu; const ct MINV = 0;\n"
    "#define PTXC_T_s64 typedef int64_t ct; typedef __int128 wt; enum { W = 64, SG = 1 }; "
    "const uint64_t WM = ~(uint64_t)0; const ct MINV = INT64_MIN;\n"
    "#define PTXC_T_u64 typedef uint64_t ct; typedef unsigned __int128 wt; enum { W = 64, "
    "SG = 0 }; const uint64_t WM = ~(uint64_t)0; const ct MINV = 0;\n"
    "#define PTXC_T_f32 typedef float ct;\n#define PTXC_T_f64 typedef double ct;\n"
    /* the lanes of mask m: a plain loop for a full warp, else the set bits */
    "#define PTXC_LANES(m, ...) do { if ((m) == 0xffffffffu) { for (int l = 0; l < 32; l++) "
    "{ __VA_ARGS__; } } else { for (uint32_t mm_ = (m); mm_; mm_ &= mm_ - 1) { "
    "int l = __builtin_ctz(mm_); __VA_ARGS__; } } } while (0)\n"
    "static inline int ptxc_have(const ptxc_block *B, uint64_t a, uint64_t span) {\n"
    "    for (int e = 0; e < 4; e++) { uint64_t off = a - B->range[2 * e];\n"
    "        if (off < B->range[2 * e + 1] && B->range[2 * e + 1] - off >= span) return 1; }\n"
    "    return 0; }\n"
    /* [lo, hi + size) as a span, 0 when it would wrap (then the slow path decides) */
    "static inline uint64_t ptxc_span(uint64_t lo, uint64_t hi, uint64_t size) {\n"
    "    return hi - lo < (UINT64_C(1) << 48) ? hi - lo + size : 0; }\n"
    "static inline int ptxc_window(uint64_t a, uint64_t span, uint64_t len) {\n"
    "    return span != 0 && a <= len && len - a >= span; }\n"
    /* ptx_exec.c's park and rejoin, on the views */
    "static inline void ptxc_park(ptxc_warp *WV, uint32_t lanes, uint32_t pc) {\n"
    "    for (uint32_t q = lanes; q; q &= q - 1) WV->lpc[__builtin_ctz(q)] = pc;\n"
    "    *WV->parked |= lanes; }\n"
    "static inline void ptxc_join(ptxc_warp *WV, uint32_t pc, uint32_t *m, uint32_t *mpc) {\n"
    "    uint32_t join = 0, nxt = UINT32_MAX;\n"
    "    for (uint32_t q = *WV->parked; q; q &= q - 1) { int l = __builtin_ctz(q);\n"
    "        if (WV->lpc[l] == pc) join |= 1u << l; else if (WV->lpc[l] < nxt) nxt = WV->lpc[l]; }\n"
    "    *m |= join; *WV->parked &= ~join; *mpc = nxt; }\n"
    "#define LOCAL_FRAME(l) (LOCB + (WI * 32 + (uint64_t)(l)) * LSZ)\n"
    "#define FAULT(pc, a, code) do { rc = B->fault(B, (pc), (a), (code)); goto out; } while (0)\n";

enum { E_MISALIGNED = 716, E_ILLEGAL = 700, E_FAILED = 719 };

typedef struct {
    const ptxc_plan *p;
    ptxc_text *t;
    const ptxc_bb *bb;
} em_ctx;

/* A register's value in lane l, in a step: the register file, a constant or
 * a special register. */
static const char *step_src(const ptxc_plan *p, uint32_t reg, char *buf, size_t n)
{
    if (reg < PTX_NSREG || p->is_const[reg])
        return ptxc_src(p, reg, buf, n);
    snprintf(buf, n, "R[%u][l]", reg);
    return buf;
}

/* The instruction's lanes: the group, narrowed by its guard. */
static void put_em(ptxc_text *t, const ptx_insn *i)
{
    if (i->guard == 0) {
        ptxc_put(t, "uint32_t em = m;");
        return;
    }
    ptxc_put(t, "uint32_t em = m & %sP[%u]; n += (uint64_t)__builtin_popcount(em);",
             (i->guard & PTX_GUARD_NEG) ? "~" : "", i->guard & ~PTX_GUARD_NEG);
}

/* ------------------------------------------------------------- segments */

static int needed_after(const em_ctx *c, uint32_t bit, uint32_t after)
{
    const ptxc_plan *p = c->p;
    if (ptxc_bit(p->live_out + (size_t)(c->bb - p->bb) * p->words, bit) || ptxc_bit(p->keep, bit))
        return 1;
    for (uint32_t pc = after; pc < c->bb->end; pc++) {
        ptxc_rw rw;
        uint32_t bits[16];
        ptxc_rw_of(&p->k->code[pc], &rw);
        for (uint32_t q = 0, n = ptxc_bits(&rw, p->k->nregs, 0, bits); q < n; q++)
            if (bits[q] == bit)
                return 1;
    }
    return 0;
}

/* The lane-local run [s, e) as one loop over the lanes of m. */
static int emit_segment(em_ctx *c, uint32_t s, uint32_t e)
{
    const ptxc_plan *p = c->p;
    const ptx_kernel *k = p->k;
    ptxc_text *t = c->t;
    uint32_t nbits = k->nregs + k->npreds;
    /* per slot: 1 read first (or a guarded write), 2 written, 4 stored after */
    uint8_t *st = calloc(nbits, 1);
    uint32_t *order = malloc(((size_t)(e - s) * 16 + 1) * sizeof *order), nord = 0;
    if (st == NULL || order == NULL) {
        free(st);
        free(order);
        return -1;
    }
    int guarded = 0;
    for (uint32_t pc = s; pc < e; pc++) {
        const ptx_insn *i = &k->code[pc];
        ptxc_rw rw;
        ptxc_rw_of(i, &rw);
        guarded |= i->guard != 0;
        uint32_t bits[16], nb = ptxc_bits(&rw, k->nregs, 0, bits);
        for (uint32_t q = 0; q < nb; q++) {
            uint32_t b = bits[q];
            if (b < k->nregs && (b < PTX_NSREG || p->is_const[b]))
                continue; /* an expression, not a local */
            if (!st[b])
                order[nord++] = b;
            if (!(st[b] & 2))
                st[b] |= 1;
        }
        uint32_t w[16], nw = ptxc_bits(&rw, k->nregs, 1, w);
        for (uint32_t q = 0; q < nw; q++) {
            if (!st[w[q]])
                order[nord++] = w[q];
            if (i->guard && !(st[w[q]] & 2))
                st[w[q]] |= 1; /* lanes the guard leaves keep the old value */
            st[w[q]] |= 2;
        }
    }
    for (uint32_t q = 0; q < nord; q++)
        if ((st[order[q]] & 2) && needed_after(c, order[q], e))
            st[order[q]] |= 4;
    ptxc_put(t, "{ /* %u..%u */", s, e - 1);
    for (uint32_t q = 0; q < nord; q++) {
        uint32_t b = order[q];
        if (b >= k->nregs) {
            uint32_t pr = b - k->nregs;
            ptxc_put(t, " const uint32_t Pi%u = P[%u];", pr, pr);
            if (st[b] & 4)
                ptxc_put(t, " uint32_t Po%u = 0;", pr);
        }
    }
    if (guarded)
        ptxc_put(t, " uint64_t cnt = 0;");
    ptxc_put(t, "\nPTXC_LANES(m,\n");
    for (uint32_t q = 0; q < nord; q++) {
        uint32_t b = order[q];
        if (b >= k->nregs)
            ptxc_put(t, " uint32_t q%u = Pi%u >> l & 1;", b - k->nregs, b - k->nregs);
        else if (st[b] & 1)
            ptxc_put(t, " uint64_t v%u = R[%u][l];", b, b);
        else
            ptxc_put(t, " uint64_t v%u;", b);
    }
    ptxc_put(t, "\n");
    int rc = 0;
    for (uint32_t pc = s; pc < e && rc == 0; pc++) {
        const ptx_insn *i = &k->code[pc];
        if (i->guard) {
            uint32_t g = i->guard & ~PTX_GUARD_NEG;
            char gx[24];
            if (g == PTX_P_TRUE || g == PTX_P_FALSE)
                snprintf(gx, sizeof gx, "%s", g == PTX_P_TRUE ? "1u" : "0u");
            else
                snprintf(gx, sizeof gx, "q%u", g);
            ptxc_put(t, "{ uint32_t g_ = %s%s; cnt += g_; if (g_) ", gx,
                     (i->guard & PTX_GUARD_NEG) ? " ^ 1u" : "");
        }
        rc = ptxc_lane(t, i, p);
        if (i->guard)
            ptxc_put(t, "}\n");
    }
    for (uint32_t q = 0; q < nord; q++) {
        uint32_t b = order[q];
        if (!(st[b] & 4))
            continue;
        if (b >= k->nregs)
            ptxc_put(t, " Po%u |= q%u << l;", b - k->nregs, b - k->nregs);
        else
            ptxc_put(t, " R[%u][l] = v%u;", b, b);
    }
    ptxc_put(t, ");\n");
    for (uint32_t q = 0; q < nord; q++) {
        uint32_t b = order[q];
        if (b >= k->nregs && (st[b] & 4))
            ptxc_put(t, " P[%u] = (P[%u] & ~m) | (Po%u & m);", b - k->nregs, b - k->nregs,
                     b - k->nregs);
    }
    if (guarded)
        ptxc_put(t, " n += cnt;");
    ptxc_put(t, " }\n");
    free(st);
    free(order);
    return rc;
}

/* ---------------------------------------------------------------- memory */

enum { SP_GENERIC, SP_SHARED, SP_LOCAL, SP_PARAM };

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

/* Whether [A, A+S) lies where a space's access may go (S 0: unknown, no). */
static void put_fits(ptxc_text *t, int space, const char *a, const char *s)
{
    static const char *const len[] = {[SP_SHARED] = "SHSZ", [SP_LOCAL] = "LSZ",
                                      [SP_PARAM] = "PLEN"};
    if (space == SP_GENERIC)
        ptxc_put(t, "(%s != 0 && ptxc_have(B, %s, %s))", s, a, s);
    else
        ptxc_put(t, "ptxc_window(%s, %s, %s)", a, s, len[space]);
}

/* The host pointer of address a in lane l (checked before). */
static const char *mem_where(int space)
{
    switch (space) {
    case SP_SHARED: return "(B->shared + a)";
    case SP_LOCAL: return "((uint8_t *)(uintptr_t)LOCAL_FRAME(l) + a)";
    case SP_PARAM: return "((uint8_t *)(uintptr_t)B->params + a)";
    default: return "((uint8_t *)(uintptr_t)a)";
    }
}

/* One lane's check of [a, a+SIZE), as the interpreter makes it: alignment,
 * then the space (generic: the cached ranges, else the launch's lookup). */
static void put_lane_check(ptxc_text *t, int space, uint32_t pc, unsigned size)
{
    char sz[24];
    snprintf(sz, sizeof sz, "UINT64_C(%u)", size);
    ptxc_put(t, " if (a & %u) FAULT(%u, a, %d);", size - 1, pc, E_MISALIGNED);
    if (space == SP_GENERIC)
        ptxc_put(t, " if (!ptxc_have(B, a, %s) && !B->gaddr(B, a, %s)) FAULT(%u, a, %d);", sz,
                 sz, pc, E_ILLEGAL);
    else {
        ptxc_put(t, " if (!");
        put_fits(t, space, "a", sz);
        ptxc_put(t, ") FAULT(%u, a, %d);", pc, E_ILLEGAL);
    }
}

/* The access of one lane at p_ (checked): vec elements of n bytes. */
static void mem_access(em_ctx *c, const ptx_insn *i, int store, unsigned n)
{
    static const char *const ut[9] = {[1] = "uint8_t", [2] = "uint16_t", [4] = "uint32_t",
                                      [8] = "uint64_t"};
    static const char *const sx[9] = {[1] = "(uint64_t)(int64_t)(int8_t)",
                                      [2] = "(uint64_t)(int64_t)(int16_t)",
                                      [4] = "(uint64_t)(int64_t)(int32_t)", [8] = "(uint64_t)"};
    char v[48];
    for (unsigned e = 0; e < i->aux; e++) {
        if (store)
            ptxc_put(c->t, " { %s x = (%s)(%s); memcpy(p_ + %u, &x, %u); }", ut[n], ut[n],
                     step_src(c->p, i->s[e], v, sizeof v), e * n, n);
        else
            ptxc_put(c->t, " { %s x; memcpy(&x, p_ + %u, %u); R[%u][l] = %s(x); }", ut[n],
                     e * n, n, i->d[e], i->mode ? sx[n] : "(uint64_t)");
    }
}

static int emit_mem(em_ctx *c, uint32_t pc)
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
    char ab[48], a[96];
    snprintf(a, sizeof a, "%s + UINT64_C(0x%llx)", step_src(c->p, i->ab, ab, sizeof ab),
             (unsigned long long)i->imm);
    ptxc_put(t, "{ /* %u */ ", pc);
    put_em(t, i);
    ptxc_put(t, " if (em) {\n"
                "uint64_t lo_ = ~UINT64_C(0), hi_ = 0, or_ = 0;\n"
                "PTXC_LANES(em, uint64_t a = %s; lo_ = a < lo_ ? a : lo_;"
                " hi_ = a > hi_ ? a : hi_; or_ |= a;);\n"
                "uint64_t span_ = ptxc_span(lo_, hi_, %u);\n"
                "if ((or_ & %u) == 0 && ", a, size, size - 1);
    put_fits(t, space, "lo_", "span_");
    ptxc_put(t, ") {\nPTXC_LANES(em, uint64_t a = %s; uint8_t *p_ = %s;", a, mem_where(space));
    mem_access(c, i, store, n);
    ptxc_put(t, ");\n} else {\nPTXC_LANES(em, uint64_t a = %s;", a);
    put_lane_check(t, space, pc, size);
    ptxc_put(t, " uint8_t *p_ = %s;", mem_where(space));
    mem_access(c, i, store, n);
    ptxc_put(t, ");\n} } }\n");
    return 0;
}

/* atom.shared: lane by lane, a plain read-modify-write (a block's shared
 * memory is its worker's alone), with the arithmetic of ptx_exec.c's atom1. */
int ptxc_atom_inline(const ptx_insn *i)
{
    return i->op == PTX_OP_atom_s && i->aux <= 5 && i->mode <= 9;
}

static void emit_atom_s(em_ctx *c, uint32_t pc)
{
    const ptx_insn *i = &c->p->k->code[pc];
    ptxc_text *t = c->t;
    int tk = (int)i->aux, op = i->mode, w32 = tk == 0 || tk == 1 || tk == 4;
    unsigned size = w32 ? 4 : 8;
    const char *ut = w32 ? "uint32_t" : "uint64_t", *st = w32 ? "int32_t" : "int64_t";
    const char *fo = w32 ? "f32of" : "f64of", *fb = w32 ? "(uint32_t)bits32" : "bits64";
    int sg = tk == 1 || tk == 3, fl = tk >= 4;
    char ab[48], a[96], bx[48], cx[48], nv[200];
    snprintf(a, sizeof a, "%s + UINT64_C(0x%llx)", step_src(c->p, i->ab, ab, sizeof ab),
             (unsigned long long)i->imm);
    step_src(c->p, i->s[0], bx, sizeof bx);
    step_src(c->p, i->s[1], cx, sizeof cx);
    switch (op) {
    case 0:
        snprintf(nv, sizeof nv, fl ? "%s(%s(old) + %s(bv))" : "old + bv", fb, fo, fo);
        break;
    case 1:
    case 2: {
        const char *cmp = op == 1 ? "<" : ">", *ffn = op == 1 ? (w32 ? "fminf" : "fmin")
                                                              : (w32 ? "fmaxf" : "fmax");
        if (fl)
            snprintf(nv, sizeof nv, "%s(%s(%s(old), %s(bv)))", fb, ffn, fo, fo);
        else if (sg)
            snprintf(nv, sizeof nv, "(%s)bv %s (%s)old ? bv : old", st, cmp, st);
        else
            snprintf(nv, sizeof nv, "bv %s old ? bv : old", cmp);
        break;
    }
    case 3: snprintf(nv, sizeof nv, "old >= bv ? 0 : old + 1"); break;
    case 4: snprintf(nv, sizeof nv, "(old == 0 || old > bv) ? bv : old - 1"); break;
    case 5: snprintf(nv, sizeof nv, "old & bv"); break;
    case 6: snprintf(nv, sizeof nv, "old | bv"); break;
    case 7: snprintf(nv, sizeof nv, "old ^ bv"); break;
    case 8: snprintf(nv, sizeof nv, "bv"); break;
    default: snprintf(nv, sizeof nv, "old == bv ? (%s)(%s) : old", ut, cx); break;
    }
    ptxc_put(t, "{ /* %u */ ", pc);
    put_em(t, i);
    ptxc_put(t, "\nPTXC_LANES(em, uint64_t a = %s;", a);
    put_lane_check(t, SP_SHARED, pc, size);
    ptxc_put(t, " uint8_t *p_ = B->shared + a; %s old, bv = (%s)(%s), nv; memcpy(&old, p_, %u);"
                " nv = (%s)(%s); memcpy(p_, &nv, %u); R[%u][l] = old;); }\n",
             ut, ut, bx, size, ut, nv, size, i->d[0]);
}

/* ------------------------------------------------------------ warp-wide */

/* A source whose other lanes are read (shfl's value) as an array: the
 * register file, or a temporary for a constant or special register. */
static void put_lanes_array(em_ctx *c, const char *name, uint32_t reg)
{
    char v[48];
    if (reg >= PTX_NSREG && !c->p->is_const[reg]) {
        ptxc_put(c->t, " const uint64_t *%s = R[%u];", name, reg);
        return;
    }
    ptxc_put(c->t, " uint64_t %s[32]; for (int l = 0; l < 32; l++) %s[l] = %s;", name, name,
             ptxc_src(c->p, reg, v, sizeof v));
}

static int emit_warp(em_ctx *c, uint32_t pc)
{
    const ptx_insn *i = &c->p->k->code[pc];
    ptxc_text *t = c->t;
    char b[48], cc[48];
    ptxc_put(t, "{ /* %u */ ", pc);
    put_em(t, i);
    ptxc_put(t, " if (em) {");
    switch (i->op) {
    case PTX_OP_fence:
        ptxc_put(t, " __atomic_thread_fence(__ATOMIC_SEQ_CST);");
        break;
    case PTX_OP_activemask:
        ptxc_put(t, " PTXC_LANES(em, R[%u][l] = em);", i->d[0]);
        break;
    case PTX_OP_vote_all:
    case PTX_OP_vote_any:
    case PTX_OP_vote_uni:
    case PTX_OP_vote_ballot: {
        ptxc_put(t, " uint32_t v_ = %sP[%u] & em;", i->mode ? "~" : "", i->s[0]);
        const char *r = i->op == PTX_OP_vote_all ? "v_ == em ? em : 0"
                        : i->op == PTX_OP_vote_any ? "v_ ? em : 0"
                                                   : "(v_ == 0 || v_ == em) ? em : 0";
        if (i->op == PTX_OP_vote_ballot)
            ptxc_put(t, " PTXC_LANES(em, R[%u][l] = v_);", i->d[0]);
        else
            ptxc_put(t, " P[%u] = (P[%u] & ~em) | (%s);", i->d[0], i->d[0], r);
        break;
    }
    case PTX_OP_shfl: {
        static const char *const lane[4] = {
            "j = l - (int)bval; ok = j >= maxl;", "j = l + (int)bval; ok = j <= maxl;",
            "j = l ^ (int)bval; ok = j <= maxl;", "j = minl | (int)(bval & ~seg); ok = j <= maxl;"};
        put_lanes_array(c, "A_", i->s[0]);
        ptxc_put(t, " uint64_t out_[32]; uint32_t pv_ = 0;\n"
                    "PTXC_LANES(em, uint32_t bval = (uint32_t)(%s) & 31, cval = (uint32_t)(%s);"
                    " uint32_t seg = (cval >> 8) & 31; int maxl = (int)((l & seg) | (cval & 31 &"
                    " ~seg)), minl = (int)(l & seg), j, ok; %s if (!ok || j < 0 || j > 31) j = l;"
                    " out_[l] = (uint32_t)A_[j]; pv_ |= (uint32_t)ok << l;);\n"
                    "PTXC_LANES(em, R[%u][l] = out_[l]);",
                 step_src(c->p, i->s[1], b, sizeof b), step_src(c->p, i->s[2], cc, sizeof cc),
                 lane[i->mode & 3], i->d[0]);
        if (i->mode2)
            ptxc_put(t, " P[%u] = (P[%u] & ~em) | (pv_ & em);", i->d[1], i->d[1]);
        break;
    }
    default:
        return -1;
    }
    ptxc_put(t, " } }\n");
    return 0;
}

/* An instruction run by its interpreter handler, on the register file. */
static void emit_call(em_ctx *c, uint32_t pc)
{
    const ptx_insn *i = &c->p->k->code[pc];
    ptxc_put(c->t, "{ /* %u: %s */ ", pc, "handler");
    put_em(c->t, i);
    ptxc_put(c->t, " if (em && (rc = B->call(B, WV, %u, em)) != 0) goto out; }\n", pc);
}

/* ------------------------------------------------------------- control */

static void emit_control(em_ctx *c, uint32_t pc)
{
    const ptx_insn *i = &c->p->k->code[pc];
    ptxc_text *t = c->t;
    uint32_t next = pc + 1;
    ptxc_put(t, "{ /* %u */ ", pc);
    put_em(t, i);
    switch (i->ctl) {
    case PTX_C_BRA: {
        uint32_t to = i->aux;
        if (to <= pc)
            ptxc_put(t, " if ((++B->backedges & 0xfff) == 0 && (rc = B->deadline(B)) != 0)"
                        " goto out;");
        if (to == next) {
            ptxc_put(t, " goto L%u; }\n", next);
            return;
        }
        ptxc_put(t, " if (em == 0) goto L%u;"
                    " if (em == m) { if (%uu > mpc) { ptxc_park(WV, m, %u); goto reselect; }"
                    " goto L%u; }"
                    " ptxc_park(WV, em, %u); m &= ~em;", next, to, to, to, to);
        if (to < next)
            ptxc_put(t, " ptxc_park(WV, m, %u); goto reselect; }\n", next);
        else
            ptxc_put(t, " mpc = %uu < mpc ? %uu : mpc; goto L%u; }\n", to, to, next);
        return;
    }
    case PTX_C_EXIT:
    case PTX_C_RET:
        ptxc_put(t, " *WV->live &= ~em; m &= ~em; if (m == 0) goto reselect; goto L%u; }\n",
                 next);
        return;
    case PTX_C_BAR:
        ptxc_put(t, " B->bar(B, WV, %u, em); m &= ~em; if (m == 0) goto reselect; goto L%u; }\n",
                 pc, next);
        return;
    default: /* trap */
        ptxc_put(t, " if (em) FAULT(%u, 0, %d); goto L%u; }\n", pc, E_FAILED, next);
        return;
    }
}

/* ---------------------------------------------------------------- blocks */

static int emit_block(em_ctx *c, uint32_t b)
{
    const ptxc_plan *p = c->p;
    const ptx_kernel *k = p->k;
    const ptxc_bb *bb = &p->bb[b];
    ptxc_text *t = c->t;
    c->bb = bb;
    uint32_t unguarded = 0;
    for (uint32_t pc = bb->start; pc < bb->end; pc++)
        unguarded += k->code[pc].guard == 0;
    ptxc_put(t, "L%u: if (mpc == %uu) ptxc_join(WV, %u, &m, &mpc);\n", bb->start, bb->start,
             bb->start);
    ptxc_put(t, "n += (uint64_t)__builtin_popcount(m) * %u;\n", unguarded);
    uint32_t seg = UINT32_MAX;
    for (uint32_t pc = bb->start; pc < bb->end; pc++) {
        const ptx_insn *i = &k->code[pc];
        int kind = ptxc_kind(i);
        if (kind == PTXC_LANE) {
            if (seg == UINT32_MAX)
                seg = pc;
            continue;
        }
        if (seg != UINT32_MAX && emit_segment(c, seg, pc) != 0)
            return -1;
        seg = UINT32_MAX;
        switch (kind) {
        case PTXC_NOP:
            if (i->guard)
                ptxc_put(t, "{ /* %u */ uint32_t em = m & %sP[%u];"
                            " n += (uint64_t)__builtin_popcount(em); }\n", pc,
                         (i->guard & PTX_GUARD_NEG) ? "~" : "", i->guard & ~PTX_GUARD_NEG);
            break;
        case PTXC_MEM:
            if (i->op == PTX_OP_atom_s)
                emit_atom_s(c, pc);
            else if (emit_mem(c, pc) != 0)
                return -1;
            break;
        case PTXC_WARP:
            if (emit_warp(c, pc) != 0)
                return -1;
            break;
        case PTXC_CALL:
            emit_call(c, pc);
            break;
        case PTXC_CTL:
            emit_control(c, pc);
            break;
        default:
            return -1;
        }
    }
    if (seg != UINT32_MAX && emit_segment(c, seg, bb->end) != 0)
        return -1;
    return 0;
}

static void emit_head(ptxc_text *t)
{
    ptxc_put(t, "%s%s\n%s", prelude_head, PTXC_ABI_TEXT, prelude_body);
    ptxc_put(t, "__attribute__((visibility(\"default\"))) const unsigned ptxc_abi = %u;\n",
             PTXC_ABI_VERSION);
    ptxc_put(t,
             "__attribute__((visibility(\"default\")))\n"
             "int ptxc_kernel(ptxc_block *B, ptxc_warp *WV)\n{\n"
             "uint64_t (*const R)[32] = WV->r; uint32_t *const P = WV->p;\n"
             "const uint64_t WI = WV->index;\n"
             "const uint32_t *const TX = B->tid[0] + WI * 32, *const TY = B->tid[1] + WI * 32,"
             " *const TZ = B->tid[2] + WI * 32;\n"
             "const uint64_t NTX = B->ntid[0], NTY = B->ntid[1], NTZ = B->ntid[2];\n"
             "const uint64_t CTX = B->ctaid[0], CTY = B->ctaid[1], CTZ = B->ctaid[2];\n"
             "const uint64_t NCX = B->nctaid[0], NCY = B->nctaid[1], NCZ = B->nctaid[2];\n"
             "const uint64_t NWI = B->nwarps, DSM = B->dyn_smem, TSM = B->total_smem;\n"
             "const uint64_t SHB = (uint64_t)(uintptr_t)B->shared, SHSZ = B->shared_size;\n"
             "const uint64_t LOCB = (uint64_t)(uintptr_t)B->local, LSZ = B->local_size;\n"
             "const uint64_t PLEN = B->params_len;\n"
             "uint32_t pc = *WV->pc, m = *WV->mask, mpc = *WV->merge_pc;\n"
             "uint64_t n = 0;\nint rc = 0;\n"
             "if (m == 0) goto reselect;\n");
}

int ptxc_emit(const ptx_kernel *k, ptxc_text *out, ptxc_needs *needs, char *why, size_t why_len)
{
    ptxc_plan p;
    if (ptxc_plan_make(k, &p, why, why_len) != 0)
        return -1;
    em_ctx c = {.p = &p, .t = out};
    emit_head(out);
    ptxc_put(out, "dispatch:\nswitch (pc) {\n");
    for (uint32_t b = 0; b < p.nbb; b++)
        ptxc_put(out, "case %u: goto L%u;\n", p.bb[b].start, p.bb[b].start);
    ptxc_put(out, "default: FAULT(pc, 0, %d);\n}\n", E_FAILED);
    int rc = 0;
    for (uint32_t b = 0; b < p.nbb && rc == 0; b++)
        rc = emit_block(&c, b);
    /* past the end: unreachable (the last instruction stops every lane) */
    ptxc_put(out, "L%u: FAULT(%u, 0, %d);\n", k->ncode, k->ncode - 1, E_FAILED);
    ptxc_put(out, "reselect:\n"
                  "if (!B->select(B, WV, &pc, &m, &mpc)) goto out;\n"
                  "goto dispatch;\n"
                  "out:\n"
                  "*WV->pc = pc; *WV->mask = rc ? 0 : m; *WV->merge_pc = mpc; *WV->insns += n;\n"
                  "return rc;\n}\n");
    if (needs != NULL) {
        needs->fill_sregs = p.calls_read_sregs;
        needs->fill_consts = p.calls_read_consts;
    }
    ptxc_plan_free(&p);
    if (rc != 0 || out->failed) {
        if (why != NULL && why_len > 0)
            snprintf(why, why_len, out->failed ? "out of memory writing C" : "an instruction "
                                                                              "has no C form");
        return -1;
    }
    return 0;
}
