// __constant__ and __device__ variables through cudaMemcpyToSymbol/FromSymbol.
#include <cstdio>
#include <cuda_runtime.h>

__constant__ float coeff[4];
__device__ int counter;
__device__ float table[256];

__global__ void poly(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = coeff[0] + v * (coeff[1] + v * (coeff[2] + v * coeff[3])) + table[i % 256];
        atomicAdd(&counter, 1);
    }
}

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    printf("{\"ok\": false, \"call\": \"%s\", \"error\": \"%s\"}\n", #call, cudaGetErrorName(e_)); \
    return 1; } } while (0)

int main()
{
    const int n = 1000;
    static float x[n], y[n], t[256];
    const float k[4] = {1.0f, 0.5f, 0.25f, 0.125f};
    for (int i = 0; i < n; i++) x[i] = (float)(i % 7);
    for (int i = 0; i < 256; i++) t[i] = (float)i;
    int zero = 0, count = -1;
    float k_back[4] = {0};
    float *dx, *dy;
    CHECK(cudaMalloc(&dx, sizeof x));
    CHECK(cudaMalloc(&dy, sizeof y));
    CHECK(cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpyToSymbol(coeff, k, sizeof k));
    CHECK(cudaMemcpyToSymbol(counter, &zero, sizeof zero));
    CHECK(cudaMemcpyToSymbol(table, t, sizeof t));
    poly<<<(n + 63) / 64, 64>>>(dx, dy, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(y, dy, sizeof y, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpyFromSymbol(&count, counter, sizeof count));
    CHECK(cudaMemcpyFromSymbol(k_back, coeff, sizeof k_back));
    int bad = 0;
    for (int i = 0; i < n; i++) {
        float v = x[i];
        float want = k[0] + v * (k[1] + v * (k[2] + v * k[3])) + t[i % 256];
        float d = y[i] - want;
        bad += d > 1e-4f || d < -1e-4f;
    }
    for (int i = 0; i < 4; i++) bad += k_back[i] != k[i];
    printf("{\"ok\": %s, \"mismatches\": %d, \"counter\": %d}\n",
           bad == 0 && count == n ? "true" : "false", bad, count);
    return bad != 0 || count != n;
}
