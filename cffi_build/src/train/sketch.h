/*
 * sketch.h — lossless homomorphic compression of sparse fp32 gradients
 * (docs/compression.md has the algorithm, the measured parameters and the
 * numerical guarantee).
 *
 * A flattened gradient of n coordinates is cut into blocks of block_len
 * coordinates (a multiple of 64; the last block may be shorter). Each worker
 *   1. marks its nonzeros in an *index* (gl_sketch_mark): a bitmap of n bits,
 *      then per block a 256-bit mask of the fp32 exponents present there;
 *      the workers OR their indexes;
 *   2. plans every block from the union index alone (gl_sketch_plan): empty;
 *      a count sketch of 3*sub cells (three hashes into three disjoint
 *      sub-tables, random signs); or raw when the sketch would not be
 *      smaller, a worker holds a NaN or an infinity, or the exponents span
 *      too wide a range. Every worker reaches the same plan;
 *   3. encodes its values (gl_sketch_encode): sketch blocks into int64
 *      cells, raw blocks into fp32 values; the workers SUM both element-wise;
 *   4. decodes in place by peeling (gl_sketch_decode). A block that does not
 *      peel completely is reported, never guessed: the caller resends the
 *      union coordinates of those blocks with a plain sum (gl_sketch_gather,
 *      gl_sketch_scatter).
 *
 * Why integer cells: peeling subtracts recovered values from other cells,
 * and with floating-point cells each cell's rounding error flows into every
 * value peeled after it, multiplied along the peeling order (measured: errors
 * of 1e16 on N(0,1) data at 100k coordinates). A sketch block therefore
 * carries its values as integers on a fixed-point grid: 2^shift, the ulp of
 * the smallest exponent present, which every fp32 value of the block is an
 * exact multiple of. Integer sums and the peel are exact (modulo 2^64, which
 * is harmless: every final sum fits in 62 bits by the choice of the grid),
 * so a decoded value is the exact sum of the workers' values, rounded once
 * to fp32. When the block's exponents span more than one int64 can hold
 * (about 36 binades), each value is split exactly into a high part on a
 * coarser grid and the rest on the fine one: two limbs per cell, both summed
 * and peeled exactly, recombined in 128 bits (about 96 binades). Wider
 * blocks go raw.
 *
 * Index layout: ceil(n/64) little-endian 64-bit words (bit j of the gradient
 * is bit j%64 of word j/64), then per block 32 bytes: bit e (byte e/8, bit
 * e%8) is set when some nonzero of the block has biased fp32 exponent e
 * (255: NaN or infinity). Bits at or beyond n are ignored wherever an index
 * is read.
 *
 * Ownership rules
 *   - Every buffer is owned by the caller and borrowed for the duration of
 *     one call; nothing keeps a pointer after it returns.
 *   - gl_sketch_decode allocates one scratch area sized for its largest
 *     sketch block and frees it before returning; no other function
 *     allocates.
 *   - There is no global or static mutable state: every function is
 *     re-entrant and may run on any thread (cffi releases the GIL).
 *   - Every function that can fail returns GL_SKETCH_OK (0) or a negative
 *     GL_SKETCH_E_* code; gl_sketch_strerror() names it.
 *
 * Untrusted input: the union index and the summed cells come from the
 * network. Whatever their contents, the functions read and write only inside
 * the buffers whose lengths they are given: plans are checked against the
 * index before use, hash positions are reduced modulo the block's own table
 * size, and a recovered value outside the block's bound fails its block
 * instead of being written.
 */
#ifndef GLEAM_SKETCH_H
#define GLEAM_SKETCH_H

#include <stddef.h>
#include <stdint.h>

/* cdef: begin */
#define GL_SKETCH_HASHES 3
#define GL_SKETCH_WORD_BITS 64
/* Coordinate ids inside a block are 32-bit; larger blocks are refused. */
#define GL_SKETCH_MAX_BLOCK 16777216u
/* Coordinates per call (2^40, 4 TiB of fp32). */
#define GL_SKETCH_MAX_N 1099511627776ull
/* cdef: end */
#define GL_SKETCH_MAX_RATIO 64.0
/* cdef: begin */
#define GL_SKETCH_MAX_WORLD 65536u
#define GL_SKETCH_MASK_BYTES 32 /* exponent mask per block */
#define GL_SKETCH_SUM_BITS 62   /* every decoded integer sum is below 2^62 */
#define GL_SKETCH_MAX_LIMBS 2

/* Block kinds in a plan, and why a block is raw. */
enum { GL_SKETCH_EMPTY = 0, GL_SKETCH_CELLS = 1, GL_SKETCH_RAW = 2 };
enum { GL_SKETCH_RAW_DENSE = 1, GL_SKETCH_RAW_NONFINITE = 2, GL_SKETCH_RAW_SPREAD = 3 };

enum {
    GL_SKETCH_OK = 0,
    GL_SKETCH_E_ARG = -101,     /* NULL pointer, n or block_len out of range */
    GL_SKETCH_E_INDEX = -102,   /* index length does not match n and block_len */
    GL_SKETCH_E_PLAN = -103,    /* block descriptors disagree with the index */
    GL_SKETCH_E_PAYLOAD = -104, /* payload length does not match the plan */
    GL_SKETCH_E_NOMEM = -105,   /* scratch allocation failed */
    GL_SKETCH_E_RATIO = -106,   /* cells_per_coord outside (0, 64] */
    GL_SKETCH_E_SELECT = -107,  /* gather/scatter length disagrees with the selection */
    GL_SKETCH_E_WORLD = -108,   /* world size outside 1 .. GL_SKETCH_MAX_WORLD */
    GL_SKETCH_E_COVER = -109    /* a local value is outside what the union index allows */
};

/* One block of a plan (48 bytes, no padding). Cell c of a sketch block holds
 * its limbs at cells[offset + c * limbs + l]. */
typedef struct {
    uint32_t kind;   /* GL_SKETCH_EMPTY | GL_SKETCH_CELLS | GL_SKETCH_RAW */
    uint32_t count;  /* union nonzeros in the block */
    uint32_t sub;    /* cells per sub-table (CELLS only; 0 otherwise) */
    uint32_t len;    /* coordinates in the block */
    uint64_t offset; /* first cell (CELLS) or raw value (RAW) of the block */
    uint64_t length; /* cells (CELLS) or raw values (RAW) of the block */
    int32_t shift;    /* CELLS: the (high) limb counts units of 2^shift */
    uint16_t bits;    /* CELLS: every coordinate's (high) limb sum is below 2^bits */
    uint16_t limbs;   /* CELLS: int64 limbs per cell, 1 or 2 */
    int32_t shift_lo; /* CELLS, 2 limbs: the low limb counts units of 2^shift_lo */
    uint16_t bits_lo; /* CELLS, 2 limbs: bound of the low limb's sums */
    uint16_t reason;  /* RAW: GL_SKETCH_RAW_* */
} gl_sketch_block;

/* Index geometry: bytes of the index and number of blocks for n coordinates.
 * block_len must be a positive multiple of 64, at most GL_SKETCH_MAX_BLOCK;
 * n at most GL_SKETCH_MAX_N (n == 0 gives an empty index and no blocks). */
int gl_sketch_geometry(uint64_t n, uint32_t block_len, uint64_t *index_len, uint64_t *n_blocks);

/* Cells per union coordinate that gl_sketch_plan uses by default for a block
 * with `count` union nonzeros (measured; see docs/compression.md). */
double gl_sketch_default_ratio(uint32_t count);

/* Sub-table size for `count` union nonzeros at `cells_per_coord` (0 selects
 * the default ratio): ceil(ratio * count / 3), at least 1; 0 when count is 0. */
uint64_t gl_sketch_sub_size(uint32_t count, double cells_per_coord);

/* Write x's nonzero bitmap and exponent masks into index (all of it), and
 * count x's nonzeros into *nonzeros. -0.0 counts as zero; NaN and
 * infinities are nonzero, with exponent 255. The first values_cap nonzero
 * values are also packed into values, in coordinate order (values may be
 * NULL when values_cap is 0); gl_sketch_encode reads them from there. */
int gl_sketch_mark(const float *x, uint64_t n, uint32_t block_len, uint8_t *index,
                   uint64_t index_len, float *values, uint64_t values_cap, uint64_t *nonzeros);

/* Plan every block from a (union) index of `world` workers. cells_per_coord
 * 0 selects the default ratio. Fills blocks[0 .. n_blocks) and the lengths
 * of the two payloads: int64 cells and fp32 raw values. */
int gl_sketch_plan(const uint8_t *index, uint64_t index_len, uint64_t n, uint32_t block_len,
                   uint32_t world, double cells_per_coord, gl_sketch_block *blocks,
                   uint64_t n_blocks, uint64_t *cells_len, uint64_t *raw_len);

/* Encode x as the plan says into cells and raw (both written in full). The
 * seed must be the same on every worker of one aggregation.
 * With own == NULL, sketch values are read from x at the union's positions.
 * Otherwise own is this worker's own index (as gl_sketch_mark wrote it,
 * index_len bytes) and values its packed nonzeros (values_len of them, all
 * of them): x is then only read for raw blocks, and every own nonzero is
 * checked to be in the union.
 * Fails with GL_SKETCH_E_COVER when the union lacks one of this worker's
 * nonzeros or a value is not on its block's grid (the union index is not an
 * OR that includes this worker's own index). */
int gl_sketch_encode(const float *x, uint64_t n, uint32_t block_len, const uint8_t *index,
                     uint64_t index_len, const gl_sketch_block *blocks, uint64_t n_blocks,
                     uint64_t seed, const uint8_t *own, const float *values,
                     uint64_t values_len, int64_t *cells, uint64_t cells_len, float *raw,
                     uint64_t raw_len);

/* Decode summed cells and raw values into x in place: every union coordinate
 * of a block that peels completely, and every coordinate of a raw block, is
 * overwritten with its sum; coordinates outside the union are left as they
 * are (zero on every worker). failed[b] is set to 1 for a sketch block that
 * did not peel (its coordinates are left untouched: resend them), 0
 * otherwise; *n_failed counts them. A block also fails when a recovered sum
 * is out of its bound (corrupt cells) or overflows fp32 (the plain resend
 * then gives the same infinity a plain fp32 sum would). */
int gl_sketch_decode(const int64_t *cells, uint64_t cells_len, const float *raw,
                     uint64_t raw_len, const uint8_t *index, uint64_t index_len,
                     const gl_sketch_block *blocks, uint64_t n_blocks, uint64_t seed, float *x,
                     uint64_t n, uint32_t block_len, uint8_t *failed, uint64_t *n_failed);

/* Union coordinates of the blocks with select[b] != 0, in coordinate order:
 * their count (the length gather and scatter expect). */
int gl_sketch_selected_count(const uint8_t *index, uint64_t index_len, uint64_t n,
                             uint32_t block_len, const uint8_t *select, uint64_t n_blocks,
                             uint64_t *count);

/* Copy those coordinates of x into out (out_len must equal their count)... */
int gl_sketch_gather(const float *x, uint64_t n, uint32_t block_len, const uint8_t *index,
                     uint64_t index_len, const uint8_t *select, uint64_t n_blocks, float *out,
                     uint64_t out_len);

/* ...and write them back from in. */
int gl_sketch_scatter(const float *in, uint64_t in_len, uint64_t n, uint32_t block_len,
                      const uint8_t *index, uint64_t index_len, const uint8_t *select,
                      uint64_t n_blocks, float *x);

/* OR through a sum, for collectives without a bitwise OR (NCCL): spread each
 * bit of bytes[0 .. len) into a field of `width` bits, 31/width fields per
 * 32-bit word (bit 31 stays clear). Summing the words of up to 2^width - 1
 * workers never carries out of a field. words_len must be
 * gl_sketch_widened_words(len, width). */
uint64_t gl_sketch_widened_words(uint64_t len, uint32_t width);
int gl_sketch_widen(const uint8_t *bytes, uint64_t len, uint32_t width, uint32_t *words,
                    uint64_t words_len);
/* Back to bytes: a bit is set when its field is nonzero. */
int gl_sketch_narrow(const uint32_t *words, uint64_t words_len, uint32_t width, uint8_t *bytes,
                     uint64_t len);

const char *gl_sketch_strerror(int code);
/* cdef: end */

#endif
