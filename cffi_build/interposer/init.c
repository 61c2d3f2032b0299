/*
 * init.c — cuInit and cuDriverGetVersion, the two calls a program makes
 * before anything else.
 */
#include <stdatomic.h>

#include "gl_client_gen.h"
#include "internal.h"

/* The CUDA version whose driver API the interposer implements. */
#define GL_API_VERSION 13000

CUresult gli_cuInit(unsigned int Flags, int ptds)
{
    (void)ptds;
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return gl_attach();
}

/* Works without cuInit, as NVIDIA's does. The first answer stands for the
 * life of the process: the server's driver version when a session is already
 * open, else the CUDA version gleam implements. cudart asks before cuInit and
 * folds the answer into its start-up check (integrity.c), which asks again
 * later; a driver's version does not change under a program, even when its
 * session moves to a server with another driver. */
CUresult gli_cuDriverGetVersion(int *driverVersion, int ptds)
{
    static atomic_int answered;

    (void)ptds;
    if (driverVersion == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    int v = atomic_load(&answered);
    if (v == 0) {
        const gl_session_hello *h = gl_session();
        int fresh = h != NULL && h->driver_version > 0 ? h->driver_version : GL_API_VERSION;
        atomic_compare_exchange_strong(&answered, &v, fresh);
        v = atomic_load(&answered);
    }
    *driverVersion = v;
    return CUDA_SUCCESS;
}
