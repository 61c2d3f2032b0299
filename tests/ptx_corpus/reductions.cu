// Reductions: shared-memory trees, warp shuffles, dynamic shared memory, grid-stride loops.
#define FULL 0xffffffffu

// One int sum per block: the classic tree in shared memory, a barrier per level.
extern "C" __global__ void reduce_shared_sum(const int *in, int *out, int n)
{
    __shared__ int part[256];
    unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    part[t] = i < n ? in[i] : 0;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s)
            part[t] += part[t + s];
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = part[0];
}

// One float sum per warp with __shfl_down_sync; lane 0 writes it.
extern "C" __global__ void reduce_warp_shfl_down(const float *in, float *out)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = in[i];
    for (int d = 16; d > 0; d >>= 1)
        v += __shfl_down_sync(FULL, v, d);
    if ((threadIdx.x & 31) == 0)
        out[i / 32] = v;
}

// Butterfly max with __shfl_xor_sync: every lane ends with its warp's max.
extern "C" __global__ void reduce_warp_xor_max(const int *in, int *out)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i];
    for (int m = 1; m < 32; m <<= 1)
        v = max(v, __shfl_xor_sync(FULL, v, m));
    out[i] = v;
}

// Double sum per block in dynamic shared memory (the size comes from the launch).
extern "C" __global__ void reduce_dynamic_shared(const double *in, double *out, int n)
{
    extern __shared__ double dpart[];
    unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    dpart[t] = i < n ? in[i] : 0.0;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s)
            dpart[t] += dpart[t + s];
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = dpart[0];
}

// Grid-stride loop: a fixed grid covers any n; 64-bit atomic accumulates.
extern "C" __global__ void grid_stride_sum(const unsigned *in, unsigned long long *total, int n)
{
    unsigned long long acc = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        acc += in[i];
    atomicAdd(total, acc);
}
