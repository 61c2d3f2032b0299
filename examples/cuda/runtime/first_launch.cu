// A kernel launch is the program's first CUDA call: cudart initialises itself
// inside the launch and resolves the kernel (cuLibraryGetKernel) before any
// context is current, which NVIDIA's driver allows. The kernel marks a
// __device__ variable, read back afterwards.
#include <cstdio>
#include <cuda_runtime.h>

__device__ int mark;

__global__ void set_mark(int value)
{
    if (threadIdx.x == 0)
        mark = value;
}

int main()
{
    set_mark<<<1, 32>>>(42);
    cudaError_t launch = cudaGetLastError();
    cudaError_t sync = cudaDeviceSynchronize();
    int seen = 0;
    cudaError_t read = cudaMemcpyFromSymbol(&seen, mark, sizeof seen);
    bool ok = launch == cudaSuccess && sync == cudaSuccess && read == cudaSuccess && seen == 42;
    printf("{\"ok\": %s, \"launch\": \"%s\", \"sync\": \"%s\", \"mark\": %d}\n",
           ok ? "true" : "false", cudaGetErrorName(launch), cudaGetErrorName(sync), seen);
    return ok ? 0 : 1;
}
