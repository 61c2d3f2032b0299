/*
 * copies.c — cuMemcpy*: cut into chunks of at most GL_COPY_CHUNK (one
 * envelope each, so neither side ever holds a whole large copy), and
 * cuMemcpy's routing by address (unified addressing: a pointer inside a
 * session allocation is device memory, anything else host memory).
 *
 * A side in mapped or managed memory is the program's view of it, copied
 * here (mirror_route.c), after the views caught up with the device.
 *
 * Device-to-host copies are synchronous also in their Async form: the bytes
 * must be in the caller's buffer when the reply is read, and reading it is
 * what the call waits for. Stream order is kept, since the waiting record
 * follows every earlier record of the stream.
 */
#include <stdlib.h>
#include <string.h>

#include "gl_client_gen.h"
#include "graph.h"
#include "internal.h"

/* A copy from pinned memory behind a host function, run where it stands. */
typedef struct {
    CUdeviceptr dst;
    const void *src;
    size_t n;
    CUstream stream;
} held_copy;

static void held_copy_job(void *data, CUresult status)
{
    held_copy *c = data;
    CUresult r = gl_copy_htod(c->dst, c->src, c->n, c->stream, 0);
    (void)status;
    if (r != CUDA_SUCCESS)
        gl_owe(r);
    free(c);
}

/* Behind a host function (hostfn.c) the program's memory is read when the
 * copy's turn comes, as CUDA reads it: pinned memory when the stream reaches
 * the copy (a host function before it may fill it), pageable memory once the
 * stream's earlier work is done (CUDA synchronizes the stream first). 1 when
 * the copy was left to the host-function thread. */
static int htod_behind_hold(CUdeviceptr dst, const void *src, size_t n, CUstream s, int ptds,
                            CUresult *r)
{
    if (gl_on_host_thread() || !gl_hold_active())
        return 0;
    uintptr_t base;
    size_t size;
    if (!gl_pinned_find(src, &base, &size)) {
        gl_hold_wait();
        return 0;
    }
    held_copy *c = malloc(sizeof *c);
    if (c == NULL) {
        *r = CUDA_ERROR_OUT_OF_MEMORY;
        return 1;
    }
    *c = (held_copy){dst, src, n, (CUstream)(uintptr_t)gl_stream_arg((uint64_t)(uintptr_t)s,
                                                                      ptds)};
    const gl_held_job job = {held_copy_job, c, (uint64_t)(uintptr_t)c->stream, gl_ctx_current(),
                             0};
    if ((*r = gl_host_job(&job)) != CUDA_SUCCESS)
        free(c);
    return 1;
}

static CUresult htod_chunks(CUdeviceptr dst, const void *src, size_t n, CUstream s, int ptds)
{
    CUresult r = CUDA_SUCCESS;
    for (size_t off = 0; r == CUDA_SUCCESS && off < n; off += GL_COPY_CHUNK) {
        size_t c = n - off < GL_COPY_CHUNK ? n - off : GL_COPY_CHUNK;
        r = glw_glMemcpyHtoD(dst + off, (const uint8_t *)src + off, c, s, ptds);
    }
    return r;
}

static CUresult dtoh_chunks(void *dst, CUdeviceptr src, size_t n, CUstream s, int ptds)
{
    CUresult r = CUDA_SUCCESS;
    for (size_t off = 0; r == CUDA_SUCCESS && off < n; off += GL_COPY_CHUNK) {
        size_t c = n - off < GL_COPY_CHUNK ? n - off : GL_COPY_CHUNK;
        r = glw_glMemcpyDtoH((uint8_t *)dst + off, src + off, c, s, ptds);
    }
    return r;
}

/* A copy whose sides are known to be device or host memory. Mapped and
 * managed memory is host memory here, its view (mirror_route.c), so only real
 * device memory crosses the network. */
static CUresult copy_sides(uint64_t dst, int d_dev, uint64_t src, int s_dev, size_t n,
                           CUstream s, int async, int ptds)
{
    CUresult r = gl_ready();

    if (r != CUDA_SUCCESS)
        return r;
    if (n != 0 && ((dst == 0 && !d_dev) || (src == 0 && !s_dev)))
        return CUDA_ERROR_INVALID_VALUE;
    if (d_dev && gl_check_dptr(dst, n) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    if (s_dev && gl_check_dptr(src, n) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    if (gl_mirror_route(&dst, &d_dev, n, &src, &s_dev, n, &r) && r != CUDA_SUCCESS)
        return r;
    if (d_dev && s_dev)
        return async ? glw_cuMemcpyDtoDAsync(dst, src, n, s, ptds)
                     : glw_cuMemcpyDtoD(dst, src, n, ptds);
    if (d_dev)
        return htod_chunks(dst, (const void *)(uintptr_t)src, n, s, ptds);
    if (s_dev)
        return dtoh_chunks((void *)(uintptr_t)dst, src, n, s, ptds);
    if (n > 0)
        memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

CUresult gl_copy_htod(CUdeviceptr dst, const void *src, size_t n, CUstream s, int ptds)
{
    CUresult r = gl_ready();

    if (r != CUDA_SUCCESS)
        return r;
    if (src == NULL && n != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (htod_behind_hold(dst, src, n, s, ptds, &r))
        return r;
    return copy_sides(dst, 1, (uint64_t)(uintptr_t)src, 0, n, s, 0, ptds);
}

CUresult gl_copy_dtoh(void *dst, CUdeviceptr src, size_t n, CUstream s, int ptds)
{
    return copy_sides((uint64_t)(uintptr_t)dst, 0, src, 1, n, s, 0, ptds);
}

CUresult gli_cuMemcpyHtoD(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, int ptds)
{
    return gl_copy_htod(dstDevice, srcHost, ByteCount, NULL, ptds);
}

CUresult gli_cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                               CUstream hStream, int ptds)
{
    CUresult r;
    if (gl_capture_linear_copy(hStream, ptds, dstDevice, (uint64_t)(uintptr_t)srcHost, ByteCount,
                               &r))
        return r;
    return gl_copy_htod(dstDevice, srcHost, ByteCount, hStream, ptds);
}

CUresult gli_cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, int ptds)
{
    return gl_copy_dtoh(dstHost, srcDevice, ByteCount, NULL, ptds);
}

CUresult gli_cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                               CUstream hStream, int ptds)
{
    CUresult r;
    if (gl_capture_linear_copy(hStream, ptds, (uint64_t)(uintptr_t)dstHost, srcDevice, ByteCount,
                               &r))
        return r;
    return gl_copy_dtoh(dstHost, srcDevice, ByteCount, hStream, ptds);
}

CUresult gl_copy_routed(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, int async,
                        int ptds)
{
    CUresult r = gl_ready();

    if (r != CUDA_SUCCESS || n == 0)
        return r;
    if (async && gl_capture_linear_copy(s, ptds, dst, src, n, &r))
        return r;
    int d_dev = gl_va_find(dst, NULL, NULL), s_dev = gl_va_find(src, NULL, NULL);
    if ((!d_dev && dst == 0) || (!s_dev && src == 0))
        return CUDA_ERROR_INVALID_VALUE;
    return copy_sides(dst, d_dev, src, s_dev, n, s, async, ptds);
}

CUresult gli_cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, int ptds)
{
    return gl_copy_routed(dst, src, ByteCount, NULL, 0, ptds);
}

CUresult gli_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream,
                           int ptds)
{
    return gl_copy_routed(dst, src, ByteCount, hStream, 1, ptds);
}
