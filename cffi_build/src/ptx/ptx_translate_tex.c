/*
 * ptx_translate_tex.c — the texture and surface instructions to compact code:
 * tex (.base, .level, .grad; 1d 2d 3d a1d a2d cube acube; results .f32,
 * .s32, .u32; coordinates .f32 or .s32; an optional residency predicate),
 * tld4 (.r .g .b .a; 2d a2d cube acube), txq and suq (the queries below),
 * suld.b and sust.b (1d 2d 3d a1d a2d; b8 b16 b32 b64, scalar, .v2, .v4;
 * .trap .clamp .zero). Their address operand [a, c] holds a coordinate
 * vector, so they have their own operand parser.
 *
 * Encoding (the handlers are in ptx_exec_tex.c): d[] the results (sust: the
 * values stored), s[] the coordinate vector as written, ab the object's
 * register, mode the geometry (PTX_TG_*) or query (PTX_Q_*). tex.level,
 * tex.grad and a residency predicate add one PTX_OP_nop right after the
 * instruction whose fields carry them (s[0] the lod or s[] dPdx, d[] dPdy,
 * ab the predicate): nothing branches between the two, and the linker
 * renumbers its fields as any instruction's.
 *
 * Refused by name: texture, sampler and surface references (.texref
 * variables, independent mode's sampler operand), coordinate offsets, depth
 * compare, .f16/.f16x2 results, multi-sample geometries, tex.grad on
 * cubemaps, the channel queries, sust.p and sured.
 * No state; the parse state is the caller's.
 */
#include <string.h>

#include "ptx_parse.h"
#include "ptx_tex.h"

int px_is_texture(const char *opcode)
{
    static const char *const ops[] = {"tex", "tld4", "txq", "suld", "sust", "suq"};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
        if (!strcmp(opcode, ops[k]))
            return 1;
    return 0;
}

/* The geometry modifier, or -1. */
static int geometry(px_mods *m)
{
    static const char *const g[] = {"1d", "2d", "3d", "a1d", "a2d", "cube", "acube"};
    for (int k = 0; k < 7; k++)
        if (px_take(m, g[k]))
            return k;
    return -1;
}

/* Coordinates (or lanes of a vector) a geometry reads: at least, at most. */
static int coords_needed(int geom)
{
    static const int need[] = {1, 2, 3, 2, 3, 3, 4};
    return need[geom];
}

/* The register holding source operand o's value (immediates become constants). */
static uint32_t value_reg(ps *s, const opnd *o)
{
    switch (o->kind) {
    case O_REG:
        return o->idx;
    case O_INT:
    case O_F32:
        return px_cst(s, o->u, 0, 0);
    case O_FLT: {
        float f = (float)o->f;
        uint32_t b;
        memcpy(&b, &f, 4);
        return px_cst(s, b, 0, 0);
    }
    default:
        px_fail(s, "expected a register or an immediate");
        return PTX_R_ZERO;
    }
}

/* Lane k of a vector (or a scalar as a one-lane vector) as a source. */
static uint32_t lane_src(ps *s, const opnd *o, int k)
{
    if (o->kind != O_VEC)
        return k == 0 ? value_reg(s, o) : PTX_R_ZERO;
    if (k >= o->nvec || o->vsink[k] == 1)
        return PTX_R_ZERO;
    if (o->vsink[k] == 2)
        return px_cst(s, o->vval[k], 0, 0);
    return o->vec[k];
}

/* Lane k of a destination vector (or scalar): a writable register or the sink. */
static uint32_t lane_dst(ps *s, const opnd *o, int k)
{
    if (o->kind == O_SINK)
        return s->sink;
    if (o->kind == O_REG && k == 0 && o->idx >= PTX_NSREG)
        return o->idx;
    if (o->kind == O_VEC && k < o->nvec) {
        if (o->vsink[k] == 1)
            return s->sink;
        if (o->vsink[k] == 0 && o->vec[k] >= PTX_NSREG)
            return o->vec[k];
    }
    px_fail(s, "expected a destination register");
    return s->sink;
}

static int lanes_of(const opnd *o)
{
    return o->kind == O_VEC ? o->nvec : 1;
}

/* [a, c] or [a]: the object's register and, with want_coords, the coordinates. */
static int address(ps *s, uint32_t *obj, opnd *coords, int want_coords)
{
    opnd a;
    px_expect(s, '[');
    if (s->failed)
        return -1;
    px_parse_operand(s, &a);
    if (s->failed)
        return -1;
    if (a.kind != O_REG) {
        px_fail(s, "unsupported: texture, sampler and surface references (only objects "
                   "passed in a .u64 register)");
        return -1;
    }
    *obj = a.idx;
    if (want_coords) {
        px_expect(s, ',');
        if (s->failed)
            return -1;
        px_parse_operand(s, coords);
        if (!s->failed && px_is_p(s, ',')) {
            px_fail(s, "unsupported: an independent-mode sampler operand");
            return -1;
        }
    }
    px_expect(s, ']');
    return s->failed ? -1 : 0;
}

/* ", operand" when one follows. */
static int more(ps *s, opnd *o)
{
    if (s->failed || !px_is_p(s, ','))
        return 0;
    px_next(s);
    px_parse_operand(s, o);
    return s->failed ? 0 : 1;
}

static int end(ps *s, const char *what)
{
    if (!s->failed && !px_is_p(s, ';'))
        px_fail(s, "%s", what);
    px_expect(s, ';');
    return s->failed ? -1 : 0;
}

static int missing(ps *s, const char *what)
{
    if (!s->failed)
        px_fail(s, "%s", what);
    return -1;
}

/* d or d|p: the result vector, and the residency predicate's index (0: none). */
static int results(ps *s, opnd *d, uint32_t *pred)
{
    *pred = 0;
    px_parse_operand(s, d);
    if (s->failed)
        return -1;
    if (d->has2) { /* a register followed by |p */
        if (d->kind2 != O_PRED) {
            px_fail(s, "expected a predicate after '|'");
            return -1;
        }
        *pred = d->idx2;
    } else if (px_is_p(s, '|')) {
        opnd p;
        px_next(s);
        px_parse_operand(s, &p);
        if (s->failed || p.kind != O_PRED || p.idx < PTX_NSPRED) {
            px_fail(s, "expected a predicate after '|'");
            return -1;
        }
        *pred = p.idx;
    }
    if (!s->failed && px_is_p(s, ','))
        px_next(s);
    else
        px_fail(s, "expected ',' after the results");
    return s->failed ? -1 : 0;
}

/* tex's and tld4's first operands: four results (and a predicate), then
 * [object, coordinates] with as many as the geometry reads. */
static int lookup_operands(ps *s, int geom, opnd *d, opnd *c, uint32_t *obj, uint32_t *pred)
{
    if (results(s, d, pred) != 0 || address(s, obj, c, 1) != 0)
        return -1;
    if (lanes_of(d) != 4 || lanes_of(c) < coords_needed(geom) || lanes_of(c) > 4) {
        px_fail(s, "wrong vector sizes");
        return -1;
    }
    return 0;
}

/* The extra operands of tex.level/tex.grad and the predicate, in a nop after i. */
static int extra_insn(ps *s, const opnd *lod, const opnd *dx, const opnd *dy, uint32_t pred,
                      uint32_t guard)
{
    ptx_insn *e = px_emit(s, PTX_OP_nop, guard);
    if (e == NULL)
        return -1;
    for (int k = 0; k < 4; k++) {
        SS(e, k, lod != NULL ? (k == 0 ? value_reg(s, lod) : PTX_R_ZERO)
                 : dx != NULL ? lane_src(s, dx, k) : PTX_R_ZERO);
        SD(e, k, dy != NULL ? lane_src(s, dy, k) : PTX_R_ZERO);
    }
    px_setf(e, PTX_F_AB, pred ? PTX_FK_PRED : PTX_FK_NONE, pred);
    return s->failed ? -1 : 0;
}

/* A new instruction with its two mode fields, or NULL. */
static ptx_insn *emit(ps *s, int op, uint32_t guard, int mode, int mode2)
{
    ptx_insn *i = px_emit(s, op, guard);
    if (i != NULL) {
        i->mode = (uint8_t)mode;
        i->mode2 = (uint16_t)mode2;
    }
    return i;
}

static int emit_lookup(ps *s, int op, uint32_t guard, const opnd *d, const opnd *c,
                       uint32_t obj, int mode, int mode2)
{
    ptx_insn *i = emit(s, op, guard, mode, mode2);
    if (i == NULL)
        return -1;
    for (int k = 0; k < 4; k++) {
        SD(i, k, lane_dst(s, d, k));
        SS(i, k, lane_src(s, c, k));
    }
    px_setf(i, PTX_F_AB, PTX_FK_REG, obj);
    return s->failed ? -1 : 0;
}

/* mode2 of tex: bit 0 float coordinates, bits 1-2 the lod mode, bit 3 an extra nop. */
static int b_tex(ps *s, px_mods *m, uint32_t guard)
{
    int lod = px_take(m, "level") ? PTX_LOD_LEVEL : px_take(m, "grad") ? PTX_LOD_GRAD
                                                                      : PTX_LOD_BASE;
    px_take(m, "base");
    int geom = geometry(m);
    int v4 = px_take(m, "v4");
    int dt = px_take_type(m), ct = px_take_type(m);
    if (geom < 0 || !v4 || (dt != T_F32 && dt != T_S32 && dt != T_U32) ||
        (ct != T_F32 && ct != T_S32) || px_finish(s, m) != 0 ||
        (ct == T_S32 && (geom == PTX_TG_CUBE || geom == PTX_TG_ACUBE)) ||
        (lod == PTX_LOD_GRAD && (geom == PTX_TG_CUBE || geom == PTX_TG_ACUBE)))
        return px_unsupported(s, m);
    opnd d, c, x, dx, dy;
    uint32_t obj, pred;
    if (lookup_operands(s, geom, &d, &c, &obj, &pred) != 0)
        return -1;
    int got_lod = lod == PTX_LOD_LEVEL && more(s, &x);
    int got_grad = lod == PTX_LOD_GRAD && more(s, &dx) && more(s, &dy);
    if ((lod == PTX_LOD_LEVEL && !got_lod) || (lod == PTX_LOD_GRAD && !got_grad))
        return missing(s, "tex: the level of detail operands are missing");
    if (end(s, "unsupported: tex with coordinate offsets or depth compare") != 0)
        return -1;
    int extra = lod != PTX_LOD_BASE || pred != 0;
    if (emit_lookup(s, PTX_OP_tex, guard, &d, &c, obj, geom,
                    (ct == T_F32) | lod << 1 | extra << 3) != 0)
        return -1;
    return extra ? extra_insn(s, got_lod ? &x : NULL, got_grad ? &dx : NULL,
                              got_grad ? &dy : NULL, pred, guard)
                 : 0;
}

static int b_tld4(ps *s, px_mods *m, uint32_t guard)
{
    static const char *const comps[] = {"r", "g", "b", "a"};
    int comp = -1;
    for (int k = 0; k < 4 && comp < 0; k++)
        if (px_take(m, comps[k]))
            comp = k;
    int geom = geometry(m);
    int v4 = px_take(m, "v4");
    int dt = px_take_type(m), ct = px_take_type(m);
    if (comp < 0 || (geom != PTX_TG_2D && geom != PTX_TG_A2D && geom != PTX_TG_CUBE &&
                     geom != PTX_TG_ACUBE) ||
        !v4 || (dt != T_F32 && dt != T_S32 && dt != T_U32) || ct != T_F32 ||
        px_finish(s, m) != 0)
        return px_unsupported(s, m);
    opnd d, c;
    uint32_t obj, pred;
    if (lookup_operands(s, geom, &d, &c, &obj, &pred) != 0)
        return -1;
    if (end(s, "unsupported: tld4 with coordinate offsets or depth compare") != 0)
        return -1;
    if (emit_lookup(s, PTX_OP_tld4, guard, &d, &c, obj, geom, comp | (pred != 0) << 3) != 0)
        return -1;
    return pred ? extra_insn(s, NULL, NULL, NULL, pred, guard) : 0;
}

/* txq and suq: mode the query, mode2 1 for txq.level (s[0]: the level). */
static int b_query(ps *s, px_mods *m, uint32_t guard, int surface)
{
    static const struct {
        const char *name;
        int q, tex, surf, level;
    } qs[] = {{"width", PTX_Q_WIDTH, 1, 1, 1}, {"height", PTX_Q_HEIGHT, 1, 1, 1},
              {"depth", PTX_Q_DEPTH, 1, 1, 1}, {"normalized_coords", PTX_Q_NORMALIZED, 1, 0, 0},
              {"filter_mode", PTX_Q_FILTER, 1, 0, 0}, {"addr_mode_0", PTX_Q_ADDR0, 1, 0, 0},
              {"addr_mode_1", PTX_Q_ADDR1, 1, 0, 0}, {"addr_mode_2", PTX_Q_ADDR2, 1, 0, 0},
              {"array_size", PTX_Q_ARRAY_SIZE, 1, 1, 0},
              {"num_mipmap_levels", PTX_Q_LEVELS, 1, 0, 0},
              {"num_samples", PTX_Q_SAMPLES, 1, 0, 0}, {"memory_layout", PTX_Q_LAYOUT, 0, 1, 0}};
    int level = !surface && px_take(m, "level");
    int q = -1, ok = 0;
    for (size_t k = 0; k < sizeof qs / sizeof qs[0] && q < 0; k++)
        if (px_take(m, qs[k].name)) {
            q = qs[k].q;
            ok = (surface ? qs[k].surf : qs[k].tex) && (!level || qs[k].level);
        }
    if (!ok || px_take_type(m) != T_B32 || px_finish(s, m) != 0)
        return px_unsupported(s, m);
    opnd d, lod;
    uint32_t obj;
    px_parse_operand(s, &d);
    px_expect(s, ',');
    if (s->failed || address(s, &obj, NULL, 0) != 0)
        return -1;
    int got = level && more(s, &lod);
    if (level && !got)
        return missing(s, "txq.level: the level operand is missing");
    if (end(s, "txq/suq: too many operands") != 0)
        return -1;
    ptx_insn *i = emit(s, surface ? PTX_OP_suq : PTX_OP_txq, guard, q, level);
    if (i == NULL)
        return -1;
    SD(i, 0, lane_dst(s, &d, 0));
    SS(i, 0, got ? value_reg(s, &lod) : PTX_R_ZERO);
    px_setf(i, PTX_F_AB, PTX_FK_REG, obj);
    return s->failed ? -1 : 0;
}

/* suld.b / sust.b: mode the geometry, mode2 the out-of-bounds mode, aux the
 * vector's lanes, imm a lane's bytes; sust's values are in d[]. */
static int b_surface(ps *s, px_mods *m, uint32_t guard, int store)
{
    static const char *const cops[] = {"ca", "cg", "cs", "cv", "wb", "wt"};
    int b = px_take(m, "b");
    int geom = geometry(m);
    for (size_t k = 0; k < sizeof cops / sizeof cops[0]; k++)
        px_take(m, cops[k]);
    int vec = px_take(m, "v2") ? 2 : px_take(m, "v4") ? 4 : 1;
    int t = px_take_type(m);
    int mode = px_take(m, "trap") ? PTX_SU_TRAP : px_take(m, "clamp") ? PTX_SU_CLAMP
               : px_take(m, "zero") ? PTX_SU_ZERO : -1;
    if (!b || geom < 0 || geom > PTX_TG_A2D || mode < 0 ||
        (t != T_B8 && t != T_B16 && t != T_B32 && t != T_B64) || px_finish(s, m) != 0)
        return px_unsupported(s, m);
    opnd v, c;
    uint32_t obj;
    if (!store) {
        px_parse_operand(s, &v);
        px_expect(s, ',');
    }
    if (s->failed || address(s, &obj, &c, 1) != 0)
        return -1;
    if (store && !more(s, &v))
        return missing(s, "sust: the values are missing");
    if (end(s, "suld/sust: too many operands") != 0)
        return -1;
    if (lanes_of(&v) != vec || lanes_of(&c) < coords_needed(geom) || lanes_of(&c) > 4) {
        px_fail(s, "suld/sust: wrong vector sizes");
        return -1;
    }
    ptx_insn *i = emit(s, store ? PTX_OP_sust : PTX_OP_suld, guard, geom, mode);
    if (i == NULL)
        return -1;
    i->aux = (uint32_t)vec;
    i->imm = tsize(t);
    for (int k = 0; k < 4; k++) {
        SS(i, k, lane_src(s, &c, k));
        if (k < vec)
            SD(i, k, store ? lane_src(s, &v, k) : lane_dst(s, &v, k));
    }
    px_setf(i, PTX_F_AB, PTX_FK_REG, obj);
    return s->failed ? -1 : 0;
}

int px_texture(ps *s, px_mods *m, uint32_t guard)
{
    const char *op = m->p[0];
    uint32_t n = m->n[0];
    m->used[0] = 1;
    if (n == 3 && !memcmp(op, "tex", 3))
        return b_tex(s, m, guard);
    if (n == 4 && !memcmp(op, "tld4", 4))
        return b_tld4(s, m, guard);
    if (n == 3 && !memcmp(op, "txq", 3))
        return b_query(s, m, guard, 0);
    if (n == 3 && !memcmp(op, "suq", 3))
        return b_query(s, m, guard, 1);
    if (n == 4 && !memcmp(op, "suld", 4))
        return b_surface(s, m, guard, 0);
    return b_surface(s, m, guard, 1);
}
