/*
 * ptx_tex.h — textures and surfaces as the PTX interpreter sees them.
 *
 * A kernel receives a texture or surface object as a 64-bit value; the
 * launch's resolver (ptx_launch_args.texture, set by the host device in
 * hostdev_kernels.c) turns it into a ptx_texref, or NULL for a value that is
 * not one of the session's live objects: the instruction then faults, it never
 * reads through an unknown value. The texref describes where each level's
 * texels lie (device addresses, which are host addresses on the host device)
 * and how to sample them; the interpreter checks its whole memory range
 * [lo, lo + size) against the session's memory at every use, as it checks a
 * global load.
 *
 * ptx_texture.c samples (tex, tld4), queries (txq, suq) and accesses surfaces
 * (suld, sust) on a texref: plain functions of their arguments, no state.
 * The resolver's texref must not change while a launch runs.
 */
#ifndef GLEAM_PTX_TEX_H
#define GLEAM_PTX_TEX_H

#include <stdint.h>

#include "gl_array.h"

/* What a texref reads from. */
enum { PTX_TEXK_ARRAY = 1, PTX_TEXK_LINEAR = 2, PTX_TEXK_PITCH2D = 3 };

typedef struct {
    uint64_t base;         /* the first texel of layer (or slice) 0 */
    uint64_t w, h, d;      /* extents in texels; d: slices of a 3D level, else layers */
    uint64_t pitch, slice; /* bytes between rows and between slices (or layers) */
} ptx_texlevel;

typedef struct ptx_texref {
    uint32_t kind;           /* PTX_TEXK_* */
    uint32_t shape;          /* GL_SHAPE_* (linear memory: 1D, pitched: 2D) */
    uint32_t format, channels, elem; /* GL_AD_*, 1/2/4, bytes per texel */
    uint32_t read_int;       /* integer texels come back as integers */
    uint32_t normalized;     /* coordinates in [0, 1) */
    uint32_t filter, mip_filter, srgb;
    uint32_t address[3];     /* GL_ADDR_* per dimension */
    float border[4];
    float mip_bias, min_level, max_level;
    uint32_t mipmapped;      /* from a mipmapped array (txq.num_mipmap_levels) */
    uint32_t nlevels;        /* at least 1 */
    ptx_texlevel level[GL_ARRAY_LEVELS_MAX];
    uint64_t lo, size;       /* the memory it reads, checked at every use */
} ptx_texref;

/* The launch's resolver: the session's live texture (surface != 0: surface)
 * object with this value, or NULL. Called from the launch's worker threads. */
typedef const ptx_texref *(*ptx_texture_fn)(void *ctx, uint64_t value, int surface);

/* Geometries of tex, tld4, suld and sust (the PTX names' order). */
enum { PTX_TG_1D, PTX_TG_2D, PTX_TG_3D, PTX_TG_A1D, PTX_TG_A2D, PTX_TG_CUBE, PTX_TG_ACUBE };
/* How tex picks its level of detail. */
enum { PTX_LOD_BASE, PTX_LOD_LEVEL, PTX_LOD_GRAD };
/* Surface out-of-bounds modes. */
enum { PTX_SU_TRAP, PTX_SU_CLAMP, PTX_SU_ZERO };
/* txq and suq queries. */
enum {
    PTX_Q_WIDTH, PTX_Q_HEIGHT, PTX_Q_DEPTH, PTX_Q_NORMALIZED, PTX_Q_FILTER, PTX_Q_ADDR0,
    PTX_Q_ADDR1, PTX_Q_ADDR2, PTX_Q_ARRAY_SIZE, PTX_Q_LEVELS, PTX_Q_SAMPLES, PTX_Q_LAYOUT
};

/* One lookup: the coordinates (floats, or integers when !fcoord), the layer
 * of an array geometry, and the level of detail as asked. */
typedef struct {
    int geom, fcoord, lod_mode;
    float c[3];      /* x, y, z (cube: the direction) */
    int32_t ic[3];   /* integer coordinates */
    uint32_t layer;
    float lod;       /* PTX_LOD_LEVEL */
    float dx[3], dy[3]; /* PTX_LOD_GRAD: the partials */
} ptx_texcoord;

/* tex: four 32-bit results (float bits, or integers for integer reads). */
void ptx_tex_sample(const ptx_texref *t, const ptx_texcoord *c, uint32_t out[4]);
/* tld4: the bilinear footprint's texels of one component (0..3),
 * counter-clockwise from the lower left. */
void ptx_tex_gather(const ptx_texref *t, const ptx_texcoord *c, int comp, uint32_t out[4]);
/* txq / suq: the query's answer (level: txq.level's, else 0). */
uint32_t ptx_tex_query(const ptx_texref *t, int query, uint32_t level);

/* suld / sust: SIZE bytes at byte X of row Y, slice or layer Z. Returns 0
 * (done; a load of a dropped access reads zeros), PTX_E_LAUNCH_FAILED for
 * .trap out of bounds, PTX_E_MISALIGNED for an X that is not a multiple of
 * SIZE. *addr is where it went (for a fault's message). */
int ptx_surf_access(const ptx_texref *t, int geom, int mode, int64_t x, int64_t y, int64_t z,
                    uint32_t layer, uint32_t size, void *data, int store, uint64_t *addr);

#endif /* GLEAM_PTX_TEX_H */
