// Two host threads, each with its own stream, filling and checking its own
// half of the work; the primary context is shared, as cudart does.
#include <cstdio>
#include <thread>
#include <cuda_runtime.h>

__global__ void fill(int *x, int base, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = base + i * i;
}

static int worker(int base, int n)
{
    int *d = nullptr, bad = 0;
    static thread_local int host[1 << 12];
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess || cudaMalloc(&d, n * sizeof(int)) != cudaSuccess)
        return -1;
    for (int round = 0; round < 4; round++) {
        fill<<<(n + 127) / 128, 128, 0, s>>>(d, base + round, n);
        if (cudaMemcpyAsync(host, d, n * sizeof(int), cudaMemcpyDeviceToHost, s) != cudaSuccess
            || cudaStreamSynchronize(s) != cudaSuccess)
            return -1;
        for (int i = 0; i < n; i++)
            bad += host[i] != base + round + i * i;
    }
    cudaFree(d);
    cudaStreamDestroy(s);
    return bad;
}

int main()
{
    const int n = 1 << 12;
    int bad[2] = {0, 0};
    std::thread a([&] { bad[0] = worker(1000, n); });
    std::thread b([&] { bad[1] = worker(5000000, n); });
    a.join();
    b.join();
    bool ok = bad[0] == 0 && bad[1] == 0;
    printf("{\"ok\": %s, \"mismatches\": [%d, %d]}\n", ok ? "true" : "false", bad[0], bad[1]);
    return ok ? 0 : 1;
}
