/*
 * copies2d.c — pitched memory: cuMemAllocPitch, cuMemcpy2D/3D (and their
 * Async and Unaligned forms), cuMemsetD2D*, and peer copies.
 *
 * A 2D copy is HEIGHT rows of WIDTH bytes, each side's rows PITCH bytes
 * apart. Rows that are contiguous on both sides go as one plain copy.
 * Otherwise host-to-device rows travel packed, at most one copy chunk per
 * glMemcpy2DHtoD record (the server spreads them out at its pitch);
 * device-to-host rows come back packed in glMemcpy2DDtoH replies (one round
 * trip per chunk, as a plain copy); device-to-device is one glMemcpy2DDtoD
 * record. A 3D copy is one 2D copy when its slices lie evenly, else one per
 * slice. A copy with an array side goes to arraycopy.c.
 *
 * Every offset and extent is checked for 64-bit overflow before use, and each
 * device side's whole span against the session's memory (the generated
 * emitters check it again, and so does the server).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "gl_span.h"
#include "graph.h"
#include "internal.h"

/* cuMemAllocPitch's row alignment: what NVIDIA's driver gives on current GPUs,
 * so a program that prints or reasons about the pitch sees a familiar one. */
#define PITCH_ALIGN 512u
/* CU_DEVICE_ATTRIBUTE_MAX_PITCH of every current GPU. */
#define MAX_PITCH ((size_t)INT32_MAX)

/* One side of a copy: where its first row starts and how far apart rows are. */
typedef struct {
    int dev;       /* 1: addr is device memory; 0: host memory */
    uint64_t addr; /* the first byte of the first row */
    size_t pitch;
} side;

typedef struct {
    side src, dst;
    size_t width, height;
    CUstream stream;
    int ptds;
} copy2d;

/* base + y * pitch + x, refusing a sum that wraps. */
static CUresult offset(uint64_t base, size_t x, size_t y, size_t pitch, uint64_t *out)
{
    uint64_t rows;
    if (__builtin_mul_overflow((uint64_t)y, (uint64_t)pitch, &rows) ||
        __builtin_add_overflow(rows, (uint64_t)x, &rows) ||
        __builtin_add_overflow(base, rows, out))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static CUresult make_side(side *s, CUmemorytype type, const void *host, CUdeviceptr device,
                          size_t x, size_t y, size_t pitch)
{
    switch (type) {
    case GL_CU_MEMORYTYPE_HOST:
        s->dev = 0;
        if (host == NULL)
            return CUDA_ERROR_INVALID_VALUE;
        s->pitch = pitch;
        return offset((uint64_t)(uintptr_t)host, x, y, pitch, &s->addr);
    case GL_CU_MEMORYTYPE_DEVICE:
    case GL_CU_MEMORYTYPE_UNIFIED:
        /* Unified addressing: an address inside a session allocation is
         * device memory, anything else host memory (as cuMemcpy routes). */
        s->dev = type == GL_CU_MEMORYTYPE_DEVICE || gl_va_find(device, NULL, NULL);
        if (device == 0)
            return CUDA_ERROR_INVALID_VALUE;
        s->pitch = pitch;
        return offset(device, x, y, pitch, &s->addr);
    default: /* arrays went to arraycopy.c */
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* The span bytes from a side's first row: session memory, or host bytes that
 * do not wrap. */
static CUresult check_reach(const side *s, uint64_t span)
{
    if (s->dev)
        return gl_check_dptr(s->addr, span);
    return s->addr + span < s->addr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* gl_span_bytes refuses overlapping rows (a pitch under the width), as CUDA does. */
static CUresult check_side(const side *s, size_t width, size_t height)
{
    uint64_t span;
    if (gl_span_bytes(s->pitch, width, height, &span) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return check_reach(s, span);
}

/* n contiguous bytes, either direction. */
static CUresult copy_flat(const copy2d *c, size_t n)
{
    const side *s = &c->src, *d = &c->dst;
    if (s->dev && d->dev)
        return glw_cuMemcpyDtoDAsync(d->addr, s->addr, n, c->stream, c->ptds);
    if (d->dev)
        return gl_copy_htod(d->addr, (const void *)(uintptr_t)s->addr, n, c->stream, c->ptds);
    if (s->dev)
        return gl_copy_dtoh((void *)(uintptr_t)d->addr, s->addr, n, c->stream, c->ptds);
    memmove((void *)(uintptr_t)d->addr, (const void *)(uintptr_t)s->addr, n);
    return CUDA_SUCCESS;
}

/* Rows per record: as many as fit in a copy chunk (run_2d sends rows wider
 * than a chunk as plain copies). */
static size_t rows_per_chunk(size_t width)
{
    return GL_COPY_CHUNK / width;
}

static CUresult htod_rows(const copy2d *c)
{
    const side *s = &c->src, *d = &c->dst;
    size_t per = rows_per_chunk(c->width);
    CUresult r = CUDA_SUCCESS;

    /* Packed host rows go as they are; others are packed into one buffer. */
    uint8_t *pack = NULL;
    if (s->pitch != c->width && (pack = malloc(per * c->width)) == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t y = 0; r == CUDA_SUCCESS && y < c->height; y += per) {
        size_t rows = c->height - y < per ? c->height - y : per;
        const uint8_t *from = (const uint8_t *)(uintptr_t)(s->addr + y * s->pitch);
        if (pack != NULL) {
            for (size_t i = 0; i < rows; i++)
                memcpy(pack + i * c->width, from + i * s->pitch, c->width);
            from = pack;
        }
        r = glw_glMemcpy2DHtoD(d->addr + y * d->pitch, d->pitch, from, c->width, rows,
                               c->stream, c->ptds);
    }
    free(pack); /* the record holds its own copy, or was sent already */
    return r;
}

static CUresult dtoh_rows(const copy2d *c)
{
    const side *s = &c->src, *d = &c->dst;
    size_t per = rows_per_chunk(c->width);
    CUresult r = CUDA_SUCCESS;

    uint8_t *pack = NULL;
    if (d->pitch != c->width && (pack = malloc(per * c->width)) == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t y = 0; r == CUDA_SUCCESS && y < c->height; y += per) {
        size_t rows = c->height - y < per ? c->height - y : per;
        uint8_t *to = (uint8_t *)(uintptr_t)(d->addr + y * d->pitch);
        r = glw_glMemcpy2DDtoH(pack != NULL ? pack : to, s->addr + y * s->pitch, s->pitch,
                               c->width, rows, c->stream, c->ptds);
        if (r == CUDA_SUCCESS && pack != NULL)
            for (size_t i = 0; i < rows; i++)
                memcpy(to + i * d->pitch, pack + i * c->width, c->width);
    }
    free(pack);
    return r;
}

/* Mapped and managed memory is host memory here: a side in it becomes its
 * view, after the views caught up with the device (mirror_route.c). */
static CUresult route_mirrors(copy2d *c)
{
    uint64_t sspan = 0, dspan = 0;
    CUresult r = CUDA_SUCCESS;
    /* check_side passed for both, so the spans fit. */
    gl_span_bytes(c->src.pitch, c->width, c->height, &sspan);
    gl_span_bytes(c->dst.pitch, c->width, c->height, &dspan);
    gl_mirror_route(&c->dst.addr, &c->dst.dev, dspan, &c->src.addr, &c->src.dev, sspan, &r);
    return r;
}

static CUresult run_2d(const copy2d *given)
{
    copy2d routed = *given;
    const copy2d *c = &routed;
    const side *s = &c->src, *d = &c->dst;
    CUresult r;

    if (c->width == 0 || c->height == 0)
        return CUDA_SUCCESS;
    if ((r = check_side(s, c->width, c->height)) != CUDA_SUCCESS ||
        (r = check_side(d, c->width, c->height)) != CUDA_SUCCESS ||
        (r = route_mirrors(&routed)) != CUDA_SUCCESS)
        return r;
    /* The spans were checked, so rows * pitch below cannot wrap. */
    if (c->height == 1 || (s->pitch == c->width && d->pitch == c->width))
        return copy_flat(c, c->width * c->height);
    if (s->dev && d->dev)
        return glw_glMemcpy2DDtoD(d->addr, d->pitch, s->addr, s->pitch, c->width, c->height,
                                  c->stream, c->ptds);
    if (c->width <= GL_COPY_CHUNK && d->dev)
        return htod_rows(c);
    if (c->width <= GL_COPY_CHUNK && s->dev)
        return dtoh_rows(c);
    /* Host to host, or rows of a chunk or more: a plain copy per row. */
    copy2d row = *c;
    r = CUDA_SUCCESS;
    for (size_t y = 0; r == CUDA_SUCCESS && y < c->height; y++) {
        row.src.addr = s->addr + y * s->pitch;
        row.dst.addr = d->addr + y * d->pitch;
        r = copy_flat(&row, c->width);
    }
    return r;
}

static CUresult memcpy2d(const CUDA_MEMCPY2D *p, CUstream stream, int ptds)
{
    if (!gl_on_host_thread())
        gl_hold_wait(); /* the program's rows are read after the host functions before */
    copy2d c = {.width = 0, .stream = stream, .ptds = ptds};
    CUresult r;

    if (p == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->srcMemoryType == GL_CU_MEMORYTYPE_ARRAY || p->dstMemoryType == GL_CU_MEMORYTYPE_ARRAY) {
        CUDA_MEMCPY3D q = {
            .srcXInBytes = p->srcXInBytes, .srcY = p->srcY, .srcMemoryType = p->srcMemoryType,
            .srcHost = p->srcHost, .srcDevice = p->srcDevice, .srcArray = p->srcArray,
            .srcPitch = p->srcPitch, .srcHeight = p->Height, .dstXInBytes = p->dstXInBytes,
            .dstY = p->dstY, .dstMemoryType = p->dstMemoryType, .dstHost = p->dstHost,
            .dstDevice = p->dstDevice, .dstArray = p->dstArray, .dstPitch = p->dstPitch,
            .dstHeight = p->Height, .WidthInBytes = p->WidthInBytes, .Height = p->Height,
            .Depth = 1};
        return gl_array_copy3d(&q, stream, ptds);
    }
    if ((r = make_side(&c.src, p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes,
                       p->srcY, p->srcPitch)) != CUDA_SUCCESS ||
        (r = make_side(&c.dst, p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes,
                       p->dstY, p->dstPitch)) != CUDA_SUCCESS)
        return r;
    c.width = p->WidthInBytes;
    c.height = p->Height;
    return run_2d(&c);
}

CUresult gls_cuMemcpy2D(const CUDA_MEMCPY2D *pCopy, int ptds)
{
    return memcpy2d(pCopy, NULL, ptds);
}

CUresult gls_cuMemcpy2DUnaligned(const CUDA_MEMCPY2D *pCopy, int ptds)
{
    return memcpy2d(pCopy, NULL, ptds); /* gleam's copies have no alignment rules */
}

CUresult gls_cuMemcpy2DAsync(const CUDA_MEMCPY2D *pCopy, CUstream hStream, int ptds)
{
    CUresult r;
    if (pCopy != NULL) { /* captured as the 3D copy it is */
        CUDA_MEMCPY3D p = {0};
        p.srcXInBytes = pCopy->srcXInBytes, p.srcY = pCopy->srcY;
        p.srcMemoryType = pCopy->srcMemoryType, p.srcHost = pCopy->srcHost;
        p.srcDevice = pCopy->srcDevice, p.srcArray = pCopy->srcArray;
        p.srcPitch = pCopy->srcPitch;
        p.dstXInBytes = pCopy->dstXInBytes, p.dstY = pCopy->dstY;
        p.dstMemoryType = pCopy->dstMemoryType, p.dstHost = pCopy->dstHost;
        p.dstDevice = pCopy->dstDevice, p.dstArray = pCopy->dstArray;
        p.dstPitch = pCopy->dstPitch;
        p.WidthInBytes = pCopy->WidthInBytes, p.Height = pCopy->Height, p.Depth = 1;
        if (gl_capture_memcpy(hStream, ptds, &p, &r))
            return r;
    }
    return memcpy2d(pCopy, hStream, ptds);
}

/* One side of a 3D copy: the origin of its first slice, and rows per slice. */
static CUresult make_side3d(side *s, size_t *slice_rows, CUmemorytype type, const void *host,
                            CUdeviceptr device, void *reserved, size_t x, size_t y, size_t z,
                            size_t pitch, size_t height, const CUDA_MEMCPY3D *p)
{
    uint64_t row;
    if (reserved != NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->Depth > 1 && height < p->Height)
        return CUDA_ERROR_INVALID_VALUE; /* slices would overlap */
    if ((p->Height > 1 || p->Depth > 1) && pitch < p->WidthInBytes)
        return CUDA_ERROR_INVALID_VALUE; /* so would rows */
    if (__builtin_mul_overflow((uint64_t)z, (uint64_t)height, &row) ||
        __builtin_add_overflow(row, (uint64_t)y, &row))
        return CUDA_ERROR_INVALID_VALUE;
    *slice_rows = height;
    return make_side(s, type, host, device, x, (size_t)row, pitch);
}

/* The bytes a side of a gapped 3D copy reaches, checked as check_side does. */
static CUresult check_extent(const side *s, uint64_t step, const CUDA_MEMCPY3D *p)
{
    uint64_t slice, all;
    if (gl_span_bytes(s->pitch, p->WidthInBytes, p->Height, &slice) != 0 ||
        gl_span_bytes(step, slice, p->Depth, &all) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return check_reach(s, all);
}

static CUresult memcpy3d(const CUDA_MEMCPY3D *p, CUstream stream, int ptds)
{
    if (!gl_on_host_thread())
        gl_hold_wait(); /* the program's rows are read after the host functions before */
    copy2d c = {.width = 0, .stream = stream, .ptds = ptds};
    size_t src_rows, dst_rows;
    uint64_t rows;
    CUresult r;

    if (p == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->srcMemoryType == GL_CU_MEMORYTYPE_ARRAY || p->dstMemoryType == GL_CU_MEMORYTYPE_ARRAY)
        return gl_array_copy3d(p, stream, ptds);
    if ((r = make_side3d(&c.src, &src_rows, p->srcMemoryType, p->srcHost, p->srcDevice,
                         p->reserved0, p->srcXInBytes, p->srcY, p->srcZ, p->srcPitch,
                         p->srcHeight, p)) != CUDA_SUCCESS ||
        (r = make_side3d(&c.dst, &dst_rows, p->dstMemoryType, p->dstHost, p->dstDevice,
                         p->reserved1, p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch,
                         p->dstHeight, p)) != CUDA_SUCCESS)
        return r;
    c.width = p->WidthInBytes;
    if (p->Depth <= 1 || (src_rows == p->Height && dst_rows == p->Height)) {
        /* One slice, or slices that follow each other without a gap: one 2D
         * copy of every row (Depth 0 copies nothing). */
        if (__builtin_mul_overflow((uint64_t)p->Height, (uint64_t)p->Depth, &rows))
            return CUDA_ERROR_INVALID_VALUE;
        c.height = (size_t)rows;
        return run_2d(&c);
    }
    /* Every slice is checked before the first is copied, as CUDA does: each
     * side's whole extent is Depth slices of one slice's span, step apart. */
    uint64_t s_step, d_step;
    if (__builtin_mul_overflow((uint64_t)src_rows, (uint64_t)c.src.pitch, &s_step) ||
        __builtin_mul_overflow((uint64_t)dst_rows, (uint64_t)c.dst.pitch, &d_step) ||
        (r = check_extent(&c.src, s_step, p)) != CUDA_SUCCESS ||
        (r = check_extent(&c.dst, d_step, p)) != CUDA_SUCCESS)
        return r == CUDA_SUCCESS ? CUDA_ERROR_INVALID_VALUE : r;
    c.height = p->Height;
    copy2d slice = c;
    for (size_t z = 0; r == CUDA_SUCCESS && z < p->Depth; z++) {
        slice.src.addr = c.src.addr + z * s_step;
        slice.dst.addr = c.dst.addr + z * d_step;
        r = run_2d(&slice);
    }
    return r;
}

CUresult gl_copy3d_ends(const CUDA_MEMCPY3D *p, int dev[2], uint64_t addr[2])
{
    side s, d;
    size_t src_rows, dst_rows;
    uint64_t s_step, d_step;
    CUresult r;

    if (p == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = make_side3d(&s, &src_rows, p->srcMemoryType, p->srcHost, p->srcDevice,
                         p->reserved0, p->srcXInBytes, p->srcY, p->srcZ, p->srcPitch,
                         p->srcHeight, p)) != CUDA_SUCCESS ||
        (r = make_side3d(&d, &dst_rows, p->dstMemoryType, p->dstHost, p->dstDevice,
                         p->reserved1, p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch,
                         p->dstHeight, p)) != CUDA_SUCCESS)
        return r;
    if (__builtin_mul_overflow((uint64_t)src_rows, (uint64_t)s.pitch, &s_step) ||
        __builtin_mul_overflow((uint64_t)dst_rows, (uint64_t)d.pitch, &d_step) ||
        (r = check_extent(&s, s_step, p)) != CUDA_SUCCESS ||
        (r = check_extent(&d, d_step, p)) != CUDA_SUCCESS)
        return r == CUDA_SUCCESS ? CUDA_ERROR_INVALID_VALUE : r;
    dev[0] = s.dev, addr[0] = s.addr;
    dev[1] = d.dev, addr[1] = d.addr;
    return CUDA_SUCCESS;
}

CUresult gls_cuMemcpy3D(const CUDA_MEMCPY3D *pCopy, int ptds)
{
    return memcpy3d(pCopy, NULL, ptds);
}

CUresult gls_cuMemcpy3DAsync(const CUDA_MEMCPY3D *pCopy, CUstream hStream, int ptds)
{
    CUresult r;
    if (pCopy != NULL && gl_capture_memcpy(hStream, ptds, pCopy, &r))
        return r;
    return memcpy3d(pCopy, hStream, ptds);
}

CUresult gls_cuMemAllocPitch(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                             size_t Height, unsigned int ElementSizeBytes, int ptds)
{
    uint64_t bytes;

    if (dptr == NULL || pPitch == NULL || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16) ||
        WidthInBytes > MAX_PITCH)
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch = (WidthInBytes + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
    if (__builtin_mul_overflow((uint64_t)pitch, (uint64_t)Height, &bytes) || bytes > SIZE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = gls_cuMemAlloc(dptr, (size_t)bytes, ptds);
    if (r == CUDA_SUCCESS)
        *pPitch = pitch;
    return r;
}

/* --------------------------------------------------------------- memsets */

/* Height rows of width elements of size elem, pitch bytes apart: one memset
 * when the rows touch, else one per row (each a small one-way record). */
static CUresult memset2d(CUdeviceptr dst, size_t pitch, unsigned int value, size_t width,
                         size_t height, unsigned int elem, CUstream stream, int async,
                         int ptds)
{
    uint64_t row_bytes, span;
    CUresult cr;
    const CUDA_MEMSET_NODE_PARAMS node = {dst, pitch, value, elem, width, height};

    if (async && gl_capture_memset(stream, ptds, &node, &cr))
        return cr;
    if (width == 0 || height == 0)
        return CUDA_SUCCESS;
    if (__builtin_mul_overflow((uint64_t)width, (uint64_t)elem, &row_bytes) ||
        dst % elem != 0 || pitch % elem != 0 ||
        gl_span_bytes(pitch, row_bytes, height, &span) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = gl_check_dptr(dst, span);
    size_t n = width, rows = height;
    if (pitch == row_bytes || height == 1) {
        n = (size_t)(span / elem); /* one memset of every row */
        rows = 1;
    }
    for (size_t y = 0; r == CUDA_SUCCESS && y < rows; y++) {
        CUdeviceptr at = dst + y * pitch;
        switch (elem) {
        case 1:
            r = async ? glw_cuMemsetD8Async(at, (unsigned char)value, n, stream, ptds)
                      : glw_cuMemsetD8(at, (unsigned char)value, n, ptds);
            break;
        case 2:
            r = async ? glw_cuMemsetD16Async(at, (unsigned short)value, n, stream, ptds)
                      : glw_cuMemsetD16(at, (unsigned short)value, n, ptds);
            break;
        default:
            r = async ? glw_cuMemsetD32Async(at, value, n, stream, ptds)
                      : glw_cuMemsetD32(at, value, n, ptds);
        }
    }
    return r;
}

CUresult gls_cuMemsetD2D8(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width,
                          size_t Height, int ptds)
{
    return memset2d(dstDevice, dstPitch, uc, Width, Height, 1, NULL, 0, ptds);
}

CUresult gls_cuMemsetD2D16(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                           size_t Width, size_t Height, int ptds)
{
    return memset2d(dstDevice, dstPitch, us, Width, Height, 2, NULL, 0, ptds);
}

CUresult gls_cuMemsetD2D32(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                           size_t Width, size_t Height, int ptds)
{
    return memset2d(dstDevice, dstPitch, ui, Width, Height, 4, NULL, 0, ptds);
}

CUresult gls_cuMemsetD2D8Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                               size_t Width, size_t Height, CUstream hStream, int ptds)
{
    return memset2d(dstDevice, dstPitch, uc, Width, Height, 1, hStream, 1, ptds);
}

CUresult gls_cuMemsetD2D16Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                                size_t Width, size_t Height, CUstream hStream, int ptds)
{
    return memset2d(dstDevice, dstPitch, us, Width, Height, 2, hStream, 1, ptds);
}

CUresult gls_cuMemsetD2D32Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                                size_t Width, size_t Height, CUstream hStream, int ptds)
{
    return memset2d(dstDevice, dstPitch, ui, Width, Height, 4, hStream, 1, ptds);
}

/* ------------------------------------------------------------ peer copies */

/* A session has one device, so both contexts are on it: a device copy. */
static CUresult peer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n,
                     CUstream stream, int async, int ptds)
{
    CUresult r;
    if ((r = gl_check_handle(GL_H_CTX, (uint64_t)(uintptr_t)dctx)) != CUDA_SUCCESS ||
        (r = gl_check_handle(GL_H_CTX, (uint64_t)(uintptr_t)sctx)) != CUDA_SUCCESS)
        return r == CUDA_ERROR_INVALID_HANDLE ? CUDA_ERROR_INVALID_CONTEXT : r;
    return async ? glw_cuMemcpyDtoDAsync(dst, src, n, stream, ptds)
                 : glw_cuMemcpyDtoD(dst, src, n, ptds);
}

CUresult gls_cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                          CUcontext srcContext, size_t ByteCount, int ptds)
{
    return peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, NULL, 0, ptds);
}

CUresult gls_cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext,
                               CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount,
                               CUstream hStream, int ptds)
{
    return peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream, 1, ptds);
}
