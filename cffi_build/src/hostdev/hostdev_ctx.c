/*
 * hostdev_ctx.c — the host device's contexts: one device (ordinal 0), its
 * primary context per session, and created contexts. A context carries no
 * state of its own here (memory and modules belong to the session), so these
 * calls only keep handles honest.
 */
#include "hostdev.h"

static CUresult check_device(CUdevice dev)
{
    return dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult hb_cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    gl_hsess *s = gl_hsess_of();
    s->primary_retains++;
    *pctx = (CUcontext)&s->primary;
    return CUDA_SUCCESS;
}

CUresult hb_cuDevicePrimaryCtxRelease(CUdevice dev)
{
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    gl_hsess *s = gl_hsess_of();
    if (s->primary_retains == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    s->primary_retains--;
    return CUDA_SUCCESS;
}

CUresult hb_cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    (void)flags; /* scheduling flags mean nothing to a synchronous device */
    return check_device(dev);
}

CUresult hb_cuDevicePrimaryCtxReset(CUdevice dev)
{
    return check_device(dev);
}

CUresult hb_cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    (void)flags;
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    gl_hctx *c = gl_hobj_new(GL_H_CTX, sizeof *c);
    if (c == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *pctx = (CUcontext)c;
    gl_hsess_of()->current = c;
    return CUDA_SUCCESS;
}

CUresult hb_cuCtxDestroy(CUcontext ctx)
{
    gl_hctx *c = (gl_hctx *)ctx;
    if (c->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    gl_hsess *s = gl_hsess_of();
    if (s->current == c)
        s->current = NULL;
    gl_hobj_free(c);
    return CUDA_SUCCESS;
}

CUresult hb_glCtxSetCurrent(CUcontext ctx)
{
    gl_hsess_of()->current = (gl_hctx *)ctx;
    return CUDA_SUCCESS;
}

CUresult hb_cuCtxSynchronize(void)
{
    return CUDA_SUCCESS; /* every call finished before the next one ran */
}
