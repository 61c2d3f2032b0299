/*
 * tensormap.c — Hopper's tensor maps (TMA descriptors). cuBLASLt and cuDNN
 * encode one per operand before launching a TMA kernel on a 9.0+ device
 * and pass it to the kernel by value. The map's 128 bytes are opaque and the
 * serving device's driver alone knows their layout, so each call packs its
 * arguments into one gl_tmap_request (include/gl_tensormap.h) and waits for
 * the server's map (glTensorMapEncode). What is checked here guards this
 * process's own reads (the arrays are read up to the rank) and the session's
 * memory; the rest of NVIDIA's rules are the serving driver's (the host
 * device's in hostdev_tensormap.c). NVIDIA documents the map's address as
 * 64-byte aligned, but an unaligned one is not refused: cuda-bindings' own
 * CUtensorMap objects are 16-byte aligned (cuda-bindings 13.5), and the map
 * reaches the program as a copy of the server's bytes in any case.
 *
 * The same request gives the same map (the driver packs its arguments), and
 * cuBLASLt encodes a map per operand per GEMM, mostly for the same tensors
 * again (a caching allocator hands out the same addresses), so answered
 * requests are remembered: a repeat is answered here, without a round trip.
 * The memo is the session's: a session that made a map never moves to
 * another server (peer/cuda/client/journal.py), whose driver might encode otherwise.
 * State: GL_TMAP_MEMO slots under one lock, a slot chosen by the request's
 * hash and replaced by the next request that hashes there.
 */
#include <pthread.h>
#include <string.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "gl_tensormap.h"
#include "internal.h"

/* Fills the fields every encoder shares; INVALID_VALUE for what this process
 * cannot read or the tensor's memory outside the session's. */
static CUresult common(gl_tmap_request *q, uint32_t kind, const CUtensorMap *map,
                       CUtensorMapDataType dtype, cuuint32_t rank, const void *address,
                       const cuuint64_t *dim, const cuuint64_t *strides,
                       const cuuint32_t *estride, int interleave, int swizzle, int l2, int oob)
{
    uint64_t extent;

    if (map == NULL || rank == 0 ||
        rank > GL_TMAP_RANK_MAX || dim == NULL || estride == NULL ||
        (rank > 1 && strides == NULL) || dtype < 0 || interleave < 0 || swizzle < 0 ||
        l2 < 0 || oob < 0)
        return CUDA_ERROR_INVALID_VALUE;
    *q = (gl_tmap_request){.kind = kind, .dtype = (uint32_t)dtype, .rank = rank,
                           .interleave = (uint32_t)interleave, .swizzle = (uint32_t)swizzle,
                           .l2promotion = (uint32_t)l2, .oobfill = (uint32_t)oob,
                           .address = (uint64_t)(uintptr_t)address};
    memcpy(q->dim, dim, rank * sizeof *dim);
    if (rank > 1)
        memcpy(q->stride, strides, (rank - 1) * sizeof *strides);
    memcpy(q->estride, estride, rank * sizeof *estride);
    if (gl_tmap_extent(q, &extent) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return gl_check_dptr(q->address, extent);
}

#define GL_TMAP_MEMO 256

typedef struct {
    int used;
    CUdevice device; /* the device of the context that asked: maps are per device */
    gl_tmap_request request;
    unsigned char map[GL_TMAP_BYTES];
} memo_slot;

static memo_slot g_memo[GL_TMAP_MEMO];
static pthread_mutex_t g_memo_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t memo_index(const gl_tmap_request *q)
{
    const unsigned char *b = (const unsigned char *)q;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < sizeof *q; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return (size_t)(h % GL_TMAP_MEMO);
}

static CUresult encode(CUtensorMap *map, const gl_tmap_request *q, int ptds)
{
    memo_slot *slot = &g_memo[memo_index(q)];
    unsigned char got[GL_TMAP_BYTES];
    CUdevice dev = -1;

    if (gli_cuCtxGetDevice(&dev, ptds) != CUDA_SUCCESS)
        return glw_glTensorMapEncode(map, q, sizeof *q, ptds); /* the server says why */
    pthread_mutex_lock(&g_memo_lock);
    int hit = slot->used && slot->device == dev && memcmp(&slot->request, q, sizeof *q) == 0;
    if (hit)
        memcpy(map, slot->map, sizeof slot->map);
    pthread_mutex_unlock(&g_memo_lock);
    if (hit)
        return CUDA_SUCCESS;
    /* Into a copy first: the program's map changes only when the server answered. */
    CUresult r = glw_glTensorMapEncode(got, q, sizeof *q, ptds);
    if (r != CUDA_SUCCESS)
        return r;
    memcpy(map, got, sizeof got);
    pthread_mutex_lock(&g_memo_lock);
    slot->used = 1;
    slot->device = dev;
    slot->request = *q;
    memcpy(slot->map, got, sizeof got);
    pthread_mutex_unlock(&g_memo_lock);
    return CUDA_SUCCESS;
}

CUresult gls_cuTensorMapEncodeTiled(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                    cuuint32_t tensorRank, void *globalAddress,
                                    const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
                                    const cuuint32_t *boxDim, const cuuint32_t *elementStrides,
                                    CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                    CUtensorMapL2promotion l2Promotion,
                                    CUtensorMapFloatOOBfill oobFill, int ptds)
{
    gl_tmap_request q;
    CUresult r = common(&q, GL_TMAP_TILED, tensorMap, tensorDataType, tensorRank, globalAddress,
                        globalDim, globalStrides, elementStrides, interleave, swizzle,
                        l2Promotion, oobFill);
    if (r != CUDA_SUCCESS)
        return r;
    if (boxDim == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(q.box, boxDim, tensorRank * sizeof *boxDim);
    return encode(tensorMap, &q, ptds);
}

/* Im2col's corners: one {D, H, W} offset per spatial dimension (rank - 2). */
CUresult gls_cuTensorMapEncodeIm2col(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                     cuuint32_t tensorRank, void *globalAddress,
                                     const cuuint64_t *globalDim,
                                     const cuuint64_t *globalStrides,
                                     const int *pixelBoxLowerCorner,
                                     const int *pixelBoxUpperCorner, cuuint32_t channelsPerPixel,
                                     cuuint32_t pixelsPerColumn, const cuuint32_t *elementStrides,
                                     CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                     CUtensorMapL2promotion l2Promotion,
                                     CUtensorMapFloatOOBfill oobFill, int ptds)
{
    gl_tmap_request q;
    CUresult r;

    if (tensorRank < 3)
        return CUDA_ERROR_INVALID_VALUE;
    r = common(&q, GL_TMAP_IM2COL, tensorMap, tensorDataType, tensorRank, globalAddress,
               globalDim, globalStrides, elementStrides, interleave, swizzle, l2Promotion,
               oobFill);
    if (r != CUDA_SUCCESS)
        return r;
    if (pixelBoxLowerCorner == NULL || pixelBoxUpperCorner == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(q.lower, pixelBoxLowerCorner, (tensorRank - 2) * sizeof *q.lower);
    memcpy(q.upper, pixelBoxUpperCorner, (tensorRank - 2) * sizeof *q.upper);
    q.channels = channelsPerPixel;
    q.pixels = pixelsPerColumn;
    return encode(tensorMap, &q, ptds);
}

CUresult gls_cuTensorMapEncodeIm2colWide(
    CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
    void *globalAddress, const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
    int pixelBoxLowerCornerWidth, int pixelBoxUpperCornerWidth, cuuint32_t channelsPerPixel,
    cuuint32_t pixelsPerColumn, const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
    CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle swizzle,
    CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill, int ptds)
{
    gl_tmap_request q;
    CUresult r;

    if (tensorRank < 3 || mode < 0)
        return CUDA_ERROR_INVALID_VALUE;
    r = common(&q, GL_TMAP_IM2COL_WIDE, tensorMap, tensorDataType, tensorRank, globalAddress,
               globalDim, globalStrides, elementStrides, interleave, swizzle, l2Promotion,
               oobFill);
    if (r != CUDA_SUCCESS)
        return r;
    q.lower[0] = pixelBoxLowerCornerWidth;
    q.upper[0] = pixelBoxUpperCornerWidth;
    q.channels = channelsPerPixel;
    q.pixels = pixelsPerColumn;
    q.mode = (uint32_t)mode;
    return encode(tensorMap, &q, ptds);
}

/* The map is the server's to read: it travels in the request and comes back
 * changed. The new start must lie in the session's memory. */
CUresult gls_cuTensorMapReplaceAddress(CUtensorMap *tensorMap, void *globalAddress, int ptds)
{
    gl_tmap_request q = {.kind = GL_TMAP_REPLACE, .address = (uint64_t)(uintptr_t)globalAddress};
    CUresult r;

    if (tensorMap == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = gl_check_dptr(q.address, 1)) != CUDA_SUCCESS)
        return r;
    memcpy(q.map, tensorMap, sizeof q.map);
    return encode(tensorMap, &q, ptds);
}
