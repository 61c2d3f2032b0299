// The last step of a block reduction runs in the first lanes of warp 0 only
// and shuffles with a member mask of those lanes, reading lanes up to 16 away
// that do not take part. PTX leaves such a read undefined; GPUs give 0, and
// block reductions that fold the per-warp sums this way (the cuda-samples
// reduction among them) count on it.
#include <cstdio>
#include <cuda_runtime.h>

// warpSize is not a constant in PTX, so this stays a loop whose register
// carries each lane's value from one call to the next.
__device__ int warp_sum(unsigned int members, int v)
{
    for (int offset = warpSize / 2; offset > 0; offset /= 2)
        v += __shfl_down_sync(members, v, offset);
    return v;
}

__global__ void block_sums(const int *in, int *out)
{
    __shared__ int warp_sums[32];
    int v = warp_sum(0xffffffffu, in[blockIdx.x * blockDim.x + threadIdx.x]);
    int warps = blockDim.x / warpSize;
    if (threadIdx.x % warpSize == 0)
        warp_sums[threadIdx.x / warpSize] = v;
    __syncthreads();
    unsigned int members = __ballot_sync(0xffffffffu, threadIdx.x < warps);
    if (threadIdx.x < warps)
        v = warp_sum(members, warp_sums[threadIdx.x]);
    if (threadIdx.x == 0)
        out[blockIdx.x] = v;
}

int main()
{
    const int blocks = 4, threads = 256, n = blocks * threads;
    static int in[n];
    int out[blocks] = {0}, want[blocks] = {0};
    for (int i = 0; i < n; i++) {
        in[i] = i % 13 + 1;
        want[i / threads] += in[i];
    }
    int *din, *dout;
    cudaMalloc(&din, sizeof in);
    cudaMalloc(&dout, sizeof out);
    cudaMemcpy(din, in, sizeof in, cudaMemcpyHostToDevice);
    block_sums<<<blocks, threads>>>(din, dout);
    cudaError_t launch = cudaGetLastError();
    cudaError_t copy = cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int b = 0; b < blocks; b++)
        bad += out[b] != want[b];
    bool ok = launch == cudaSuccess && copy == cudaSuccess && bad == 0;
    printf("{\"ok\": %s, \"copy\": \"%s\", \"mismatches\": %d, \"first\": %d, \"want\": %d}\n",
           ok ? "true" : "false", cudaGetErrorName(copy), bad, out[0], want[0]);
    return ok ? 0 : 1;
}
