// Persisting L2 and access policy windows, as cuda-samples' simpleAttributes
// uses them: the device's persisting and window limits, the persisting L2
// limit (clamped to the device's maximum), a stream's window with each of the
// checks CUDA documents, copying a stream's attributes, the reset of
// persisting lines, and a launch whose attribute carries a window. Windows are
// hints: the kernels' results are checked all the same. Prints one JSON line.
#include <cmath>
#include <cstdio>
#include <cuda_runtime.h>

__global__ void scale(int *p, int n, int k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = p[i] * k + i;
}

static int failed = 0;
#define TRY(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { failed++; \
    fprintf(stderr, "%s: %s\n", #call, cudaGetErrorName(e_)); } } while (0)

// The error a window set on the stream gets (cudaSuccess when taken).
static cudaError_t set_window(cudaStream_t s, void *base, size_t bytes, float hit,
                              cudaAccessProperty hitProp, cudaAccessProperty missProp)
{
    cudaStreamAttrValue v = {};
    v.accessPolicyWindow.base_ptr = base;
    v.accessPolicyWindow.num_bytes = bytes;
    v.accessPolicyWindow.hitRatio = hit;
    v.accessPolicyWindow.hitProp = hitProp;
    v.accessPolicyWindow.missProp = missProp;
    return cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v);
}

static size_t read_limit()
{
    size_t v = 0;
    TRY(cudaDeviceGetLimit(&v, cudaLimitPersistingL2CacheSize));
    return v;
}

int main()
{
    const int n = 4096;
    cudaDeviceProp prop = {};
    TRY(cudaGetDeviceProperties(&prop, 0));
    const size_t max_l2 = (size_t)prop.persistingL2CacheMaxSize;
    const size_t max_window = (size_t)prop.accessPolicyMaxWindowSize;

    TRY(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, max_l2));
    size_t limit_max = read_limit();
    TRY(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 2 * max_l2));
    size_t limit_over = read_limit();
    TRY(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 1 << 20));
    size_t limit_small = read_limit();

    int *d = nullptr, h[n];
    for (int i = 0; i < n; i++)
        h[i] = i;
    TRY(cudaMalloc(&d, n * sizeof(int)));
    TRY(cudaMemcpy(d, h, n * sizeof(int), cudaMemcpyHostToDevice));
    cudaStream_t s, t;
    TRY(cudaStreamCreate(&s));
    TRY(cudaStreamCreate(&t));

    const cudaAccessProperty P = cudaAccessPropertyPersisting, N = cudaAccessPropertyNormal,
                             S = cudaAccessPropertyStreaming;
    TRY(set_window(s, d, n * sizeof(int), 0.5f, P, S));
    cudaError_t ratio_high = set_window(s, d, 64, 1.5f, P, N);
    cudaError_t ratio_low = set_window(s, d, 64, -0.25f, P, N);
    cudaError_t ratio_nan = set_window(s, d, 64, nanf(""), P, N);
    cudaError_t too_long = set_window(s, d, max_window + 1, 1.0f, P, N);
    cudaError_t miss_persisting = set_window(s, d, 64, 1.0f, P, P);
    (void)cudaGetLastError(); // cudart keeps the refusals as its last error
    cudaStreamAttrValue back = {}, copied = {}, fresh = {};
    TRY(cudaStreamGetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &back));
    TRY(cudaStreamGetAttribute(t, cudaStreamAttributeAccessPolicyWindow, &fresh));
    TRY(cudaStreamCopyAttributes(t, s));
    TRY(cudaStreamGetAttribute(t, cudaStreamAttributeAccessPolicyWindow, &copied));
    cudaStreamAttrValue policy = {};
    policy.syncPolicy = cudaSyncPolicyYield;
    TRY(cudaStreamSetAttribute(s, cudaStreamAttributeSynchronizationPolicy, &policy));
    policy.syncPolicy = cudaSyncPolicyAuto;
    TRY(cudaStreamGetAttribute(s, cudaStreamAttributeSynchronizationPolicy, &policy));
    TRY(cudaCtxResetPersistingL2Cache());

    scale<<<n / 256, 256, 0, s>>>(d, n, 3);
    TRY(cudaGetLastError());

    // The same window as a launch attribute, then a refused one.
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeAccessPolicyWindow;
    attr.val.accessPolicyWindow = back.accessPolicyWindow;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(n / 256);
    config.blockDim = dim3(256);
    config.stream = s;
    config.attrs = &attr;
    config.numAttrs = 1;
    TRY(cudaLaunchKernelEx(&config, scale, d, n, 2));
    attr.val.accessPolicyWindow.hitRatio = 2.0f;
    cudaError_t launch_ratio = cudaLaunchKernelEx(&config, scale, d, n, 5);
    TRY(cudaStreamSynchronize(s));
    TRY(cudaMemcpy(h, d, n * sizeof(int), cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (int i = 0; i < n; i++)
        wrong += h[i] != (i * 3 + i) * 2 + i;

    const cudaAccessPolicyWindow &w = back.accessPolicyWindow;
    bool kept = w.base_ptr == d && w.num_bytes == n * sizeof(int) && w.hitRatio == 0.5f
                && w.hitProp == P && w.missProp == S;
    bool same = copied.accessPolicyWindow.base_ptr == d
                && copied.accessPolicyWindow.num_bytes == n * sizeof(int);
    TRY(cudaStreamDestroy(s));
    TRY(cudaStreamDestroy(t));
    TRY(cudaFree(d));
    printf("{\"failed\": %d, \"persisting_max\": %zu, \"window_max\": %zu, \"l2\": %d, "
           "\"limit\": [%zu, %zu, %zu], \"refused\": [\"%s\", \"%s\", \"%s\", \"%s\", \"%s\", "
           "\"%s\"], \"kept\": %s, \"fresh_bytes\": %zu, \"copied\": %s, \"sync_policy\": %d, "
           "\"wrong\": %d}\n",
           failed, max_l2, max_window, prop.l2CacheSize, limit_max, limit_over, limit_small,
           cudaGetErrorName(ratio_high), cudaGetErrorName(ratio_low), cudaGetErrorName(ratio_nan),
           cudaGetErrorName(too_long), cudaGetErrorName(miss_persisting),
           cudaGetErrorName(launch_ratio), kept ? "true" : "false",
           fresh.accessPolicyWindow.num_bytes, same ? "true" : "false", policy.syncPolicy, wrong);
    return failed == 0 && wrong == 0 ? 0 : 1;
}
