/*
 * runtime.c — local answers to the driver calls that libcudart makes around
 * its own bookkeeping (module loading mode, context flags and limits); see
 * docs/cuda-forwarding.md, "Runtime API (libcudart)". State: the module
 * made for each library whose globals were asked for (a map under its own
 * lock; entries live as long as the process, like the minted handles), and
 * the context limits as set (one set per process, under the same lock).
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
CUresult gls_cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library,
                                const char *name, int ptds)
{
    CUmodule mod;
    CUresult r = CUDA_SUCCESS;

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
CUresult gls_cuCtxGetApiVersion(CUcontext ctx, unsigned int *version, int ptds)
{
    (void)ptds;
    if (version == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t h = ctx != NULL ? (uint64_t)(uintptr_t)ctx : gl_ctx_current();
    if (h == 0 || gl_check_handle(GL_H_CTX, h) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    *version = 3020;
    return CUDA_SUCCESS;
}

/* The context flags are the primary context's of the current device (cudart
 * sets them with cuDevicePrimaryCtxSetFlags; gleam keeps no others). */
CUresult gli_cuCtxGetFlags(unsigned int *flags, int ptds)
{
    CUdevice dev;
    int active;
    CUresult r = gli_cuCtxGetDevice(&dev, ptds);

    if (r != CUDA_SUCCESS)
        return r;
    if (flags == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return gli_cuDevicePrimaryCtxGetState(dev, flags, &active, ptds);
}

/* CUlimit values 0..6 with the defaults NVIDIA's driver reports: stack
 * size, printf FIFO, malloc heap, device-runtime sync depth and pending
 * launches, L2 fetch granularity, persisting L2 size. The first three are
 * sent to the serving device too (devheap.c); the others it does not have,
 * so their numbers only have to be sane. 9, the CIG
 * shared-memory fallback, is on by default. 7 and 8 (CUDA 12.8's CIG
 * limits) can only be read: a context that is not CIG (none here is) has
 * the device's opt-in shared memory per block and is not CIG-enabled;
 * cuBLASLt reads 7 as it starts. */
#define GL_LIMITS 10
#define GL_LIMIT_MALLOC_HEAP_SIZE 2
#define GL_LIMIT_PENDING_LAUNCHES 4
#define GL_LIMIT_SHMEM_SIZE 7
#define GL_LIMIT_CIG_ENABLED 8
static size_t g_limits[GL_LIMITS] = {1024, 1 << 20, 8 << 20, 2, 2048, 32, 0, 0, 0, 1};

CUresult gls_cuCtxGetLimit(size_t *pvalue, CUlimit limit, int ptds)
{
    (void)ptds;
    if (pvalue == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (limit < 0 || limit >= GL_LIMITS)
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    if (limit == GL_LIMIT_SHMEM_SIZE) {
        CUdevice dev;
        int optin = 0;
        CUresult r = gli_cuCtxGetDevice(&dev, ptds);
        if (r == CUDA_SUCCESS)
            r = gli_cuDeviceGetAttribute(&optin, GL_ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev,
                                         ptds);
        if (r != CUDA_SUCCESS)
            return r;
        *pvalue = (size_t)optin;
        return CUDA_SUCCESS;
    }
    pthread_mutex_lock(&g_lock);
    *pvalue = g_limits[limit];
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
}

size_t gl_limit_value(CUlimit limit)
{
    pthread_mutex_lock(&g_lock);
    size_t v = limit >= 0 && limit < GL_LIMITS ? g_limits[limit] : 0;
    pthread_mutex_unlock(&g_lock);
    return v;
}

CUresult gls_cuCtxSetLimit(CUlimit limit, size_t value, int ptds)
{
    if (limit < 0 || limit >= GL_LIMITS)
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    if (limit == GL_LIMIT_SHMEM_SIZE || limit == GL_LIMIT_CIG_ENABLED)
        return CUDA_ERROR_INVALID_VALUE; /* read-only */
    /* The stack, the printf FIFO, the malloc heap and the pending
     * device-side launches are the serving device's (devheap.c); the others
     * are only numbers here. */
    if (limit <= GL_LIMIT_MALLOC_HEAP_SIZE || limit == GL_LIMIT_PENDING_LAUNCHES) {
        CUresult r = gl_limit_send(limit, value, ptds);
        if (r != CUDA_SUCCESS)
            return r;
    }
    pthread_mutex_lock(&g_lock);
    g_limits[limit] = value;
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
}

/* The host device runs every stream in order on one executor thread: one
 * priority, 0 (NVIDIA's driver clamps a requested priority into the range,
 * so cudaStreamCreateWithPriority still works). */
CUresult gls_cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority, int ptds)
{
    (void)ptds;
    if (gl_ctx_current() == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (leastPriority)
        *leastPriority = 0;
    if (greatestPriority)
        *greatestPriority = 0;
    return CUDA_SUCCESS;
}

CUresult gls_cuStreamGetPriority(CUstream hStream, int *priority, int ptds)
{
    CUresult r = CUDA_SUCCESS;

    (void)ptds;
    if (priority == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = gl_check_handle(GL_H_STREAM, (uint64_t)(uintptr_t)hStream)) != CUDA_SUCCESS)
        return r;
    *priority = 0;
    return CUDA_SUCCESS;
}

/* The size of each CUpointer_attribute's value (CUDA 13's cuda.h, 1..21). */
static size_t pointer_attribute_size(CUpointer_attribute a)
{
    static const uint8_t size[22] = {0, 8, 4, 8, 8, 16, 4, 8, 4, 4, 4,
                                     8, 8, 4, 8, 4, 4, 8, 8, 8, 8, 4};
    return a >= 1 && a <= 21 ? size[a] : 0;
}

/* As the driver documents: a value that cannot be given (an address that is
 * no CUDA memory, an attribute gleam does not track) is zeroed, and the call
 * still succeeds. */
CUresult gls_cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
                                    void **data, CUdeviceptr ptr, int ptds)
{
    if (numAttributes > 0 && (attributes == NULL || data == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned int i = 0; i < numAttributes; i++) {
        size_t size = pointer_attribute_size(attributes[i]);
        if (size == 0 || data[i] == NULL)
            return CUDA_ERROR_INVALID_VALUE;
        /* Zeroed first: the single-attribute getter writes booleans as one
         * byte, and cudart reads them here as 4-byte integers. */
        memset(data[i], 0, size);
        if (gli_cuPointerGetAttribute(data[i], attributes[i], ptr, ptds) != CUDA_SUCCESS)
            memset(data[i], 0, size);
    }
    return CUDA_SUCCESS;
}
