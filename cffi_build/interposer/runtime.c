/*
 * runtime.c — local answers to the driver calls that libcudart makes around
 * its own bookkeeping (module loading mode, context flags and limits); see
 * docs/cuda-forwarding.md, "Runtime API (libcudart)". State: the module
 * made for each library whose globals were asked for (a map under its own
 * lock; entries live as long as the process, like the minted handles).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gl_calls.h"
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

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static gl_hmap *g_lib_module; /* minted library -> minted module */

static void make_map(void)
{
    g_lib_module = gl_hmap_new();
}

/* The module of a library, made once with cuLibraryGetModule. */
static CUresult library_module(CUlibrary library, CUmodule *out)
{
    CUresult r = CUDA_SUCCESS;

    pthread_once(&g_once, make_map);
    if (g_lib_module == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_lock);
    *out = gl_hmap_get(g_lib_module, (uint64_t)(uintptr_t)library);
    if (*out == NULL && (r = glw_cuLibraryGetModule(out, library, 0)) == CUDA_SUCCESS
        && gl_hmap_put(g_lib_module, (uint64_t)(uintptr_t)library, *out) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&g_lock);
    return r;
}

/* cudart 13 resolves __device__ and __constant__ variables in the library it
 * loaded; the global is its module's (which registers the range as the
 * session's memory). */
CUresult gli_cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library,
                                const char *name, int ptds)
{
    CUmodule mod;
    CUresult r = gl_ready();

    if (r != CUDA_SUCCESS)
        return r;
    if (name == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = gl_check_handle(GL_H_LIB, (uint64_t)(uintptr_t)library)) != CUDA_SUCCESS)
        return r;
    if ((r = library_module(library, &mod)) != CUDA_SUCCESS)
        return r;
    return gli_cuModuleGetGlobal(dptr, bytes, mod, name, ptds);
}

/* Every gleam context has the API of cuCtxCreate_v2, which the driver
 * reports as 3020 (the number in NVIDIA's documentation of this call). */
CUresult gli_cuCtxGetApiVersion(CUcontext ctx, unsigned int *version, int ptds)
{
    CUresult r = gl_ready();

    (void)ptds;
    if (r != CUDA_SUCCESS)
        return r;
    if (version == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t h = ctx != NULL ? (uint64_t)(uintptr_t)ctx : gl_ctx_current();
    if (h == 0 || gl_check_handle(GL_H_CTX, h) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    *version = 3020;
    return CUDA_SUCCESS;
}
