// Barrier reductions and warp-level synchronisation: bar.red, match.sync, bar.warp.sync.
#define FULL 0xffffffffu

// Block-wide votes folded into the barrier: __syncthreads_count/_and/_or (bar.red).
extern "C" __global__ void block_sync_counts(const int *in, int *out)
{
    int v = in[blockIdx.x * blockDim.x + threadIdx.x];
    int count = __syncthreads_count(v > 0);
    int all = __syncthreads_and(v > -90);
    int any = __syncthreads_or(v > 95);
    if (threadIdx.x == 0) {
        out[3 * blockIdx.x] = count;
        out[3 * blockIdx.x + 1] = all != 0;
        out[3 * blockIdx.x + 2] = any != 0;
    }
}

// __match_any_sync groups, a double broadcast by __shfl_sync, and a warp-synchronous
// shared-memory fold ordered by __syncwarp.
extern "C" __global__ void warp_match_shuffle(const int *in, const double *d, unsigned *groups,
                                              double *bcast, int *folded)
{
    __shared__ int buf[64];
    unsigned t = threadIdx.x, lane = t & 31, i = blockIdx.x * blockDim.x + t;
    int v = in[i];
    groups[i] = __match_any_sync(FULL, v & 7);
    bcast[i] = __shfl_sync(FULL, d[i], (lane * 7) & 31);
    buf[t] = v;
    __syncwarp();
    for (int s = 16; s > 0; s >>= 1) {
        int o = lane < s ? buf[t + s] : 0;
        __syncwarp();
        if (lane < s)
            buf[t] += o;
        __syncwarp();
    }
    if (lane == 0)
        folded[i / 32] = buf[t];
}
