// Block-wide prefix sums: three common shapes of scan.
#define FULL 0xffffffffu

// Hillis-Steele inclusive scan, double-buffered in shared memory.
extern "C" __global__ void scan_inclusive_hillis(const int *in, int *out)
{
    __shared__ int buf[2][256];
    unsigned t = threadIdx.x, base = blockIdx.x * blockDim.x;
    int src = 0;
    buf[0][t] = in[base + t];
    __syncthreads();
    for (unsigned d = 1; d < blockDim.x; d <<= 1) {
        int v = buf[src][t];
        if (t >= d)
            v += buf[src][t - d];
        buf[1 - src][t] = v;
        src = 1 - src;
        __syncthreads();
    }
    out[base + t] = buf[src][t];
}

// Warp scans with __shfl_up_sync, then the warps' totals scanned by warp 0.
extern "C" __global__ void scan_warp_shfl_up(const int *in, int *out)
{
    __shared__ int warp_total[32];
    unsigned t = threadIdx.x, lane = t & 31, warp = t >> 5;
    unsigned i = blockIdx.x * blockDim.x + t;
    int v = in[i];
    for (int d = 1; d < 32; d <<= 1) {
        int u = __shfl_up_sync(FULL, v, d);
        if (lane >= d)
            v += u;
    }
    if (lane == 31)
        warp_total[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int w = lane < blockDim.x / 32 ? warp_total[lane] : 0;
        for (int d = 1; d < 32; d <<= 1) {
            int u = __shfl_up_sync(FULL, w, d);
            if (lane >= d)
                w += u;
        }
        warp_total[lane] = w;
    }
    __syncthreads();
    if (warp > 0)
        v += warp_total[warp - 1];
    out[i] = v;
}

// Blelloch work-efficient exclusive scan: 2 elements per thread, up-sweep then down-sweep.
extern "C" __global__ void scan_exclusive_blelloch(const unsigned *in, unsigned *out)
{
    __shared__ unsigned tree[256];
    unsigned t = threadIdx.x, n = 2 * blockDim.x, base = blockIdx.x * n;
    tree[2 * t] = in[base + 2 * t];
    tree[2 * t + 1] = in[base + 2 * t + 1];
    unsigned off = 1;
    for (unsigned d = n >> 1; d > 0; d >>= 1) {
        __syncthreads();
        if (t < d)
            tree[off * (2 * t + 2) - 1] += tree[off * (2 * t + 1) - 1];
        off <<= 1;
    }
    if (t == 0)
        tree[n - 1] = 0;
    for (unsigned d = 1; d < n; d <<= 1) {
        off >>= 1;
        __syncthreads();
        if (t < d) {
            unsigned a = off * (2 * t + 1) - 1, b = off * (2 * t + 2) - 1;
            unsigned x = tree[a];
            tree[a] = tree[b];
            tree[b] += x;
        }
    }
    __syncthreads();
    out[base + 2 * t] = tree[2 * t];
    out[base + 2 * t + 1] = tree[2 * t + 1];
}
