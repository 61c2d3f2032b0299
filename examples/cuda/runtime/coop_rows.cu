// Separate compilation and a cooperative grid: built with nvcc -rdc=true beside
// coop_scale.cu, which defines scale() and offset. Row r of m gets, in each column,
// the previous row's opposite column plus one, and the grid syncs after each row
// (cooperative groups' grid.sync()); a grid larger than the device holds at once
// must be refused. Prints one JSON verdict.
#include <cooperative_groups.h>
#include <cstdio>
#include <cuda_runtime.h>

namespace cg = cooperative_groups;

extern __device__ int scale(int x);
extern __device__ int offset;

__global__ void rows(int *m, int cols, int steps)
{
    cg::grid_group grid = cg::this_grid();
    int col = (int)grid.thread_rank();
    for (int r = 1; r <= steps; r++) {
        m[r * cols + col] = m[(r - 1) * cols + (cols - 1 - col)] + 1;
        grid.sync();
    }
    if (col == 0)
        m[0] = scale(offset);
}

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    printf("{\"ok\": false, \"call\": \"%s\", \"error\": \"%s\"}\n", #call, cudaGetErrorName(e_)); \
    return 1; } } while (0)

int main()
{
    int coop = 0, per_sm = 0, sms = 0;
    const int threads = 64, steps = 16;
    CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, 0));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, rows, threads, 0));
    int blocks = per_sm * sms < 8 ? per_sm * sms : 8;
    int cols = blocks * threads;
    size_t bytes = sizeof(int) * (size_t)cols * (steps + 1);
    int *d, *h = (int *)malloc(bytes);
    CHECK(cudaMalloc(&d, bytes));
    CHECK(cudaMemset(d, 0, bytes));
    void *args[] = {&d, (void *)&cols, (void *)&steps};
    CHECK(cudaLaunchCooperativeKernel((void *)rows, blocks, threads, args, 0, 0));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    int mismatches = 0;
    for (int r = 0; r <= steps; r++)
        for (int c = 0; c < cols; c++)
            mismatches += h[r * cols + c] != (r == 0 && c == 0 ? 2 * 5 + 1 : r);
    cudaError_t big = cudaLaunchCooperativeKernel((void *)rows, per_sm * sms + 1, threads, args,
                                                  0, 0);
    printf("{\"ok\": %s, \"cooperative\": %d, \"mismatches\": %d, \"too_large\": \"%s\"}\n",
           mismatches == 0 && big == cudaErrorCooperativeLaunchTooLarge ? "true" : "false", coop,
           mismatches, cudaGetErrorName(big));
    free(h);
    return 0;
}
