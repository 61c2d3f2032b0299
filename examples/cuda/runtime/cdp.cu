// Dynamic parallelism (CDP2): kernels that launch kernels. Built with
// `nvcc -rdc=true -ptx -arch=compute_80` for tests/test_device_launch.py,
// which drives each kernel straight into an executor session, and with
// `nvcc -rdc=true ... -lcudadevrt` as a whole program (main below) that
// tests run through two real agents.
#include <cstdio>
#include <cuda_runtime.h>

// One level: a parent's threads fill a table, thread 0 launches a child that
// doubles it (a child sees what its parent wrote before the launch).
extern "C" __global__ void double_it(int *data, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        data[i] *= 2;
}

extern "C" __global__ void fill_then_double(int *data, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        data[i] = i + 1;
    __syncthreads();
    if (threadIdx.x == 0)
        double_it<<<1, blockDim.x>>>(data + blockIdx.x * blockDim.x,
                                     min((int)blockDim.x, n - (int)(blockIdx.x * blockDim.x)));
}

// Recursion: each level writes its number, then launches the next until
// `levels`; each launch's error lands in errs[level].
extern "C" __global__ void recurse(int *seen, int *errs, int level, int levels)
{
    seen[level] = level + 1;
    if (level + 1 < levels) {
        recurse<<<1, 1>>>(seen, errs, level + 1, levels);
        errs[level] = (int)cudaGetLastError();
    }
}

// Streams: thread t creates its own stream and queues two children in it;
// the second records what the first wrote, so stream order shows.
extern "C" __global__ void stamp(int *slot, int value)
{
    *slot = value;
}

extern "C" __global__ void copy_one(int *dst, const int *src)
{
    *dst = *src;
}

extern "C" __global__ void two_in_each_stream(int *first, int *second, int *errs)
{
    int t = threadIdx.x;
    cudaStream_t s;
    errs[t] = (int)cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    stamp<<<1, 1, 0, s>>>(first + t, 100 + t);
    copy_one<<<1, 1, 0, s>>>(second + t, first + t);
    errs[t] |= (int)cudaGetLastError();
    cudaStreamDestroy(s);
}

// Tail launch: queued first, it still runs after the parent's other child.
extern "C" __global__ void tail_first(int *flag, int *saw)
{
    copy_one<<<1, 1, 0, cudaStreamTailLaunch>>>(saw, flag);
    stamp<<<1, 1, 0, cudaStreamFireAndForget>>>(flag, 7);
}

// The pending-launch limit: every thread launches one child; those past the
// limit get cudaErrorLaunchPendingCountExceeded.
extern "C" __global__ void many(int *ran, int *errs)
{
    int t = threadIdx.x;
    stamp<<<1, 1>>>(ran + t, 1);
    errs[t] = (int)cudaGetLastError();
}

// Forbidden: a pointer to the block's shared memory passed to a child.
extern "C" __global__ void pass_shared(int *out)
{
    __shared__ int cell;
    cell = 5;
    __syncthreads();
    if (threadIdx.x == 0)
        copy_one<<<1, 1>>>(out, &cell);
}

// A child that faults: its parent's launch reports it.
extern "C" __global__ void child_faults(int *out)
{
    copy_one<<<1, 1>>>(out, (const int *)16);
}

// Device-side copies and sets, in stream order with launches.
extern "C" __global__ void copies(int *a, int *b, int n)
{
    cudaMemsetAsync(a, 0, n * sizeof(int), 0);
    stamp<<<1, 1>>>(a, 42);
    cudaMemcpyAsync(b, a, n * sizeof(int), cudaMemcpyDeviceToDevice, 0);
}

// Whole-program check: a tree of launches sums to a known number.
__global__ void count(unsigned *total, int level, int levels)
{
    atomicAdd(total, 1u);
    if (threadIdx.x == 0 && level + 1 < levels)
        count<<<2, 2>>>(total, level + 1, levels);
}

int main()
{
    unsigned *total = nullptr, got = 0;
    const int levels = 5;
    // each launch (2 blocks of 2 threads) adds 4; level 0 has one, level k 2^k grids
    unsigned want = 0;
    for (int k = 0, grids = 1; k < levels; k++, grids *= 2)
        want += 4u * grids;
    if (cudaMalloc(&total, sizeof *total) != cudaSuccess)
        return 1;
    cudaMemset(total, 0, sizeof *total);
    count<<<2, 2>>>(total, 0, levels);
    cudaError_t err = cudaDeviceSynchronize();
    cudaMemcpy(&got, total, sizeof got, cudaMemcpyDeviceToHost);
    printf("launch tree: %u of %u threads ran (%s)\n", got, want, cudaGetErrorString(err));

    // The pending-launch limit travels to the device: 2 of 4 launches are taken.
    int *ran = nullptr, *errs = nullptr, r[4] = {0}, e[4] = {0};
    cudaError_t set = cudaDeviceSetLimit(cudaLimitDevRuntimePendingLaunchCount, 2);
    size_t limit = 0;
    cudaDeviceGetLimit(&limit, cudaLimitDevRuntimePendingLaunchCount);
    cudaMalloc(&ran, sizeof r);
    cudaMalloc(&errs, sizeof e);
    cudaMemset(ran, 0, sizeof r);
    many<<<1, 4>>>(ran, errs);
    cudaError_t err2 = cudaDeviceSynchronize();
    cudaMemcpy(r, ran, sizeof r, cudaMemcpyDeviceToHost);
    cudaMemcpy(e, errs, sizeof e, cudaMemcpyDeviceToHost);
    printf("pending limit %zu (%s): ran %d %d %d %d, errors %d %d %d %d (%s)\n", limit,
           cudaGetErrorString(set), r[0], r[1], r[2], r[3], e[0], e[1], e[2], e[3],
           cudaGetErrorString(err2));
    cudaFree(total);
    cudaFree(ran);
    cudaFree(errs);
    int limited = set == cudaSuccess && limit == 2 && r[0] + r[1] + r[2] + r[3] == 2
                  && e[2] == cudaErrorLaunchPendingCountExceeded;
    return err == cudaSuccess && got == want && err2 == cudaSuccess && limited ? 0 : 1;
}
