/*
 * runtime.c — local answers to the driver calls that libcudart makes around
 * its own bookkeeping (module loading mode, context flags and limits); see
 * docs/cuda-forwarding.md, "Runtime API (libcudart)". No state of its own
 * beyond what the environment says once.
 */
#include <stdlib.h>
#include <string.h>

#include "gl_client_gen.h"
#include "internal.h"

#define GL_MODULE_EAGER_LOADING 1
#define GL_MODULE_LAZY_LOADING 2

/* CUDA_MODULE_LOADING chooses, as with NVIDIA's driver (lazy by default since
 * CUDA 12.2). cudart then loads each fatbin with cuLibraryLoadData (lazy) or
 * through the cudart-interface export table (eager); both reach glModuleLoad. */
CUresult gli_cuModuleGetLoadingMode(CUmoduleLoadingMode *mode, int ptds)
{
    const char *env = getenv("CUDA_MODULE_LOADING");

    (void)ptds;
    if (mode == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *mode = env != NULL && strcmp(env, "EAGER") == 0 ? GL_MODULE_EAGER_LOADING
                                                     : GL_MODULE_LAZY_LOADING;
    return CUDA_SUCCESS;
}
