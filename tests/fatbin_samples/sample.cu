// A small module for the fatbin tests: two kernels, a device function, a __constant__.
__constant__ float scale[4];

__device__ __noinline__ float twice(float v) { return 2.0f * v; }

extern "C" __global__ void sample_saxpy(float a, const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i] * scale[i & 3];
}

extern "C" __global__ void sample_twice(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = twice(x[i]);
}
