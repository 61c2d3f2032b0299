/*
 * vector_add.c — the smallest complete driver-API program: c = a + b over 2^20 floats,
 * checked element by element against the CPU.
 *
 * Usage: vector_add [KERNELS.ptx|KERNELS.fatbin]
 */
#include "common.h"

int main(int argc, char **argv)
{
    const int n = 1 << 20;
    const size_t bytes = (size_t)n * sizeof(float);

    CHECK(cuInit(0));
    CUdevice dev;
    CUcontext ctx;
    CHECK(cuDeviceGet(&dev, 0));
    /* The primary context, the one the runtime API and most frameworks use. */
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));

    CUmodule mod = example_load_kernels(argc > 1 ? argv[1] : NULL);
    CUfunction fn;
    CHECK(cuModuleGetFunction(&fn, mod, "vector_add"));

    float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
    if (a == NULL || b == NULL || c == NULL) {
        fprintf(stderr, "out of host memory\n");
        return 2;
    }
    uint32_t seed = 12345;
    for (int i = 0; i < n; ++i) {
        a[i] = example_uniform(&seed, -1.0f, 1.0f);
        b[i] = example_uniform(&seed, -1.0f, 1.0f);
        c[i] = -99.0f; /* a value no correct sum produces */
    }

    CUdeviceptr da, db, dc;
    CHECK(cuMemAlloc(&da, bytes));
    CHECK(cuMemAlloc(&db, bytes));
    CHECK(cuMemAlloc(&dc, bytes));
    CHECK(cuMemcpyHtoD(da, a, bytes));
    CHECK(cuMemcpyHtoD(db, b, bytes));

    const unsigned block = 256;
    int count = n;
    void *params[] = {&da, &db, &dc, &count};
    double t0 = example_now();
    CHECK(cuLaunchKernel(fn, example_blocks((size_t)n, block), 1, 1, block, 1, 1, 0, NULL,
                         params, NULL));
    CHECK(cuMemcpyDtoH(c, dc, bytes)); /* synchronous: waits for the kernel */
    double seconds = example_now() - t0;

    /* One float addition on each side, both rounded to nearest: the results are identical. */
    int bad = 0;
    for (int i = 0; i < n; ++i) {
        if (c[i] != a[i] + b[i]) {
            if (bad < 5)
                fprintf(stderr, "c[%d] = %g, expected %g\n", i, c[i], a[i] + b[i]);
            ++bad;
        }
    }

    CHECK(cuMemFree(da));
    CHECK(cuMemFree(db));
    CHECK(cuMemFree(dc));
    CHECK(cuModuleUnload(mod));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    free(a);
    free(b);
    free(c);

    printf("vector_add: %d elements, %d wrong, %.3f ms for launch + copy back\n", n, bad,
           seconds * 1e3);
    printf("{\"example\": \"vector_add\", \"ok\": %s, \"n\": %d, \"mismatches\": %d, "
           "\"seconds\": %.6f}\n",
           bad ? "false" : "true", n, bad, seconds);
    return bad ? 1 : 0;
}
