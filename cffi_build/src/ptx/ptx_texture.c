/*
 * ptx_texture.c — what a texture unit does, on the host: tex (point and
 * linear filtering, the four address modes, normalized coordinates, layers,
 * cubemaps, mip levels), tld4 gathers, txq/suq queries and suld/sust
 * surface accesses, each a plain function of a texref (ptx_tex.h) and the
 * instruction's coordinates.
 *
 * The rules are those of the CUDA C++ Programming Guide's "Texture Fetching"
 * appendix and the PTX ISA:
 *  - unnormalized coordinates address texels [0, N); normalized ones [0, 1)
 *    scale by N. Wrap and mirror work on normalized coordinates only (the
 *    guide); with unnormalized ones they act as clamp. Wrap takes frac(x);
 *    mirror frac(x) when floor(x) is even, else 1 - frac(x); clamp keeps the
 *    texel index in [0, N - 1]; border reads the border colour outside it.
 *  - point filtering reads texel floor(x); linear filtering blends texels
 *    floor(xB) and floor(xB) + 1 at xB = x - 0.5 with the weight frac(xB),
 *    which the hardware keeps in 9-bit fixed point with 8 fractional bits:
 *    xB is rounded to the nearest 1/256 first (the texel pair and the weight
 *    come from that value), and each texel index of the pair is addressed on
 *    its own (wrapped, mirrored, clamped or border).
 *  - 8- and 16-bit integer texels read as normalized floats unless the
 *    texture reads integers: unsigned / (2^n - 1), signed / (2^(n-1) - 1)
 *    clamped at -1; 32-bit integer texels always read as integers; half
 *    texels as floats. sRGB textures (8-bit unsigned) convert R, G and B to
 *    linear before filtering. A channel the format lacks reads 0 (alpha 1).
 *  - cubemaps: the coordinate of largest magnitude picks the face, the other
 *    two divided by it give the face's (s, t) (the guide's table); faces
 *    are sampled with clamped normalized coordinates (seamless filtering
 *    across faces is not done).
 *  - a layer index is clamped to the layers there are; the level of detail
 *    is lod (tex.level), 0 (tex, tex.base) or log2 of the larger gradient
 *    length in texels (tex.grad), plus the bias, clamped to the texture's
 *    level clamps and its levels; the mipmap filter picks the nearest level
 *    (point) or blends the two around it (linear).
 * No state; thread-safe. Memory: reads and writes only inside the texref's
 * levels, which the caller checked against the session's memory.
 */
#include <math.h>
#include <string.h>

#include "ptx.h"
#include "ptx_tex.h"

/* One texel's channels as the texture returns them. */
typedef struct {
    float f[4];
    uint32_t u[4];
} texel;

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f)
        bits = sign | 0x7f800000u | man << 13;
    else if (exp != 0)
        bits = sign | (exp + 112) << 23 | man << 13;
    else if (man == 0)
        bits = sign;
    else { /* subnormal: normalise */
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while ((man & 0x400) == 0);
        bits = sign | (uint32_t)(112 - e) << 23 | (man & 0x3ff) << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float srgb_to_linear(float c)
{
    return c <= 0.04045f ? c / 12.92f : powf((c + 0.055f) / 1.055f, 2.4f);
}

/* Channel c of a texel as an integer (32-bit formats as they are, smaller ones
 * sign- or zero-extended). */
static uint32_t channel_int(uint32_t format, const uint8_t *q)
{
    uint16_t b2;
    uint32_t b4;
    switch (format) {
    case GL_AD_U8:
        return q[0];
    case GL_AD_S8:
        return (uint32_t)(int32_t)(int8_t)q[0];
    case GL_AD_U16:
        memcpy(&b2, q, 2);
        return b2;
    case GL_AD_S16:
        memcpy(&b2, q, 2);
        return (uint32_t)(int32_t)(int16_t)b2;
    case GL_AD_HALF:
        memcpy(&b2, q, 2);
        return float_bits(half_to_float(b2));
    default:
        memcpy(&b4, q, 4);
        return b4;
    }
}

/* Channel c of a texel as the float a texture that returns floats gives. */
static float channel_float(uint32_t format, const uint8_t *q)
{
    uint32_t v = channel_int(format, q);
    float f;
    switch (format) {
    case GL_AD_U8:
        return (float)v / 255.0f;
    case GL_AD_S8:
        return fmaxf((float)(int32_t)v / 127.0f, -1.0f);
    case GL_AD_U16:
        return (float)v / 65535.0f;
    case GL_AD_S16:
        return fmaxf((float)(int32_t)v / 32767.0f, -1.0f);
    default: /* half (converted above) and float: the bits */
        memcpy(&f, &v, 4);
        return f;
    }
}

/* A texel's channels as the texture returns them: integers when it reads
 * integers, else floats (the other member is left as it is). */
static void read_texel(const ptx_texref *t, const ptx_texlevel *L, uint64_t i, uint64_t j,
                       uint64_t k, texel *o)
{
    uint64_t at = L->base + k * L->slice + j * L->pitch + i * t->elem;
    const uint8_t *p = (const uint8_t *)(uintptr_t)at;
    uint32_t cb = t->elem / t->channels, c = 0;
    if (at < t->lo || at - t->lo > t->size || t->size - (at - t->lo) < t->elem) {
        memset(o, 0, sizeof *o); /* a guard: the indices above are always inside */
        return;
    }
    if (t->read_int) {
        for (; c < t->channels; c++)
            o->u[c] = channel_int(t->format, p + c * cb);
        for (; c < 4; c++)
            o->u[c] = c == 3;
        return;
    }
    if (t->format == GL_AD_FLOAT)
        memcpy(o->f, p, 4u * t->channels), c = t->channels;
    for (; c < t->channels; c++)
        o->f[c] = channel_float(t->format, p + c * cb);
    if (t->srgb && t->format == GL_AD_U8)
        for (uint32_t s = 0; s < 3 && s < t->channels; s++)
            o->f[s] = srgb_to_linear(o->f[s]);
    for (; c < 4; c++)
        o->f[c] = c == 3 ? 1.0f : 0.0f;
}

static void border_texel(const ptx_texref *t, texel *o)
{
    for (int c = 0; c < 4; c++) {
        o->f[c] = t->border[c];
        o->u[c] = float_bits(t->border[c]); /* integer reads: the colour's bits */
    }
}

/* A texel index along an extent of n under an address mode: -1 for border. */
static int64_t address(int64_t i, uint64_t n, uint32_t mode)
{
    int64_t m = (int64_t)n;
    switch (mode) {
    case GL_ADDR_WRAP:
        return ((i % m) + m) % m;
    case GL_ADDR_MIRROR: {
        int64_t r = ((i % (2 * m)) + 2 * m) % (2 * m);
        return r < m ? r : 2 * m - 1 - r;
    }
    case GL_ADDR_BORDER:
        return i < 0 || i >= m ? -1 : i;
    default:
        return i < 0 ? 0 : i >= m ? m - 1 : i;
    }
}

/* The coordinate in texels after the normalized address modes: wrap and
 * mirror act on normalized coordinates, else they are clamp. */
static float to_texels(float x, uint64_t n, int normalized, uint32_t *mode)
{
    if (!(x == x))
        x = 0.0f; /* NaN: a deterministic texel rather than an undefined cast */
    if (!normalized) {
        if (*mode == GL_ADDR_WRAP || *mode == GL_ADDR_MIRROR)
            *mode = GL_ADDR_CLAMP;
        return x;
    }
    if (*mode == GL_ADDR_WRAP)
        x -= floorf(x);
    else if (*mode == GL_ADDR_MIRROR) {
        float f = floorf(x), fr = x - f;
        x = fmodf(f, 2.0f) != 0.0f ? 1.0f - fr : fr;
    }
    return x * (float)n;
}

/* floor(x) as an index, kept far from int64's ends (NaN: 0; converting it
 * would be undefined). */
static int64_t floor_index(double x)
{
    if (!(x == x))
        return 0;
    if (x < -1e12)
        return -1000000000000LL;
    if (x > 1e12)
        return 1000000000000LL;
    return (int64_t)floor(x);
}

/* Linear filtering's texel pair and weight: xB = x - 0.5 rounded to 1/256. */
static void linear_pair(float x, int64_t *i0, float *a)
{
    double xb = (double)x - 0.5;
    if (!(xb == xb)) /* NaN (inf - inf of a wrapped infinity) */
        xb = 0.0;
    if (xb < -1e12)
        xb = -1e12;
    if (xb > 1e12)
        xb = 1e12;
    int64_t fixed = (int64_t)llrint(xb * 256.0);
    int64_t i = fixed >= 0 ? fixed / 256 : -((-fixed + 255) / 256);
    *i0 = i;
    *a = (float)(fixed - i * 256) / 256.0f;
}

typedef struct {
    int dims;        /* spatial dimensions: 1, 2 or 3 */
    int fcoord;      /* float coordinates (else integer texel indices) */
    float x[3];
    int64_t ix[3];
    uint64_t layer;  /* the layer (or cube face) of a layered level */
    int force_clamp; /* cube faces: clamped normalized coordinates */
} lookup;

/* The texel at idx (a 3D level's slice idx[2], else the lookup's layer). */
static void fetch_at(const ptx_texref *t, const ptx_texlevel *L, const int64_t idx[3],
                     const lookup *q, texel *o)
{
    for (int d = 0; d < 3; d++)
        if (idx[d] < 0) {
            border_texel(t, o);
            return;
        }
    uint64_t k = q->dims == 3 ? (uint64_t)idx[2] : q->layer;
    read_texel(t, L, (uint64_t)idx[0], (uint64_t)idx[1], k, o);
}

/* Point or linear sampling of one level. */
static void sample_level(const ptx_texref *t, uint32_t lv, const lookup *q, texel *out)
{
    const ptx_texlevel *L = &t->level[lv];
    uint64_t ext[3] = {L->w, L->h, q->dims == 3 ? L->d : 1};
    int64_t i0[3] = {0, 0, 0};
    float a[3] = {0, 0, 0};
    uint32_t mode[3];
    int linear = t->filter == GL_FILTER_LINEAR && q->fcoord;
    int normalized = t->normalized || q->force_clamp;

    for (int d = 0; d < 3; d++) {
        mode[d] = q->force_clamp ? GL_ADDR_CLAMP : t->address[d];
        if (d >= q->dims)
            continue;
        if (!q->fcoord) {
            i0[d] = q->ix[d];
            if (mode[d] == GL_ADDR_WRAP || mode[d] == GL_ADDR_MIRROR)
                mode[d] = GL_ADDR_CLAMP;
            continue;
        }
        float x = to_texels(q->x[d], ext[d], normalized, &mode[d]);
        if (linear)
            linear_pair(x, &i0[d], &a[d]);
        else
            i0[d] = floor_index(x);
    }
    if (t->kind == PTX_TEXK_LINEAR && !linear) { /* linear memory: outside reads zero */
        if (i0[0] < 0 || (uint64_t)i0[0] >= L->w) {
            memset(out, 0, sizeof *out);
            return;
        }
    }
    int corners = linear ? 1 << q->dims : 1;
    memset(out, 0, sizeof *out);
    for (int c = 0; c < corners; c++) {
        int64_t idx[3] = {0, 0, 0};
        float w = 1.0f;
        for (int d = 0; d < q->dims; d++) {
            int hi = (c >> d) & 1;
            idx[d] = address(i0[d] + hi, ext[d], mode[d]);
            w *= linear ? (hi ? a[d] : 1.0f - a[d]) : 1.0f;
        }
        texel tx;
        fetch_at(t, L, idx, q, &tx);
        if (!linear) {
            *out = tx;
            return;
        }
        for (int k = 0; k < 4; k++)
            out->f[k] += w * tx.f[k];
    }
}

/* The cube face and its normalized (s, t) for a direction. */
static int cube_face(const float v[3], float *s, float *t)
{
    float ax = fabsf(v[0]), ay = fabsf(v[1]), az = fabsf(v[2]), ma, sc, tc;
    int face;
    if (ax >= ay && ax >= az) {
        face = v[0] >= 0 ? 0 : 1;
        ma = ax;
        sc = v[0] >= 0 ? -v[2] : v[2];
        tc = -v[1];
    } else if (ay >= az) {
        face = v[1] >= 0 ? 2 : 3;
        ma = ay;
        sc = v[0];
        tc = v[1] >= 0 ? v[2] : -v[2];
    } else {
        face = v[2] >= 0 ? 4 : 5;
        ma = az;
        sc = v[2] >= 0 ? v[0] : -v[0];
        tc = -v[1];
    }
    if (!(ma > 0.0f)) { /* no direction (or NaN): the face's centre */
        *s = *t = 0.5f;
        return face;
    }
    *s = (sc / ma + 1.0f) * 0.5f;
    *t = (tc / ma + 1.0f) * 0.5f;
    return face;
}

/* The lookup a geometry's coordinates make (layers and cube faces resolved). */
static void make_lookup(const ptx_texref *t, const ptx_texcoord *c, lookup *q)
{
    memset(q, 0, sizeof *q);
    q->fcoord = c->fcoord;
    uint64_t layers = t->level[0].d ? t->level[0].d : 1;
    uint64_t layer = c->layer;
    switch (c->geom) {
    case PTX_TG_1D:
    case PTX_TG_A1D:
        q->dims = 1;
        break;
    case PTX_TG_2D:
    case PTX_TG_A2D:
        q->dims = 2;
        break;
    case PTX_TG_3D:
        q->dims = 3;
        break;
    default: { /* cube, acube */
        float s, tt;
        int face = cube_face(c->c, &s, &tt);
        q->dims = 2;
        q->fcoord = 1;
        q->force_clamp = 1;
        q->x[0] = s;
        q->x[1] = tt;
        uint64_t cubes = layers / 6 ? layers / 6 : 1;
        uint64_t cube = c->geom == PTX_TG_ACUBE ? (layer < cubes ? layer : cubes - 1) : 0;
        q->layer = cube * 6 + (uint64_t)face;
        if (q->layer >= layers) /* a cube lookup of a texture with fewer layers */
            q->layer = layers - 1;
        return;
    }
    }
    for (int d = 0; d < 3; d++) {
        q->x[d] = c->c[d];
        q->ix[d] = c->ic[d];
    }
    if (c->geom == PTX_TG_A1D || c->geom == PTX_TG_A2D)
        q->layer = layer < layers ? layer : layers - 1;
}

static float gradient_lod(const ptx_texref *t, const ptx_texcoord *c, int dims)
{
    const ptx_texlevel *L = &t->level[0];
    double ext[3] = {(double)L->w, (double)L->h, (double)L->d};
    double gx = 0, gy = 0;
    for (int d = 0; d < dims; d++) {
        double s = t->normalized ? ext[d] : 1.0;
        gx += (c->dx[d] * s) * (c->dx[d] * s);
        gy += (c->dy[d] * s) * (c->dy[d] * s);
    }
    double rho = sqrt(gx > gy ? gx : gy);
    return rho > 0 ? (float)log2(rho) : -1e30f;
}

void ptx_tex_sample(const ptx_texref *t, const ptx_texcoord *c, uint32_t out[4])
{
    lookup q;
    texel r;
    make_lookup(t, c, &q);
    float lambda = 0.0f;
    if (t->mipmapped) {
        if (c->lod_mode == PTX_LOD_LEVEL)
            lambda = c->lod;
        else if (c->lod_mode == PTX_LOD_GRAD)
            lambda = gradient_lod(t, c, q.dims);
        lambda += t->mip_bias;
        lambda = fminf(fmaxf(lambda, t->min_level), t->max_level);
        lambda = fminf(fmaxf(lambda, 0.0f), (float)(t->nlevels - 1));
        if (!(lambda == lambda))
            lambda = 0.0f;
    }
    uint32_t l0 = (uint32_t)lambda;
    float frac = lambda - (float)l0;
    if (t->mip_filter != GL_FILTER_LINEAR || l0 + 1 >= t->nlevels || frac == 0.0f) {
        if (t->mip_filter != GL_FILTER_LINEAR && frac >= 0.5f && l0 + 1 < t->nlevels)
            l0++;
        sample_level(t, l0, &q, &r);
    } else {
        texel r1;
        sample_level(t, l0, &q, &r);
        sample_level(t, l0 + 1, &q, &r1);
        for (int k = 0; k < 4; k++)
            r.f[k] = (1.0f - frac) * r.f[k] + frac * r1.f[k];
    }
    for (int k = 0; k < 4; k++)
        out[k] = t->read_int ? r.u[k] : float_bits(r.f[k]);
}

void ptx_tex_gather(const ptx_texref *t, const ptx_texcoord *c, int comp, uint32_t out[4])
{
    lookup q;
    make_lookup(t, c, &q);
    const ptx_texlevel *L = &t->level[0];
    uint64_t ext[2] = {L->w, L->h};
    int64_t i0[2];
    uint32_t mode[2];
    float a;
    int normalized = t->normalized || q.force_clamp;
    for (int d = 0; d < 2; d++) {
        mode[d] = q.force_clamp ? GL_ADDR_CLAMP : t->address[d];
        linear_pair(to_texels(q.x[d], ext[d], normalized, &mode[d]), &i0[d], &a);
    }
    /* counter-clockwise from the lower left: (i0, j1), (i1, j1), (i1, j0), (i0, j0) */
    static const int di[4] = {0, 1, 1, 0}, dj[4] = {1, 1, 0, 0};
    for (int k = 0; k < 4; k++) {
        int64_t idx[3] = {address(i0[0] + di[k], ext[0], mode[0]),
                          address(i0[1] + dj[k], ext[1], mode[1]), 0};
        texel tx;
        fetch_at(t, L, idx, &q, &tx);
        out[k] = t->read_int ? tx.u[comp & 3] : float_bits(tx.f[comp & 3]);
    }
}

uint32_t ptx_tex_query(const ptx_texref *t, int query, uint32_t level)
{
    const ptx_texlevel *L = &t->level[level < t->nlevels ? level : 0];
    int layered = gl_array_layered((int)t->shape);
    switch (query) {
    case PTX_Q_WIDTH:
        return (uint32_t)L->w;
    case PTX_Q_HEIGHT:
        return (uint32_t)L->h;
    case PTX_Q_DEPTH:
        return layered ? 1 : (uint32_t)L->d;
    case PTX_Q_NORMALIZED:
        return t->normalized;
    case PTX_Q_FILTER:
        return t->filter;
    case PTX_Q_ADDR0:
    case PTX_Q_ADDR1:
    case PTX_Q_ADDR2:
        return t->address[query - PTX_Q_ADDR0];
    case PTX_Q_ARRAY_SIZE:
        if (t->shape == GL_SHAPE_CUBE)
            return 0;
        if (t->shape == GL_SHAPE_CUBE_LAYERED)
            return (uint32_t)(L->d / 6);
        return layered ? (uint32_t)L->d : 0;
    case PTX_Q_LEVELS:
        return t->mipmapped ? t->nlevels : 0;
    case PTX_Q_LAYOUT:
        return t->kind != PTX_TEXK_ARRAY;
    default: /* samples: no multi-sample textures */
        return 0;
    }
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

int ptx_surf_access(const ptx_texref *t, int geom, int mode, int64_t x, int64_t y, int64_t z,
                    uint32_t layer, uint32_t size, void *data, int store, uint64_t *addr)
{
    const ptx_texlevel *L = &t->level[0];
    int64_t row = (int64_t)(L->w * t->elem), h = (int64_t)L->h, d = (int64_t)L->d;
    *addr = L->base;
    if (geom == PTX_TG_1D || geom == PTX_TG_A1D)
        y = 0;
    if (geom == PTX_TG_A1D || geom == PTX_TG_A2D)
        z = (int64_t)layer;
    else if (geom != PTX_TG_3D)
        z = 0;
    if (((uint64_t)x & (size - 1)) != 0)
        return PTX_E_MISALIGNED;
    int out = x < 0 || x > row - (int64_t)size || y < 0 || y >= h || z < 0 || z >= d;
    if (out) {
        if (mode == PTX_SU_TRAP)
            return PTX_E_LAUNCH_FAILED;
        if (mode == PTX_SU_ZERO || (int64_t)size > row) {
            if (!store)
                memset(data, 0, size);
            return 0;
        }
        x = clamp64(x, 0, (row - (int64_t)size) / (int64_t)size * (int64_t)size);
        y = clamp64(y, 0, h - 1);
        z = clamp64(z, 0, d - 1);
    }
    uint8_t *p = (uint8_t *)(uintptr_t)(L->base + (uint64_t)z * L->slice +
                                        (uint64_t)y * L->pitch + (uint64_t)x);
    *addr = (uint64_t)(uintptr_t)p;
    if (store)
        memcpy(p, data, size);
    else
        memcpy(data, p, size);
    return 0;
}
