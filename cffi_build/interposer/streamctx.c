/*
 * streamctx.c — cuStreamGetCtx, answered in the interposer. A session has one
 * device, and the interposer does not record which context was current when
 * a stream was made: the answer is the calling thread's current context,
 * which is the stream's for every program that keeps one context per device
 * (the primary context, as cudart, numba-cuda and cuda.core do). cuda.core
 * asks it before a cooperative launch. No state of its own.
 */
#include "gl_calls.h"
#include "gl_client_gen.h"
#include "internal.h"

CUresult gls_cuStreamGetCtx(CUstream hStream, CUcontext *pctx, int ptds)
{
    (void)ptds;
    CUresult r = gl_check_handle(GL_H_STREAM, (uint64_t)(uintptr_t)hStream);
    if (r != CUDA_SUCCESS)
        return r;
    if (pctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t ctx = gl_ctx_current();
    if (ctx == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    *pctx = (CUcontext)(uintptr_t)ctx;
    return CUDA_SUCCESS;
}
