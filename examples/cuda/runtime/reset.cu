// cudaDeviceReset between two rounds of work: cudart drops its per-context
// state (the driver calls its context-local-storage destructor) and
// initialises again on the next call.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void twice(int *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = 2 * i;
}

static int round_trip(int n)
{
    static int host[1024];
    int *d = nullptr, bad = 0;
    if (cudaMalloc(&d, n * sizeof(int)) != cudaSuccess)
        return -1;
    twice<<<(n + 127) / 128, 128>>>(d, n);
    if (cudaMemcpy(host, d, n * sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess)
        return -2;
    for (int i = 0; i < n; i++)
        bad += host[i] != 2 * i;
    cudaFree(d);
    return bad;
}

int main()
{
    int first = round_trip(1024);
    cudaError_t reset = cudaDeviceReset();
    int second = round_trip(1024);
    bool ok = first == 0 && second == 0 && reset == cudaSuccess;
    printf("{\"ok\": %s, \"first\": %d, \"reset\": \"%s\", \"second\": %d}\n", ok ? "true" : "false",
           first, cudaGetErrorName(reset), second);
    return ok ? 0 : 1;
}
