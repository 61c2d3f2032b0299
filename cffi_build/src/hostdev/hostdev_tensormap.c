/*
 * hostdev_tensormap.c — tensor maps on the host device. No PTX the host
 * device runs reads one (it has no TMA instructions, and it reports
 * capability 8.0, so NVIDIA's libraries do not encode any for it), but a
 * program may encode maps whatever its device, so the host device answers as
 * NVIDIA's driver does: the same argument rules (cuda.h, CUDA 13.0), each
 * broken one CUDA_ERROR_INVALID_VALUE, and a map of its own layout (below),
 * which cuTensorMapReplaceAddress reads back.
 */
#include <assert.h>
#include <string.h>

#include "exec/executor.h"
#include "gl_tensormap.h"

/* The host device's map: the request's fields, narrowed to the ranges the
 * rules allow, behind a magic that a replace checks. No implicit padding. */
typedef struct {
    uint32_t magic;
    uint8_t kind, dtype, rank, interleave, swizzle, l2promotion, oobfill, mode;
    uint32_t dim_hi; /* bit i: dim[i] is 2^32, the one value that does not fit below */
    uint64_t address;
    uint32_t dim[GL_TMAP_RANK_MAX];
    uint32_t pad0;
    uint64_t stride[GL_TMAP_RANK_MAX - 1];
    uint16_t box[GL_TMAP_RANK_MAX];
    uint8_t estride[GL_TMAP_RANK_MAX];
    uint8_t pad1;
    int16_t lower[3], upper[3];
    uint16_t channels, pixels;
    uint8_t reserved[16];
} gl_host_tmap;

static_assert(sizeof(gl_host_tmap) == GL_TMAP_BYTES, "a tensor map is 128 bytes");

#define HOST_TMAP_MAGIC 0x4d544c47u /* "GLTM" */

enum {
    SWIZZLE_NONE, SWIZZLE_32B, SWIZZLE_64B, SWIZZLE_128B, SWIZZLE_128B_ATOM_32B,
    SWIZZLE_128B_ATOM_32B_FLIP_8B, SWIZZLE_128B_ATOM_64B, SWIZZLE_LAST = SWIZZLE_128B_ATOM_64B
};
enum { INTERLEAVE_NONE, INTERLEAVE_16B, INTERLEAVE_32B };
enum { DT_16U4_ALIGN8B = 13, DT_16U4_ALIGN16B = 14, DT_16U6_ALIGN16B = 15 };

static int packed16(uint32_t dtype)
{
    return dtype == DT_16U4_ALIGN16B || dtype == DT_16U6_ALIGN16B;
}

/* The swizzles a type allows (bit per CUtensorMapSwizzle): the packed
 * ALIGN16B types have a few; the wide im2col form has its own few. */
static unsigned swizzles_allowed(uint32_t dtype, uint32_t kind)
{
    const unsigned atoms = 1u << SWIZZLE_128B | 1u << SWIZZLE_128B_ATOM_32B;
    if (kind == GL_TMAP_IM2COL_WIDE)
        return packed16(dtype) ? atoms : atoms | 1u << SWIZZLE_64B;
    if (dtype == DT_16U6_ALIGN16B)
        return atoms | 1u << SWIZZLE_NONE | 1u << SWIZZLE_128B_ATOM_64B;
    if (dtype == DT_16U4_ALIGN16B)
        return atoms | 1u << SWIZZLE_NONE;
    return (1u << (SWIZZLE_LAST + 1)) - 1;
}

static int is_float(uint32_t dtype)
{
    return dtype >= 6 && dtype <= 12; /* FLOAT16 .. TFLOAT32_FTZ */
}

/* The start's alignment: 16 bytes, 32 for 32-byte interleave and the
 * 16-byte-aligned packed types. */
static int address_ok(uint64_t address, uint32_t dtype, uint32_t interleave)
{
    uint64_t align = interleave == INTERLEAVE_32B || packed16(dtype) ? 32 : 16;
    return address % align == 0;
}

/* The rules every encoder shares; inner: the bytes of the box's innermost
 * row, which a swizzle span must hold. */
static int common_ok(const gl_tmap_request *q, uint64_t inner_bytes)
{
    static const uint64_t span[] = {0, 32, 64, 128, 128, 128, 128};
    uint64_t sa = q->interleave == INTERLEAVE_32B || packed16(q->dtype) ? 32 : 16;

    if (gl_tmap_dtype_bits(q->dtype) == 0 || q->interleave > INTERLEAVE_32B ||
        q->swizzle > SWIZZLE_LAST || q->l2promotion > 3 || q->oobfill > 1)
        return 0;
    if (q->rank == 0 || q->rank > GL_TMAP_RANK_MAX ||
        (q->interleave != INTERLEAVE_NONE && q->rank < 3))
        return 0;
    if (!address_ok(q->address, q->dtype, q->interleave))
        return 0;
    /* With no interleave the first element stride is ignored (TMA has none there). */
    for (uint32_t i = 0; i < q->rank; i++)
        if (q->dim[i] == 0 || q->dim[i] > ((uint64_t)1 << 32) ||
            ((q->estride[i] == 0 || q->estride[i] > 8) &&
             (i > 0 || q->interleave != INTERLEAVE_NONE)))
            return 0;
    for (uint32_t i = 0; i + 1 < q->rank; i++)
        if (q->stride[i] % sa != 0 || q->stride[i] >= ((uint64_t)1 << 40))
            return 0;
    if (packed16(q->dtype) && q->dim[0] % 128 != 0)
        return 0;
    if (q->dtype == DT_16U4_ALIGN8B && q->dim[0] % 2 != 0)
        return 0;
    if (q->interleave == INTERLEAVE_32B && q->swizzle != SWIZZLE_32B)
        return 0;
    if (!(swizzles_allowed(q->dtype, q->kind) >> q->swizzle & 1u))
        return 0;
    if (q->interleave == INTERLEAVE_NONE && q->swizzle != SWIZZLE_NONE &&
        inner_bytes > span[q->swizzle])
        return 0;
    if (q->dtype == DT_16U6_ALIGN16B && q->interleave != INTERLEAVE_NONE)
        return 0;
    if (q->oobfill == 1 && !is_float(q->dtype))
        return 0;
    return 1;
}

static int tiled_ok(const gl_tmap_request *q)
{
    if (q->rank == 0 || q->rank > GL_TMAP_RANK_MAX)
        return 0;
    for (uint32_t i = 0; i < q->rank; i++)
        if (q->box[i] == 0 || q->box[i] > 256)
            return 0;
    uint64_t inner = gl_tmap_row_bytes(q->box[0], q->dtype);
    if (q->interleave == INTERLEAVE_NONE && inner % 16 != 0)
        return 0;
    if (packed16(q->dtype) && q->box[0] != 128)
        return 0;
    return common_ok(q, inner);
}

/* Im2col's corner offsets narrow with the rank: 16, 8 and 5 bits. */
static int corners_ok(const gl_tmap_request *q)
{
    static const int32_t lim[] = {32768, 128, 16};
    uint32_t n = q->rank - 2;
    int32_t l = lim[n - 1];

    for (uint32_t i = 0; i < n; i++)
        if (q->lower[i] < -l || q->lower[i] >= l || q->upper[i] < -l || q->upper[i] >= l)
            return 0;
    return 1;
}

/* Im2colWide has the W offsets alone, each 16 bits, and a mode (W or W128). */
static int wide_ok(const gl_tmap_request *q)
{
    return q->lower[0] >= -32768 && q->lower[0] <= 32767 && q->upper[0] >= -32768 &&
           q->upper[0] <= 32767 && q->mode <= 1;
}

static int im2col_ok(const gl_tmap_request *q)
{
    if (q->rank < 3 || q->rank > GL_TMAP_RANK_MAX)
        return 0;
    if (!(q->kind == GL_TMAP_IM2COL ? corners_ok(q) : wide_ok(q)))
        return 0;
    if (q->channels == 0 || q->channels > 256 || (packed16(q->dtype) && q->channels != 128))
        return 0;
    /* The wide form's W128 mode ignores the pixels per column. */
    if ((q->pixels == 0 || q->pixels > 1024) && !(q->kind == GL_TMAP_IM2COL_WIDE && q->mode == 1))
        return 0;
    return common_ok(q, gl_tmap_row_bytes(q->channels, q->dtype));
}

static void encode(const gl_tmap_request *q, gl_host_tmap *m)
{
    /* The layout has no implicit padding, so every byte is set. */
    *m = (gl_host_tmap){.magic = HOST_TMAP_MAGIC, .kind = (uint8_t)q->kind,
                        .dtype = (uint8_t)q->dtype, .rank = (uint8_t)q->rank,
                        .interleave = (uint8_t)q->interleave, .swizzle = (uint8_t)q->swizzle,
                        .l2promotion = (uint8_t)q->l2promotion,
                        .oobfill = (uint8_t)q->oobfill, .mode = (uint8_t)q->mode,
                        .address = q->address, .channels = (uint16_t)q->channels,
                        .pixels = (uint16_t)q->pixels};
    for (uint32_t i = 0; i < q->rank; i++) {
        m->dim_hi |= (q->dim[i] >> 32) << i;
        m->dim[i] = (uint32_t)q->dim[i];
        m->box[i] = (uint16_t)q->box[i];
        m->estride[i] = (uint8_t)q->estride[i];
    }
    for (uint32_t i = 0; i + 1 < q->rank; i++)
        m->stride[i] = q->stride[i];
    for (int i = 0; i < 3; i++) {
        m->lower[i] = (int16_t)q->lower[i];
        m->upper[i] = (int16_t)q->upper[i];
    }
}

/* A map this device wrote, with a new start that keeps its alignment and
 * has the whole tensor in the session's memory (the executor checked the
 * start alone: only this device can read the map's extent). */
static CUresult replace(const gl_tmap_request *q, gl_host_tmap *m)
{
    gl_tmap_request shape = {.dtype = 0};
    uint64_t extent;

    memcpy(m, q->map, sizeof *m);
    if (m->magic != HOST_TMAP_MAGIC || m->kind < GL_TMAP_TILED || m->kind > GL_TMAP_IM2COL_WIDE ||
        m->rank == 0 || m->rank > GL_TMAP_RANK_MAX ||
        !address_ok(q->address, m->dtype, m->interleave))
        return CUDA_ERROR_INVALID_VALUE;
    shape.dtype = m->dtype;
    shape.rank = m->rank;
    for (uint32_t i = 0; i < m->rank; i++)
        shape.dim[i] = (uint64_t)m->dim[i] | (uint64_t)(m->dim_hi >> i & 1u) << 32;
    memcpy(shape.stride, m->stride, sizeof m->stride);
    if (gl_tmap_extent(&shape, &extent) != 0 ||
        gl_exec_check_dptr(gl_exec_current(), q->address, extent) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    m->address = q->address;
    return CUDA_SUCCESS;
}

CUresult hb_glTensorMapEncode(void *tensorMap, const void *request, size_t n)
{
    const gl_tmap_request *q = request;
    gl_host_tmap m;

    (void)n;
    if (q->kind == GL_TMAP_REPLACE) {
        CUresult r = replace(q, &m);
        if (r != CUDA_SUCCESS)
            return r;
    } else {
        if (!(q->kind == GL_TMAP_TILED ? tiled_ok(q) : im2col_ok(q)))
            return CUDA_ERROR_INVALID_VALUE;
        encode(q, &m);
    }
    memcpy(tensorMap, &m, sizeof m);
    return CUDA_SUCCESS;
}
