// The device runtime: printf, assert, malloc/free and new/delete in kernels,
// and the limits that size them. `devrt MODE`; each mode prints one JSON line
// last (device printf output comes before it, on the same stdout).
//   print    a kernel prints between two host lines; the host's "before" is
//            flushed first, the device's lines come at the synchronisation
//   reset    a kernel prints, then cudaDeviceReset (a flush point) and exit
//   noflush  a kernel prints and the program exits: CUDA prints nothing
//   assert   thread 3 of 8 fails an assertion: cudaErrorAssert, sticky
//   heap     new/delete and malloc/free under a 1 MiB heap, then the heap's
//            size can no longer change
//   fifo     an 8 MiB printf FIFO takes 2.5 MiB of lines, then its size
//            can no longer change
#include <cassert>
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

__global__ void hello(int tag)
{
    printf("hello %d from thread %d of block %d (%.2f)\n", tag, threadIdx.x, blockIdx.x,
           threadIdx.x / 4.0);
}

__global__ void guarded(int n)
{
    assert(threadIdx.x < n);
}

__global__ void chatter(int lines)
{
    for (int i = 0; i < lines; i++)
        printf("thread %3d line %4d ..........................................................\n",
               threadIdx.x, i);
}

__global__ void allocate(int *sums)
{
    int n = 16 + threadIdx.x % 7;
    int *a = new int[n];
    long long *b = (long long *)malloc(sizeof(long long) * n);
    if (a == nullptr || b == nullptr) {
        sums[threadIdx.x] = -1;
        return;
    }
    for (int i = 0; i < n; i++) {
        a[i] = i + threadIdx.x;
        b[i] = a[i];
    }
    int s = 0;
    for (int i = 0; i < n; i++)
        s += (int)b[i];
    sums[threadIdx.x] = s;
    delete[] a;
    free(b);
}

static const char *name(cudaError_t e)
{
    return cudaGetErrorName(e);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "print";
    if (strcmp(mode, "print") == 0) {
        printf("before\n");
        fflush(stdout);
        hello<<<2, 2>>>(7);
        cudaError_t e = cudaDeviceSynchronize();
        printf("after\n{\"sync\": \"%s\"}\n", name(e));
    } else if (strcmp(mode, "reset") == 0) {
        hello<<<1, 2>>>(1);
        hello<<<1, 1>>>(2);
        cudaDeviceReset(); // flushes on a GPU; gleam sends it one-way
    } else if (strcmp(mode, "noflush") == 0) {
        hello<<<1, 2>>>(3);
    } else if (strcmp(mode, "assert") == 0) {
        guarded<<<1, 8>>>(3);
        cudaError_t sync = cudaDeviceSynchronize();
        int *d = nullptr;
        cudaError_t later = cudaMalloc(&d, 16);
        if (later == cudaSuccess)
            later = cudaMemset(d, 0, 16);
        if (later == cudaSuccess)
            later = cudaDeviceSynchronize();
        printf("{\"sync\": \"%s\", \"later\": \"%s\"}\n", name(sync), name(later));
    } else if (strcmp(mode, "heap") == 0) {
        cudaError_t set = cudaDeviceSetLimit(cudaLimitMallocHeapSize, 1 << 20);
        size_t heap = 0;
        cudaDeviceGetLimit(&heap, cudaLimitMallocHeapSize);
        int *d, sums[256];
        cudaMalloc(&d, sizeof sums);
        allocate<<<1, 256>>>(d);
        cudaError_t sync = cudaDeviceSynchronize();
        cudaMemcpy(sums, d, sizeof sums, cudaMemcpyDeviceToHost);
        int right = 0;
        for (int t = 0; t < 256; t++) {
            int n = 16 + t % 7, want = n * (n - 1) / 2 + n * t;
            right += sums[t] == want;
        }
        cudaError_t again = cudaDeviceSetLimit(cudaLimitMallocHeapSize, 2 << 20);
        printf("{\"set\": \"%s\", \"heap\": %zu, \"sync\": \"%s\", \"right\": %d, "
               "\"again\": \"%s\"}\n", name(set), heap, name(sync), right, name(again));
    } else if (strcmp(mode, "fifo") == 0) {
        cudaError_t set = cudaDeviceSetLimit(cudaLimitPrintfFifoSize, 8 << 20);
        chatter<<<1, 64>>>(400);
        cudaError_t sync = cudaDeviceSynchronize();
        cudaError_t again = cudaDeviceSetLimit(cudaLimitPrintfFifoSize, 1 << 20);
        printf("{\"set\": \"%s\", \"sync\": \"%s\", \"again\": \"%s\"}\n", name(set), name(sync),
               name(again));
    }
    return 0;
}
