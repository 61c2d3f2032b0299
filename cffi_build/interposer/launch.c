/*
 * launch.c — cuLaunchKernel: packs the parameters into one buffer with the
 * function's layout (module.c) and sends one glLaunch record. The `extra`
 * form (a ready buffer) is sent as given. cuLaunchKernelEx is the same launch
 * described by a CUlaunchConfig; with a thread-block cluster it is one
 * glLaunchCluster record; a cooperative one (cuLaunchCooperativeKernel, or
 * the COOPERATIVE attribute) one glLaunchCooperative record, once the grid is
 * known to fit at once (cooperative.c). The cluster occupancy queries ask the
 * server.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "internal.h"

/* The buffer of `extra`, or INVALID_VALUE for a malformed list. */
static CUresult parse_extra(void **extra, const void **buf, size_t *size)
{
    const size_t *psize = NULL;

    *buf = NULL;
    for (size_t i = 0; extra[i] != GL_CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == GL_CU_LAUNCH_PARAM_BUFFER_POINTER)
            *buf = extra[i + 1];
        else if (extra[i] == GL_CU_LAUNCH_PARAM_BUFFER_SIZE)
            psize = extra[i + 1];
        else
            return CUDA_ERROR_INVALID_VALUE;
    }
    if ((*buf == NULL) != (psize == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    *size = psize ? *psize : 0;
    return CUDA_SUCCESS;
}

/* The device's launch limits (cached attributes 1..7: threads per block,
 * block and grid extents), checked here because the launch is one-way. A
 * limit the device does not report (0) is not checked. What a launch that
 * breaks one returns depends on who launched (caller.c): a driver-API
 * program gets CUDA_ERROR_INVALID_VALUE, as NVIDIA documents for
 * cuLaunchKernel (and as numba and CuPy report on GPUs); cudart gets the
 * CUresult it turns into cudaErrorInvalidConfiguration, which is what
 * runtime-API programs see on a GPU (docs/cuda-forwarding.md). */
static CUresult launch_config_error(void)
{
    return gl_caller_is_cudart() ? GL_CUDA_ERROR_CUDART_INVALID_CONFIGURATION
                                 : CUDA_ERROR_INVALID_VALUE;
}

static CUresult check_launch_limits(unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                    unsigned by, unsigned bz)
{
    const unsigned dims[7] = {0, bx, by, bz, gx, gy, gz};
    CUdevice dev;
    CUresult r;

    if (gli_cuCtxGetDevice(&dev, 0) != CUDA_SUCCESS)
        return CUDA_SUCCESS; /* the server answers for a launch without a context */
    const gl_device_info *d = gl_device(dev, &r);
    if (d == NULL)
        return CUDA_SUCCESS;
    const int32_t *limit = d->attrs; /* by attribute number: 1 threads, 2-7 extents */
    if (limit[1] > 0 && (uint64_t)bx * by * bz > (uint64_t)limit[1])
        return launch_config_error();
    for (int a = 2; a <= 7; a++) {
        if (limit[a] > 0 && dims[a - 1] > (unsigned)limit[a])
            return launch_config_error();
    }
    return CUDA_SUCCESS;
}

/* A launch as both entry points describe it. cluster: the configuration's
 * CLUSTER_DIMENSION as given, {0, 0, 0} without one; a launch is a cluster
 * launch when an extent is above 1 ({1, 1, 1} is a plain launch). */
typedef struct {
    unsigned grid[3], block[3], cluster[3];
    unsigned shared;
    CUstream stream;
    int cooperative; /* every block resident at once (glLaunchCooperative) */
} launch_shape;

CUresult gl_launch_params(uint64_t f, void **kernelParams, void **extra, uint8_t **packed,
                          const void **buf, size_t *size)
{
    const gl_layout *l;
    CUresult r;

    *packed = NULL;
    *buf = NULL;
    *size = 0;
    /* An `extra` holding only the end marker gives nothing. */
    if (extra != NULL && extra[0] == GL_CU_LAUNCH_PARAM_END)
        extra = NULL;
    if (extra != NULL) {
        if (kernelParams != NULL)
            return CUDA_ERROR_INVALID_VALUE;
        return parse_extra(extra, buf, size);
    }
    if ((r = gl_func_layout(f, &l)) != CUDA_SUCCESS)
        return r;
    if (l->count > 0 && kernelParams == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (l->total > 0 && (*packed = calloc(1, l->total)) == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (uint32_t i = 0; i < l->count; i++) {
        if (kernelParams[i] == NULL && l->size[i] > 0) {
            free(*packed);
            *packed = NULL;
            return CUDA_ERROR_INVALID_VALUE;
        }
        memcpy(*packed + l->offset[i], kernelParams[i], l->size[i]);
    }
    *buf = *packed;
    *size = l->total;
    return CUDA_SUCCESS;
}

CUresult gl_launch_heap(uint64_t f, int ptds)
{
    const gl_layout *l;

    if (gl_func_layout(f, &l) != CUDA_SUCCESS || !l->heap)
        return CUDA_SUCCESS; /* (an error of asking is gl_launch_params' to report) */
    return gl_devheap_before_launch(ptds);
}

/* Over the kernel's launch bounds: INVALID_VALUE, as numba's test of launch
 * bounds expects of a GPU (for cudart's launches too). Known from the layout,
 * which a launch with `extra` does not fetch. */
static CUresult within_launch_bounds(uint64_t f, const unsigned b[3], void **extra)
{
    const gl_layout *l;
    CUresult r;

    if (extra != NULL && extra[0] != GL_CU_LAUNCH_PARAM_END)
        return CUDA_SUCCESS;
    if ((r = gl_func_layout(f, &l)) != CUDA_SUCCESS)
        return r;
    if (l->max_threads != 0 && (uint64_t)b[0] * b[1] * b[2] > l->max_threads)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static CUresult launch(CUfunction f, const launch_shape *s, void **kernelParams, void **extra,
                       int ptds)
{
    const unsigned *g = s->grid, *b = s->block, *c = s->cluster;
    const void *buf = NULL;
    uint8_t *packed = NULL;
    size_t size = 0;
    CUresult r = CUDA_SUCCESS;

    uint64_t fh;
    if ((r = gl_launchable((uint64_t)(uintptr_t)f, &fh)) != CUDA_SUCCESS)
        return r;
    f = (CUfunction)(uintptr_t)fh;
    if ((r = gl_check_handle(GL_H_FUNC, fh)) != CUDA_SUCCESS)
        return r;
    if (!g[0] || !g[1] || !g[2] || !b[0] || !b[1] || !b[2])
        return launch_config_error();
    if ((r = check_launch_limits(g[0], g[1], g[2], b[0], b[1], b[2])) != CUDA_SUCCESS)
        return r;
    if (s->cooperative && (r = gl_cooperative_fits(f, g, b, s->shared, ptds)) != CUDA_SUCCESS)
        return r;
    if ((r = within_launch_bounds(fh, b, extra)) != CUDA_SUCCESS)
        return r;
    if ((r = gl_launch_heap(fh, ptds)) != CUDA_SUCCESS)
        return r;
    if ((r = gl_launch_params(fh, kernelParams, extra, &packed, &buf, &size)) != CUDA_SUCCESS)
        return r;
    if (s->cooperative)
        r = glw_glLaunchCooperative(f, g[0], g[1], g[2], b[0], b[1], b[2], s->shared, s->stream,
                                    buf, size, ptds);
    else if (c[0] > 1 || c[1] > 1 || c[2] > 1)
        r = glw_glLaunchCluster(f, g[0], g[1], g[2], b[0], b[1], b[2], s->shared, s->stream,
                                c[0], c[1], c[2], buf, size, ptds);
    else
        r = glw_glLaunch(f, g[0], g[1], g[2], b[0], b[1], b[2], s->shared, s->stream, buf, size,
                         ptds);
    free(packed);
    return r;
}

CUresult gls_cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                            unsigned int gridDimZ, unsigned int blockDimX,
                            unsigned int blockDimY, unsigned int blockDimZ,
                            unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
                            void **extra, int ptds)
{
    const launch_shape s = {{gridDimX, gridDimY, gridDimZ}, {blockDimX, blockDimY, blockDimZ},
                            {0, 0, 0}, sharedMemBytes, hStream, 0};
    return launch(f, &s, kernelParams, extra, ptds);
}

CUresult gls_cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                       unsigned int gridDimY, unsigned int gridDimZ,
                                       unsigned int blockDimX, unsigned int blockDimY,
                                       unsigned int blockDimZ, unsigned int sharedMemBytes,
                                       CUstream hStream, void **kernelParams, int ptds)
{
    const launch_shape s = {{gridDimX, gridDimY, gridDimZ}, {blockDimX, blockDimY, blockDimZ},
                            {0, 0, 0}, sharedMemBytes, hStream, 1};
    return launch(f, &s, kernelParams, NULL, ptds);
}

/* Launch attributes that change nothing a program can observe on gleam's
 * devices pass; a cluster dimension is kept for the launch (glLaunchCluster:
 * the serving driver forms the clusters, the host device runs their blocks
 * as it runs any, hostdev_attrs.c); any other one is refused with a line
 * saying which. Programmatic stream serialization (programmatic dependent
 * launch, which cuBLAS uses on Hopper) only lets a kernel start before the
 * previous one ends: launched without it, the kernel waits for its
 * predecessor, which is always correct (its griddepcontrol.wait then returns
 * at once). Scheduling policies, memory-sync domains and preferred cluster
 * shapes are hints. */
static CUresult check_attribute(const CUlaunchAttribute *a, unsigned cluster[3],
                                int *cooperative)
{
    switch (a->id) {
    case GL_CU_LAUNCH_ATTRIBUTE_IGNORE:
    case GL_CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: /* cache hints */
    case GL_CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
    case GL_CU_LAUNCH_ATTRIBUTE_PRIORITY:
    case GL_CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
    case GL_CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
    case GL_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
    case GL_CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
    case GL_CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
    case GL_CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
    case GL_CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
    case GL_CU_LAUNCH_ATTRIBUTE_PORTABLE_CLUSTER_SIZE_MODE:
        return CUDA_SUCCESS;
    case GL_CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
        *cooperative = a->value.cooperative != 0; /* the last one stands */
        return CUDA_SUCCESS;
    case GL_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
        /* The last one stands. A shape with a zero beside a larger extent goes
         * to the serving driver, which says what is wrong with it. */
        memcpy(cluster, a->value.clusterDim, 3 * sizeof *cluster);
        return CUDA_SUCCESS;
    default:
        break;
    }
    gl_log(GL_LOG_ERROR, "cuLaunchKernelEx", "cuLaunchKernelEx: launch attribute %d is not "
           "supported", a->id);
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* The cluster a configuration gives ({0, 0, 0}: none) and whether it is
 * cooperative, or why not. A cooperative grid of clusters is not forwarded. */
static CUresult config_cluster(const CUlaunchConfig *config, unsigned cluster[3],
                               int *cooperative)
{
    cluster[0] = cluster[1] = cluster[2] = 0;
    *cooperative = 0;
    if (config == NULL || (config->numAttrs > 0 && config->attrs == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned int i = 0; i < config->numAttrs; i++) {
        CUresult r = check_attribute(&config->attrs[i], cluster, cooperative);
        if (r != CUDA_SUCCESS)
            return r;
    }
    if (*cooperative && (cluster[0] > 1 || cluster[1] > 1 || cluster[2] > 1)) {
        gl_log(GL_LOG_ERROR, "cuLaunchKernelEx", "cuLaunchKernelEx: a cooperative launch in "
               "thread-block clusters is not supported");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return CUDA_SUCCESS;
}

CUresult gli_cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                              void **extra, int ptds)
{
    unsigned c[3];
    int coop;
    CUresult r = config_cluster(config, c, &coop);

    if (r != CUDA_SUCCESS || (r = gl_ready()) != CUDA_SUCCESS)
        return r;
    const launch_shape s = {{config->gridDimX, config->gridDimY, config->gridDimZ},
                            {config->blockDimX, config->blockDimY, config->blockDimZ},
                            {c[0], c[1], c[2]},
                            config->sharedMemBytes,
                            config->hStream,
                            coop};
    return launch(f, &s, kernelParams, extra, ptds);
}

/* The occupancy queries of a cluster launch: the serving device's answer for
 * the launch the configuration describes, its cluster dimension as given
 * ({0, 0, 0}: none, which the cuda backend passes on as no attribute). The
 * configuration's stream is not sent: gleam's sessions have one context. */
static CUresult cluster_query(int *value, CUfunction func, unsigned query,
                              const CUlaunchConfig *config, int ptds)
{
    unsigned c[3];
    int coop;
    uint64_t fh;
    CUresult r = config_cluster(config, c, &coop);

    (void)coop; /* occupancy does not depend on it */
    if (r != CUDA_SUCCESS)
        return r;
    if (value == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = gl_launchable((uint64_t)(uintptr_t)func, &fh)) != CUDA_SUCCESS)
        return r;
    return glw_glClusterOccupancy(value, (CUfunction)(uintptr_t)fh, query, config->gridDimX,
                                  config->gridDimY, config->gridDimZ, config->blockDimX,
                                  config->blockDimY, config->blockDimZ, config->sharedMemBytes,
                                  c[0], c[1], c[2], ptds);
}

CUresult gls_cuOccupancyMaxActiveClusters(int *numClusters, CUfunction func,
                                          const CUlaunchConfig *config, int ptds)
{
    return cluster_query(numClusters, func, GL_CLUSTER_ACTIVE, config, ptds);
}

CUresult gls_cuOccupancyMaxPotentialClusterSize(int *clusterSize, CUfunction func,
                                                const CUlaunchConfig *config, int ptds)
{
    return cluster_query(clusterSize, func, GL_CLUSTER_POTENTIAL_SIZE, config, ptds);
}
