// Mapped and managed memory through the runtime API: the program writes on its CPU,
// launches, and reads on its CPU, in loops, with several allocations and two streams,
// and never copies. Through gleam the device is on another machine, so each step only
// works if what the CPU wrote reaches the device before the launch and what the kernel
// wrote comes back at the synchronisation (docs/cuda-forwarding.md, "Mapped and managed
// memory"). Prints one JSON line; every value is checked against the CPU.
//
// `managed poll`: a kernel sets a flag in mapped memory and the program polls it without
// any CUDA call, as zero-copy signalling does on a GPU. Through gleam the flag arrives
// once the kernel has finished (the program's view is refreshed when it makes no call
// for a while); the program gives up after 60 s.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cuda_runtime.h>

// Built with CUDA 13's headers but linked with libcudart 12 (tests/test_managed_memory.py),
// the advice and prefetch calls must take 12's names for the CUmemLocation forms.
#ifdef MANAGED_CUDART12
extern "C" cudaError_t cudaMemAdvise_v2(const void *, size_t, cudaMemoryAdvise, cudaMemLocation);
extern "C" cudaError_t cudaMemPrefetchAsync_v2(const void *, size_t, cudaMemLocation, unsigned,
                                               cudaStream_t);
#define MEM_ADVISE cudaMemAdvise_v2
#define MEM_PREFETCH cudaMemPrefetchAsync_v2
#else
#define MEM_ADVISE cudaMemAdvise
#define MEM_PREFETCH cudaMemPrefetchAsync
#endif

// out[i] = a[i] * k + h[i] + r[i]: managed, mapped (cudaHostAlloc) and registered
// (cudaHostRegister) memory read by one kernel.
__global__ void combine(float *out, const float *a, const float *h, const float *r, float k,
                        int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = a[i] * k + h[i] + r[i];
}

// Writes the odd bytes of p; the CPU writes the even ones meanwhile (mapped memory may
// be written by both, byte for byte).
__global__ void odd_bytes(unsigned char *p, int n, int salt)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (2 * i + 1 < n)
        p[2 * i + 1] = (unsigned char)(i * 7 + salt);
}

// Sums the even bytes (the CPU's) into *sum.
__global__ void sum_even(const unsigned char *p, int n, unsigned *sum)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (2 * i < n)
        atomicAdd(sum, p[2 * i]);
}

__global__ void set_flag(volatile int *flag, int value)
{
    *flag = value;
}

static int poll_flag()
{
    int *flag, *dflag;
    if (cudaHostAlloc(&flag, sizeof *flag, cudaHostAllocMapped) != cudaSuccess ||
        cudaHostGetDevicePointer(&dflag, flag, 0) != cudaSuccess)
        return 2;
    *flag = 0;
    set_flag<<<1, 1>>>(dflag, 42);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int seen = 0;
    do {
        seen = *(volatile int *)flag == 42;
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (!seen && now.tv_sec - t0.tv_sec < 60);
    printf("{\"ok\": %s, \"seen\": %s}\n", seen ? "true" : "false", seen ? "true" : "false");
    cudaFreeHost(flag);
    return !seen;
}

static int fails;
#define EXPECT(cond)                                                                       \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);            \
            fails++;                                                                       \
        }                                                                                  \
    } while (0)
#define CHECK(call) EXPECT((call) == cudaSuccess)

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "poll") == 0)
        return poll_flag();
    const int n = 3000;           // not a multiple of a page: allocations share nothing
    const int rounds = 6;
    int attr = -1;
    CHECK(cudaSetDeviceFlags(cudaDeviceMapHost));
    CHECK(cudaDeviceGetAttribute(&attr, cudaDevAttrManagedMemory, 0));
    EXPECT(attr == 1);
    CHECK(cudaDeviceGetAttribute(&attr, cudaDevAttrConcurrentManagedAccess, 0));
    int concurrent = attr;
    CHECK(cudaDeviceGetAttribute(&attr, cudaDevAttrCanMapHostMemory, 0));
    EXPECT(attr == 1);

    float *a[2], *out[2], *h, *dh, *r, *dr;
    for (int s = 0; s < 2; s++) {
        CHECK(cudaMallocManaged(&a[s], n * sizeof(float)));
        CHECK(cudaMallocManaged(&out[s], n * sizeof(float)));
    }
    CHECK(cudaHostAlloc(&h, n * sizeof(float), cudaHostAllocMapped));
    CHECK(cudaHostGetDevicePointer(&dh, h, 0));
    r = (float *)aligned_alloc(4096, 4 * 4096);
    CHECK(cudaHostRegister(r, n * sizeof(float), cudaHostRegisterMapped));
    CHECK(cudaHostGetDevicePointer(&dr, r, 0));
    cudaStream_t st[2];
    for (int s = 0; s < 2; s++)
        CHECK(cudaStreamCreate(&st[s]));

    // CPU writes, launch on two streams, synchronise, CPU reads: round after round.
    int bad = 0;
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < n; i++) {
            h[i] = (float)(round * 3 + i % 5);
            r[i] = (float)(i % 11) - round;
            for (int s = 0; s < 2; s++)
                a[s][i] = (float)(i + s * 1000 + round);
        }
        for (int s = 0; s < 2; s++)
            combine<<<(n + 127) / 128, 128, 0, st[s]>>>(out[s], a[s], dh, dr, 2.0f + s, n);
        if (round % 2)
            CHECK(cudaDeviceSynchronize());
        else
            for (int s = 0; s < 2; s++)
                CHECK(cudaStreamSynchronize(st[s]));
        for (int s = 0; s < 2; s++)
            for (int i = 0; i < n; i++)
                bad += out[s][i] != a[s][i] * (2.0f + s) + h[i] + r[i];
    }
    EXPECT(bad == 0);

    // The CPU and a kernel write different bytes of the same mapped page; both stay.
    unsigned char *bytes;
    unsigned *sum;
    CHECK(cudaHostAlloc(&bytes, 4096, cudaHostAllocMapped));
    CHECK(cudaMallocManaged(&sum, sizeof *sum));
    *sum = 0;
    odd_bytes<<<16, 128>>>(bytes, 4096, 3);
    unsigned want = 0;
    for (int i = 0; i < 4096; i += 2) {
        bytes[i] = (unsigned char)(i / 2 % 200);
        want += bytes[i];
    }
    CHECK(cudaDeviceSynchronize());
    int shared_bad = 0;
    for (int i = 0; i < 4096; i++)
        shared_bad += bytes[i] != (unsigned char)(i % 2 ? (i / 2) * 7 + 3 : i / 2 % 200);
    sum_even<<<16, 128>>>(bytes, 4096, sum);
    CHECK(cudaDeviceSynchronize());
    EXPECT(shared_bad == 0);
    EXPECT(*sum == want);

    // A memset of managed memory is seen at once; copies in and out of it.
    CHECK(cudaMemset(a[0], 0x3f, n * sizeof(float)));
    int memset_bad = 0;
    for (int i = 0; i < n; i++)
        memset_bad += ((unsigned char *)a[0])[4 * i] != 0x3f;
    EXPECT(memset_bad == 0);
    float *dev, host[64];
    CHECK(cudaMalloc(&dev, 64 * sizeof(float)));
    for (int i = 0; i < 64; i++)
        a[1][i] = 0.5f * i;
    CHECK(cudaMemcpy(dev, a[1], 64 * sizeof(float), cudaMemcpyDefault));       // managed -> device
    CHECK(cudaMemcpy(out[0] + 100, dev, 64 * sizeof(float), cudaMemcpyDefault)); // device -> managed
    CHECK(cudaMemcpy(host, out[0] + 100, sizeof host, cudaMemcpyDefault));       // managed -> host
    int copy_bad = 0;
    for (int i = 0; i < 64; i++)
        copy_bad += out[0][100 + i] != 0.5f * i || host[i] != 0.5f * i;
    EXPECT(copy_bad == 0);

    // What the queries say.
    cudaPointerAttributes pa;
    CHECK(cudaPointerGetAttributes(&pa, a[0] + 5));
    EXPECT(pa.type == cudaMemoryTypeManaged && pa.devicePointer == a[0] + 5);
    CHECK(cudaPointerGetAttributes(&pa, r + 7));
    EXPECT(pa.type == cudaMemoryTypeHost && pa.devicePointer == dr + 7 && pa.hostPointer == r + 7);
    cudaMemLocation host_loc = {cudaMemLocationTypeHost, 0};
    CHECK(MEM_ADVISE(a[0], n * sizeof(float), cudaMemAdviseSetReadMostly, host_loc));
    int mostly = -1;
    CHECK(cudaMemRangeGetAttribute(&mostly, 4, cudaMemRangeAttributeReadMostly, a[0],
                                   n * sizeof(float)));
    EXPECT(mostly == 1);
    cudaMemLocation dev_loc = {cudaMemLocationTypeDevice, 0};
    CHECK(MEM_PREFETCH(a[0], n * sizeof(float), host_loc, 0, st[0]));
    cudaError_t to_device = MEM_PREFETCH(a[0], n * sizeof(float), dev_loc, 0, st[0]);
    EXPECT(concurrent ? to_device == cudaSuccess : to_device == cudaErrorInvalidDevice);
    cudaGetLastError();
    CHECK(cudaStreamAttachMemAsync(st[1], out[1], 0, cudaMemAttachSingle));
    CHECK(cudaStreamSynchronize(st[1]));

    CHECK(cudaHostUnregister(r));
    free(r);
    CHECK(cudaFreeHost(h));
    CHECK(cudaFreeHost(bytes));
    for (int s = 0; s < 2; s++) {
        CHECK(cudaFree(a[s]));
        CHECK(cudaFree(out[s]));
        CHECK(cudaStreamDestroy(st[s]));
    }
    CHECK(cudaFree(sum));
    CHECK(cudaFree(dev));
    printf("{\"ok\": %s, \"rounds\": %d, \"mismatches\": %d, \"shared_page\": %d, "
           "\"concurrent_managed_access\": %d, \"prefetch_to_device\": \"%s\"}\n",
           fails == 0 ? "true" : "false", rounds, bad, shared_bad, concurrent,
           cudaGetErrorName(to_device));
    return fails != 0;
}
