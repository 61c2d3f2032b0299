/*
 * hostdev_cache_hints.c — the host device's answers to the cache hints the
 * interposer forwards (stream access policy windows and synchronization
 * policies, copying them between streams, resetting persisting L2 lines).
 * Its caches are the server CPU's, which no program steers: every hint is
 * taken and changes nothing a kernel computes (docs/cuda-forwarding.md,
 * "Persisting L2 and access policy windows"). The interposer checked each
 * value as CUDA documents; the bytes from the wire are never read here. No
 * state.
 */
#include "hostdev.h"

CUresult hb_glStreamSetAttribute(CUstream hStream, CUstreamAttrID attr,
                                 const CUstreamAttrValue *value)
{
    (void)hStream;
    (void)attr;
    (void)value;
    return CUDA_SUCCESS;
}

CUresult hb_glStreamCopyAttributes(CUstream dst, CUstream src)
{
    (void)dst;
    (void)src;
    return CUDA_SUCCESS;
}

CUresult hb_glCtxResetPersistingL2Cache(void)
{
    return CUDA_SUCCESS;
}
