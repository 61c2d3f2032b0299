// Atomics on global and shared memory, every operation and width the compilers emit.

// 64 bins counted in shared memory first, then merged into the global histogram.
extern "C" __global__ void histogram_shared(const unsigned char *in, unsigned *bins, int n)
{
    __shared__ unsigned local[64];
    for (unsigned b = threadIdx.x; b < 64; b += blockDim.x)
        local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&local[in[i] & 63], 1u);
    __syncthreads();
    for (unsigned b = threadIdx.x; b < 64; b += blockDim.x)
        atomicAdd(&bins[b], local[b]);
}

// 16 bins counted straight into global memory.
extern "C" __global__ void histogram_global(const int *in, int *bins, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicAdd(&bins[in[i] & 15], 1);
}

// float and double atomicAdd; integer-valued inputs keep the sums order-independent.
extern "C" __global__ void atomic_add_float_double(const float *in, float *fsum, double *dsum)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(&fsum[i & 7], in[i]);
    atomicAdd(&dsum[i & 3], (double)in[i] * 0.5);
}

// A float max built from an atomicCAS loop, as code without atomicMax(float) does.
__device__ float atomic_max_float(float *addr, float v)
{
    int *a = (int *)addr;
    int old = *a, seen;
    do {
        seen = old;
        if (__int_as_float(seen) >= v)
            break;
        old = atomicCAS(a, seen, __float_as_int(v));
    } while (old != seen);
    return __int_as_float(old);
}

extern "C" __global__ void atomic_cas_float_max(const float *in, float *out)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    atomic_max_float(out, in[i]);
    // A 64-bit CAS loop too: the sum of squares as unsigned long long.
    unsigned long long *acc = (unsigned long long *)(out + 2);
    unsigned long long old = *acc, seen, sq = (unsigned long long)(in[i] * in[i]);
    do {
        seen = old;
        old = atomicCAS(acc, seen, seen + sq);
    } while (old != seen);
}

// Signed and unsigned min/max, 32 and 64 bits, global and shared.
extern "C" __global__ void atomic_min_max(const int *in, int *s32, unsigned *u32,
                                          unsigned long long *u64, long long *s64)
{
    __shared__ int smin;
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x == 0)
        smin = 0x7fffffff;
    __syncthreads();
    int v = in[i];
    atomicMin(&smin, v);
    atomicMax(&s32[1], v);
    atomicMin(&u32[0], (unsigned)v);
    atomicMax(&u32[1], (unsigned)v);
    atomicMax(&u64[0], (unsigned long long)(long long)v);
    atomicMin(&s64[0], (long long)v * 1000003);
    __syncthreads();
    if (threadIdx.x == 0)
        atomicMin(&s32[0], smin);
}

// atomicInc/atomicDec wrap at a limit: the end value depends only on the count.
extern "C" __global__ void atomic_inc_dec(unsigned *counters)
{
    atomicInc(&counters[0], 6u);
    atomicDec(&counters[1], 9u);
    __shared__ unsigned s;
    if (threadIdx.x == 0)
        s = 0;
    __syncthreads();
    atomicInc(&s, 1000u);
    __syncthreads();
    if (threadIdx.x == 0)
        atomicAdd(&counters[2], s);
}

// and/or/xor fold every input; exch swaps a per-thread slot and keeps the old value.
extern "C" __global__ void atomic_bitwise_exch(const unsigned *in, unsigned *acc,
                                               unsigned *slots, unsigned *olds,
                                               unsigned long long *acc64)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned v = in[i];
    atomicAnd(&acc[0], v | 0x80000001u);
    atomicOr(&acc[1], v & 0x0f0f0f0fu);
    atomicXor(&acc[2], v);
    atomicOr(&acc64[0], (unsigned long long)v << (i & 31));
    atomicXor(&acc64[1], (unsigned long long)v * 0x100000001ull);
    olds[i] = atomicExch(&slots[i], v);
}

// Shared-memory atomics on floats, doubles and 64-bit words, merged into global memory.
extern "C" __global__ void atomic_shared_mixed(const float *in, float *fsum, double *dsum,
                                               unsigned long long *words)
{
    __shared__ float f;
    __shared__ double d;
    __shared__ unsigned long long sum, swapped;
    if (threadIdx.x == 0) {
        f = 0.0f;
        d = 0.0;
        sum = 0;
        swapped = 0;
    }
    __syncthreads();
    float v = in[blockIdx.x * blockDim.x + threadIdx.x];
    atomicAdd(&f, v);
    atomicAdd(&d, (double)v * 0.25);
    atomicAdd(&sum, (unsigned long long)(v + 1000.0f));
    unsigned long long seen = swapped, old;
    do { // the largest thread index wins, by 64-bit CAS
        old = seen;
        if (old >= threadIdx.x + 1ull)
            break;
        seen = atomicCAS(&swapped, old, threadIdx.x + 1ull);
    } while (seen != old);
    __syncthreads();
    if (threadIdx.x == 0) {
        fsum[blockIdx.x] = f;
        dsum[blockIdx.x] = d;
        words[2 * blockIdx.x] = sum;
        words[2 * blockIdx.x + 1] = atomicExch(&swapped, 0ull);
    }
}
