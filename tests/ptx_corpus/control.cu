// Control flow: non-inlined calls, divergence and reconvergence, votes, 3D indexing, switch.
#define FULL 0xffffffffu

__device__ __noinline__ int gcd(int a, int b)
{
    while (b != 0) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

__device__ __noinline__ float lerp3(float a, float b, float t, float *side)
{
    *side = a - b;
    return a + t * (b - a);
}

__device__ __noinline__ long long mix64(long long v, int shift)
{
    return (v << shift) ^ (v >> 3);
}

extern "C" __global__ void noinline_calls(const int *a, const int *b, int *g, float *f,
                                          long long *m)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    g[i] = gcd(a[i], b[i]);
    float side;
    f[2 * i] = lerp3((float)a[i], (float)b[i], 0.25f, &side);
    f[2 * i + 1] = side;
    m[i] = mix64((long long)a[i] * b[i], i & 15);
}

// Data-dependent loop lengths, break/continue and early returns in one warp.
extern "C" __global__ void divergent_collatz(const int *in, int *steps, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int v = in[i];
    if (v <= 0) {
        steps[i] = -1;
        return;
    }
    int s = 0;
    while (v != 1) {
        if (s > 500)
            break;
        s++;
        if (v & 1) {
            v = 3 * v + 1;
            continue;
        }
        v >>= 1;
    }
    if (s % 3 == 0)
        return; // leaves its slot as the host filled it
    steps[i] = s;
}

// Warp votes in uniform and divergent code.
extern "C" __global__ void warp_votes(const int *in, unsigned *out)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i];
    unsigned ballot = __ballot_sync(FULL, v > 0);
    unsigned all = __all_sync(FULL, v > -50);
    unsigned any = __any_sync(FULL, v > 90);
    unsigned active = 0;
    if (v & 1)
        active = __activemask();
    out[4 * i] = ballot;
    out[4 * i + 1] = all;
    out[4 * i + 2] = any;
    out[4 * i + 3] = active;
}

// Every special register of a 3D grid of 3D blocks, packed into one word per thread.
extern "C" __global__ void grid_3d(unsigned *out)
{
    unsigned bx = blockIdx.x, by = blockIdx.y, bz = blockIdx.z;
    unsigned tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
    unsigned block = (bz * gridDim.y + by) * gridDim.x + bx;
    unsigned local = (tz * blockDim.y + ty) * blockDim.x + tx;
    unsigned threads = blockDim.x * blockDim.y * blockDim.z;
    out[block * threads + local] = tx | ty << 4 | tz << 8 | bx << 12 | by << 16 | bz << 20 |
                                   (gridDim.x * gridDim.y * gridDim.z) << 24;
}

// A dense switch (nvcc may emit a jump table: brx.idx) and a sparse one.
extern "C" __global__ void switch_dispatch(const int *in, int *out)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i], r;
    switch (v & 7) {
    case 0: r = v + 11; break;
    case 1: r = v * 3; break;
    case 2: r = v - 100; break;
    case 3: r = v ^ 0x55; break;
    case 4: r = -v; break;
    case 5: r = v << 2; break;
    case 6: r = v >> 1; break;
    default: r = 7; break;
    }
    switch (v) {
    case 1000: r += 1; break;
    case -77: r += 2; break;
    case 123456: r += 3; break;
    default: break;
    }
    out[i] = r;
}

// %laneid, shfl.sync.idx (a reversal within the warp), fences and clock64.
extern "C" __global__ void lane_shuffle_fences(unsigned *out, unsigned long long *ordered)
{
    unsigned lane, i = blockIdx.x * blockDim.x + threadIdx.x;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    long long t0 = clock64();
    out[2 * i] = lane;
    __threadfence();
    out[2 * i + 1] = __shfl_sync(FULL, i, 31 - lane);
    __threadfence_block();
    long long t1 = clock64();
    ordered[i] = t1 >= t0;
}
