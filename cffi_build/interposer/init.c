/*
 * init.c — cuInit and cuDriverGetVersion, the two calls a program makes
 * before anything else.
 */
#include "gl_client_gen.h"
#include "internal.h"

CUresult gli_cuInit(unsigned int Flags, int ptds)
{
    (void)ptds;
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return gl_attach();
}

/* Works without cuInit, as NVIDIA's does: before attaching gleam answers the
 * CUDA version it implements. */
CUresult gli_cuDriverGetVersion(int *driverVersion, int ptds)
{
    const gl_session_hello *h = gl_session();

    (void)ptds;
    if (driverVersion == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = h != NULL && h->driver_version > 0 ? h->driver_version : 13000;
    return CUDA_SUCCESS;
}
