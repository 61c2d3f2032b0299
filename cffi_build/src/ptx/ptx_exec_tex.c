/*
 * ptx_exec_tex.c — the handlers of tex, tld4, txq, suq, suld and sust
 * (encoded by ptx_translate_tex.c): per active lane, the object's value is
 * resolved to the session's texref (ptx_tex.h) — a value that is not a live
 * object of the session faults (illegal address), it is never read through —
 * its memory is checked like any global access, and ptx_texture.c does the
 * rest. A warp usually samples one object: the last one resolved is kept
 * for the next lane.
 * Thread-safety: as every handler, one warp on one thread; the texrefs are
 * read-only during the launch.
 */
#include <string.h>

#include "ptx_int.h"
#include "ptx_tex.h"

typedef struct {
    uint64_t value;
    const ptx_texref *t;
} object_cache;

/* The live object of value v with its memory checked, or NULL and *rc. */
static const ptx_texref *object(ptx_warp *w, const ptx_insn *i, object_cache *oc, uint64_t v,
                                int surface, int *rc)
{
    if (oc->t != NULL && oc->value == v)
        return oc->t;
    const ptx_texref *t = ptx_texture_of(w->b, v, surface);
    if (t == NULL) {
        *rc = ptx_fault(w, i, v, PTX_E_ILLEGAL_ADDRESS);
        return NULL;
    }
    if (t->size != 0 && ptx_gaddr(w->b, t->lo, t->size) == NULL) {
        *rc = ptx_fault(w, i, t->lo, PTX_E_ILLEGAL_ADDRESS);
        return NULL;
    }
    oc->value = v;
    oc->t = t;
    return t;
}

static float f32_at(const ptx_warp *w, uint32_t reg, int l)
{
    uint32_t b = (uint32_t)w->r[reg][l];
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* The coordinates of lane l as its geometry lays them out in s[]. */
static void coords(const ptx_warp *w, const ptx_insn *i, int l, int fcoord, ptx_texcoord *c)
{
    int geom = i->mode, first = 0;
    memset(c, 0, sizeof *c);
    c->geom = geom;
    c->fcoord = fcoord;
    if (geom == PTX_TG_A1D || geom == PTX_TG_A2D || geom == PTX_TG_ACUBE) {
        c->layer = (uint32_t)w->r[i->s[0]][l];
        first = 1;
    }
    int n = geom == PTX_TG_1D || geom == PTX_TG_A1D ? 1
            : geom == PTX_TG_2D || geom == PTX_TG_A2D ? 2 : 3;
    for (int k = 0; k < n; k++) {
        c->c[k] = f32_at(w, i->s[first + k], l);
        c->ic[k] = (int32_t)(uint32_t)w->r[i->s[first + k]][l];
    }
}

/* The residency predicate of the extra instruction e, when it has one: data
 * here is always resident, so it reads true. */
static void resident(ptx_warp *w, const ptx_insn *e, uint32_t m)
{
    if (((e->fk >> (2 * PTX_F_AB)) & 3) == PTX_FK_PRED)
        w->p[e->ab] |= m;
}

static void store4(ptx_warp *w, const ptx_insn *i, int l, const uint32_t out[4])
{
    for (int k = 0; k < 4; k++)
        w->r[i->d[k]][l] = out[k];
}

/* What an instruction does for one lane with its object resolved: 0 or a fault. */
typedef int (*lane_op)(ptx_warp *w, const ptx_insn *i, int l, const ptx_texref *t);

/* Runs op for the lanes of m, each with its object resolved and checked. */
static int each_lane(ptx_warp *w, const ptx_insn *i, uint32_t m, int surface, lane_op op)
{
    int rc = 0;
    object_cache oc = {0, NULL};
    for (uint32_t q = m; q; q &= q - 1) {
        int l = __builtin_ctz(q);
        const ptx_texref *t = object(w, i, &oc, w->r[i->ab][l], surface, &rc);
        if (t == NULL || (rc = op(w, i, l, t)) != 0)
            return rc;
    }
    return 0;
}

static int tex_lane(ptx_warp *w, const ptx_insn *i, int l, const ptx_texref *t)
{
    const ptx_insn *e = i + 1; /* the extra operands, when mode2 says there are */
    int fcoord = i->mode2 & 1, lod = (i->mode2 >> 1) & 3;
    ptx_texcoord c;
    uint32_t out[4];
    coords(w, i, l, fcoord, &c);
    c.lod_mode = lod;
    if (lod == PTX_LOD_LEVEL)
        c.lod = fcoord ? f32_at(w, e->s[0], l) : (float)(int32_t)(uint32_t)w->r[e->s[0]][l];
    else if (lod == PTX_LOD_GRAD)
        for (int k = 0; k < 3; k++) {
            c.dx[k] = f32_at(w, e->s[k], l);
            c.dy[k] = f32_at(w, e->d[k], l);
        }
    ptx_tex_sample(t, &c, out);
    store4(w, i, l, out);
    return 0;
}

static int tld4_lane(ptx_warp *w, const ptx_insn *i, int l, const ptx_texref *t)
{
    ptx_texcoord c;
    uint32_t out[4];
    coords(w, i, l, 1, &c);
    ptx_tex_gather(t, &c, i->mode2 & 3, out);
    store4(w, i, l, out);
    return 0;
}

static int query_lane(ptx_warp *w, const ptx_insn *i, int l, const ptx_texref *t)
{
    uint32_t level = i->mode2 ? (uint32_t)w->r[i->s[0]][l] : 0;
    w->r[i->d[0]][l] = ptx_tex_query(t, i->mode, level);
    return 0;
}

/* suld/sust: the coordinates (a layered geometry's first is the layer), the
 * lanes' bytes to or from the registers. */
static int surface_lane(ptx_warp *w, const ptx_insn *i, int l, const ptx_texref *t, int store)
{
    int geom = i->mode, first = geom == PTX_TG_A1D || geom == PTX_TG_A2D;
    uint32_t vec = i->aux, lane = (uint32_t)i->imm;
    int64_t xyz[3];
    uint8_t data[32];
    uint64_t addr;
    for (int k = 0; k < 3; k++)
        xyz[k] = (int32_t)(uint32_t)w->r[i->s[first + k < 4 ? first + k : 3]][l];
    uint32_t layer = first ? (uint32_t)w->r[i->s[0]][l] : 0;
    for (uint32_t k = 0; store && k < vec; k++)
        memcpy(data + k * lane, &w->r[i->d[k]][l], lane); /* little-endian: the low bytes */
    int rc = ptx_surf_access(t, geom, i->mode2, xyz[0], xyz[1], xyz[2], layer, vec * lane, data,
                             store, &addr);
    if (rc != 0)
        return ptx_fault(w, i, addr, rc);
    for (uint32_t k = 0; !store && k < vec; k++) {
        uint64_t v = 0;
        memcpy(&v, data + k * lane, lane);
        w->r[i->d[k]][l] = v;
    }
    return 0;
}

static int suld_lane(ptx_warp *w, const ptx_insn *i, int l, const ptx_texref *t)
{
    return surface_lane(w, i, l, t, 0);
}

static int sust_lane(ptx_warp *w, const ptx_insn *i, int l, const ptx_texref *t)
{
    return surface_lane(w, i, l, t, 1);
}

int h_tex(ptx_warp *w, const ptx_insn *i, uint32_t m)
{
    int rc = each_lane(w, i, m, 0, tex_lane);
    if (rc == 0 && (i->mode2 & 8))
        resident(w, i + 1, m);
    return rc;
}

int h_tld4(ptx_warp *w, const ptx_insn *i, uint32_t m)
{
    int rc = each_lane(w, i, m, 0, tld4_lane);
    if (rc == 0 && (i->mode2 & 8))
        resident(w, i + 1, m);
    return rc;
}

int h_txq(ptx_warp *w, const ptx_insn *i, uint32_t m)
{
    return each_lane(w, i, m, 0, query_lane);
}

int h_suq(ptx_warp *w, const ptx_insn *i, uint32_t m)
{
    return each_lane(w, i, m, 1, query_lane);
}

int h_suld(ptx_warp *w, const ptx_insn *i, uint32_t m)
{
    return each_lane(w, i, m, 1, suld_lane);
}

int h_sust(ptx_warp *w, const ptx_insn *i, uint32_t m)
{
    return each_lane(w, i, m, 1, sust_lane);
}
