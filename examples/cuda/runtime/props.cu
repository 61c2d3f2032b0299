// Device and context queries that runtime programs and libraries make first:
// properties, flags, limits, stream priorities, pointer and function
// attributes, memory info, profiler control. Prints what cudart answers.
#include <cstdio>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

__global__ void touch(int *p) { p[threadIdx.x] = threadIdx.x; }

int main()
{
    int failed = 0;
#define TRY(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { failed++; \
    fprintf(stderr, "%s: %s\n", #call, cudaGetErrorName(e_)); } } while (0)
    cudaDeviceProp prop = {};
    TRY(cudaGetDeviceProperties(&prop, 0));
    TRY(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
    unsigned flags = 0;
    TRY(cudaGetDeviceFlags(&flags));
    int least = 1, greatest = 1;
    TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cudaStream_t s;
    TRY(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest));
    int prio = 1;
    TRY(cudaStreamGetPriority(s, &prio));
    size_t stack = 0, heap = 0;
    TRY(cudaDeviceGetLimit(&stack, cudaLimitStackSize));
    TRY(cudaDeviceGetLimit(&heap, cudaLimitMallocHeapSize));
    int *d = nullptr;
    TRY(cudaMalloc(&d, 256 * sizeof(int)));
    cudaPointerAttributes pa = {};
    TRY(cudaPointerGetAttributes(&pa, d + 3));
    cudaFuncAttributes fa = {};
    TRY(cudaFuncGetAttributes(&fa, touch));
    size_t free_b = 0, total_b = 0;
    TRY(cudaMemGetInfo(&free_b, &total_b));
    TRY(cudaProfilerStart());   // no profiling tool: no effect, and no error
    touch<<<1, 256, 0, s>>>(d);
    TRY(cudaStreamSynchronize(s));
    TRY(cudaProfilerStop());
    int v = 0, driver = 0, runtime = 0;
    TRY(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0));
    TRY(cudaDriverGetVersion(&driver));
    TRY(cudaRuntimeGetVersion(&runtime));
    TRY(cudaStreamDestroy(s));
    TRY(cudaFree(d));
    bool ok = failed == 0 && prop.major * 10 + prop.minor >= 75 && prop.maxThreadsPerBlock > 0
              && pa.type == cudaMemoryTypeDevice && pa.devicePointer == d + 3
              && fa.maxThreadsPerBlock > 0 && total_b > 0 && v > 0;
    printf("{\"ok\": %s, \"failed\": %d, \"name\": \"%s\", \"cc\": %d, \"flags_blocking\": %s, "
           "\"priorities\": [%d, %d], \"stream_priority\": %d, \"stack\": %zu, "
           "\"pointer_type\": %d, \"max_threads\": %d, \"sms\": %d, \"driver\": %d}\n",
           ok ? "true" : "false", failed, prop.name, prop.major * 10 + prop.minor,
           (flags & cudaDeviceScheduleBlockingSync) ? "true" : "false", least, greatest, prio,
           stack, (int)pa.type, fa.maxThreadsPerBlock, v, driver);
    return ok ? 0 : 1;
}
