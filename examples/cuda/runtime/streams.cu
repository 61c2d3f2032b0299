// Two streams, events and cudaEventElapsedTime; cudaMallocHost, memset and
// device-to-device copies. Prints one JSON verdict.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void scale(float *x, float k, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= k;
}

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    printf("{\"ok\": false, \"call\": \"%s\", \"error\": \"%s\"}\n", #call, cudaGetErrorName(e_)); \
    return 1; } } while (0)

int main()
{
    const int n = 1 << 14;
    float *host, *a, *b, *c;
    CHECK(cudaMallocHost(&host, n * sizeof(float)));
    for (int i = 0; i < n; i++) host[i] = (float)i;
    CHECK(cudaMalloc(&a, n * sizeof(float)));
    CHECK(cudaMalloc(&b, n * sizeof(float)));
    CHECK(cudaMalloc(&c, n * sizeof(float)));
    cudaStream_t s1, s2;
    cudaEvent_t start, stop, done1;
    CHECK(cudaStreamCreate(&s1));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    CHECK(cudaEventCreateWithFlags(&done1, cudaEventDisableTiming));
    CHECK(cudaEventRecord(start, s1));
    CHECK(cudaMemcpyAsync(a, host, n * sizeof(float), cudaMemcpyHostToDevice, s1));
    scale<<<(n + 127) / 128, 128, 0, s1>>>(a, 2.0f, n);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(done1, s1));
    CHECK(cudaStreamWaitEvent(s2, done1, 0));
    CHECK(cudaMemcpyAsync(b, a, n * sizeof(float), cudaMemcpyDeviceToDevice, s2));
    scale<<<(n + 127) / 128, 128, 0, s2>>>(b, 3.0f, n);
    CHECK(cudaEventRecord(stop, s2));
    CHECK(cudaMemsetAsync(c, 0, n * sizeof(float), s2));
    CHECK(cudaMemcpy(c, b, n * sizeof(float) / 2, cudaMemcpyDeviceToDevice));
    CHECK(cudaStreamSynchronize(s2));
    CHECK(cudaEventSynchronize(stop));
    float ms = -1.0f;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    static float back[1 << 14], back_c[1 << 14];
    CHECK(cudaMemcpy(back, b, n * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(back_c, c, n * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < n; i++) {
        bad += back[i] != 6.0f * i;
        bad += back_c[i] != (i < n / 2 ? 6.0f * i : 0.0f);
    }
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaStreamDestroy(s1));
    CHECK(cudaStreamDestroy(s2));
    CHECK(cudaEventDestroy(start));
    CHECK(cudaEventDestroy(stop));
    CHECK(cudaEventDestroy(done1));
    CHECK(cudaFreeHost(host));
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    CHECK(cudaFree(c));
    printf("{\"ok\": %s, \"n\": %d, \"mismatches\": %d, \"elapsed_ms_nonnegative\": %s}\n",
           bad == 0 && ms >= 0.0f ? "true" : "false", n, bad, ms >= 0.0f ? "true" : "false");
    return bad != 0;
}
