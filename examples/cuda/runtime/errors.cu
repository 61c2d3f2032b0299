// Error paths: a copy from a pointer that is not device memory, a launch
// with too many threads per block. Prints the errors cudart returns.
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

__global__ void noop(int *p) { if (p) *p = 1; }

int main()
{
    int host = 0;
    int *d;
    cudaError_t malloc_err = cudaMalloc(&d, sizeof(int));
    // A device address no allocation holds: gleam's range starts far above it.
    const void *bogus = (const void *)(uintptr_t)0x1000;
    cudaError_t copy = cudaMemcpy(&host, bogus, sizeof host, cudaMemcpyDeviceToHost);
    cudaGetLastError();
    noop<<<1, 4096>>>(d);
    cudaError_t launch = cudaGetLastError();
    cudaError_t sync = cudaDeviceSynchronize();
    printf("{\"malloc\": \"%s\", \"copy\": \"%s\", \"launch\": \"%s\", \"sync\": \"%s\"}\n",
           cudaGetErrorName(malloc_err), cudaGetErrorName(copy), cudaGetErrorName(launch),
           cudaGetErrorName(sync));
    return 0;
}
