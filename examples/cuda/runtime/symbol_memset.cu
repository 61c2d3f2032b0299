// cudaMemset on the address of a __device__ variable (cudaGetSymbolAddress):
// cudart 13 takes the address from cuLibraryGetGlobal and sets it with
// cuMemsetD8. The bytes must change, and no error may reach a later call.
#include <cstdio>
#include <cuda_runtime.h>

__device__ unsigned char flags[256];

__global__ void sum_flags(unsigned int *out)
{
    atomicAdd(out, flags[threadIdx.x]);
}

int main()
{
    void *addr = nullptr;
    unsigned int *sum = nullptr;
    unsigned char back[256] = {0};
    unsigned int total = 0;
    cudaError_t where = cudaGetSymbolAddress(&addr, flags);
    cudaError_t set = cudaMemset(addr, 3, sizeof flags);
    cudaError_t alloc = cudaMalloc(&sum, sizeof *sum);
    cudaError_t zero = cudaMemset(sum, 0, sizeof *sum);
    sum_flags<<<1, 256>>>(sum);
    cudaError_t launch = cudaGetLastError();
    cudaError_t read = cudaMemcpyFromSymbol(back, flags, sizeof back);
    cudaError_t copy = cudaMemcpy(&total, sum, sizeof total, cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int i = 0; i < 256; i++)
        bad += back[i] != 3;
    bool ok = where == cudaSuccess && set == cudaSuccess && alloc == cudaSuccess &&
              zero == cudaSuccess && launch == cudaSuccess && read == cudaSuccess &&
              copy == cudaSuccess && bad == 0 && total == 3 * 256;
    printf("{\"ok\": %s, \"set\": \"%s\", \"read\": \"%s\", \"copy\": \"%s\", \"mismatches\": %d, "
           "\"sum\": %u}\n", ok ? "true" : "false", cudaGetErrorName(set),
           cudaGetErrorName(read), cudaGetErrorName(copy), bad, total);
    return ok ? 0 : 1;
}
