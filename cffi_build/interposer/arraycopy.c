/*
 * arraycopy.c — copies with a CUDA array on either side: cuMemcpy2D/3D (and
 * their Async forms, which copies2d.c routes here when a side names an
 * array) and the 1D array copies cuMemcpyHtoA, AtoH, AtoD, DtoA, AtoA.
 *
 * A copy is cut into records of one slice each: glMemcpyDtoA, glMemcpyAtoD
 * and glMemcpyAtoA carry no bytes and go as one record per slice; host rows
 * travel packed in glMemcpyHtoA payloads and come back packed in
 * glMemcpyAtoH replies, at most one copy chunk per record (a row wider than
 * a chunk goes in pieces). Everything is checked before the first record:
 * the array's extents against the copy's (x, width and every row and slice
 * inside it, whole elements), each memory side's reach (the session's memory,
 * or host bytes that do not wrap), and CUDA's rules for the descriptor (LOD
 * members 0, reserved members NULL, rows and slices that do not overlap).
 * The server checks the array's extents again, and the device spans.
 */
#include <stdlib.h>
#include <string.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "gl_span.h"
#include "internal.h"

enum { SIDE_HOST, SIDE_DEVICE, SIDE_ARRAY };

typedef struct {
    int kind;
    uint64_t addr;   /* host or device: the first byte of the copy in slice 0 */
    size_t pitch;    /* host or device: bytes between rows */
    uint64_t step;   /* host or device: bytes between slices */
    uint64_t array;  /* an array side's handle */
    size_t x, y, z;  /* an array side's origin */
} side;

typedef struct {
    side src, dst;
    size_t width, height, depth;
    CUstream stream;
    int ptds;
} xcopy;

/* base + z * step + y * pitch + x without wrapping. */
static CUresult origin(uint64_t base, size_t x, size_t y, size_t z, uint64_t pitch,
                       uint64_t step, uint64_t *out)
{
    uint64_t a, b;
    if (__builtin_mul_overflow((uint64_t)z, step, &a) ||
        __builtin_mul_overflow((uint64_t)y, pitch, &b) || __builtin_add_overflow(a, b, &a) ||
        __builtin_add_overflow(a, (uint64_t)x, &a) || __builtin_add_overflow(base, a, out))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* An array side: the copy's box inside the array's extents, in whole elements. */
static CUresult array_side(side *s, CUarray array, size_t x, size_t y, size_t z,
                           const xcopy *c)
{
    gl_array_info a;
    uint64_t w, h, d;
    if (!gl_array_find((uint64_t)(uintptr_t)array, 0, &a))
        return CUDA_ERROR_INVALID_VALUE;
    uint32_t elem = gl_array_elem_bytes(a.d.format, a.d.channels);
    gl_array_level_dims(&a.d, 0, &w, &h, &d);
    uint64_t row = w * elem;
    if (x % elem != 0 || c->width % elem != 0 || x > row || c->width > row - x || y > h ||
        c->height > h - y || z > d || c->depth > d - z)
        return CUDA_ERROR_INVALID_VALUE;
    s->kind = SIDE_ARRAY;
    s->array = (uint64_t)(uintptr_t)array;
    s->x = x, s->y = y, s->z = z;
    return CUDA_SUCCESS;
}

/* A memory side: rows and slices that do not overlap, inside its memory. */
static CUresult memory_side(side *s, int device, uint64_t base, size_t x, size_t y, size_t z,
                            size_t pitch, size_t slice_rows, const xcopy *c)
{
    uint64_t slice, all;
    if (base == 0 || (c->depth > 1 && slice_rows < c->height) ||
        __builtin_mul_overflow((uint64_t)slice_rows, (uint64_t)pitch, &s->step) ||
        gl_span_bytes(pitch, c->width, c->height, &slice) != 0 ||
        gl_span_bytes(s->step, slice, c->depth, &all) != 0 ||
        origin(base, x, y, z, pitch, s->step, &s->addr) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    s->kind = device ? SIDE_DEVICE : SIDE_HOST;
    s->pitch = pitch;
    if (device)
        return gl_check_dptr(s->addr, all);
    return s->addr + all < s->addr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult make_side(side *s, CUmemorytype type, const void *host, CUdeviceptr device,
                          CUarray array, const void *reserved, size_t lod, size_t x, size_t y,
                          size_t z, size_t pitch, size_t slice_rows, const xcopy *c)
{
    if (reserved != NULL || lod != 0)
        return CUDA_ERROR_INVALID_VALUE;
    switch (type) {
    case GL_CU_MEMORYTYPE_HOST:
        return memory_side(s, 0, (uint64_t)(uintptr_t)host, x, y, z, pitch, slice_rows, c);
    case GL_CU_MEMORYTYPE_DEVICE:
        return memory_side(s, 1, device, x, y, z, pitch, slice_rows, c);
    case GL_CU_MEMORYTYPE_UNIFIED: /* told by address, as cuMemcpy routes */
        return memory_side(s, gl_va_find(device, NULL, NULL), device, x, y, z, pitch,
                           slice_rows, c);
    case GL_CU_MEMORYTYPE_ARRAY:
        return array_side(s, array, x, y, z, c);
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* ROWS rows of WIDTH bytes from byte OFF of row R0 of slice K, between the
 * host side and the array, packed through tmp when the host rows are not. */
static CUresult host_rows(const xcopy *c, int to_array, size_t k, size_t off, size_t r0,
                          size_t rows, size_t width, uint8_t *tmp)
{
    const side *h = to_array ? &c->src : &c->dst, *a = to_array ? &c->dst : &c->src;
    uint8_t *host = (uint8_t *)(uintptr_t)(h->addr + k * h->step + r0 * h->pitch + off);
    int packed = rows == 1 || h->pitch == width;
    uint8_t *buf = packed ? host : tmp;
    CUarray array = (CUarray)(uintptr_t)a->array;
    CUresult r;
    if (to_array) {
        for (size_t i = 0; !packed && i < rows; i++)
            memcpy(tmp + i * width, host + i * h->pitch, width);
        return glw_glMemcpyHtoA(array, a->x + off, a->y + r0, a->z + k, buf, width, rows,
                                c->stream, c->ptds);
    }
    r = glw_glMemcpyAtoH(buf, array, a->x + off, a->y + r0, a->z + k, width, rows, c->stream,
                         c->ptds);
    for (size_t i = 0; r == CUDA_SUCCESS && !packed && i < rows; i++)
        memcpy(host + i * h->pitch, tmp + i * width, width);
    return r;
}

/* One slice between the host and the array, a copy chunk per record. */
static CUresult host_slice(const xcopy *c, int to_array, size_t k, uint8_t *tmp)
{
    CUresult r = CUDA_SUCCESS;
    if (c->width > GL_COPY_CHUNK) {
        for (size_t y = 0; r == CUDA_SUCCESS && y < c->height; y++)
            for (size_t off = 0; r == CUDA_SUCCESS && off < c->width; off += GL_COPY_CHUNK) {
                size_t piece = c->width - off < GL_COPY_CHUNK ? c->width - off : GL_COPY_CHUNK;
                r = host_rows(c, to_array, k, off, y, 1, piece, tmp);
            }
        return r;
    }
    size_t per = GL_COPY_CHUNK / c->width;
    for (size_t y = 0; r == CUDA_SUCCESS && y < c->height; y += per)
        r = host_rows(c, to_array, k, 0, y, c->height - y < per ? c->height - y : per,
                      c->width, tmp);
    return r;
}

static CUresult slice(const xcopy *c, size_t k, uint8_t *tmp)
{
    const side *s = &c->src, *d = &c->dst;
    CUarray sa = (CUarray)(uintptr_t)s->array, da = (CUarray)(uintptr_t)d->array;
    if (s->kind == SIDE_ARRAY && d->kind == SIDE_ARRAY)
        return glw_glMemcpyAtoA(da, d->x, d->y, d->z + k, sa, s->x, s->y, s->z + k, c->width,
                                c->height, c->stream, c->ptds);
    if (s->kind == SIDE_DEVICE)
        return glw_glMemcpyDtoA(da, d->x, d->y, d->z + k, s->addr + k * s->step, s->pitch,
                                c->width, c->height, c->stream, c->ptds);
    if (d->kind == SIDE_DEVICE)
        return glw_glMemcpyAtoD(d->addr + k * d->step, d->pitch, sa, s->x, s->y, s->z + k,
                                c->width, c->height, c->stream, c->ptds);
    return host_slice(c, d->kind == SIDE_ARRAY, k, tmp);
}

CUresult gl_array_copy3d(const CUDA_MEMCPY3D *p, CUstream stream, int ptds)
{
    xcopy c = {.width = 0, .stream = stream, .ptds = ptds};
    CUresult r;
    if (p == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    c.width = p->WidthInBytes;
    c.height = p->Height;
    c.depth = p->Depth;
    if ((r = make_side(&c.src, p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray,
                       p->reserved0, p->srcLOD, p->srcXInBytes, p->srcY, p->srcZ, p->srcPitch,
                       p->srcHeight, &c)) != CUDA_SUCCESS ||
        (r = make_side(&c.dst, p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray,
                       p->reserved1, p->dstLOD, p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch,
                       p->dstHeight, &c)) != CUDA_SUCCESS)
        return r;
    if (c.src.kind != SIDE_ARRAY && c.dst.kind != SIDE_ARRAY)
        return CUDA_ERROR_INVALID_VALUE; /* copies2d.c copies memory to memory */
    if (c.width == 0 || c.height == 0 || c.depth == 0)
        return CUDA_SUCCESS;
    uint8_t *tmp = NULL;
    int host = c.src.kind == SIDE_HOST || c.dst.kind == SIDE_HOST;
    if (host && (tmp = malloc(GL_COPY_CHUNK)) == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    r = CUDA_SUCCESS;
    for (size_t k = 0; r == CUDA_SUCCESS && k < c.depth; k++)
        r = slice(&c, k, tmp);
    free(tmp);
    return r;
}

/* ----------------------------------------------------- the 1D array copies */

/* One end of a 1D copy: an array at a byte offset, host or device memory. */
typedef struct {
    CUmemorytype type;
    const void *host;
    CUdeviceptr device;
    CUarray array;
    size_t offset;
} end1d;

#define ARRAY_AT(a, off) ((end1d){.type = GL_CU_MEMORYTYPE_ARRAY, .array = (a), .offset = (off)})
#define HOST_AT(p) ((end1d){.type = GL_CU_MEMORYTYPE_HOST, .host = (p)})
#define DEVICE_AT(p) ((end1d){.type = GL_CU_MEMORYTYPE_DEVICE, .device = (p)})

/* n bytes from s to d; an array end must be a 1D array ("Copies ... a 1D
 * CUDA array", the calls' documentation). */
static CUresult copy1d(end1d d, end1d s, size_t n, CUstream stream, int ptds)
{
    const end1d *ends[2] = {&d, &s};
    for (int k = 0; k < 2; k++) {
        gl_array_info a;
        if (ends[k]->type != GL_CU_MEMORYTYPE_ARRAY)
            continue;
        if (!gl_array_find((uint64_t)(uintptr_t)ends[k]->array, 0, &a) || a.d.height != 0 ||
            a.d.depth != 0)
            return CUDA_ERROR_INVALID_VALUE;
    }
    CUDA_MEMCPY3D p = {
        .srcXInBytes = s.offset, .srcMemoryType = s.type, .srcHost = s.host,
        .srcDevice = s.device, .srcArray = s.array, .srcPitch = n, .dstXInBytes = d.offset,
        .dstMemoryType = d.type, .dstHost = (void *)(uintptr_t)d.host, .dstDevice = d.device,
        .dstArray = d.array, .dstPitch = n, .WidthInBytes = n, .Height = 1, .Depth = 1};
    return gl_array_copy3d(&p, stream, ptds);
}

CUresult gls_cuMemcpyHtoA(CUarray dstArray, size_t dstOffset, const void *srcHost,
                          size_t ByteCount, int ptds)
{
    return copy1d(ARRAY_AT(dstArray, dstOffset), HOST_AT(srcHost), ByteCount, NULL, ptds);
}

CUresult gls_cuMemcpyHtoAAsync(CUarray dstArray, size_t dstOffset, const void *srcHost,
                               size_t ByteCount, CUstream hStream, int ptds)
{
    return copy1d(ARRAY_AT(dstArray, dstOffset), HOST_AT(srcHost), ByteCount, hStream, ptds);
}

CUresult gls_cuMemcpyAtoH(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount,
                          int ptds)
{
    return copy1d(HOST_AT(dstHost), ARRAY_AT(srcArray, srcOffset), ByteCount, NULL, ptds);
}

CUresult gls_cuMemcpyAtoHAsync(void *dstHost, CUarray srcArray, size_t srcOffset,
                               size_t ByteCount, CUstream hStream, int ptds)
{
    return copy1d(HOST_AT(dstHost), ARRAY_AT(srcArray, srcOffset), ByteCount, hStream, ptds);
}

CUresult gls_cuMemcpyAtoD(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset,
                          size_t ByteCount, int ptds)
{
    return copy1d(DEVICE_AT(dstDevice), ARRAY_AT(srcArray, srcOffset), ByteCount, NULL, ptds);
}

CUresult gls_cuMemcpyDtoA(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice,
                          size_t ByteCount, int ptds)
{
    return copy1d(ARRAY_AT(dstArray, dstOffset), DEVICE_AT(srcDevice), ByteCount, NULL, ptds);
}

CUresult gls_cuMemcpyAtoA(CUarray dstArray, size_t dstOffset, CUarray srcArray,
                          size_t srcOffset, size_t ByteCount, int ptds)
{
    return copy1d(ARRAY_AT(dstArray, dstOffset), ARRAY_AT(srcArray, srcOffset), ByteCount, NULL,
                  ptds);
}
