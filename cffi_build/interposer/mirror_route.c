/*
 * mirror_route.c — where mapped and managed memory meets the rest of the
 * interposer (mirror.c keeps the two sides coherent):
 *
 * - batch.c's hooks: what each forwarded record may read or write of device
 *   memory, so that the program's changes reach the server before it runs and
 *   the device's come back after (a launch may reach any mirror; a copy or a
 *   memset only the range it names; the rest touch no memory);
 * - copies: a mirrored side of a copy is the program's view, read or written
 *   here after a refresh, so only real device memory crosses the network;
 *
 * No state of its own. A thread inside a coherence step (mirror.c emits
 * records while it holds its lock) is not hooked again: gl_mirror_any.
 */
#include <string.h>

#include "gl_calls.h"
#include "gl_span.h"
#include "internal.h"

/* What a record touches: every mirror (a launch), or up to two ranges. */
typedef struct {
    int all;
    int n;
    uint64_t lo[2], len[2];
    int writes; /* the first range (or, with all, anything) may be written */
    int sync;   /* a write the program sees when the call returns (a memset) */
} touch;

static touch range(uint64_t lo, uint64_t len, int writes)
{
    return (touch){.n = 1, .lo = {lo}, .len = {len}, .writes = writes};
}

static touch pitched(uint64_t lo, uint64_t pitch, uint64_t width, uint64_t rows, int writes)
{
    uint64_t span;
    if (gl_span_bytes(pitch, width, rows, &span) != 0)
        return (touch){.all = 1, .writes = 1}; /* the server refuses it; be safe */
    return range(lo, span, writes);
}

static touch memset_of(const uint64_t *a, uint8_t nargs, uint64_t width, int sync)
{
    uint64_t bytes;
    if (nargs < 3 || __builtin_mul_overflow(a[2], width, &bytes))
        return (touch){.all = 1, .writes = 1};
    touch t = range(a[0], bytes, 1);
    t.sync = sync;
    return t;
}

/* The argument layouts are the rows' (cuda_api.py: values, handles and device
 * pointers in parameter order). A call not named here may touch anything. */
static touch touch_of(uint16_t call, const uint64_t *a, uint8_t nargs)
{
    switch (call) {
    case GL_CALL_glMemcpyDtoH: /* src, n, stream */
        return nargs >= 2 ? range(a[0], a[1], 0) : (touch){.all = 1, .writes = 1};
    case GL_CALL_glMemcpyHtoD: /* dst, n, stream */
        return nargs >= 2 ? range(a[0], a[1], 1) : (touch){.all = 1, .writes = 1};
    /* dst, value, count (, stream): the synchronous ones are seen at once */
    case GL_CALL_cuMemsetD8: case GL_CALL_cuMemsetD8Async:
        return memset_of(a, nargs, 1, call == GL_CALL_cuMemsetD8);
    case GL_CALL_cuMemsetD16: case GL_CALL_cuMemsetD16Async:
        return memset_of(a, nargs, 2, call == GL_CALL_cuMemsetD16);
    case GL_CALL_cuMemsetD32: case GL_CALL_cuMemsetD32Async:
        return memset_of(a, nargs, 4, call == GL_CALL_cuMemsetD32);
    case GL_CALL_cuMemcpyDtoD:
    case GL_CALL_cuMemcpyDtoDAsync: { /* dst, src, n */
        if (nargs < 3)
            return (touch){.all = 1, .writes = 1};
        touch t = range(a[0], a[2], 1);
        t.n = 2, t.lo[1] = a[1], t.len[1] = a[2];
        return t;
    }
    case GL_CALL_glMemcpy2DDtoH: /* src, spitch, width, height, stream */
        return nargs >= 4 ? pitched(a[0], a[1], a[2], a[3], 0) : (touch){.all = 1, .writes = 1};
    case GL_CALL_glMemcpy2DHtoD: /* dst, dpitch, width, height, stream */
        return nargs >= 4 ? pitched(a[0], a[1], a[2], a[3], 1) : (touch){.all = 1, .writes = 1};
    case GL_CALL_glMemcpy2DDtoD: { /* dst, dpitch, src, spitch, width, height, stream */
        if (nargs < 6)
            return (touch){.all = 1, .writes = 1};
        touch d = pitched(a[0], a[1], a[4], a[5], 1), s = pitched(a[2], a[3], a[4], a[5], 0);
        if (d.all || s.all)
            return d.all ? d : s;
        d.n = 2, d.lo[1] = s.lo[0], d.len[1] = s.len[0];
        return d;
    }
    /* No device memory: contexts, streams, events, modules, functions,
     * allocation bookkeeping, queries; and mirror.c's own records. */
    case GL_CALL_glCtxSetCurrent: case GL_CALL_cuCtxCreate: case GL_CALL_cuCtxDestroy:
    case GL_CALL_cuDevicePrimaryCtxRetain: case GL_CALL_cuDevicePrimaryCtxRelease:
    case GL_CALL_cuDevicePrimaryCtxSetFlags: case GL_CALL_cuDevicePrimaryCtxReset:
    case GL_CALL_cuCtxSynchronize: case GL_CALL_cuMemGetInfo:
    case GL_CALL_glMemAlloc: case GL_CALL_glMemFree:
    case GL_CALL_glModuleLoad: case GL_CALL_cuModuleUnload: case GL_CALL_cuModuleGetFunction:
    case GL_CALL_cuModuleGetGlobal: case GL_CALL_glLibraryLoad: case GL_CALL_cuLibraryUnload:
    case GL_CALL_cuLibraryGetKernel: case GL_CALL_cuKernelGetFunction:
    case GL_CALL_cuFuncGetAttribute: case GL_CALL_cuFuncGetParamInfo:
    case GL_CALL_cuStreamCreate: case GL_CALL_cuStreamCreateWithPriority:
    case GL_CALL_cuStreamDestroy: case GL_CALL_cuStreamSynchronize: case GL_CALL_cuStreamQuery:
    case GL_CALL_cuStreamWaitEvent: case GL_CALL_cuEventCreate: case GL_CALL_cuEventRecord:
    case GL_CALL_cuEventSynchronize: case GL_CALL_cuEventQuery: case GL_CALL_cuEventElapsedTime:
    case GL_CALL_cuEventDestroy: case GL_CALL_cuKernelGetAttribute:
    case GL_CALL_cuOccupancyMaxActiveBlocksPerMultiprocessor:
    case GL_CALL_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags:
    case GL_CALL_cuLibraryGetModule: case GL_CALL_glImagePart: case GL_CALL_glModuleLoadStaged:
    case GL_CALL_glLibraryLoadStaged: case GL_CALL_cuFuncSetAttribute:
    case GL_CALL_cuKernelSetAttribute: case GL_CALL_glModuleVarsRead:
    case GL_CALL_glModuleVarsWrite: case GL_CALL_glTensorMapEncode:
    case GL_CALL_glClusterOccupancy:
    case GL_CALL_glMirrorAdd: case GL_CALL_glMirrorPush: case GL_CALL_glMirrorPull:
    case GL_CALL_glManagedVarMirror:
        return (touch){0};
    default: /* launches, and whatever a later row adds */
        return (touch){.all = 1, .writes = 1};
    }
}

static int hooked(uint16_t call)
{
    return gl_mirror_any() && call != GL_CALL_glMirrorAdd && call != GL_CALL_glMirrorPush
           && call != GL_CALL_glMirrorPull && call != GL_CALL_glManagedVarMirror;
}

void gl_mirror_before(uint16_t call, const uint64_t *args, uint8_t nargs)
{
    if (!hooked(call))
        return;
    if (call == GL_CALL_cuModuleUnload && nargs >= 1) /* its managed variables' views go */
        gl_mirror_drop_module(args[0]);
    touch t = touch_of(call, args, nargs);
    /* An error here is the session's: the record's own send reports it. */
    if (t.all)
        gl_mirror_push(1, 0, 0);
    for (int k = 0; k < t.n; k++)
        if (gl_mirror_overlaps(t.lo[k], t.len[k]))
            gl_mirror_push(0, t.lo[k], t.len[k]);
}

/* Whether the record may have written mirrored memory. */
static int wrote(const touch *t)
{
    return t->all || (t->writes && t->n > 0 && gl_mirror_overlaps(t->lo[0], t->len[0]));
}

CUresult gl_mirror_after_emit(uint16_t call, const uint64_t *args, uint8_t nargs)
{
    if (!hooked(call))
        return CUDA_SUCCESS;
    touch t = touch_of(call, args, nargs);
    if (!wrote(&t))
        return CUDA_SUCCESS;
    gl_mirror_mark_dirty();
    if (!t.sync)
        return CUDA_SUCCESS;
    /* cuMemsetD8 & co. on mapped or managed memory are synchronous for the
     * host (CUDA's "API synchronization behavior"): the program reads the
     * bytes as soon as the call returns. */
    CUresult r = gl_mirror_refresh();
    return r;
}

CUresult gl_mirror_after_wait(uint16_t call, const uint64_t *args, uint8_t nargs, CUresult r)
{
    if (!hooked(call))
        return r;
    touch t = touch_of(call, args, nargs);
    if (wrote(&t))
        gl_mirror_mark_dirty();
    if (r != CUDA_SUCCESS)
        return r; /* the views stay owed: the next call that succeeds brings them */
    r = gl_mirror_refresh();
    return r;
}

/* ------------------------------------------------------------------ copies */

/* A side of a copy: a device side inside a mirror becomes its view (host
 * memory); a host side that meets a view stays where it is. Either asks for
 * a refresh first. */
static CUresult route_side(uint64_t *addr, int *dev, size_t n, int *hit)
{
    gl_mirror_info m;
    if (*dev) {
        if (!gl_mirror_by_dev(*addr, &m))
            return CUDA_SUCCESS;
        uint64_t off = *addr - m.dev;
        if (n > m.size - off)
            return CUDA_ERROR_INVALID_VALUE;
        *addr = (uint64_t)(uintptr_t)m.view + off;
        *dev = 0;
        *hit = 1;
        return CUDA_SUCCESS;
    }
    if (gl_mirror_view_overlaps(*addr, n > 0 ? n : 1))
        *hit = 1;
    return CUDA_SUCCESS;
}

int gl_mirror_route(uint64_t *dst, int *dst_dev, size_t dst_n, uint64_t *src, int *src_dev,
                    size_t src_n, CUresult *r)
{
    int hit = 0;
    if (!gl_mirror_any())
        return 0;
    *r = route_side(dst, dst_dev, dst_n, &hit);
    if (*r == CUDA_SUCCESS)
        *r = route_side(src, src_dev, src_n, &hit);
    if (*r != CUDA_SUCCESS)
        return 1;
    if (hit)
        *r = gl_mirror_refresh();
    return hit;
}
