// Memory spaces: __constant__, __device__ globals, local arrays, vector accesses, params.

__constant__ float poly_coeffs[8];
__device__ int launch_counter;
__device__ float device_scale = 1.0f;

// Horner's rule over coefficients the host writes with cuModuleGetGlobal + a copy.
extern "C" __global__ void constant_poly(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float acc = poly_coeffs[7];
    for (int k = 6; k >= 0; k--)
        acc = acc * x[i] + poly_coeffs[k];
    y[i] = acc;
}

// A module-scope __device__ variable read (scale) and updated (counter) by every thread.
extern "C" __global__ void device_global_scale(const float *in, float *out)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = in[i] * device_scale;
    atomicAdd(&launch_counter, 1);
}

// A per-thread array indexed by data: it has to live in local memory.
extern "C" __global__ void local_array_dynamic(const int *idx, int *out)
{
    int local[16];
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < 16; k++)
        local[k] = (int)i * k - k * k;
    int acc = 0;
    for (int k = 0; k < 8; k++) {
        int j = idx[i * 8 + k] & 15;
        acc += local[j];
        local[(j + 3) & 15] ^= acc;
    }
    out[i] = acc + local[i & 15];
}

// float4 and int2 loads and stores (ld/st .v4 and .v2).
extern "C" __global__ void vector_float4(const float4 *in, float4 *out, const int2 *pairs,
                                        int *sums)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    float4 v = in[i];
    out[i] = make_float4(v.w * 2.0f, v.z + 1.0f, v.y - v.x, v.x);
    int2 p = pairs[i];
    sums[i] = p.x * 3 - p.y;
}

struct Mixed {
    int a;
    float b;
    double c;
    char tag;
};

// Many parameters of mixed sizes and a struct by value: the parameter layout is the test.
extern "C" __global__ void many_params(char c, short s, int i, long long ll, float f, double d,
                                       double *out, unsigned char uc, struct Mixed m,
                                       unsigned short us, const int *extra)
{
    unsigned t = threadIdx.x;
    double v = (double)c + s + i + (double)ll + f + d + uc + us;
    v += m.a + m.b + m.c + m.tag;
    out[t] = v * (t + 1) + extra[t];
}

// Generic addressing: one non-inlined function reads and writes through pointers that may
// point to global, shared or local memory (cvta to generic, ld/st without a space).
__device__ __noinline__ int sum_and_mark(int *p, int n, int mark)
{
    int s = 0;
    for (int k = 0; k < n; k++)
        s += p[k];
    p[0] = mark;
    return s;
}

extern "C" __global__ void generic_pointers(int *g, int *out)
{
    __shared__ int sh[128];
    int local[4];
    unsigned t = threadIdx.x;
    sh[t] = (int)t * 3;
    for (int k = 0; k < 4; k++)
        local[k] = (int)t + k;
    __syncthreads();
    int a = sum_and_mark(g + 4 * t, 4, -1);
    int b = t % 4 == 0 ? sum_and_mark(sh + t, 4, 7) : 0;
    int c = sum_and_mark(local, 4, 5) + local[0];
    __syncthreads();
    out[4 * t] = a;
    out[4 * t + 1] = b;
    out[4 * t + 2] = c;
    out[4 * t + 3] = sh[t];
}
