// Vector add through the runtime API: the ten-line program of issue 10.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void vadd(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

int main()
{
    const int n = 1 << 16;
    static float a[n], b[n], c[n];
    for (int i = 0; i < n; i++) { a[i] = i; b[i] = 2 * i; }
    float *da, *db, *dc;
    cudaMalloc(&da, sizeof a); cudaMalloc(&db, sizeof b); cudaMalloc(&dc, sizeof c);
    cudaMemcpy(da, a, sizeof a, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b, sizeof b, cudaMemcpyHostToDevice);
    vadd<<<(n + 255) / 256, 256>>>(da, db, dc, n);
    cudaError_t launch = cudaGetLastError();
    cudaMemcpy(c, dc, sizeof c, cudaMemcpyDeviceToHost);
    cudaError_t sync = cudaDeviceSynchronize();
    int bad = 0;
    for (int i = 0; i < n; i++) bad += c[i] != 3.0f * i;
    printf("{\"ok\": %s, \"n\": %d, \"mismatches\": %d, \"launch\": \"%s\", \"sync\": \"%s\"}\n",
           bad == 0 && launch == cudaSuccess && sync == cudaSuccess ? "true" : "false", n, bad,
           cudaGetErrorName(launch), cudaGetErrorName(sync));
    return bad != 0;
}
