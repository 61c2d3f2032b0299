/*
 * hostdev_clusters.c — thread-block clusters on the host device. A cluster
 * lets its blocks share memory and barriers through PTX's cluster state
 * (%cluster_ctarank, mapa, barrier.cluster), which the host device's PTX has
 * not got: an image that uses it does not load, so a kernel that reaches a
 * cluster launch here never looks at its cluster, and its blocks run as any
 * launch's do. What stays is CUDA's shape rules: each grid extent a multiple
 * of the cluster's, and at most 8 blocks (the portable size; the host device
 * allows no larger one), else CUDA_ERROR_INVALID_CLUSTER_SIZE.
 */
#include <unistd.h>

#include "exec/executor.h"

#define PORTABLE_CLUSTER_BLOCKS 8

static CUresult shape_ok(const unsigned grid[3], const unsigned cluster[3])
{
    uint64_t blocks = 1;

    for (int i = 0; i < 3; i++) {
        /* Each extent at most 8 first, so that the product cannot wrap. */
        if (cluster[i] == 0 || cluster[i] > PORTABLE_CLUSTER_BLOCKS ||
            (grid != NULL && grid[i] % cluster[i] != 0))
            return CUDA_ERROR_INVALID_CLUSTER_SIZE;
        blocks *= cluster[i];
    }
    return blocks <= PORTABLE_CLUSTER_BLOCKS ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CLUSTER_SIZE;
}

CUresult hb_glLaunchCluster(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                            unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                            unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                            unsigned int clusterDimX, unsigned int clusterDimY,
                            unsigned int clusterDimZ, const void *params, size_t size)
{
    const unsigned grid[3] = {gridDimX, gridDimY, gridDimZ};
    const unsigned cluster[3] = {clusterDimX, clusterDimY, clusterDimZ};

    if (gridDimX == 0 || gridDimY == 0 || gridDimZ == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = shape_ok(grid, cluster);
    if (r != CUDA_SUCCESS)
        return r;
    return hb_glLaunch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                       sharedMemBytes, hStream, params, size);
}

/* A core runs one block at a time (hostdev_attrs.c), so as many clusters fit
 * at once as there are cores for all their blocks, and at least one (its
 * blocks never wait on each other here, so they need not run together); none
 * when a block does not fit. The grid does not bound it (nor CUDA's answer).
 * A configuration without a cluster dimension ({0, 0, 0}) counts clusters of
 * one block here (a GPU refuses it unless the kernel names its own size,
 * which the host device does not keep). The largest cluster is the portable
 * 8 blocks, or 0 when a block does not fit; as on CUDA, the configuration's
 * cluster does not matter to that query. */
CUresult hb_glClusterOccupancy(int *value, CUfunction func, unsigned int query,
                               unsigned int gridDimX, unsigned int gridDimY,
                               unsigned int gridDimZ, unsigned int blockDimX,
                               unsigned int blockDimY, unsigned int blockDimZ,
                               unsigned int sharedMemBytes, unsigned int clusterDimX,
                               unsigned int clusterDimY, unsigned int clusterDimZ)
{
    unsigned cluster[3] = {clusterDimX, clusterDimY, clusterDimZ};
    uint64_t threads = (uint64_t)blockDimX * blockDimY * blockDimZ;
    long cores = sysconf(_SC_NPROCESSORS_ONLN); /* what the host device reports as SMs */
    int fits = 0;

    (void)gridDimX, (void)gridDimY, (void)gridDimZ;
    if (query > GL_CLUSTER_POTENTIAL_SIZE || threads == 0 || threads > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    if ((cluster[0] | cluster[1] | cluster[2]) == 0)
        cluster[0] = cluster[1] = cluster[2] = 1;
    CUresult r = query == GL_CLUSTER_ACTIVE ? shape_ok(NULL, cluster) : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS)
        r = hb_cuOccupancyMaxActiveBlocksPerMultiprocessor(&fits, func, (int)threads,
                                                           sharedMemBytes);
    if (r != CUDA_SUCCESS)
        return r;
    if (query == GL_CLUSTER_POTENTIAL_SIZE) {
        *value = fits ? PORTABLE_CLUSTER_BLOCKS : 0;
        return CUDA_SUCCESS;
    }
    uint64_t blocks = (uint64_t)cluster[0] * cluster[1] * cluster[2]; /* <= 8: shape_ok */
    uint64_t resident = (uint64_t)(cores > 0 ? cores : 1) / blocks;
    *value = fits ? (int)(resident > 0 ? resident : 1) : 0;
    return CUDA_SUCCESS;
}
