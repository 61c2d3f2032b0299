/*
 * gl_array.h — CUDA arrays, mipmapped arrays, texture and surface objects as
 * they cross the wire, and the host device's layout of an array.
 *
 * An array lives on the server. The interposer keeps its descriptor (it
 * answers cuArray3DGetDescriptor without a round trip) and, when the serving
 * device is gleam's host device, allocates the array's storage in the
 * session's memory itself: the host device keeps the array there in the
 * layout below, so a checkpoint's memory snapshot holds its contents like any
 * allocation's, and every kernel access to it is checked like other memory.
 * The cuda backend makes a real array with the real driver and gets no
 * storage. A texture or surface object request names its resource by minted
 * handle (an array or mipmapped array) or device address (linear and pitched
 * memory), and carries the whole texture and view description, widened to
 * fixed-width fields so that both ends read it alike (gleam's peers are
 * little-endian, as the records are).
 *
 * Header-only; the interposer, the executor and both backends share it. No
 * state. Every size computed here is checked against 64-bit overflow by
 * bounding the extents first (gl_array_valid), never after the fact.
 */
#ifndef GLEAM_ARRAY_H
#define GLEAM_ARRAY_H

#include <stdint.h>

/* CUarray_format values gleam stores (CUDA's numbers). */
enum {
    GL_AD_U8 = 0x01, GL_AD_U16 = 0x02, GL_AD_U32 = 0x03,
    GL_AD_S8 = 0x08, GL_AD_S16 = 0x09, GL_AD_S32 = 0x0a,
    GL_AD_HALF = 0x10, GL_AD_FLOAT = 0x20
};

/* CUDA_ARRAY3D_* flags. */
enum {
    GL_ARRAY_LAYERED = 0x01, GL_ARRAY_SURFACE_LDST = 0x02, GL_ARRAY_CUBEMAP = 0x04,
    GL_ARRAY_TEXTURE_GATHER = 0x08
};
#define GL_ARRAY_KNOWN_FLAGS 0x0fu

/* CUresourcetype, CUaddress_mode, CUfilter_mode, CU_TRSF_* (CUDA's numbers). */
enum { GL_RES_ARRAY = 0, GL_RES_MIPMAP = 1, GL_RES_LINEAR = 2, GL_RES_PITCH2D = 3 };
enum { GL_ADDR_WRAP = 0, GL_ADDR_CLAMP = 1, GL_ADDR_MIRROR = 2, GL_ADDR_BORDER = 3 };
enum { GL_FILTER_POINT = 0, GL_FILTER_LINEAR = 1 };
enum {
    GL_TRSF_READ_AS_INTEGER = 0x01, GL_TRSF_NORMALIZED_COORDINATES = 0x02,
    GL_TRSF_SRGB = 0x10, GL_TRSF_DISABLE_TRILINEAR_OPTIMIZATION = 0x20,
    GL_TRSF_SEAMLESS_CUBEMAP = 0x40
};
#define GL_TRSF_KNOWN 0x73u

enum { GL_TEX_TEXTURE = 1, GL_TEX_SURFACE = 2 };

/* The shapes an array descriptor may have (cuArray3DCreate's table). */
enum {
    GL_SHAPE_BAD = 0, GL_SHAPE_1D, GL_SHAPE_2D, GL_SHAPE_3D, GL_SHAPE_1D_LAYERED,
    GL_SHAPE_2D_LAYERED, GL_SHAPE_CUBE, GL_SHAPE_CUBE_LAYERED
};

/* Each level of the host layout starts at this alignment (tex's base
 * address rule is 16). */
#define GL_ARRAY_LEVEL_ALIGN 256u

/* cdef: begin */
/* Extents above this are refused before any size is computed: it is above
 * every limit a current GPU reports (131072), and keeps width x height x
 * depth x 16 bytes x 18 levels inside 64 bits. */
#define GL_ARRAY_EXTENT_MAX 131072
/* 1 + log2(GL_ARRAY_EXTENT_MAX): the most levels a mipmapped array has. */
#define GL_ARRAY_LEVELS_MAX 18

/* An array or mipmapped array (CUDA_ARRAY3D_DESCRIPTOR, widened). */
typedef struct {
    uint64_t width, height, depth; /* as the program gave them: 0 = fewer dimensions */
    uint32_t format, channels, flags;
    uint32_t levels; /* 0: a plain array; else a mipmapped array's levels (clamped) */
} gl_array_desc;

/* CUDA_TEXTURE_DESC and CUDA_RESOURCE_VIEW_DESC, field for field (the
 * interposer checks the sizes): the program's descriptors travel as they are
 * and a GPU's driver gets them back as they were. */
typedef struct {
    int32_t address[3]; /* GL_ADDR_* */
    int32_t filter;     /* GL_FILTER_* */
    uint32_t flags;     /* GL_TRSF_* */
    uint32_t max_anisotropy;
    int32_t mip_filter;
    float mip_bias, min_level, max_level;
    float border[4];
    int32_t reserved[12];
} gl_tex_desc;
typedef struct {
    int32_t format; /* CUresourceViewFormat; 0: the resource's own */
    uint32_t pad;
    uint64_t width, height, depth;
    uint32_t first_level, last_level, first_layer, last_layer;
    uint32_t reserved[16];
} gl_view_desc;

/* A texture (kind GL_TEX_TEXTURE) or surface (GL_TEX_SURFACE) object request. */
typedef struct {
    uint64_t handle;   /* the object's minted handle */
    uint32_t kind;     /* GL_TEX_* */
    uint32_t res_type; /* GL_RES_* */
    uint64_t resource; /* an array or mipmapped array's minted handle, or a device address */
    uint32_t format, channels;  /* linear and pitch2D memory */
    uint64_t width, height, pitch; /* linear: width is sizeInBytes; pitch2D: elements, bytes */
    uint32_t res_flags;         /* CUDA_RESOURCE_DESC::flags (must be 0) */
    /* 1: the program was given the handle itself as the object's value (the
     * host device's answer). A server whose values differ (a GPU's driver)
     * refuses such a request: it comes from a session moved to it. */
    uint32_t value_is_handle;
    uint32_t has_view, pad;
    gl_tex_desc tex;   /* textures */
    gl_view_desc view; /* when has_view */
} gl_tex_request;
/* cdef: end */

/* Bytes of one channel of a format; 0 for the formats gleam does not store
 * (the packed UNORM/SNORM, block-compressed and video formats). */
static inline uint32_t gl_array_format_bytes(uint32_t format)
{
    switch (format) {
    case GL_AD_U8:
    case GL_AD_S8:
        return 1;
    case GL_AD_U16:
    case GL_AD_S16:
    case GL_AD_HALF:
        return 2;
    case GL_AD_U32:
    case GL_AD_S32:
    case GL_AD_FLOAT:
        return 4;
    default:
        return 0;
    }
}

/* Bytes of one element (all its channels); 0 when not storable. */
static inline uint32_t gl_array_elem_bytes(uint32_t format, uint32_t channels)
{
    if (channels != 1 && channels != 2 && channels != 4)
        return 0;
    return gl_array_format_bytes(format) * channels;
}

/* The shape the extents and flags describe (cuArray3DCreate's rules), or
 * GL_SHAPE_BAD. */
static inline int gl_array_shape(const gl_array_desc *d)
{
    uint32_t f = d->flags & (GL_ARRAY_LAYERED | GL_ARRAY_CUBEMAP);
    if (d->width == 0)
        return GL_SHAPE_BAD;
    if (f == 0) {
        if (d->height == 0)
            return d->depth == 0 ? GL_SHAPE_1D : GL_SHAPE_BAD;
        return d->depth == 0 ? GL_SHAPE_2D : GL_SHAPE_3D;
    }
    if (f == GL_ARRAY_LAYERED) {
        if (d->depth == 0)
            return GL_SHAPE_BAD;
        return d->height == 0 ? GL_SHAPE_1D_LAYERED : GL_SHAPE_2D_LAYERED;
    }
    if (d->width != d->height)
        return GL_SHAPE_BAD;
    if (f == GL_ARRAY_CUBEMAP)
        return d->depth == 6 ? GL_SHAPE_CUBE : GL_SHAPE_BAD;
    return d->depth != 0 && d->depth % 6 == 0 ? GL_SHAPE_CUBE_LAYERED : GL_SHAPE_BAD;
}

static inline int gl_array_layered(int shape)
{
    return shape == GL_SHAPE_1D_LAYERED || shape == GL_SHAPE_2D_LAYERED ||
           shape == GL_SHAPE_CUBE || shape == GL_SHAPE_CUBE_LAYERED;
}

/* The most levels an array of these extents has: 1 + floor(log2(the largest
 * extent that shrinks)); layers do not shrink. */
static inline uint32_t gl_array_full_levels(const gl_array_desc *d)
{
    uint64_t m = d->width > d->height ? d->width : d->height;
    if (!gl_array_layered(gl_array_shape(d)) && d->depth > m)
        m = d->depth;
    uint32_t n = 1;
    while (m > 1) {
        m >>= 1;
        n++;
    }
    return n;
}

/* 1 when the descriptor is one gleam can store: a known shape and format,
 * known flags, extents up to GL_ARRAY_EXTENT_MAX, and for a mipmapped array
 * levels within 1 .. gl_array_full_levels (the caller clamps first, as
 * cuMipmappedArrayCreate documents). */
static inline int gl_array_valid(const gl_array_desc *d)
{
    if (gl_array_shape(d) == GL_SHAPE_BAD || gl_array_elem_bytes(d->format, d->channels) == 0 ||
        (d->flags & ~GL_ARRAY_KNOWN_FLAGS) != 0 || d->width > GL_ARRAY_EXTENT_MAX ||
        d->height > GL_ARRAY_EXTENT_MAX || d->depth > GL_ARRAY_EXTENT_MAX)
        return 0;
    return d->levels <= gl_array_full_levels(d);
}

/* Level L's extents in elements, each at least 1 (depth: layers for layered
 * shapes, which do not shrink). */
static inline void gl_array_level_dims(const gl_array_desc *d, uint32_t level, uint64_t *w,
                                       uint64_t *h, uint64_t *depth)
{
    uint64_t wl = d->width >> level, hl = d->height >> level, dl = d->depth >> level;
    *w = wl ? wl : 1;
    *h = d->height == 0 ? 1 : hl ? hl : 1;
    if (gl_array_layered(gl_array_shape(d)))
        *depth = d->depth;
    else
        *depth = d->depth == 0 ? 1 : dl ? dl : 1;
}

/* The host layout: level after level, each GL_ARRAY_LEVEL_ALIGN-aligned,
 * each dense (rows of width elements, slices of height rows). Offset of
 * level L, or with L = the level count, the bytes of the whole array. The
 * descriptor must be valid (gl_array_valid), which bounds every product. */
static inline uint64_t gl_array_level_offset(const gl_array_desc *d, uint32_t level)
{
    uint64_t off = 0, w, h, depth, elem = gl_array_elem_bytes(d->format, d->channels);
    for (uint32_t l = 0; l < level; l++) {
        gl_array_level_dims(d, l, &w, &h, &depth);
        off += (elem * w * h * depth + GL_ARRAY_LEVEL_ALIGN - 1) / GL_ARRAY_LEVEL_ALIGN *
               GL_ARRAY_LEVEL_ALIGN;
    }
    return off;
}

static inline uint64_t gl_array_bytes(const gl_array_desc *d)
{
    return gl_array_level_offset(d, d->levels ? d->levels : 1);
}

#endif /* GLEAM_ARRAY_H */
