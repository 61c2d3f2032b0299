/*
 * remoting_bench.c — the three workloads of `gleam-peer bench remoting`.
 *
 *   remoting_bench [KERNELS] mlp HIDDEN LAYERS REQUESTS [SEED]
 *       an MLP of LAYERS hidden layers of HIDDEN x HIDDEN fp32 weights (4096 x 4 = 256 MiB) and
 *       a HIDDEN x 16 output layer; the weights go up once, then REQUESTS requests, each an
 *       input upload (one row; SEED varies it between runs), every layer's sgemm + bias_relu,
 *       a softmax and the output download. Three requests are checked against the CPU.
 *   remoting_bench [KERNELS] storm LAUNCHES EVERY
 *       LAUNCHES small kernel launches (saxpy over 256 floats, y += x), a cuCtxSynchronize
 *       after every EVERY of them; y is checked (it must equal LAUNCHES).
 *   remoting_bench [KERNELS] transfer BYTES CHUNK
 *       BYTES of fixed, non-repeating data host to device in CHUNK-sized cuMemcpyHtoD calls,
 *       then back in CHUNK-sized cuMemcpyDtoH calls; the bytes are compared.
 *
 * Host data is made before the clock starts, the check runs after it stops. The timed part
 * starts after the module is loaded and one synchronize. Prints one JSON line: seconds, the
 * waiting calls the program itself made (the waits no remoting system can avoid: synchronizes
 * and downloads whose data the program reads), and its bytes: static_h2d (the same in every
 * run: weights, the transfer's data), dynamic_h2d (new in every run: the inputs), d2h.
 */
#include <math.h>

#include "common.h"

enum { OUT = 16, TILE = 16, STORM_N = 256 };

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (p == NULL) {
        fprintf(stderr, "out of host memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

static void report(const char *workload, int ok, double seconds, long long waits,
                   long long static_h2d, long long dynamic_h2d, long long d2h)
{
    printf("{\"workload\": \"%s\", \"ok\": %s, \"seconds\": %.9f, \"waits\": %lld, "
           "\"static_h2d\": %lld, \"dynamic_h2d\": %lld, \"d2h\": %lld}\n",
           workload, ok ? "true" : "false", seconds, waits, static_h2d, dynamic_h2d, d2h);
}

/* ------------------------------------------------------------------ mlp */

static void fill(float *v, size_t n, uint32_t *seed, float lo, float hi)
{
    for (size_t i = 0; i < n; ++i)
        v[i] = example_uniform(seed, lo, hi);
}

/* The CPU's answer for one input row, in double. */
static void cpu_forward(float *const *w, float *const *b, const float *x, int hidden, int layers,
                        double *p)
{
    double *h = xmalloc(sizeof(double) * (size_t)hidden);
    double *g = xmalloc(sizeof(double) * (size_t)hidden);
    for (int i = 0; i < hidden; ++i)
        h[i] = x[i];
    for (int l = 0; l <= layers; ++l) {
        int cols = l < layers ? hidden : OUT;
        for (int c = 0; c < cols; ++c)
            g[c] = 0.0;
        for (int i = 0; i < hidden; ++i)
            for (int c = 0; c < cols; ++c)
                g[c] += h[i] * w[l][(size_t)i * cols + c];
        for (int c = 0; c < cols; ++c) {
            double v = g[c] + b[l][c];
            h[c] = v > 0.0 ? v : 0.0;
        }
    }
    double m = h[0], sum = 0.0;
    for (int c = 1; c < OUT; ++c)
        m = fmax(m, h[c]);
    for (int c = 0; c < OUT; ++c)
        sum += p[c] = exp(h[c] - m);
    for (int c = 0; c < OUT; ++c)
        p[c] /= sum;
    free(h);
    free(g);
}

static int mlp(CUmodule mod, int hidden, int layers, int requests, uint32_t run_seed)
{
    CUfunction sgemm, bias_relu, softmax;
    CHECK(cuModuleGetFunction(&sgemm, mod, "sgemm"));
    CHECK(cuModuleGetFunction(&bias_relu, mod, "bias_relu"));
    CHECK(cuModuleGetFunction(&softmax, mod, "softmax_rows"));

    /* Weights: fixed seed, so every run uploads the same bytes (what the cache keeps). */
    float **w = xmalloc(sizeof(float *) * (size_t)(layers + 1));
    float **b = xmalloc(sizeof(float *) * (size_t)(layers + 1));
    CUdeviceptr *dw = xmalloc(sizeof(CUdeviceptr) * (size_t)(layers + 1));
    CUdeviceptr *db = xmalloc(sizeof(CUdeviceptr) * (size_t)(layers + 1));
    uint32_t seed = 20261201;
    float a = sqrtf(6.0f / (float)hidden); /* keeps activations O(1) under relu */
    long long weight_bytes = 0;
    for (int l = 0; l <= layers; ++l) {
        int cols = l < layers ? hidden : OUT;
        size_t n = (size_t)hidden * (size_t)cols;
        w[l] = xmalloc(sizeof(float) * n);
        b[l] = xmalloc(sizeof(float) * (size_t)cols);
        fill(w[l], n, &seed, -a, a);
        fill(b[l], (size_t)cols, &seed, 0.0f, 0.1f);
        CHECK(cuMemAlloc(&dw[l], sizeof(float) * n));
        CHECK(cuMemAlloc(&db[l], sizeof(float) * (size_t)cols));
        weight_bytes += (long long)(sizeof(float) * (n + (size_t)cols));
    }
    /* Inputs: new in every run (run_seed), as a serving program's requests are. */
    float *x = xmalloc(sizeof(float) * (size_t)hidden * (size_t)requests);
    uint32_t xseed = 77u + run_seed * 7919u;
    fill(x, (size_t)hidden * (size_t)requests, &xseed, -1.0f, 1.0f);
    float *p = xmalloc(sizeof(float) * OUT * (size_t)requests);
    CUdeviceptr d_h0, d_h1, d_o, d_p;
    CHECK(cuMemAlloc(&d_h0, sizeof(float) * (size_t)hidden));
    CHECK(cuMemAlloc(&d_h1, sizeof(float) * (size_t)hidden));
    CHECK(cuMemAlloc(&d_o, sizeof(float) * OUT));
    CHECK(cuMemAlloc(&d_p, sizeof(float) * OUT));
    CHECK(cuCtxSynchronize());

    double t0 = example_now();
    for (int l = 0; l <= layers; ++l) {
        int cols = l < layers ? hidden : OUT;
        CHECK(cuMemcpyHtoD(dw[l], w[l], sizeof(float) * (size_t)hidden * (size_t)cols));
        CHECK(cuMemcpyHtoD(db[l], b[l], sizeof(float) * (size_t)cols));
    }
    int one = 1, out = OUT, k = hidden;
    for (int r = 0; r < requests; ++r) {
        CHECK(cuMemcpyHtoD(d_h0, x + (size_t)r * hidden, sizeof(float) * (size_t)hidden));
        CUdeviceptr in = d_h0, next = d_h1;
        for (int l = 0; l <= layers; ++l) {
            int cols = l < layers ? hidden : OUT;
            CUdeviceptr y = l < layers ? next : d_o;
            void *gemm_args[] = {&in, &dw[l], &y, &one, &cols, &k};
            CHECK(cuLaunchKernel(sgemm, example_blocks((size_t)cols, TILE), 1, 1, TILE, TILE, 1,
                                 0, NULL, gemm_args, NULL));
            void *bias_args[] = {&y, &db[l], &one, &cols};
            CHECK(cuLaunchKernel(bias_relu, example_blocks((size_t)cols, 256), 1, 1, 256, 1, 1,
                                 0, NULL, bias_args, NULL));
            next = in;
            in = y;
        }
        void *sm_args[] = {&d_o, &d_p, &one, &out};
        CHECK(cuLaunchKernel(softmax, 1, 1, 1, 64, 1, 1, 0, NULL, sm_args, NULL));
        CHECK(cuMemcpyDtoH(p + (size_t)r * OUT, d_p, sizeof(float) * OUT));
    }
    double t = example_now() - t0;

    int checked[3] = {0, requests / 2, requests - 1}, ok = 1;
    double worst = 0.0, ref[OUT];
    for (int i = 0; i < 3; ++i) {
        int r = checked[i];
        cpu_forward(w, b, x + (size_t)r * hidden, hidden, layers, ref);
        for (int c = 0; c < OUT; ++c) {
            double err = fabs((double)p[(size_t)r * OUT + c] - ref[c]);
            if (!(err <= worst))
                worst = isnan(err) ? INFINITY : err;
        }
    }
    ok = worst < 1e-4;
    fprintf(stderr, "mlp: %d requests, %lld weight bytes, %.3f s, max |p - p_cpu| %.3g\n",
            requests, weight_bytes, t, worst);
    report("mlp-infer", ok, t, requests, weight_bytes,
           (long long)sizeof(float) * hidden * requests, (long long)sizeof(float) * OUT * requests);
    return ok ? 0 : 1;
}

/* ---------------------------------------------------------------- storm */

static int storm(CUmodule mod, long long launches, long long every)
{
    CUfunction saxpy;
    CHECK(cuModuleGetFunction(&saxpy, mod, "saxpy"));
    float ones[STORM_N], y[STORM_N];
    for (int i = 0; i < STORM_N; ++i)
        ones[i] = 1.0f;
    CUdeviceptr dx, dy;
    CHECK(cuMemAlloc(&dx, sizeof ones));
    CHECK(cuMemAlloc(&dy, sizeof ones));
    CHECK(cuMemcpyHtoD(dx, ones, sizeof ones));
    CHECK(cuMemsetD32(dy, 0, STORM_N));
    CHECK(cuCtxSynchronize());

    float alpha = 1.0f;
    int n = STORM_N;
    void *args[] = {&alpha, &dx, &dy, &n};
    long long waits = 0;
    double t0 = example_now();
    for (long long i = 1; i <= launches; ++i) {
        CHECK(cuLaunchKernel(saxpy, 1, 1, 1, STORM_N, 1, 1, 0, NULL, args, NULL));
        if (i % every == 0) {
            CHECK(cuCtxSynchronize());
            ++waits;
        }
    }
    CHECK(cuMemcpyDtoH(y, dy, sizeof y));
    ++waits;
    double t = example_now() - t0;

    int ok = 1;
    for (int i = 0; i < STORM_N; ++i)
        ok &= y[i] == (float)launches;
    fprintf(stderr, "storm: %lld launches, %lld waits, %.3f s\n", launches, waits, t);
    report("launch-storm", ok, t, waits, 0, 0, (long long)sizeof y);
    return ok ? 0 : 1;
}

/* ------------------------------------------------------------- transfer */

static int transfer(long long bytes, long long chunk)
{
    size_t n = (size_t)bytes;
    uint64_t *src = xmalloc(n + 8), *back = xmalloc(n + 8);
    uint64_t s = 0x9e3779b97f4a7c15ull; /* xorshift64: no two 1 MiB chunks alike */
    for (size_t i = 0; i < n / 8 + 1; ++i) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        src[i] = s;
    }
    memset(back, 0, n);
    CUdeviceptr d;
    CHECK(cuMemAlloc(&d, n));
    CHECK(cuCtxSynchronize());

    long long waits = 0;
    double t0 = example_now();
    for (size_t off = 0; off < n; off += (size_t)chunk) {
        size_t len = n - off < (size_t)chunk ? n - off : (size_t)chunk;
        CHECK(cuMemcpyHtoD(d + off, (const char *)src + off, len));
    }
    for (size_t off = 0; off < n; off += (size_t)chunk) {
        size_t len = n - off < (size_t)chunk ? n - off : (size_t)chunk;
        CHECK(cuMemcpyDtoH((char *)back + off, d + off, len));
        ++waits;
    }
    double t = example_now() - t0;

    int ok = memcmp(src, back, n) == 0;
    fprintf(stderr, "transfer: %lld bytes each way, %.3f s\n", bytes, t);
    report("transfer", ok, t, waits, bytes, 0, bytes);
    CHECK(cuMemFree(d));
    free(src);
    free(back);
    return ok ? 0 : 1;
}

static int is_mode(const char *s)
{
    return strcmp(s, "mlp") == 0 || strcmp(s, "storm") == 0 || strcmp(s, "transfer") == 0;
}

int main(int argc, char **argv)
{
    const char *image;
    int m = example_mode_index(argc, argv, is_mode, &image);
    if (m < 0) {
        fprintf(stderr, "usage: %s [KERNELS] mlp HIDDEN LAYERS REQUESTS [SEED] | "
                "storm LAUNCHES EVERY | transfer BYTES CHUNK\n", argv[0]);
        return 2;
    }
    const char *mode = argv[m];
    const char *a1 = m + 1 < argc ? argv[m + 1] : NULL, *a2 = m + 2 < argc ? argv[m + 2] : NULL;
    CUdevice dev;
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    int rc;
    if (strcmp(mode, "transfer") == 0) {
        rc = transfer(example_count(a1, "BYTES"), example_count(a2, "CHUNK"));
    } else {
        CUmodule mod = example_load_kernels(image);
        if (strcmp(mode, "storm") == 0) {
            rc = storm(mod, example_count(a1, "LAUNCHES"), example_count(a2, "EVERY"));
        } else {
            const char *a3 = m + 3 < argc ? argv[m + 3] : NULL;
            const char *a4 = m + 4 < argc ? argv[m + 4] : "0";
            rc = mlp(mod, (int)example_count(a1, "HIDDEN"), (int)example_count(a2, "LAYERS"),
                     (int)example_count(a3, "REQUESTS"), (uint32_t)strtoul(a4, NULL, 10));
        }
        CHECK(cuModuleUnload(mod));
    }
    CHECK(cuDevicePrimaryCtxRelease(dev));
    return rc;
}
