/*
 * saxpy_streams.c — the wider driver API around one kernel: a created context, two streams
 * ordered by an event, memsets, device-to-device and unified-addressing copies, pointer and
 * memory queries, parameter layout queries, the `extra` launch form, and the errors gleam
 * promises to report the way CUDA does.
 *
 * Usage: saxpy_streams [KERNELS.ptx|KERNELS.fatbin]
 */
#include "common.h"

enum { N = 1 << 16 };

static int failures = 0;

static void expect(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "FAILED: %s\n", what);
        ++failures;
    }
}

/*
 * An error CUDA may report at the call or, for work it queues, at the next synchronization
 * (gleam sends some calls ahead without waiting, as CUDA's own asynchronous errors do).
 */
static void expect_error(CUresult r, CUresult want, const char *what)
{
    if (r == CUDA_SUCCESS)
        r = cuCtxSynchronize();
    if (r != want) {
        fprintf(stderr, "FAILED: %s returned %d (%s), expected %d (%s)\n", what, (int)r,
                example_error_name(r), (int)want, example_error_name(want));
        ++failures;
    }
}

static unsigned float_bits(float f)
{
    unsigned u;
    memcpy(&u, &f, sizeof u);
    return u;
}

int main(int argc, char **argv)
{
    const size_t bytes = (size_t)N * sizeof(float);

    CHECK(cuInit(0));
    CUdevice dev;
    CUcontext ctx;
    CHECK(cuDeviceGet(&dev, 0));
    /* CUDA 12 headers map cuCtxCreate to cuCtxCreate_v2; CUDA 13 to _v4 with a params arg. */
#if CUDA_VERSION >= 13000
    CHECK(cuCtxCreate(&ctx, NULL, 0, dev));
#else
    CHECK(cuCtxCreate(&ctx, 0, dev));
#endif
    CUmodule mod = example_load_kernels(argc > 1 ? argv[1] : NULL);
    CUfunction saxpy;
    CHECK(cuModuleGetFunction(&saxpy, mod, "saxpy"));

    /* The parameter layout the driver sees: saxpy(float, float *, float *, int). */
    size_t offs[4], sizes[4];
    for (int i = 0; i < 4; ++i)
        CHECK(cuFuncGetParamInfo(saxpy, (size_t)i, &offs[i], &sizes[i]));
    expect(offs[0] == 0 && sizes[0] == 4 && offs[1] == 8 && sizes[1] == 8 && offs[2] == 16 &&
               sizes[2] == 8 && offs[3] == 24 && sizes[3] == 4,
           "cuFuncGetParamInfo(saxpy) gives offsets 0,8,16,24 and sizes 4,8,8,4");

    size_t free_before = 0, total = 0;
    CHECK(cuMemGetInfo(&free_before, &total));
    expect(total > 0 && free_before <= total, "cuMemGetInfo: 0 < free <= total");

    CUdeviceptr x, y, z, w;
    CHECK(cuMemAlloc(&x, bytes));
    CHECK(cuMemAlloc(&y, bytes));
    CHECK(cuMemAlloc(&z, bytes));
    CHECK(cuMemAlloc(&w, bytes));

    CUdeviceptr base = 0;
    size_t range = 0;
    CHECK(cuMemGetAddressRange(&base, &range, x + 100));
    expect(base == x && range >= bytes, "cuMemGetAddressRange finds x from inside it");
    unsigned memtype = 0;
    CHECK(cuPointerGetAttribute(&memtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, y));
    expect(memtype == CU_MEMORYTYPE_DEVICE, "cuPointerGetAttribute: y is device memory");

    /* Blocking streams (flag 0), so the legacy default stream orders against both. */
    CUstream s1, s2;
    CUevent zeroed;
    CHECK(cuStreamCreate(&s1, CU_STREAM_DEFAULT));
    CHECK(cuStreamCreate(&s2, CU_STREAM_DEFAULT));
    CHECK(cuEventCreate(&zeroed, CU_EVENT_DISABLE_TIMING));

    /* x = 2.0 everywhere; y = 0.0 on s1; s2 waits for that before y = 3x + y. */
    CHECK(cuMemsetD32(x, float_bits(2.0f), N));
    CHECK(cuMemsetD8Async(y, 0, bytes, s1));
    CHECK(cuEventRecord(zeroed, s1));
    CHECK(cuStreamWaitEvent(s2, zeroed, 0));

    /* The `extra` form: one buffer packed with the layout the driver reported. */
    unsigned char argbuf[32];
    size_t argsize = offs[3] + sizes[3];
    float a3 = 3.0f;
    int n = N;
    memset(argbuf, 0, sizeof argbuf);
    memcpy(argbuf + offs[0], &a3, sizeof a3);
    memcpy(argbuf + offs[1], &x, sizeof x);
    memcpy(argbuf + offs[2], &y, sizeof y);
    memcpy(argbuf + offs[3], &n, sizeof n);
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, argbuf, CU_LAUNCH_PARAM_BUFFER_SIZE,
                     &argsize, CU_LAUNCH_PARAM_END};
    CHECK(cuLaunchKernel(saxpy, example_blocks(N, 256), 1, 1, 256, 1, 1, 0, s2, NULL, extra));
    CHECK(cuStreamSynchronize(s2));
    CHECK(cuStreamQuery(s2)); /* nothing left on s2: CUDA_SUCCESS, not CUDA_ERROR_NOT_READY */

    /* z = y (device to device); w = i from a host buffer through cuMemcpy (unified
     * addressing decides the direction from the pointers). */
    CHECK(cuMemcpyDtoD(z, y, bytes));
    float *ramp = malloc(bytes);
    if (ramp == NULL)
        return 2;
    for (int i = 0; i < N; ++i)
        ramp[i] = (float)i;
    CHECK(cuMemcpy(w, (CUdeviceptr)(uintptr_t)ramp, bytes));

    /* z = 0.5 w + z on s1, with kernelParams this time. */
    float half = 0.5f;
    void *params[] = {&half, &w, &z, &n};
    CHECK(cuLaunchKernel(saxpy, example_blocks(N, 256), 1, 1, 256, 1, 1, 0, s1, params, NULL));
    CHECK(cuCtxSynchronize());

    /* Back to the host: y with cuMemcpyDtoH, z with cuMemcpy into pinned memory. */
    float *y_host = malloc(bytes), *z_host;
    if (y_host == NULL)
        return 2;
    CHECK(cuMemAllocHost((void **)&z_host, bytes));
    CHECK(cuMemcpyDtoH(y_host, y, bytes));
    CHECK(cuMemcpy((CUdeviceptr)(uintptr_t)z_host, z, bytes));
    int bad = 0;
    for (int i = 0; i < N; ++i) {
        /* Every value here is exact in float: 3*2+0 = 6 and 0.5*i + 6 for i < 2^16. */
        float want_z = 0.5f * (float)i + 6.0f;
        if (y_host[i] != 6.0f || z_host[i] != want_z) {
            if (bad < 5)
                fprintf(stderr, "i=%d: y=%g (want 6), z=%g (want %g)\n", i, y_host[i],
                        z_host[i], want_z);
            ++bad;
        }
    }
    expect(bad == 0, "y = 3x + 0 and z = 0.5 i + y everywhere");

    size_t free_after = 0;
    CHECK(cuMemGetInfo(&free_after, &total));
    expect(free_after <= total, "cuMemGetInfo after allocating: free <= total");

    /* The errors. A copy to a pointer in no allocation (the top of a 48-bit address space,
     * where neither CUDA nor gleam places memory): CUDA_ERROR_INVALID_VALUE. */
    CUdeviceptr nowhere = ((CUdeviceptr)1 << 47) - 4096;
    expect_error(cuMemcpyHtoD(nowhere, ramp, 16), CUDA_ERROR_INVALID_VALUE,
                 "cuMemcpyHtoD to unallocated memory");
    /* A function handle that was never handed out: CUDA_ERROR_INVALID_HANDLE. */
    int attr = 0;
    expect_error(cuFuncGetAttribute(&attr, CU_FUNC_ATTRIBUTE_NUM_REGS, NULL),
                 CUDA_ERROR_INVALID_HANDLE, "cuFuncGetAttribute of a NULL function");
    /* An entry the module does not have: CUDA_ERROR_NOT_FOUND, now or at the next sync. */
    CUfunction missing;
    expect_error(cuModuleGetFunction(&missing, mod, "no_such_kernel"), CUDA_ERROR_NOT_FOUND,
                 "cuModuleGetFunction of a missing entry");
    /* None of those errors is sticky: the context still works. */
    CHECK(cuCtxSynchronize());

    CHECK(cuEventDestroy(zeroed));
    CHECK(cuStreamDestroy(s1));
    CHECK(cuStreamDestroy(s2));
    CHECK(cuMemFreeHost(z_host));
    CHECK(cuMemFree(x));
    CHECK(cuMemFree(y));
    CHECK(cuMemFree(z));
    CHECK(cuMemFree(w));
    CHECK(cuModuleUnload(mod));
    CHECK(cuCtxDestroy(ctx));
    free(ramp);
    free(y_host);

    printf("saxpy_streams: %d elements, %d wrong values, %d failed checks\n", N, bad, failures);
    printf("{\"example\": \"saxpy_streams\", \"ok\": %s, \"n\": %d, \"mismatches\": %d, "
           "\"failed_checks\": %d}\n",
           failures ? "false" : "true", N, bad, failures);
    return failures ? 1 : 0;
}
