/*
 * gl_tensormap.h — a tensor-map request (Hopper's TMA descriptors:
 * cuTensorMapEncodeTiled, ...Im2col, ...Im2colWide, cuTensorMapReplaceAddress)
 * as it crosses the wire, and how far the described tensor reaches.
 *
 * A tensor map is 128 opaque bytes that only the serving device's driver can
 * write, so the interposer packs the call's arguments into one request
 * (interposer/tensormap.c), the server checks the memory it names against the
 * session's (executor.c) and its backend encodes the map: the real driver on
 * the cuda backend, gleam's own layout on the host device
 * (src/hostdev/hostdev_tensormap.c). The request has fixed-width fields only, so both
 * ends read it the same way (gleam's peers are little-endian, as the records
 * are). Header-only; the interposer, the executor and both backends share it.
 */
#ifndef GLEAM_TENSORMAP_H
#define GLEAM_TENSORMAP_H

#include <stdint.h>

#define GL_TMAP_BYTES 128 /* sizeof(CUtensorMap) */
#define GL_TMAP_ALIGN 64  /* the alignment NVIDIA's driver documents for a map it writes */
#define GL_TMAP_RANK_MAX 5

enum {
    GL_TMAP_TILED = 1,
    GL_TMAP_IM2COL = 2,
    GL_TMAP_IM2COL_WIDE = 3,
    GL_TMAP_REPLACE = 4 /* map: the map to change; address: the new start */
};

/* Every argument of the four calls; a kind uses its own and leaves the rest
 * zero. Arrays hold the call's `rank` entries (strides: rank - 1). */
typedef struct {
    uint32_t kind, dtype, rank, interleave;
    uint32_t swizzle, l2promotion, oobfill, mode; /* mode: Im2colWide only */
    uint64_t address;
    uint64_t dim[GL_TMAP_RANK_MAX];
    uint64_t stride[GL_TMAP_RANK_MAX - 1];
    uint32_t box[GL_TMAP_RANK_MAX]; /* Tiled */
    uint32_t estride[GL_TMAP_RANK_MAX];
    int32_t lower[3], upper[3];     /* Im2col's {D, H, W} corners; Wide: [0] is W */
    uint32_t channels, pixels;      /* Im2col: per pixel, per column */
    uint8_t map[GL_TMAP_BYTES];     /* Replace */
} gl_tmap_request;

/* CUtensorMapDataType (CUDA 12.0-13.0): bits each element takes in memory;
 * 0 for an unknown type. The last three are packed 4- and 6-bit integers
 * (CUDA 12.8): 16U4_ALIGN8B packs 16 in 8 bytes, while the two ALIGN16B types
 * pad each 16 to 16 bytes (8- and 4-byte gaps), so they take 8 bits each. */
static inline unsigned gl_tmap_dtype_bits(uint32_t dtype)
{
    static const unsigned char bits[] = {8,  16, 32, 32, 64, 64, 16, 32,
                                         64, 16, 32, 32, 32, 4,  8,  8};
    return dtype < sizeof bits ? bits[dtype] : 0;
}

/* The bytes a row of N elements of the type takes (N at most 2^32, so the
 * product cannot wrap). */
static inline uint64_t gl_tmap_row_bytes(uint64_t n, uint32_t dtype)
{
    return (n * gl_tmap_dtype_bits(dtype) + 7) / 8;
}

/* 0 and *out = the bytes the tensor reaches from its address: its innermost
 * row, plus each outer dimension's (dim - 1) strides. -1 when a dimension is
 * zero or above 2^32 (CUDA's bound, which also keeps the row's arithmetic
 * from wrapping), the rank or type is out of range, or the sum does not fit
 * in 64 bits (which would let a huge tensor pass a range check). */
static inline int gl_tmap_extent(const gl_tmap_request *q, uint64_t *out)
{
    unsigned bits = gl_tmap_dtype_bits(q->dtype);
    uint64_t total, step;

    if (q->rank == 0 || q->rank > GL_TMAP_RANK_MAX || bits == 0)
        return -1;
    for (uint32_t i = 0; i < q->rank; i++)
        if (q->dim[i] == 0 || q->dim[i] > ((uint64_t)1 << 32))
            return -1;
    total = gl_tmap_row_bytes(q->dim[0], q->dtype);
    for (uint32_t i = 1; i < q->rank; i++)
        if (__builtin_mul_overflow(q->dim[i] - 1, q->stride[i - 1], &step) ||
            __builtin_add_overflow(total, step, &total))
            return -1;
    *out = total;
    return 0;
}

#endif
