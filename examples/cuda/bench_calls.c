/*
 * bench_calls.c — the call-rate and copy benchmarks behind `gleam-peer bench calls`.
 *
 *   bench_calls [KERNELS] oneway N        N launches of gleam_empty, then one cuCtxSynchronize
 *   bench_calls [KERNELS] waiting N       N cuMemcpyDtoH of 4 bytes (each waits for its reply)
 *   bench_calls [KERNELS] h2d BYTES CHUNK BYTES in CHUNK-sized cuMemcpyHtoD calls, then a sync
 *
 * KERNELS (only `oneway` needs it) may be left out: then $GLEAM_EXAMPLE_KERNELS or the
 * package's kernels.ptx. Prints one JSON line; the results are checked, so a fast wrong
 * answer is not a benchmark result.
 *
 * With GLEAM_BENCH_MARKS=1 the program stops at each end of its timed section: it prints
 * `mark start` or `mark end` and reads one line from stdin before it goes on. That lets
 * `gleam-peer bench cpu` read the agents' CPU time at exactly those moments (setup, the
 * device buffer's first touch and the checks afterwards stay outside).
 */
#include "common.h"

static void mark(const char *where)
{
    static int wanted = -1;
    if (wanted < 0) {
        const char *env = getenv("GLEAM_BENCH_MARKS");
        wanted = env != NULL && strcmp(env, "1") == 0;
    }
    if (!wanted)
        return;
    printf("mark %s\n", where);
    fflush(stdout);
    char line[16];
    if (fgets(line, sizeof line, stdin) == NULL) {
        fprintf(stderr, "bench_calls: stdin closed at mark %s\n", where);
        exit(2);
    }
}

static CUcontext setup(CUdevice *dev)
{
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, *dev));
    CHECK(cuCtxSetCurrent(ctx));
    return ctx;
}

static int bench_oneway(const char *image, long long calls)
{
    CUmodule mod = example_load_kernels(image);
    CUfunction empty;
    CHECK(cuModuleGetFunction(&empty, mod, "gleam_empty"));
    CHECK(cuCtxSynchronize()); /* module loading stays out of the measurement */
    mark("start");
    double t0 = example_now();
    for (long long i = 0; i < calls; ++i)
        CHECK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CHECK(cuCtxSynchronize());
    double t = example_now() - t0;
    mark("end");
    CHECK(cuModuleUnload(mod));
    printf("oneway: %lld launches in %.3f s, %.0f calls/s\n", calls, t, (double)calls / t);
    printf("{\"mode\": \"oneway\", \"calls\": %lld, \"seconds\": %.9f}\n", calls, t);
    return 0;
}

static int bench_waiting(long long calls)
{
    CUdeviceptr d;
    CHECK(cuMemAlloc(&d, 4));
    CHECK(cuMemsetD32(d, 0x600dcafeu, 1));
    unsigned v = 0;
    int bad = 0;
    mark("start");
    double t0 = example_now();
    for (long long i = 0; i < calls; ++i) {
        CHECK(cuMemcpyDtoH(&v, d, 4));
        bad |= v != 0x600dcafeu;
    }
    double t = example_now() - t0;
    mark("end");
    CHECK(cuMemFree(d));
    printf("waiting: %lld round trips in %.3f s, %.1f us each%s\n", calls, t,
           t / (double)calls * 1e6, bad ? " (WRONG DATA)" : "");
    printf("{\"mode\": \"waiting\", \"calls\": %lld, \"seconds\": %.9f, \"per_call_seconds\": "
           "%.9f, \"ok\": %s}\n",
           calls, t, t / (double)calls, bad ? "false" : "true");
    return bad;
}

static int bench_h2d(long long total, long long chunk, unsigned long long seed)
{
    if (chunk > total)
        chunk = total;
    unsigned char *host = malloc((size_t)total);
    if (host == NULL) {
        fprintf(stderr, "out of host memory\n");
        return 2;
    }
    /* Touched before timing, and checkable after. Not periodic: every copy chunk
     * differs, so a content-addressed cache cannot shortcut a cold run. */
    unsigned long long x = 88172645463325252ull ^ (seed * 0x9E3779B97F4A7C15ull);
    for (long long i = 0; i < total; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        host[i] = (unsigned char)(x >> 24);
    }
    CUdeviceptr d;
    CHECK(cuMemAlloc(&d, (size_t)total));
    /* Touch the device buffer once before timing: a fresh allocation costs the
     * serving host device its page faults (a GPU has none), which would be
     * measured instead of the copy path. */
    CHECK(cuMemsetD8(d, 0, (size_t)total));
    CHECK(cuCtxSynchronize());
    mark("start");
    double t0 = example_now();
    for (long long off = 0; off < total; off += chunk) {
        long long n = total - off < chunk ? total - off : chunk;
        CHECK(cuMemcpyHtoD(d + (CUdeviceptr)off, host + off, (size_t)n));
    }
    CHECK(cuCtxSynchronize());
    double t = example_now() - t0;
    mark("end");

    /* Spot checks: the first, the last and a middle piece of what arrived. */
    unsigned char probe[256];
    long long at[3] = {0, total / 2, total > 256 ? total - 256 : 0};
    int bad = 0;
    for (int k = 0; k < 3; ++k) {
        size_t n = (size_t)(total - at[k] < 256 ? total - at[k] : 256);
        CHECK(cuMemcpyDtoH(probe, d + (CUdeviceptr)at[k], n));
        bad |= memcmp(probe, host + at[k], n) != 0;
    }
    CHECK(cuMemFree(d));
    free(host);
    printf("h2d: %lld bytes in %lld-byte copies, %.3f s, %.1f MB/s%s\n", total, chunk, t,
           (double)total / t / 1e6, bad ? " (WRONG DATA)" : "");
    printf("{\"mode\": \"h2d\", \"bytes\": %lld, \"chunk\": %lld, \"seconds\": %.9f, "
           "\"bytes_per_second\": %.1f, \"ok\": %s}\n",
           total, chunk, t, (double)total / t, bad ? "false" : "true");
    return bad;
}

static int is_mode(const char *s)
{
    return strcmp(s, "oneway") == 0 || strcmp(s, "waiting") == 0 || strcmp(s, "h2d") == 0;
}

int main(int argc, char **argv)
{
    /* The kernel image is optional and comes first, as in the other examples. */
    const char *image;
    int m = example_mode_index(argc, argv, is_mode, &image);
    if (m < 0) {
        fprintf(stderr, "usage: %s [KERNELS] oneway N | waiting N | h2d BYTES CHUNK [SEED]\n",
                argv[0]);
        return 2;
    }
    const char *mode = argv[m];
    const char *arg1 = m + 1 < argc ? argv[m + 1] : NULL;
    const char *arg2 = m + 2 < argc ? argv[m + 2] : NULL;
    /* h2d's optional seed picks other bytes (one-off data for the cache benchmark). */
    unsigned long long seed = m + 3 < argc ? strtoull(argv[m + 3], NULL, 10) : 0;

    CUdevice dev;
    setup(&dev);
    int rc;
    if (strcmp(mode, "oneway") == 0)
        rc = bench_oneway(image, example_count(arg1, "N"));
    else if (strcmp(mode, "waiting") == 0)
        rc = bench_waiting(example_count(arg1, "N"));
    else
        rc = bench_h2d(example_count(arg1, "BYTES"), example_count(arg2, "CHUNK"), seed);
    CHECK(cuDevicePrimaryCtxRelease(dev));
    return rc;
}
