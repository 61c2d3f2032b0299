/* sketch.c — see sketch.h for the algorithm, the index layout and the
 * ownership rules. Ownership in short: callers own every buffer; only
 * gl_sketch_decode allocates (one scratch area, freed before it returns);
 * there is no static mutable state. */
#include "sketch.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SIZEOF_INT128__)
#define GL_SKETCH_HAVE_INT128 1
__extension__ typedef __int128 gl_i128;
__extension__ typedef unsigned __int128 gl_u128;
#else
#define GL_SKETCH_HAVE_INT128 0 /* two-limb blocks need it: they go raw instead */
#endif

/* ---------------------------------------------------------------- helpers */

static inline uint64_t load_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static inline void store_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Inline SWAR popcount: the build targets baseline x86-64, where
 * __builtin_popcountll becomes a library call. */
static inline uint32_t popcount64(uint64_t v) {
    v = v - ((v >> 1) & UINT64_C(0x5555555555555555));
    v = (v & UINT64_C(0x3333333333333333)) + ((v >> 2) & UINT64_C(0x3333333333333333));
    v = (v + (v >> 4)) & UINT64_C(0x0f0f0f0f0f0f0f0f);
    return (uint32_t)((v * UINT64_C(0x0101010101010101)) >> 56);
}

static inline uint32_t float_bits(const float *p) {
    uint32_t bits;
    memcpy(&bits, p, sizeof bits);
    return bits;
}

/* splitmix64's finaliser: a bijection with good avalanche, cheap enough to
 * run twice per coordinate. */
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A different hash family per block, so one unlucky support pattern does not
 * fail in every block, and per aggregation (the caller varies the seed). */
static inline uint64_t block_seed(uint64_t seed, uint64_t block) {
    return mix64(seed ^ mix64(block + 0x632be59bd9b4e019ull));
}

/* The three cells (one per sub-table, so always distinct) and signs of
 * coordinate j in a block whose sub-tables hold `sub` cells each. */
typedef struct {
    uint32_t cell[GL_SKETCH_HASHES];
    uint32_t negative; /* bit k set: coordinate enters cell[k] with sign -1 */
} slots;

static inline void slots_of(uint64_t bseed, uint32_t j, uint32_t sub, slots *s) {
    const uint64_t a = mix64(bseed + (uint64_t)j * 0x9e3779b97f4a7c15ull);
    const uint64_t b = mix64(a ^ 0xd6e8feb86659fd93ull);
    const uint32_t h[GL_SKETCH_HASHES] = {(uint32_t)a, (uint32_t)(a >> 32), (uint32_t)b};
    s->negative = (uint32_t)(b >> 32) & ((1u << GL_SKETCH_HASHES) - 1);
    for (uint32_t k = 0; k < GL_SKETCH_HASHES; k++) {
        /* Multiply-shift maps a 32-bit hash onto [0, sub) without a division. */
        s->cell[k] = k * sub + (uint32_t)(((uint64_t)h[k] * sub) >> 32);
    }
}

static int check_geometry(uint64_t n, uint32_t block_len, uint64_t *index_len,
                          uint64_t *n_blocks) {
    if (block_len == 0 || block_len % GL_SKETCH_WORD_BITS != 0 || block_len > GL_SKETCH_MAX_BLOCK ||
        n > GL_SKETCH_MAX_N)
        return GL_SKETCH_E_ARG;
    const uint64_t words = (n + GL_SKETCH_WORD_BITS - 1) / GL_SKETCH_WORD_BITS;
    const uint64_t blocks = (n + block_len - 1) / block_len;
    *index_len = words * 8 + blocks * GL_SKETCH_MASK_BYTES;
    *n_blocks = blocks;
    return GL_SKETCH_OK;
}

/* Geometry shared by every entry point that reads an index. */
typedef struct {
    uint64_t n;
    uint32_t block_len;
    uint64_t n_blocks;
    const uint8_t *bits;  /* the bitmap words */
    const uint8_t *masks; /* GL_SKETCH_MASK_BYTES per block */
} index_view;

static int open_index(const uint8_t *index, uint64_t index_len, uint64_t n, uint32_t block_len,
                      index_view *v) {
    uint64_t want = 0, blocks = 0;
    int rc = check_geometry(n, block_len, &want, &blocks);
    if (rc != GL_SKETCH_OK) return rc;
    if (index == NULL && want != 0) return GL_SKETCH_E_ARG;
    if (index_len != want) return GL_SKETCH_E_INDEX;
    v->n = n;
    v->block_len = block_len;
    v->n_blocks = blocks;
    v->bits = index;
    v->masks = index + (want - blocks * GL_SKETCH_MASK_BYTES);
    return GL_SKETCH_OK;
}

static inline uint32_t block_len_at(const index_view *v, uint64_t b) {
    const uint64_t start = b * v->block_len;
    const uint64_t rest = v->n - start;
    return rest < v->block_len ? (uint32_t)rest : v->block_len;
}

/* Word w of block b, with the bits at or beyond n cleared: the index may come
 * from the network with anything in its padding. */
static inline uint64_t block_word(const index_view *v, uint64_t b, uint32_t w, uint32_t len) {
    const uint64_t word_index = b * (v->block_len / GL_SKETCH_WORD_BITS) + w;
    uint64_t word = load_le64(v->bits + word_index * 8);
    const uint32_t first = w * GL_SKETCH_WORD_BITS;
    if (len - first < GL_SKETCH_WORD_BITS) word &= (UINT64_C(1) << (len - first)) - 1;
    return word;
}

static inline uint32_t block_words(uint32_t len) {
    return (len + GL_SKETCH_WORD_BITS - 1) / GL_SKETCH_WORD_BITS;
}

static uint32_t block_count(const index_view *v, uint64_t b) {
    const uint32_t len = block_len_at(v, b);
    uint32_t count = 0;
    for (uint32_t w = 0; w < block_words(len); w++)
        count += popcount64(block_word(v, b, w, len));
    return count;
}

/* Runs the statements that follow for every union coordinate j
 * (block-relative) of block b, in increasing order. */
#define FOR_EACH_UNION(v, b, len, j, ...)                                    \
    for (uint32_t w_ = 0; w_ < block_words(len); w_++) {                     \
        uint64_t word_ = block_word((v), (b), w_, (len));                    \
        while (word_) {                                                      \
            const uint32_t j = w_ * GL_SKETCH_WORD_BITS +                    \
                               (uint32_t)__builtin_ctzll(word_);            \
            word_ &= word_ - 1;                                              \
            __VA_ARGS__                                                      \
        }                                                                    \
    }

static inline int grid_ok(int32_t shift, uint16_t bits) {
    return shift >= -149 && shift <= 127 && bits >= 1 && bits <= GL_SKETCH_SUM_BITS;
}

/* Check a plan against the index before trusting any offset in it. */
static int check_plan(const index_view *v, const gl_sketch_block *blocks, uint64_t n_blocks,
                      uint64_t cells_len, uint64_t raw_len) {
    if (blocks == NULL && n_blocks != 0) return GL_SKETCH_E_ARG;
    if (n_blocks != v->n_blocks) return GL_SKETCH_E_PLAN;
    uint64_t cells_at = 0, raw_at = 0;
    for (uint64_t b = 0; b < n_blocks; b++) {
        const gl_sketch_block *blk = &blocks[b];
        const uint32_t len = block_len_at(v, b);
        if (blk->len != len || blk->count != block_count(v, b)) return GL_SKETCH_E_PLAN;
        switch (blk->kind) {
        case GL_SKETCH_EMPTY:
            if (blk->count != 0 || blk->length != 0 || blk->sub != 0) return GL_SKETCH_E_PLAN;
            break;
        case GL_SKETCH_CELLS:
            if (blk->count == 0 || blk->sub == 0 || blk->sub > GL_SKETCH_MAX_BLOCK ||
                blk->limbs < 1 || blk->limbs > GL_SKETCH_MAX_LIMBS ||
                blk->length != (uint64_t)GL_SKETCH_HASHES * blk->sub * blk->limbs ||
                blk->offset != cells_at || !grid_ok(blk->shift, blk->bits))
                return GL_SKETCH_E_PLAN;
            if (blk->limbs == 2 &&
                (!GL_SKETCH_HAVE_INT128 || !grid_ok(blk->shift_lo, blk->bits_lo) ||
                 blk->shift_lo >= blk->shift || blk->shift - blk->shift_lo > blk->bits_lo))
                return GL_SKETCH_E_PLAN;
            cells_at += blk->length;
            break;
        case GL_SKETCH_RAW:
            if (blk->length != len || blk->sub != 0 || blk->offset != raw_at)
                return GL_SKETCH_E_PLAN;
            raw_at += blk->length;
            break;
        default:
            return GL_SKETCH_E_PLAN;
        }
    }
    return cells_at == cells_len && raw_at == raw_len ? GL_SKETCH_OK : GL_SKETCH_E_PAYLOAD;
}

/* ---------------------------------------------------------------- sizes */

int gl_sketch_geometry(uint64_t n, uint32_t block_len, uint64_t *index_len, uint64_t *n_blocks) {
    if (index_len == NULL || n_blocks == NULL) return GL_SKETCH_E_ARG;
    return check_geometry(n, block_len, index_len, n_blocks);
}

double gl_sketch_default_ratio(uint32_t count) {
    /* Measured (docs/compression.md, `gleam-peer bench compression`): the
     * smallest ratio of the ones tried whose peel failure rate stays below
     * about 1% per block. Failures left are mostly two coordinates sharing
     * all three cells, about 13.5 / (ratio^3 * count) per block, and cost
     * one resend of that block's union coordinates. */
    if (count >= 20000) return 1.27;
    if (count >= 3000) return 1.3;
    if (count >= 1000) return 1.4;
    if (count >= 300) return 1.7;
    if (count >= 100) return 3.0;
    return 4.0;
}

uint64_t gl_sketch_sub_size(uint32_t count, double cells_per_coord) {
    if (count == 0) return 0;
    const double ratio = cells_per_coord > 0.0 ? cells_per_coord : gl_sketch_default_ratio(count);
    double sub = ceil(ratio * (double)count / GL_SKETCH_HASHES);
    if (!(sub >= 1.0)) sub = 1.0;
    if (sub > (double)GL_SKETCH_MAX_BLOCK) sub = (double)GL_SKETCH_MAX_BLOCK;
    return (uint64_t)sub;
}

/* ---------------------------------------------------------------- encode */

/* Bit i set when p[i] is nonzero, for 64 floats. The test is on the bits
 * (shifting out the sign makes -0.0 a zero; NaN is nonzero), so that
 * flush-to-zero modes cannot hide subnormals, and written so that compilers
 * vectorise it. Eight 0/1 bytes pack into a byte with one multiplication
 * (little-endian hosts; others take the plain loop). */
static inline uint64_t nonzero_word(const float *p) {
    uint32_t lanes[GL_SKETCH_WORD_BITS];
    uint8_t flags[GL_SKETCH_WORD_BITS];
    memcpy(lanes, p, sizeof lanes);
    for (uint32_t i = 0; i < GL_SKETCH_WORD_BITS; i++) flags[i] = (lanes[i] << 1) != 0;
    uint64_t word = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (uint32_t g = 0; g < GL_SKETCH_WORD_BITS / 8; g++) {
        uint64_t eight;
        memcpy(&eight, flags + 8 * g, sizeof eight);
        word |= ((eight * UINT64_C(0x0102040810204080)) >> 56) << (8 * g);
    }
#else
    for (uint32_t i = 0; i < GL_SKETCH_WORD_BITS; i++) word |= (uint64_t)flags[i] << i;
#endif
    return word;
}

int gl_sketch_mark(const float *x, uint64_t n, uint32_t block_len, uint8_t *index,
                   uint64_t index_len, float *values, uint64_t values_cap, uint64_t *nonzeros) {
    uint64_t want = 0, n_blocks = 0;
    int rc = check_geometry(n, block_len, &want, &n_blocks);
    if (rc != GL_SKETCH_OK) return rc;
    if (index_len != want) return GL_SKETCH_E_INDEX;
    if ((x == NULL || index == NULL) && n != 0) return GL_SKETCH_E_ARG;
    if (nonzeros == NULL || (values == NULL && values_cap != 0)) return GL_SKETCH_E_ARG;
    uint64_t found = 0;
    uint8_t *masks = index + (want - n_blocks * GL_SKETCH_MASK_BYTES);
    for (uint64_t b = 0; b < n_blocks; b++) {
        const uint64_t start = b * block_len;
        const uint32_t len = (n - start) < block_len ? (uint32_t)(n - start) : block_len;
        uint8_t *mask = masks + b * GL_SKETCH_MASK_BYTES;
        memset(mask, 0, GL_SKETCH_MASK_BYTES);
        for (uint32_t w = 0; w < block_words(len); w++) {
            const float *p = x + start + (uint64_t)w * GL_SKETCH_WORD_BITS;
            const uint32_t rest = len - w * GL_SKETCH_WORD_BITS;
            const uint32_t here = rest < GL_SKETCH_WORD_BITS ? rest : GL_SKETCH_WORD_BITS;
            uint64_t word = here == GL_SKETCH_WORD_BITS ? nonzero_word(p) : 0;
            if (here != GL_SKETCH_WORD_BITS) {
                for (uint32_t i = 0; i < here; i++) {
                    /* Shifting out the sign makes -0.0 a zero. */
                    word |= (uint64_t)((float_bits(p + i) << 1) != 0) << i;
                }
            }
            store_le64(index + (start / GL_SKETCH_WORD_BITS + w) * 8, word);
            /* A second pass over the few nonzeros records their exponents
             * and packs their values, so that encoding reads them in order
             * instead of hopping through x. */
            while (word) {
                const uint32_t i = (uint32_t)__builtin_ctzll(word);
                word &= word - 1;
                const uint32_t e = (float_bits(p + i) >> 23) & 0xffu;
                mask[e / 8] |= (uint8_t)(1u << (e % 8));
                if (found < values_cap) values[found] = p[i];
                found++;
            }
        }
    }
    *nonzeros = found;
    return GL_SKETCH_OK;
}

/* Lowest and highest exponent set in a block's mask; -1 when none. */
static void mask_range(const uint8_t *mask, int *lo, int *hi) {
    *lo = -1;
    *hi = -1;
    for (int e = 0; e < 256; e++) {
        if ((mask[e / 8] >> (e % 8)) & 1) {
            if (*lo < 0) *lo = e;
            *hi = e;
        }
    }
}

static uint32_t ceil_log2(uint32_t v) {
    uint32_t bits = 0;
    while (bits < 32 && (UINT64_C(1) << bits) < v) bits++;
    return bits;
}

int gl_sketch_plan(const uint8_t *index, uint64_t index_len, uint64_t n, uint32_t block_len,
                   uint32_t world, double cells_per_coord, gl_sketch_block *blocks,
                   uint64_t n_blocks, uint64_t *cells_len, uint64_t *raw_len) {
    index_view v;
    int rc = open_index(index, index_len, n, block_len, &v);
    if (rc != GL_SKETCH_OK) return rc;
    if (cells_len == NULL || raw_len == NULL || (blocks == NULL && n_blocks != 0))
        return GL_SKETCH_E_ARG;
    if (n_blocks != v.n_blocks) return GL_SKETCH_E_PLAN;
    if (world == 0 || world > GL_SKETCH_MAX_WORLD) return GL_SKETCH_E_WORLD;
    if (!(cells_per_coord >= 0.0 && cells_per_coord <= GL_SKETCH_MAX_RATIO))
        return GL_SKETCH_E_RATIO;
    const int world_bits = (int)ceil_log2(world);
    uint64_t cells_at = 0, raw_at = 0;
    for (uint64_t b = 0; b < n_blocks; b++) {
        gl_sketch_block *blk = &blocks[b];
        memset(blk, 0, sizeof *blk);
        blk->len = block_len_at(&v, b);
        blk->count = block_count(&v, b);
        if (blk->count == 0) {
            blk->kind = GL_SKETCH_EMPTY;
            continue;
        }
        int lo = 0, hi = 0;
        mask_range(v.masks + b * GL_SKETCH_MASK_BYTES, &lo, &hi);
        /* Every |value| is below 2^top, and every value is a multiple of
         * 2^fine, the ulp of the smallest exponent present (subnormals share
         * exponent 1's ulp). A sum of `world` values on that grid needs
         * top - fine + world_bits bits; one limb holds 62. Wider ranges split
         * each value into a high part on a coarser grid and the exact rest
         * on the fine one: two limbs, each summed and peeled exactly. */
        const int top = hi - 126;
        const int fine = (lo < 1 ? 1 : lo) - 150;
        const int one_limb = top - fine + world_bits;
        const int coarse = top + world_bits - GL_SKETCH_SUM_BITS;
        const int low_bits = coarse - fine + world_bits;
        const uint64_t sub = gl_sketch_sub_size(blk->count, cells_per_coord);
        uint16_t reason = 0, limbs = 1;
        if (lo < 0 || hi == 255)
            reason = GL_SKETCH_RAW_NONFINITE; /* lo < 0: a corrupt mask; be safe */
        else if (one_limb > GL_SKETCH_SUM_BITS)
            limbs = 2;
        if (limbs == 2 && (!GL_SKETCH_HAVE_INT128 || low_bits > GL_SKETCH_SUM_BITS))
            reason = GL_SKETCH_RAW_SPREAD;
        /* A cell limb is 8 bytes, a raw value 4: the sketch must be smaller. */
        if (reason == 0 && 2 * GL_SKETCH_HASHES * sub * limbs >= blk->len)
            reason = GL_SKETCH_RAW_DENSE;
        if (reason != 0) {
            blk->kind = GL_SKETCH_RAW;
            blk->reason = reason;
            blk->offset = raw_at;
            blk->length = blk->len;
            raw_at += blk->len;
            continue;
        }
        blk->kind = GL_SKETCH_CELLS;
        blk->sub = (uint32_t)sub;
        blk->limbs = limbs;
        blk->offset = cells_at;
        blk->length = GL_SKETCH_HASHES * sub * limbs;
        if (limbs == 1) {
            blk->shift = fine;
            blk->bits = (uint16_t)(one_limb < 1 ? 1 : one_limb);
        } else {
            blk->shift = coarse;
            blk->bits = GL_SKETCH_SUM_BITS;
            blk->shift_lo = fine;
            blk->bits_lo = (uint16_t)low_bits;
        }
        cells_at += blk->length;
    }
    *cells_len = cells_at;
    *raw_len = raw_at;
    return GL_SKETCH_OK;
}

/* A block's fixed-point grid(s), ready for the per-value arithmetic. */
typedef struct {
    uint32_t limbs;
    int fine;  /* the finest grid's exponent: shift (one limb) or shift_lo */
    int split; /* two limbs: shift - shift_lo, the low limb's width */
    int bits[GL_SKETCH_MAX_LIMBS];
    double unscale[GL_SKETCH_MAX_LIMBS]; /* 2^shift */
    uint64_t bound[GL_SKETCH_MAX_LIMBS]; /* 2^bits */
} grid;

static void grid_of(const gl_sketch_block *blk, grid *g) {
    const int32_t shift[GL_SKETCH_MAX_LIMBS] = {blk->shift, blk->shift_lo};
    const uint16_t bits[GL_SKETCH_MAX_LIMBS] = {blk->bits, blk->bits_lo};
    g->limbs = blk->limbs;
    g->fine = blk->limbs == 1 ? blk->shift : blk->shift_lo;
    g->split = blk->limbs == 1 ? 0 : blk->shift - blk->shift_lo;
    for (uint32_t l = 0; l < g->limbs; l++) {
        g->bits[l] = bits[l];
        g->unscale[l] = ldexp(1.0, shift[l]);
        g->bound[l] = UINT64_C(1) << bits[l];
    }
}

/* value as integers on the grid: q[0] on the (high) grid, and with two
 * limbs q[1], the exact rest on the fine one. Integer arithmetic on the
 * float's bits, so no rounding and no dependence on the FPU's modes
 * (flush-to-zero would silently drop subnormals). 0 when the value is not on
 * the grid or out of its bound (the union index does not cover this
 * worker's values). */
static inline int on_grid(float value, const grid *g, uint64_t q[GL_SKETCH_MAX_LIMBS]) {
    const uint32_t bits = float_bits(&value);
    const uint32_t e = (bits >> 23) & 0xffu;
    if (e == 0xffu) return 0;
    uint64_t m = e ? (uint64_t)((bits & 0x7fffffu) | 0x800000u) : (uint64_t)(bits & 0x7fffffu);
    if (m == 0) { /* a zero */
        q[0] = q[1] = 0;
        return 1;
    }
    int d = (e ? (int)e : 1) - 150 - g->fine; /* value = m * 2^(fine + d) */
    if (d < 0) {
        /* Below the fine grid unless the low bits are zero anyway. */
        if (d <= -24 || (m & ((UINT64_C(1) << -d) - 1)) != 0) return 0;
        m >>= -d;
        d = 0;
    }
    const int width = 64 - __builtin_clzll(m); /* m < 2^width */
    const int negative = (int)(bits >> 31);
    if (g->limbs == 1) {
        if (d + width > g->bits[0]) return 0;
        const uint64_t mag = m << d;
        q[0] = negative ? (uint64_t)0 - mag : mag;
        return 1;
    }
#if GL_SKETCH_HAVE_INT128
    if (d + width > g->bits[0] + g->split) return 0;
    const gl_u128 mag = (gl_u128)m << d;
    const uint64_t high = (uint64_t)(mag >> g->split);
    const uint64_t low = (uint64_t)(mag & (((gl_u128)1 << g->split) - 1));
    if (high >= g->bound[0] || low >= g->bound[1]) return 0;
    q[0] = negative ? (uint64_t)0 - high : high;
    q[1] = negative ? (uint64_t)0 - low : low;
    return 1;
#else
    return 0;
#endif
}

/* Add one coordinate's limbs to its three cells. Unsigned arithmetic: the
 * cells are integers modulo 2^64. */
static inline void add_to_cells(uint64_t *out, uint64_t bseed, uint32_t j, uint32_t sub,
                                uint32_t limbs, const uint64_t q[GL_SKETCH_MAX_LIMBS]) {
    slots s;
    slots_of(bseed, j, sub, &s);
    for (uint32_t k = 0; k < GL_SKETCH_HASHES; k++) {
        uint64_t *cell = out + (uint64_t)s.cell[k] * limbs;
        for (uint32_t l = 0; l < limbs; l++) {
            if ((s.negative >> k) & 1u)
                cell[l] -= q[l];
            else
                cell[l] += q[l];
        }
    }
}

int gl_sketch_encode(const float *x, uint64_t n, uint32_t block_len, const uint8_t *index,
                     uint64_t index_len, const gl_sketch_block *blocks, uint64_t n_blocks,
                     uint64_t seed, const uint8_t *own, const float *values,
                     uint64_t values_len, int64_t *cells, uint64_t cells_len, float *raw,
                     uint64_t raw_len) {
    index_view v, mine;
    int rc = open_index(index, index_len, n, block_len, &v);
    if (rc != GL_SKETCH_OK) return rc;
    if ((x == NULL && n != 0) || (cells == NULL && cells_len != 0) ||
        (raw == NULL && raw_len != 0) || (own != NULL && values == NULL && values_len != 0))
        return GL_SKETCH_E_ARG;
    if (own != NULL && (rc = open_index(own, index_len, n, block_len, &mine)) != GL_SKETCH_OK)
        return rc;
    rc = check_plan(&v, blocks, n_blocks, cells_len, raw_len);
    if (rc != GL_SKETCH_OK) return rc;
    if (cells_len != 0) memset(cells, 0, cells_len * sizeof *cells);
    uint64_t at = 0; /* next packed value */
    for (uint64_t b = 0; b < n_blocks; b++) {
        const gl_sketch_block *blk = &blocks[b];
        const float *xb = x + b * block_len;
        const uint32_t len = blk->len;
        if (own != NULL) {
            /* Every own nonzero must be in the union, or it would be lost. */
            uint32_t mine_here = 0;
            for (uint32_t w = 0; w < block_words(len); w++) {
                const uint64_t word = block_word(&mine, b, w, len);
                if (word & ~block_word(&v, b, w, len)) return GL_SKETCH_E_COVER;
                mine_here += popcount64(word);
            }
            if (mine_here > values_len - at) return GL_SKETCH_E_COVER;
            if (blk->kind != GL_SKETCH_CELLS) {
                at += mine_here;
                if (blk->kind == GL_SKETCH_RAW)
                    memcpy(raw + blk->offset, xb, (size_t)len * sizeof *raw);
                continue;
            }
        } else if (blk->kind == GL_SKETCH_RAW) {
            memcpy(raw + blk->offset, xb, (size_t)len * sizeof *raw);
            continue;
        }
        if (blk->kind != GL_SKETCH_CELLS) continue;
        uint64_t *out = (uint64_t *)(cells + blk->offset);
        const uint64_t bseed = block_seed(seed, b);
        grid g;
        grid_of(blk, &g);
        uint64_t q[GL_SKETCH_MAX_LIMBS] = {0, 0};
        if (own != NULL && g.limbs == 1) {
            /* The packed values, in coordinate order: no reads of x. The
             * one-limb loop is spelled out so the compiler drops the limb
             * loops from the common case. */
            FOR_EACH_UNION(&mine, b, len, j, {
                if (!on_grid(values[at++], &g, q)) return GL_SKETCH_E_COVER;
                add_to_cells(out, bseed, j, blk->sub, 1, q);
            })
        } else if (own != NULL) {
            FOR_EACH_UNION(&mine, b, len, j, {
                if (!on_grid(values[at++], &g, q)) return GL_SKETCH_E_COVER;
                add_to_cells(out, bseed, j, blk->sub, GL_SKETCH_MAX_LIMBS, q);
            })
        } else {
            FOR_EACH_UNION(&v, b, len, j, {
                const float value = xb[j];
                if (value == 0.0f) continue; /* most union coordinates are zero here */
                if (!on_grid(value, &g, q)) return GL_SKETCH_E_COVER;
                add_to_cells(out, bseed, j, blk->sub, g.limbs, q);
            })
        }
    }
    return GL_SKETCH_OK;
}

/* ---------------------------------------------------------------- decode */

/* What the peel keeps per cell, together so that visiting a cell touches
 * one cache line: occupancy and id XOR come from the union, low is the
 * (first) limb's sum. A second limb lives in its own array. */
typedef struct {
    uint32_t occupancy;
    uint32_t ids; /* XOR of the coordinates still in the cell */
    uint64_t low; /* limb 0, modulo 2^64 */
} peel_cell;

typedef struct {
    peel_cell *cell;
    uint64_t *high;   /* limb 1 of two-limb blocks */
    uint32_t *stack;  /* cells whose occupancy reached 1 */
    uint32_t *found;  /* recovered coordinates, in peel order */
    float *found_value;
} scratch;

static void scratch_free(scratch *s) {
    free(s->cell);
    free(s->high);
    free(s->stack);
    free(s->found);
    free(s->found_value);
}

/* cells: the most cells of any sketch block; count: the most union nonzeros. */
static int scratch_alloc(scratch *s, uint64_t cells, uint64_t count) {
    memset(s, 0, sizeof *s);
    if (cells == 0) return GL_SKETCH_OK;
    s->cell = malloc(cells * sizeof *s->cell);
    s->high = malloc(cells * sizeof *s->high);
    s->stack = malloc(cells * sizeof *s->stack);
    s->found = malloc(count * sizeof *s->found);
    s->found_value = malloc(count * sizeof *s->found_value);
    if (!s->cell || !s->high || !s->stack || !s->found || !s->found_value) {
        scratch_free(s);
        return GL_SKETCH_E_NOMEM;
    }
    return GL_SKETCH_OK;
}

/* Two's complement without relying on implementation-defined conversion. */
static inline int64_t as_signed(uint64_t u) {
    return (u >> 63) ? -(int64_t)(~u) - 1 : (int64_t)u;
}

/* q * 2^shift (shift >= -149) rounded once to fp32; 0 when it overflows
 * fp32. Both products below are exact in double (a power of two times at
 * most 53 significant bits, far from double's limits). */
static inline int to_float(int64_t q, uint64_t mag, double unscale, float *out) {
    double value;
    if (mag <= (UINT64_C(1) << 53)) {
        /* Exact in double; one rounding to fp32, subnormals included. */
        value = (double)q * unscale;
    } else {
        /* Round the integer to 24 bits first (one correct rounding); the
         * scaling is then exact, since the result is far from subnormal. */
        value = (double)(float)q * unscale;
    }
    if (!(fabs(value) <= (double)FLT_MAX)) return 0;
    *out = (float)value;
    return 1;
}

#if GL_SKETCH_HAVE_INT128
/* high * 2^shift + low * 2^shift_lo, exactly, then rounded once to fp32. */
static int limbs_to_float(int64_t high, int64_t low, int32_t shift, int32_t shift_lo,
                          double unscale_lo, float *out) {
    /* |high| < 2^62 and shift - shift_lo <= 62 (check_plan): fits in 127 bits. */
    const gl_i128 total = (gl_i128)high * ((gl_i128)1 << (shift - shift_lo)) + low;
    const gl_u128 mag = total < 0 ? -(gl_u128)total : (gl_u128)total;
    double value;
    if (mag <= ((gl_u128)1 << 53))
        value = (double)total * unscale_lo;
    else
        value = (double)(float)total * unscale_lo; /* as in to_float */
    if (!(fabs(value) <= (double)FLT_MAX)) return 0;
    *out = (float)value;
    return 1;
}
#endif

/* Recovered limbs (this cell's sign applied) of coordinate j as fp32; 0 when
 * a limb is out of its bound (corrupt cells) or the sum overflows fp32. */
static int recovered_value(const gl_sketch_block *blk, const grid *g,
                           const uint64_t uq[GL_SKETCH_MAX_LIMBS], float *out) {
    int64_t q[GL_SKETCH_MAX_LIMBS] = {0, 0};
    uint64_t mag[GL_SKETCH_MAX_LIMBS] = {0, 0};
    for (uint32_t l = 0; l < g->limbs; l++) {
        q[l] = as_signed(uq[l]);
        mag[l] = q[l] < 0 ? (uint64_t)0 - uq[l] : uq[l];
        if (mag[l] >= g->bound[l]) return 0; /* no honest sum is this large */
    }
    if (g->limbs == 1) return to_float(q[0], mag[0], g->unscale[0], out);
#if GL_SKETCH_HAVE_INT128
    return limbs_to_float(q[0], q[1], blk->shift, blk->shift_lo, g->unscale[1], out);
#else
    (void)blk;
    return 0;
#endif
}

/* Peel one sketch block. Writes xb only when every union coordinate was
 * recovered; returns 1 then, 0 when the block must be resent. */
static int peel_block(const index_view *v, uint64_t b, const gl_sketch_block *blk,
                      const int64_t *cells, uint64_t bseed, scratch *s, float *xb) {
    const uint32_t sub = blk->sub, len = blk->len;
    const uint64_t m = (uint64_t)GL_SKETCH_HASHES * sub;
    grid g;
    grid_of(blk, &g);
    const uint32_t limbs = g.limbs;
    peel_cell *cell = s->cell;
    for (uint64_t c = 0; c < m; c++) {
        cell[c].occupancy = 0;
        cell[c].ids = 0;
        cell[c].low = (uint64_t)cells[c * limbs];
        if (limbs == 2) s->high[c] = (uint64_t)cells[c * limbs + 1];
    }
    /* Occupancy comes from the union alone: it never travels. */
    FOR_EACH_UNION(v, b, len, j, {
        slots sl;
        slots_of(bseed, j, sub, &sl);
        for (uint32_t k = 0; k < GL_SKETCH_HASHES; k++) {
            cell[sl.cell[k]].occupancy++;
            cell[sl.cell[k]].ids ^= j;
        }
    })
    uint64_t top = 0;
    for (uint64_t c = 0; c < m; c++)
        if (cell[c].occupancy == 1) s->stack[top++] = (uint32_t)c;
    uint32_t got = 0;
    while (top > 0) {
        const uint32_t c = s->stack[--top];
        if (cell[c].occupancy != 1) continue; /* emptied since it was pushed */
        const uint32_t j = cell[c].ids;
        const uint32_t k = c / sub;
        slots sl;
        if (j >= len || got >= blk->count) return 0; /* cannot happen for a valid plan */
        slots_of(bseed, j, sub, &sl);
        if (sl.cell[k] != c) return 0;
        /* The sum times this cell's sign, modulo 2^64, limb by limb. */
        const int negative = (sl.negative >> k) & 1u;
        uint64_t uq[GL_SKETCH_MAX_LIMBS] = {cell[c].low, limbs == 2 ? s->high[c] : 0};
        for (uint32_t l = 0; l < limbs; l++)
            if (negative) uq[l] = (uint64_t)0 - uq[l];
        if (!recovered_value(blk, &g, uq, &s->found_value[got])) return 0;
        s->found[got++] = j;
        for (uint32_t kk = 0; kk < GL_SKETCH_HASHES; kk++) {
            const uint32_t cc = sl.cell[kk];
            if (kk != k) {
                const int minus = !((sl.negative >> kk) & 1u);
                cell[cc].low = minus ? cell[cc].low - uq[0] : cell[cc].low + uq[0];
                if (limbs == 2) s->high[cc] = minus ? s->high[cc] - uq[1] : s->high[cc] + uq[1];
            }
            cell[cc].occupancy--;
            cell[cc].ids ^= j;
            /* A cell reaches occupancy 1 at most once: the stack holds m. */
            if (cell[cc].occupancy == 1) s->stack[top++] = cc;
        }
    }
    if (got != blk->count) return 0;
    /* Peel order is random over the block: prefetch, or each write waits
     * for its cache line. */
    enum { AHEAD = 16 };
    for (uint32_t i = 0; i < got; i++) {
        if (i + AHEAD < got) __builtin_prefetch(&xb[s->found[i + AHEAD]], 1);
        xb[s->found[i]] = s->found_value[i];
    }
    return 1;
}

int gl_sketch_decode(const int64_t *cells, uint64_t cells_len, const float *raw,
                     uint64_t raw_len, const uint8_t *index, uint64_t index_len,
                     const gl_sketch_block *blocks, uint64_t n_blocks, uint64_t seed, float *x,
                     uint64_t n, uint32_t block_len, uint8_t *failed, uint64_t *n_failed) {
    index_view v;
    int rc = open_index(index, index_len, n, block_len, &v);
    if (rc != GL_SKETCH_OK) return rc;
    if ((x == NULL && n != 0) || (cells == NULL && cells_len != 0) ||
        (raw == NULL && raw_len != 0) || n_failed == NULL || (failed == NULL && n_blocks != 0))
        return GL_SKETCH_E_ARG;
    rc = check_plan(&v, blocks, n_blocks, cells_len, raw_len);
    if (rc != GL_SKETCH_OK) return rc;
    uint64_t max_cells = 0, max_count = 0;
    for (uint64_t b = 0; b < n_blocks; b++) {
        if (blocks[b].kind != GL_SKETCH_CELLS) continue;
        if (blocks[b].length > max_cells) max_cells = blocks[b].length;
        if (blocks[b].count > max_count) max_count = blocks[b].count;
    }
    scratch s;
    rc = scratch_alloc(&s, max_cells, max_count);
    if (rc != GL_SKETCH_OK) return rc;
    uint64_t bad = 0;
    for (uint64_t b = 0; b < n_blocks; b++) {
        const gl_sketch_block *blk = &blocks[b];
        float *xb = x + b * block_len;
        failed[b] = 0;
        if (blk->kind == GL_SKETCH_RAW) {
            memcpy(xb, raw + blk->offset, (size_t)blk->len * sizeof *xb);
        } else if (blk->kind == GL_SKETCH_CELLS &&
                   !peel_block(&v, b, blk, cells + blk->offset, block_seed(seed, b), &s, xb)) {
            failed[b] = 1;
            bad++;
        }
    }
    scratch_free(&s);
    *n_failed = bad;
    return GL_SKETCH_OK;
}

/* ---------------------------------------------------------------- fallback */

int gl_sketch_selected_count(const uint8_t *index, uint64_t index_len, uint64_t n,
                             uint32_t block_len, const uint8_t *select, uint64_t n_blocks,
                             uint64_t *count) {
    index_view v;
    int rc = open_index(index, index_len, n, block_len, &v);
    if (rc != GL_SKETCH_OK) return rc;
    if (count == NULL || (select == NULL && n_blocks != 0)) return GL_SKETCH_E_ARG;
    if (n_blocks != v.n_blocks) return GL_SKETCH_E_SELECT;
    uint64_t total = 0;
    for (uint64_t b = 0; b < n_blocks; b++)
        if (select[b]) total += block_count(&v, b);
    *count = total;
    return GL_SKETCH_OK;
}

/* gather (to_x == 0) or scatter (to_x == 1) the selected union coordinates. */
static int move_selected(float *x, uint64_t n, uint32_t block_len, const uint8_t *index,
                         uint64_t index_len, const uint8_t *select, uint64_t n_blocks,
                         float *packed, uint64_t packed_len, int to_x) {
    index_view v;
    uint64_t want = 0;
    int rc = gl_sketch_selected_count(index, index_len, n, block_len, select, n_blocks, &want);
    if (rc != GL_SKETCH_OK) return rc;
    if (want != packed_len) return GL_SKETCH_E_SELECT;
    if ((x == NULL && n != 0) || (packed == NULL && packed_len != 0)) return GL_SKETCH_E_ARG;
    rc = open_index(index, index_len, n, block_len, &v);
    if (rc != GL_SKETCH_OK) return rc;
    uint64_t at = 0;
    for (uint64_t b = 0; b < n_blocks; b++) {
        if (!select[b]) continue;
        float *xb = x + b * block_len;
        const uint32_t len = block_len_at(&v, b);
        FOR_EACH_UNION(&v, b, len, j, {
            if (to_x)
                xb[j] = packed[at];
            else
                packed[at] = xb[j];
            at++;
        })
    }
    return GL_SKETCH_OK;
}

int gl_sketch_gather(const float *x, uint64_t n, uint32_t block_len, const uint8_t *index,
                     uint64_t index_len, const uint8_t *select, uint64_t n_blocks, float *out,
                     uint64_t out_len) {
    /* move_selected only reads x when gathering. */
    return move_selected((float *)x, n, block_len, index, index_len, select, n_blocks, out,
                         out_len, 0);
}

int gl_sketch_scatter(const float *in, uint64_t in_len, uint64_t n, uint32_t block_len,
                      const uint8_t *index, uint64_t index_len, const uint8_t *select,
                      uint64_t n_blocks, float *x) {
    /* move_selected only reads packed when scattering. */
    return move_selected(x, n, block_len, index, index_len, select, n_blocks, (float *)in,
                         in_len, 1);
}

/* ---------------------------------------------------------------- OR by SUM */

uint64_t gl_sketch_widened_words(uint64_t len, uint32_t width) {
    if (width == 0 || width > 31 || len > GL_SKETCH_MAX_N) return 0;
    const uint64_t per_word = 31 / width;
    return (len * 8 + per_word - 1) / per_word;
}

int gl_sketch_widen(const uint8_t *bytes, uint64_t len, uint32_t width, uint32_t *words,
                    uint64_t words_len) {
    if (width == 0 || width > 31 || len > GL_SKETCH_MAX_N) return GL_SKETCH_E_ARG;
    if ((bytes == NULL || words == NULL) && len != 0) return GL_SKETCH_E_ARG;
    if (words_len != gl_sketch_widened_words(len, width)) return GL_SKETCH_E_INDEX;
    const uint32_t per_word = 31 / width;
    if (words_len != 0) memset(words, 0, words_len * sizeof *words);
    for (uint64_t i = 0; i < len; i++) {
        if (bytes[i] == 0) continue; /* indexes are sparse */
        for (uint32_t k = 0; k < 8; k++) {
            const uint64_t bit = i * 8 + k;
            if ((bytes[i] >> k) & 1u)
                words[bit / per_word] |= UINT32_C(1) << ((bit % per_word) * width);
        }
    }
    return GL_SKETCH_OK;
}

int gl_sketch_narrow(const uint32_t *words, uint64_t words_len, uint32_t width, uint8_t *bytes,
                     uint64_t len) {
    if (width == 0 || width > 31 || len > GL_SKETCH_MAX_N) return GL_SKETCH_E_ARG;
    if ((bytes == NULL || words == NULL) && len != 0) return GL_SKETCH_E_ARG;
    if (words_len != gl_sketch_widened_words(len, width)) return GL_SKETCH_E_INDEX;
    const uint32_t per_word = 31 / width;
    const uint32_t mask = (UINT32_C(1) << width) - 1;
    if (len != 0) memset(bytes, 0, len);
    for (uint64_t w = 0; w < words_len; w++) {
        if (words[w] == 0) continue;
        for (uint32_t f = 0; f < per_word; f++) {
            const uint64_t bit = w * per_word + f;
            if (bit < len * 8 && ((words[w] >> (f * width)) & mask))
                bytes[bit / 8] |= (uint8_t)(1u << (bit % 8));
        }
    }
    return GL_SKETCH_OK;
}

const char *gl_sketch_strerror(int code) {
    switch (code) {
    case GL_SKETCH_OK: return "ok";
    case GL_SKETCH_E_ARG: return "invalid argument (NULL buffer, or n or block length out of range)";
    case GL_SKETCH_E_INDEX: return "index length does not match the gradient length and block length";
    case GL_SKETCH_E_PLAN: return "block plan does not match the index";
    case GL_SKETCH_E_PAYLOAD: return "payload length does not match the plan";
    case GL_SKETCH_E_NOMEM: return "out of memory for the decoder's scratch";
    case GL_SKETCH_E_RATIO: return "cells per coordinate must be in (0, 64] (0 for the default)";
    case GL_SKETCH_E_SELECT: return "gather/scatter length does not match the selected blocks";
    case GL_SKETCH_E_WORLD: return "world size must be between 1 and 65536";
    case GL_SKETCH_E_COVER:
        return "a value of this worker is not covered by the union index (was the index OR-reduced "
               "with this worker's own?)";
    default: return "unknown sketch error";
    }
}
