/*
 * digest.c — BLAKE3 (see digest.h), from its specification: 1 KiB chunks
 * hashed in 64-byte blocks, their chaining values joined pairwise in a
 * left-balanced binary tree, the last compression flagged ROOT.
 *
 * The input is cut into aligned subtrees of up to SUBTREE chunks (all but
 * the last chunk). A subtree's chunks go through the vector lanes a
 * vector's width at a time, then its parent nodes level by level the same
 * way; its chaining value joins a stack that merges as the reference's
 * does (one merge per trailing zero of the chunk count). The last chunk,
 * whose final block may be short, and the parents above the subtrees run
 * through the scalar compression.
 *
 * Global state: the implementation in use (an index into KINDS, atomic;
 * -1 until the first call picks the widest the CPU has).
 */
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "digest.h"

/* PREFETCH_AHEAD: each vector load also asks for the bytes two blocks on
 * in every lane. The lanes read 16 (or 8) streams 1 KiB apart, more than
 * the hardware prefetcher follows; from memory, 1 MiB blobs hashed at
 * 3.5 GB/s without it and 4.6 with it (AVX-512, this project's VM). 64 and
 * 512 bytes ahead were slower. */
enum { B3_BLOCK = 64, B3_CHUNK = 1024, SUBTREE = 256, PREFETCH_AHEAD = 128 };
enum { CHUNK_START = 1, CHUNK_END = 2, PARENT = 4, ROOT = 8 };

static const uint32_t B3_IV[8] = {0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A,
                                  0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19};
/* The message word each round's G functions take, in order: row 1 is
 * BLAKE3's permutation P, and row r+1 is row r permuted (row[r+1][i] =
 * row[r][P[i]]), so the words are never moved, only picked. */
static const uint8_t B3_SCHEDULE[7][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8},
    {3, 4, 10, 12, 13, 2, 7, 14, 6, 5, 9, 0, 11, 15, 8, 1},
    {10, 7, 12, 9, 14, 3, 13, 15, 4, 0, 11, 2, 5, 8, 1, 6},
    {12, 13, 9, 11, 15, 10, 14, 8, 7, 2, 5, 3, 0, 1, 6, 4},
    {9, 14, 11, 5, 8, 12, 15, 1, 13, 3, 0, 10, 2, 6, 4, 7},
    {11, 15, 5, 0, 1, 9, 8, 6, 14, 10, 2, 12, 3, 4, 7, 13},
};

/* What a run of compressions shares: the counter (of the first lane, and
 * one more per lane when count_lanes), the flags of every block and those
 * of the first and the last block. */
typedef struct {
    uint64_t counter;
    int count_lanes;
    unsigned flags, first, last;
} b3_job;

static inline uint32_t b3_load32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void b3_store32(uint8_t *p, uint32_t w)
{
    p[0] = (uint8_t)w;
    p[1] = (uint8_t)(w >> 8);
    p[2] = (uint8_t)(w >> 16);
    p[3] = (uint8_t)(w >> 24);
}

/* The round function, over scalars or vectors alike. */
#define B3_ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))
#define B3_G(v, a, b, c, d, x, y)                                                            \
    do {                                                                                     \
        v[a] = v[a] + v[b] + (x);                                                            \
        v[d] = B3_ROTR(v[d] ^ v[a], 16);                                                     \
        v[c] = v[c] + v[d];                                                                  \
        v[b] = B3_ROTR(v[b] ^ v[c], 12);                                                     \
        v[a] = v[a] + v[b] + (y);                                                            \
        v[d] = B3_ROTR(v[d] ^ v[a], 8);                                                      \
        v[c] = v[c] + v[d];                                                                  \
        v[b] = B3_ROTR(v[b] ^ v[c], 7);                                                      \
    } while (0)
/* A round: G over the columns, then over the diagonals. */
#define B3_ROUND(v, m, r)                                                                    \
    do {                                                                                     \
        const uint8_t *s_ = B3_SCHEDULE[r];                                                  \
        B3_G(v, 0, 4, 8, 12, m[s_[0]], m[s_[1]]);                                            \
        B3_G(v, 1, 5, 9, 13, m[s_[2]], m[s_[3]]);                                            \
        B3_G(v, 2, 6, 10, 14, m[s_[4]], m[s_[5]]);                                           \
        B3_G(v, 3, 7, 11, 15, m[s_[6]], m[s_[7]]);                                           \
        B3_G(v, 0, 5, 10, 15, m[s_[8]], m[s_[9]]);                                           \
        B3_G(v, 1, 6, 11, 12, m[s_[10]], m[s_[11]]);                                         \
        B3_G(v, 2, 7, 8, 13, m[s_[12]], m[s_[13]]);                                          \
        B3_G(v, 3, 4, 9, 14, m[s_[14]], m[s_[15]]);                                          \
    } while (0)
/* Seven rounds, written out so that every word's index is a constant and
 * the state and message stay in registers. */
#define B3_ROUNDS(v, m)                                                                      \
    do {                                                                                     \
        B3_ROUND(v, m, 0);                                                                   \
        B3_ROUND(v, m, 1);                                                                   \
        B3_ROUND(v, m, 2);                                                                   \
        B3_ROUND(v, m, 3);                                                                   \
        B3_ROUND(v, m, 4);                                                                   \
        B3_ROUND(v, m, 5);                                                                   \
        B3_ROUND(v, m, 6);                                                                   \
    } while (0)

/* One compression: the 16 words of state it ends with (the chaining value
 * is the first 8 XOR the last 8). */
static void compress(const uint32_t cv[8], const uint32_t block[16], uint32_t len,
                     uint64_t counter, unsigned flags, uint32_t out[16])
{
    uint32_t v[16], m[16];
    memcpy(m, block, sizeof m);
    memcpy(v, cv, 32);
    memcpy(v + 8, B3_IV, 16);
    v[12] = (uint32_t)counter;
    v[13] = (uint32_t)(counter >> 32);
    v[14] = len;
    v[15] = flags;
    B3_ROUNDS(v, m);
    for (int i = 0; i < 8; i++) {
        out[i] = v[i] ^ v[i + 8];
        out[i + 8] = v[i + 8] ^ cv[i];
    }
}

static void words_of(const uint8_t *p, size_t n, uint32_t out[16])
{
    uint8_t block[B3_BLOCK] = {0};
    memcpy(block, p, n);
    for (int i = 0; i < 16; i++)
        out[i] = b3_load32(block + 4 * i);
}

/* The parent of two chaining values (8 words each) into CV. */
static void parent(const uint32_t left[8], const uint32_t right[8], uint32_t cv[8])
{
    uint32_t block[16], out[16];
    memcpy(block, left, 32);
    memcpy(block + 8, right, 32);
    compress(B3_IV, block, B3_BLOCK, 0, PARENT, out);
    memcpy(cv, out, 32);
}

/* The vector kernels, one per width, and how each loads a block per lane. */
typedef uint32_t dl_vec_portable __attribute__((vector_size(16)));

static inline void load_words(dl_vec_portable m[16], const uint8_t *p, const uint32_t *row)
{
    for (int j = 0; j < 16; j++)
        for (int k = 0; k < 4; k++)
            m[j][k] = b3_load32(p + row[k] + 4 * j);
}

#define LANES 4
#define SUFFIX portable
#define TARGET
#define LOAD_BLOCK load_words
#include "digest_lanes.h"
#undef LANES
#undef SUFFIX
#undef TARGET
#undef LOAD_BLOCK

#if defined(__x86_64__)
/* Rows a, b, c, d transposed inside each 128-bit lane: out[i] holds word i
 * (of each lane's four) of a, b, c and d. */
#define TRANSPOSE_4X4(W, a, b, c, d, out)                                                   \
    do {                                                                                     \
        __m##W##i t0_ = _mm##W##_unpacklo_epi32(a, b), t1_ = _mm##W##_unpackhi_epi32(a, b);   \
        __m##W##i t2_ = _mm##W##_unpacklo_epi32(c, d), t3_ = _mm##W##_unpackhi_epi32(c, d);   \
        out[0] = _mm##W##_unpacklo_epi64(t0_, t2_);                                          \
        out[1] = _mm##W##_unpackhi_epi64(t0_, t2_);                                          \
        out[2] = _mm##W##_unpacklo_epi64(t1_, t3_);                                          \
        out[3] = _mm##W##_unpackhi_epi64(t1_, t3_);                                          \
    } while (0)

typedef uint32_t dl_vec_avx2 __attribute__((vector_size(32)));

/* Eight lanes' blocks, a half (8 words) at a time: 4x4 in 128-bit lanes,
 * then the halves of two groups of four lanes joined. */
__attribute__((target("avx2"))) static inline void load_avx2(dl_vec_avx2 m[16],
                                                             const uint8_t *p,
                                                             const uint32_t *row)
{
    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
        __m256i r[8], u[2][4];
        _Pragma("GCC unroll 16") for (int k = 0; k < 8; k++) {
            r[k] = _mm256_loadu_si256((const void *)(p + row[k] + 32 * h));
            if (h == 0)
                _mm_prefetch((const char *)(p + row[k] + PREFETCH_AHEAD), _MM_HINT_T0);
        }
        _Pragma("GCC unroll 16") for (int g = 0; g < 2; g++)
            TRANSPOSE_4X4(256, r[4 * g], r[4 * g + 1], r[4 * g + 2], r[4 * g + 3], u[g]);
        _Pragma("GCC unroll 16") for (int i = 0; i < 4; i++) {
            m[8 * h + i] = (dl_vec_avx2)_mm256_permute2x128_si256(u[0][i], u[1][i], 0x20);
            m[8 * h + 4 + i] = (dl_vec_avx2)_mm256_permute2x128_si256(u[0][i], u[1][i], 0x31);
        }
    }
}

#define LANES 8
#define SUFFIX avx2
#define TARGET __attribute__((target("avx2")))
#define LOAD_BLOCK load_avx2
#include "digest_lanes.h"
#undef LANES
#undef SUFFIX
#undef TARGET
#undef LOAD_BLOCK

typedef uint32_t dl_vec_avx512 __attribute__((vector_size(64)));

/* Sixteen lanes' blocks: 4x4 in 128-bit lanes per group of four lanes,
 * then the groups' 128-bit pieces transposed (4x4 again, a level up). */
__attribute__((target("avx512f"))) static inline void load_avx512(dl_vec_avx512 m[16],
                                                                 const uint8_t *p,
                                                                 const uint32_t *row)
{
    __m512i r[16], u[4][4];
    _Pragma("GCC unroll 16") for (int k = 0; k < 16; k++) {
        r[k] = _mm512_loadu_si512((const void *)(p + row[k]));
        _mm_prefetch((const char *)(p + row[k] + PREFETCH_AHEAD), _MM_HINT_T0);
    }
    _Pragma("GCC unroll 16") for (int g = 0; g < 4; g++)
        TRANSPOSE_4X4(512, r[4 * g], r[4 * g + 1], r[4 * g + 2], r[4 * g + 3], u[g]);
    _Pragma("GCC unroll 16") for (int i = 0; i < 4; i++) {
        __m512i x0 = _mm512_shuffle_i32x4(u[0][i], u[1][i], 0x44);
        __m512i x1 = _mm512_shuffle_i32x4(u[0][i], u[1][i], 0xEE);
        __m512i x2 = _mm512_shuffle_i32x4(u[2][i], u[3][i], 0x44);
        __m512i x3 = _mm512_shuffle_i32x4(u[2][i], u[3][i], 0xEE);
        m[i] = (dl_vec_avx512)_mm512_shuffle_i32x4(x0, x2, 0x88);
        m[4 + i] = (dl_vec_avx512)_mm512_shuffle_i32x4(x0, x2, 0xDD);
        m[8 + i] = (dl_vec_avx512)_mm512_shuffle_i32x4(x1, x3, 0x88);
        m[12 + i] = (dl_vec_avx512)_mm512_shuffle_i32x4(x1, x3, 0xDD);
    }
}

#define LANES 16
#define SUFFIX avx512
#define TARGET __attribute__((target("avx512f")))
#define LOAD_BLOCK load_avx512
#include "digest_lanes.h"
#undef LANES
#undef SUFFIX
#undef TARGET
#undef LOAD_BLOCK

static int has_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}

static int has_avx512(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}
#endif

static int always(void)
{
    return 1;
}

typedef void lanes_fn(const uint8_t *, uint32_t, unsigned, unsigned, const b3_job *, uint8_t *);

/* Widest first: the first the CPU has is the default. */
static const struct {
    const char *name;
    unsigned lanes;
    lanes_fn *run;
    int (*supported)(void);
} KINDS[] = {
#if defined(__x86_64__)
    {"avx512", 16, lanes_avx512, has_avx512},
    {"avx2", 8, lanes_avx2, has_avx2},
#endif
    {"portable", 4, lanes_portable, always},
};
#define NKINDS (sizeof KINDS / sizeof KINDS[0])

static int kind = -1;

static int current(void)
{
    int k = __atomic_load_n(&kind, __ATOMIC_RELAXED);
    if (k >= 0)
        return k;
    for (k = 0; !KINDS[k].supported(); k++)
        ;
    __atomic_store_n(&kind, k, __ATOMIC_RELAXED);
    return k;
}

const char *gl_content_digest_kind(void)
{
    return KINDS[current()].name;
}

const char *gl_content_digest_kind_at(int i)
{
    return i >= 0 && (size_t)i < NKINDS ? KINDS[i].name : NULL;
}

int gl_content_digest_use(const char *name)
{
    for (size_t k = 0; k < NKINDS; k++)
        if (strcmp(KINDS[k].name, name) == 0 && KINDS[k].supported()) {
            __atomic_store_n(&kind, (int)k, __ATOMIC_RELAXED);
            return 0;
        }
    return -1;
}

/* The chaining value of COUNT whole chunks (a power of two, at most
 * SUBTREE) that start at chunk number FIRST. */
static void subtree(const uint8_t *data, size_t count, uint64_t first, int k, uint32_t cv[8])
{
    uint8_t cvs[SUBTREE * 32];
    unsigned w = KINDS[k].lanes;
    for (size_t c = 0; c < count; c += w) {
        b3_job chunks = {first + c, 1, 0, CHUNK_START, CHUNK_END};
        unsigned n = count - c < w ? (unsigned)(count - c) : w;
        KINDS[k].run(data + c * B3_CHUNK, B3_CHUNK, n, B3_CHUNK / B3_BLOCK, &chunks, cvs + 32 * c);
    }
    /* each level in place: the pair at 64 p becomes the parent at 32 p */
    static const b3_job parents = {0, 0, PARENT, 0, 0};
    for (size_t level = count; level > 1; level /= 2)
        for (size_t p = 0; p < level / 2; p += w) {
            unsigned n = level / 2 - p < w ? (unsigned)(level / 2 - p) : w;
            KINDS[k].run(cvs + 64 * p, 64, n, 1, &parents, cvs + 32 * p);
        }
    for (int i = 0; i < 8; i++)
        cv[i] = b3_load32(cvs + 4 * i);
}

void gl_content_digest(const uint8_t *data, size_t len, uint8_t *out)
{
    int k = current();
    uint64_t chunks = len == 0 ? 1 : (len + B3_CHUNK - 1) / B3_CHUNK;
    uint32_t stack[64][8];
    int depth = 0;
    uint64_t done = 0;
    while (done + 1 < chunks) {
        uint64_t size = SUBTREE;
        while (size > chunks - 1 - done || done % size != 0)
            size /= 2;
        uint32_t cv[8];
        subtree(data + done * B3_CHUNK, size, done, k, cv);
        /* the merges the reference makes once the subtree's last chunk is in */
        for (uint64_t t = (done + size) / size; t % 2 == 0; t /= 2)
            parent(stack[--depth], cv, cv);
        memcpy(stack[depth++], cv, 32);
        done += size;
    }
    /* The last chunk: every block but its last chains; the last (maybe short,
     * zero-padded) is the output, unless parents sit above it. */
    const uint8_t *p = data + done * B3_CHUNK;
    size_t left = len - done * B3_CHUNK;
    uint32_t cv[8], block[16], state[16];
    memcpy(cv, B3_IV, 32);
    unsigned flags = CHUNK_START;
    while (left > B3_BLOCK) {
        words_of(p, B3_BLOCK, block);
        compress(cv, block, B3_BLOCK, done, flags, state);
        memcpy(cv, state, 32);
        flags = 0;
        p += B3_BLOCK;
        left -= B3_BLOCK;
    }
    words_of(p, left, block);
    uint32_t block_len = (uint32_t)left;
    uint64_t counter = done;
    flags |= CHUNK_END;
    while (depth > 0) {
        compress(cv, block, block_len, counter, flags, state);
        memcpy(block, stack[--depth], 32);
        memcpy(block + 8, state, 32);
        memcpy(cv, B3_IV, 32);
        block_len = B3_BLOCK;
        counter = 0;
        flags = PARENT;
    }
    compress(cv, block, block_len, 0, flags | ROOT, state);
    for (int i = 0; i < 8; i++)
        b3_store32(out + 4 * i, state[i]);
}
