/*
 * ptxc_emit.c — a kernel's compact form as one C function that runs a warp
 * exactly as the interpreter's ptx_warp_run does (ptx_exec.c): the same
 * lane groups, the same reconvergence (parked lanes rejoin when the group
 * reaches their pc), the same barrier arrivals, faults at the same
 * instruction, lane and address, the same thread-instruction count.
 *
 * Shape: one label per basic block, entered with the group's mask m. A run
 * of lane-local instructions and loads becomes one loop over the lanes
 * (ptxc_seg.c: registers in C locals, loaded from and stored to the register
 * file only where a value crosses the run; with a full mask gcc vectorises
 * it). A store, an atomic, a warp-wide instruction or one run by its handler
 * is a step of its own between those loops (ptxc_mem.c and below), so
 * memory is written in the interpreter's order (instruction by instruction,
 * lane by lane). Control (bra, exit, bar, trap) ends a block; branches back
 * count towards the time limit.
 *
 * The text is built only from fixed strings and numbers printed here; no
 * name or text of the PTX reaches it. No global state.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptxc.h"

/* Instructions of one lane loop: gcc vectorises loops of a dozen or so, not
 * of fifty; a loop with per-lane loads stays scalar anyway, and long. */
#define PTXC_RUN_MAX 12u
#define PTXC_RUN_LONG 256u

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
    /* min/max as the interpreter's (ptx_exec.c PTX_MINMAX): -0.0 below +0.0 */
    "#define PTXC_MINMAX(name, T) "
    "static inline T name##_min(T a, T b) { return isnan(a) ? b : isnan(b) ? a : a < b ? a : "
    "b < a ? b : signbit(a) ? a : b; } "
    "static inline T name##_max(T a, T b) { return isnan(a) ? b : isnan(b) ? a : a > b ? a : "
    "b > a ? b : signbit(a) ? b : a; }\n"
    "PTXC_MINMAX(f32, float)\nPTXC_MINMAX(f64, double)\n"
    "static inline double satd(double x) { return x > 0.0 ? (x < 1.0 ? x : 1.0) : 0.0; }\n"
    "#define LD_s16(v) ((int16_t)(uint16_t)(v))\n#define LD_u16(v) ((uint16_t)(v))\n"
    /* a 16-bit source of a widening op as a 32-bit value (the same number): gcc
     * vectorises these in 32-bit lanes, not with word shuffles */
    "#define LW_s16(v) ((int32_t)((uint32_t)(v) << 16) >> 16)\n"
    "#define LW_u16(v) ((uint32_t)(v) & 0xffffu)\n"
    "#define LW_s32(v) LD_s32(v)\n#define LW_u32(v) LD_u32(v)\n"
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
    /* A warp's load that moves by a steady stride (a grid-stride loop: tens of
     * KiB a trip, which the CPU's own prefetchers do not follow) has the
     * lines it will read eight trips on fetched now. A prefetch never
     * faults and changes no value. */
    "static inline void ptxc_prefetch(uint64_t *last, uint64_t a, uint64_t span) {\n"
    "    uint64_t d = a - *last, t = a + 8 * d; *last = a;\n"
    "    if (d == 0 || d + (UINT64_C(1) << 24) >= (UINT64_C(1) << 25) || span > 1024) return;\n"
    "    for (uint64_t o = t & ~UINT64_C(63); o - t < span || o < t; o += 64)\n"
    "        __builtin_prefetch((const void *)(uintptr_t)o); }\n"
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
    /* a trip loop's index in lane l (ptxc_trip.c) */
    "#define PTXC_TRIPX(l) ((uint64_t)(uint32_t)(X0_ + (uint32_t)(l)))\n"

    "#define PTXC_IN1(a, sz, lo, len) (((a) - (lo) < (len)) & ((len) - ((a) - (lo)) >= (sz)))\n"
    "#define PTXC_IN4(a, sz) (PTXC_IN1(a, sz, G0_, G1_) | PTXC_IN1(a, sz, G2_, G3_) | "
    "PTXC_IN1(a, sz, G4_, G5_) | PTXC_IN1(a, sz, G6_, G7_))\n"
    "#define FAULT(pc, a, code) do { rc = B->fault(B, (pc), (a), (code)); goto out; } while (0)\n";


const char *ptxc_step_src(const ptxc_emitter *c, uint32_t reg, char *buf, size_t n)
{
    if (reg == c->trip_reg)
        return ptxc_trip_lane;
    if (reg < PTX_NSREG || c->p->is_const[reg])
        return ptxc_src(c->p, reg, buf, n);
    char slot[24];
    snprintf(buf, n, "%s[l]", ptxc_slot(c, reg, slot, sizeof slot));
    return buf;
}

void ptxc_put_em(ptxc_text *t, const ptx_insn *i)
{
    if (i->guard == 0) {
        ptxc_put(t, "uint32_t em = m;");
        return;
    }
    ptxc_put(t, "uint32_t em = m & %sP[%u]; n += (uint64_t)__builtin_popcount(em);",
             (i->guard & PTX_GUARD_NEG) ? "~" : "", i->guard & ~PTX_GUARD_NEG);
}

/* ------------------------------------------------------------ warp-wide */

/* Before a warp-wide .sync instruction: where lanes of its member mask are
 * parked elsewhere, the interpreter holds the group there until they arrive
 * (ptx_exec.c sync_must_hold), a schedule the lowest-pc rule of this code does
 * not follow; so the warp goes to the interpreter at this instruction, not yet
 * counted (the block's unguarded instructions from here on are taken back). */
static void emit_hold(ptxc_emitter *c, uint32_t pc)
{
    const ptx_insn *i = &c->p->k->code[pc];
    if (ptx_sync_mask_operand(i->op) < 0)
        return;
    uint32_t later = 0;
    for (uint32_t q = pc; q < c->bb->end; q++)
        later += c->p->k->code[q].guard == 0;
    ptxc_put(c->t, "if (*WV->parked) { uint32_t hm_ = m");
    if (i->guard != 0)
        ptxc_put(c->t, " & %sP[%u]", (i->guard & PTX_GUARD_NEG) ? "~" : "",
                 i->guard & ~PTX_GUARD_NEG);
    ptxc_put(c->t, "; if (hm_ && B->hold(B, WV, %u, hm_, m)) { n -= (uint64_t)"
                   "__builtin_popcount(m) * %u; pc = %u; rc = %d; goto out; } }\n",
             pc, later, pc, PTXC_HANDOFF);
}

/* A source whose other lanes are read (shfl's value) as an array: the
 * register file, or a temporary for a constant or special register. */
static void put_lanes_array(ptxc_emitter *c, const char *name, uint32_t reg)
{
    char v[48];
    if (reg >= PTX_NSREG && !c->p->is_const[reg]) {
        ptxc_put(c->t, " const uint64_t *%s = R[%u];", name, reg);
        return;
    }
    ptxc_put(c->t, " uint64_t %s[32]; for (int l = 0; l < 32; l++) %s[l] = %s;", name, name,
             ptxc_src(c->p, reg, v, sizeof v));
}

static int emit_warp(ptxc_emitter *c, uint32_t pc)
{
    const ptx_insn *i = &c->p->k->code[pc];
    ptxc_text *t = c->t;
    char b[48], cc[48];
    emit_hold(c, pc);
    ptxc_put(t, "{ /* %u */ ", pc);
    ptxc_put_em(t, i);
    ptxc_put(t, " if (em) {");
    switch (i->op) {
    case PTX_OP_fence:
    case PTX_OP_warpsync: /* its waiting is emit_hold's */
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
        /* a source lane that does not run this shfl with us gives 0, as in
         * the interpreter (h_shfl): its register holds an older value */
        static const char *const lane[4] = {
            "j = l - (int)bval; ok = j >= maxl;", "j = l + (int)bval; ok = j <= maxl;",
            "j = l ^ (int)bval; ok = j <= maxl;", "j = minl | (int)(bval & ~seg); ok = j <= maxl;"};
        put_lanes_array(c, "A_", i->s[0]);
        ptxc_put(t, " uint64_t out_[32]; uint32_t pv_ = 0;\n"
                    "PTXC_LANES(em, uint32_t bval = (uint32_t)(%s) & 31, cval = (uint32_t)(%s);"
                    " uint32_t seg = (cval >> 8) & 31; int maxl = (int)((l & seg) | (cval & 31 &"
                    " ~seg)), minl = (int)(l & seg), j, ok; %s if (!ok || j < 0 || j > 31) j = l;"
                    " out_[l] = em >> j & 1 ? (uint32_t)A_[j] : 0; pv_ |= (uint32_t)ok << l;);\n"
                    "PTXC_LANES(em, R[%u][l] = out_[l]);",
                 ptxc_step_src(c, i->s[1], b, sizeof b), ptxc_step_src(c, i->s[2], cc, sizeof cc),
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
static void emit_call(ptxc_emitter *c, uint32_t pc)
{
    const ptx_insn *i = &c->p->k->code[pc];
    emit_hold(c, pc);
    ptxc_put(c->t, "{ /* %u: %s */ ", pc, "handler");
    ptxc_put_em(c->t, i);
    ptxc_put(c->t, " if (em && (rc = B->call(B, WV, %u, em)) != 0) goto out; }\n", pc);
}

/* ------------------------------------------------------------- control */

/* A branch back: where a warp may yield (ptxc_abi.h yield_mask) and resume. */
static int resumes_at(const ptxc_plan *p, uint32_t pc)
{
    const ptx_insn *i = &p->k->code[pc];
    return i->op == PTX_OP_ctl && i->ctl == PTX_C_BRA && i->aux <= pc;
}

static void emit_control(ptxc_emitter *c, uint32_t pc)
{
    const ptx_insn *i = &c->p->k->code[pc];
    ptxc_text *t = c->t;
    uint32_t next = pc + 1;
    /* a warp that yielded at a branch back resumes here and runs the branch
     * again, counted again, as the interpreter does; the block's own count
     * holds it already for the code that falls through to it */
    if (resumes_at(c->p, pc) && c->bb->start != pc)
        ptxc_put(t, "if (0) { R%u: n += (uint64_t)__builtin_popcount(m) * %u; }\n", pc,
                 i->guard == 0);
    ptxc_put(t, "{ /* %u */ ", pc);
    ptxc_put_em(t, i);
    switch (i->ctl) {
    case PTX_C_BRA: {
        uint32_t to = i->aux;
        if (to <= pc)
            ptxc_put(t, " { uint64_t be = ++B->backedges;"
                        " if ((be & 0xfff) == 0 && (rc = B->deadline(B)) != 0) goto out;"
                        " if ((be & B->yield_mask) == 0) { pc = %u; rc = %d; goto out; } }",
                     pc, PTXC_YIELD);
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
        ptxc_put(t, " if (em) FAULT(%u, 0, %d); goto L%u; }\n", pc, PTX_E_LAUNCH_FAILED, next);
        return;
    }
}

/* ---------------------------------------------------------------- blocks */

int ptxc_emit_range(ptxc_emitter *c, uint32_t start, uint32_t end)
{
    const ptxc_plan *p = c->p;
    const ptx_kernel *k = p->k;
    const ptxc_bb *bb = c->bb;
    ptxc_text *t = c->t;
    uint32_t seg = UINT32_MAX;
    int lane_loads = 0;
    for (uint32_t pc = start; pc < end; pc++) {
        const ptx_insn *i = &k->code[pc];
        int kind = ptxc_kind(i), load = ptxc_fusable_load(i);
        if (kind == PTXC_LANE || load) {
            /* a run that gcc can vectorise (no load of its own per lane)
             * stays short enough that it does; one with such loads is scalar
             * anyway, and may be long */
            uint32_t cap = lane_loads ? PTXC_RUN_LONG : PTXC_RUN_MAX;
            if (seg != UINT32_MAX && pc - seg >= cap) {
                if (ptxc_emit_segment(c, seg, pc) != 0)
                    return -1;
                seg = UINT32_MAX;
            }
            if (seg == UINT32_MAX)
                seg = pc, lane_loads = 0;
            lane_loads |= load && !ptxc_uniform_load(i, p);
            continue;
        }
        if (seg != UINT32_MAX && ptxc_emit_segment(c, seg, pc) != 0)
            return -1;
        seg = UINT32_MAX;
        switch (kind) {
        case PTXC_NOP:
            if (i->guard)
                ptxc_put(t, "{ /* %u */ uint32_t em = m & %sP[%u];"
                            " n += (uint64_t)__builtin_popcount(em); }\n", pc,
                         (i->guard & PTX_GUARD_NEG) ? "~" : "", i->guard & ~PTX_GUARD_NEG);
            break;
        case PTXC_MEM: {
            uint32_t gather_end = ptxc_gather_end(p, bb, pc);
            if (gather_end != 0) {
                if (ptxc_emit_gather(c, pc, gather_end) != 0)
                    return -1;
                pc = gather_end - 1;
            } else if (i->op == PTX_OP_atom_s)
                ptxc_emit_atom_s(c, pc);
            else if (ptxc_emit_mem(c, pc) != 0)
                return -1;
            break;
        }
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
    if (seg != UINT32_MAX && ptxc_emit_segment(c, seg, end) != 0)
        return -1;
    return 0;
}

static int emit_block(ptxc_emitter *c, uint32_t b)
{
    const ptxc_plan *p = c->p;
    const ptxc_bb *bb = &p->bb[b];
    c->bb = bb;
    if (ptxc_homes(c) != 0)
        return -1;
    uint32_t unguarded = 0;
    for (uint32_t pc = bb->start; pc < bb->end; pc++)
        unguarded += p->k->code[pc].guard == 0;
    ptxc_put(c->t, "L%u: if (mpc == %uu) ptxc_join(WV, %u, &m, &mpc);\n", bb->start, bb->start,
             bb->start);
    ptxc_put(c->t, "n += (uint64_t)__builtin_popcount(m) * %u;\n", unguarded);
    ptxc_trip tr;
    if (ptxc_trip_find(c, &tr) && ptxc_emit_trips(c, &tr, unguarded) != 0)
        return -1;
    return ptxc_emit_range(c, bb->start, bb->end);
}

static void emit_head(ptxc_text *t, uint32_t pf_sites)
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
             /* held in locals: a store through any pointer could alias B */
             "uint8_t *const SHP = B->shared; const uint8_t *const ZP = B->zero;\n"
             "const uint64_t LOCB = (uint64_t)(uintptr_t)B->local, LSZ = B->local_size;\n"
             "const uint64_t PLEN = B->params_len, PRMB = (uint64_t)(uintptr_t)B->params;\n"
             "const uint64_t ZERO_ADDR = (uint64_t)(uintptr_t)B->zero;\n"
             "uint32_t pc = *WV->pc, m = *WV->mask, mpc = *WV->merge_pc;\n"
             "uint64_t n = 0;\nint rc = 0;\n");
    /* each prefetched load's last warp address (ptxc_mem.c): its stride */
    if (pf_sites > 0)
        ptxc_put(t, "uint64_t PF_[%u] = {0};\n", pf_sites);
}

/* Numbers the loads that get a stride prefetch: pf_site[pc] = slot + 1. */
static uint32_t number_prefetch_sites(const ptx_kernel *k, uint32_t *pf_site)
{
    uint32_t n = 0;
    for (uint32_t pc = 0; pc < k->ncode && n < PTXC_PF_SITES; pc++)
        if (ptxc_prefetched_load(&k->code[pc]))
            pf_site[pc] = ++n;
    return n;
}

int ptxc_emit(const ptx_kernel *k, ptxc_text *out, ptxc_needs *needs, char *why, size_t why_len)
{
    ptxc_plan p;
    if (ptxc_plan_make(k, &p, why, why_len) != 0)
        return -1;
    uint32_t *pf_site = calloc(k->ncode + 1, sizeof *pf_site);
    uint8_t *home = calloc(k->nregs, 1), *declared = calloc(k->nregs, 1);
    if (pf_site == NULL || home == NULL || declared == NULL) {
        ptxc_plan_free(&p);
        free(pf_site);
        free(home);
        free(declared);
        snprintf(why, why_len, "out of memory writing C");
        return -1;
    }
    /* the blocks first, into a text of their own: the private arrays they
     * ask for (ptxc_home.c) are declared at the function's top */
    ptxc_text body = {0};
    ptxc_emitter c = {.p = &p, .t = &body, .pf_site = pf_site, .home = home,
                      .declared = declared, .trip_reg = UINT32_MAX};
    uint32_t pf_sites = number_prefetch_sites(k, pf_site);
    int rc = 0;
    for (uint32_t b = 0; b < p.nbb && rc == 0; b++)
        rc = emit_block(&c, b);
    c.t = out;
    emit_head(out, pf_sites);
    ptxc_put_private_arrays(&c);
    ptxc_put(out, "if (m == 0) goto reselect;\n");
    ptxc_put(out, "dispatch:\nswitch (pc) {\n");
    for (uint32_t b = 0; b < p.nbb; b++)
        ptxc_put(out, "case %u: goto L%u;\n", p.bb[b].start, p.bb[b].start);
    for (uint32_t b = 0; b < p.nbb; b++)
        if (p.bb[b].end > p.bb[b].start + 1 && resumes_at(&p, p.bb[b].end - 1))
            ptxc_put(out, "case %u: goto R%u;\n", p.bb[b].end - 1, p.bb[b].end - 1);
    ptxc_put(out, "default: FAULT(pc, 0, %d);\n}\n", PTX_E_LAUNCH_FAILED);
    if (body.failed)
        out->failed = 1;
    else if (body.n > 0)
        ptxc_put(out, "%s", body.s);
    ptxc_text_free(&body);
    /* past the end: unreachable (the last instruction stops every lane) */
    ptxc_put(out, "L%u: FAULT(%u, 0, %d);\n", k->ncode, k->ncode - 1, PTX_E_LAUNCH_FAILED);
    ptxc_put(out, "reselect:\n"
                  "if (!B->select(B, WV, &pc, &m, &mpc)) goto out;\n"
                  "goto dispatch;\n"
                  "out: /* a yield keeps the lanes that run */\n"
                  "*WV->pc = pc; *WV->mask = rc && rc != %d && rc != %d ? 0 : m;"
                  " *WV->merge_pc = mpc; *WV->insns += n;\n"
                  "return rc;\n}\n", PTXC_YIELD, PTXC_HANDOFF);
    if (needs != NULL) {
        needs->fill_sregs = p.calls_read_sregs;
        needs->fill_consts = p.calls_read_consts;
    }
    ptxc_plan_free(&p);
    free(pf_site);
    free(home);
    free(declared);
    if (rc != 0 || out->failed) {
        if (why != NULL && why_len > 0)
            snprintf(why, why_len, out->failed ? "out of memory writing C" : "an instruction "
                                                                              "has no C form");
        return -1;
    }
    return 0;
}
