/*
 * mlp_infer.c — inference with a 2-layer MLP, the example gleam's demo runs.
 *
 *   h = relu(x·W1 + b1)     x: 64x256, W1: 256x512   (sgemm + bias_relu)
 *   o = relu(h·W2 + b2)     W2: 512x10               (sgemm + bias_relu)
 *   p = softmax(o) per row                           (softmax_rows)
 *
 * Weights and inputs come from a fixed-seed LCG, so every run on every machine computes the
 * same classes. Weights go up with plain cuMemcpyHtoD (large enough for gleam's bulk path);
 * the input and output live in pinned host memory and move with async copies on a stream;
 * events time the forward passes. The result is checked against the same computation on
 * the CPU (float, max abs error of the probabilities < 1e-4, identical argmax classes).
 *
 * Usage: mlp_infer [KERNELS.ptx|KERNELS.fatbin] [REPEATS=20]
 */
#include <math.h>

#include "common.h"

enum { BATCH = 64, IN = 256, HIDDEN = 512, OUT = 10, TILE = 16 };

/* The CPU reference of one layer: y = relu(x·w + b), x: rows x k, w: k x cols. */
static void cpu_layer(const float *x, const float *w, const float *b, float *y, int rows,
                      int cols, int k)
{
    for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < cols; ++c) {
            float acc = 0.0f;
            for (int i = 0; i < k; ++i)
                acc += x[r * k + i] * w[i * cols + c];
            float v = acc + b[c];
            y[r * cols + c] = v > 0.0f ? v : 0.0f;
        }
    }
}

static void cpu_softmax(const float *x, float *y, int rows, int cols)
{
    for (int r = 0; r < rows; ++r) {
        float m = x[r * cols];
        for (int c = 1; c < cols; ++c)
            m = fmaxf(m, x[r * cols + c]);
        float sum = 0.0f;
        for (int c = 0; c < cols; ++c)
            sum += y[r * cols + c] = expf(x[r * cols + c] - m);
        for (int c = 0; c < cols; ++c)
            y[r * cols + c] /= sum;
    }
}

static int argmax(const float *row, int n)
{
    int best = 0;
    for (int i = 1; i < n; ++i)
        if (row[i] > row[best])
            best = i;
    return best;
}

static void fill(float *v, size_t n, uint32_t *seed, float lo, float hi)
{
    for (size_t i = 0; i < n; ++i)
        v[i] = example_uniform(seed, lo, hi);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (p == NULL) {
        fprintf(stderr, "out of host memory\n");
        exit(2);
    }
    return p;
}

/* One layer on the device: sgemm over a 2-D grid, then bias_relu over a 1-D one. */
static void gpu_layer(CUfunction sgemm, CUfunction bias_relu, CUstream s, CUdeviceptr x,
                      CUdeviceptr w, CUdeviceptr b, CUdeviceptr y, int rows, int cols, int k)
{
    void *gemm_args[] = {&x, &w, &y, &rows, &cols, &k};
    CHECK(cuLaunchKernel(sgemm, example_blocks((size_t)cols, TILE),
                         example_blocks((size_t)rows, TILE), 1, TILE, TILE, 1, 0, s, gemm_args,
                         NULL));
    int total = rows * cols;
    void *bias_args[] = {&y, &b, &rows, &cols};
    CHECK(cuLaunchKernel(bias_relu, example_blocks((size_t)total, 256), 1, 1, 256, 1, 1, 0, s,
                         bias_args, NULL));
}

int main(int argc, char **argv)
{
    int repeats = argc > 2 ? atoi(argv[2]) : 20;
    if (repeats < 1) {
        fprintf(stderr, "usage: %s [KERNELS] [REPEATS>=1]\n", argv[0]);
        return 2;
    }

    /* Host data: weights, biases, one input batch; the CPU's answer. */
    float *w1 = xmalloc(sizeof(float) * IN * HIDDEN), *b1 = xmalloc(sizeof(float) * HIDDEN);
    float *w2 = xmalloc(sizeof(float) * HIDDEN * OUT), *b2 = xmalloc(sizeof(float) * OUT);
    float *x = xmalloc(sizeof(float) * BATCH * IN);
    uint32_t seed = 20240611;
    fill(w1, (size_t)IN * HIDDEN, &seed, -0.1f, 0.1f);
    fill(b1, HIDDEN, &seed, 0.0f, 0.1f);
    fill(w2, (size_t)HIDDEN * OUT, &seed, -0.2f, 0.2f);
    fill(b2, OUT, &seed, 0.5f, 1.0f); /* keeps most logits positive, so relu rarely ties */
    fill(x, (size_t)BATCH * IN, &seed, -1.0f, 1.0f);

    float *h_ref = xmalloc(sizeof(float) * BATCH * HIDDEN);
    float *o_ref = xmalloc(sizeof(float) * BATCH * OUT);
    float *p_ref = xmalloc(sizeof(float) * BATCH * OUT);
    cpu_layer(x, w1, b1, h_ref, BATCH, HIDDEN, IN);
    cpu_layer(h_ref, w2, b2, o_ref, BATCH, OUT, HIDDEN);
    cpu_softmax(o_ref, p_ref, BATCH, OUT);

    /* Device setup. */
    CHECK(cuInit(0));
    CUdevice dev;
    CUcontext ctx;
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CUmodule mod = example_load_kernels(argc > 1 ? argv[1] : NULL);
    CUfunction f_sgemm, f_bias_relu, f_softmax;
    CHECK(cuModuleGetFunction(&f_sgemm, mod, "sgemm"));
    CHECK(cuModuleGetFunction(&f_bias_relu, mod, "bias_relu"));
    CHECK(cuModuleGetFunction(&f_softmax, mod, "softmax_rows"));

    CUdeviceptr d_w1, d_b1, d_w2, d_b2, d_x, d_h, d_o, d_p;
    CHECK(cuMemAlloc(&d_w1, sizeof(float) * IN * HIDDEN));
    CHECK(cuMemAlloc(&d_b1, sizeof(float) * HIDDEN));
    CHECK(cuMemAlloc(&d_w2, sizeof(float) * HIDDEN * OUT));
    CHECK(cuMemAlloc(&d_b2, sizeof(float) * OUT));
    CHECK(cuMemAlloc(&d_x, sizeof(float) * BATCH * IN));
    CHECK(cuMemAlloc(&d_h, sizeof(float) * BATCH * HIDDEN));
    CHECK(cuMemAlloc(&d_o, sizeof(float) * BATCH * OUT));
    CHECK(cuMemAlloc(&d_p, sizeof(float) * BATCH * OUT));
    CHECK(cuMemcpyHtoD(d_w1, w1, sizeof(float) * IN * HIDDEN));
    CHECK(cuMemcpyHtoD(d_b1, b1, sizeof(float) * HIDDEN));
    CHECK(cuMemcpyHtoD(d_w2, w2, sizeof(float) * HIDDEN * OUT));
    CHECK(cuMemcpyHtoD(d_b2, b2, sizeof(float) * OUT));

    /* Pinned buffers: async copies from pageable memory would not overlap anything. */
    float *x_pinned, *p_pinned;
    CHECK(cuMemAllocHost((void **)&x_pinned, sizeof(float) * BATCH * IN));
    CHECK(cuMemAllocHost((void **)&p_pinned, sizeof(float) * BATCH * OUT));
    memcpy(x_pinned, x, sizeof(float) * BATCH * IN);
    memset(p_pinned, 0, sizeof(float) * BATCH * OUT);

    CUstream stream;
    CUevent start, stop;
    CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK(cuEventCreate(&stop, CU_EVENT_DEFAULT));

    /* The forward pass, REPEATS times, all queued on one stream. */
    CHECK(cuEventRecord(start, stream));
    for (int rep = 0; rep < repeats; ++rep) {
        CHECK(cuMemcpyHtoDAsync(d_x, x_pinned, sizeof(float) * BATCH * IN, stream));
        gpu_layer(f_sgemm, f_bias_relu, stream, d_x, d_w1, d_b1, d_h, BATCH, HIDDEN, IN);
        gpu_layer(f_sgemm, f_bias_relu, stream, d_h, d_w2, d_b2, d_o, BATCH, OUT, HIDDEN);
        int rows = BATCH, cols = OUT;
        void *sm_args[] = {&d_o, &d_p, &rows, &cols};
        CHECK(cuLaunchKernel(f_softmax, example_blocks(BATCH, 64), 1, 1, 64, 1, 1, 0, stream,
                             sm_args, NULL));
        CHECK(cuMemcpyDtoHAsync(p_pinned, d_p, sizeof(float) * BATCH * OUT, stream));
    }
    CHECK(cuEventRecord(stop, stream));
    CHECK(cuEventSynchronize(stop));
    float gpu_ms = 0.0f;
    CHECK(cuEventElapsedTime(&gpu_ms, start, stop));

    /* Verify against the CPU. */
    double max_err = 0.0;
    int class_mismatches = 0, classes[BATCH];
    for (int r = 0; r < BATCH; ++r) {
        for (int c = 0; c < OUT; ++c) {
            double err = fabs((double)p_pinned[r * OUT + c] - (double)p_ref[r * OUT + c]);
            if (!(err <= max_err)) /* also catches NaN */
                max_err = isnan(err) ? INFINITY : err;
        }
        classes[r] = argmax(p_pinned + r * OUT, OUT);
        class_mismatches += classes[r] != argmax(p_ref + r * OUT, OUT);
    }
    int ok = max_err < 1e-4 && class_mismatches == 0;

    CHECK(cuEventDestroy(start));
    CHECK(cuEventDestroy(stop));
    CHECK(cuStreamDestroy(stream));
    CHECK(cuMemFreeHost(x_pinned));
    CHECK(cuMemFreeHost(p_pinned));
    CUdeviceptr all[] = {d_w1, d_b1, d_w2, d_b2, d_x, d_h, d_o, d_p};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        CHECK(cuMemFree(all[i]));
    CHECK(cuModuleUnload(mod));
    CHECK(cuDevicePrimaryCtxRelease(dev));

    printf("mlp_infer: batch %d, %d->%d->%d, %d forward passes in %.3f ms (%.3f ms each)\n",
           BATCH, IN, HIDDEN, OUT, repeats, gpu_ms, gpu_ms / repeats);
    printf("max |p - p_cpu| = %.3g, %d class mismatches: %s\n", max_err, class_mismatches,
           ok ? "OK" : "WRONG");
    printf("{\"example\": \"mlp_infer\", \"ok\": %s, \"max_abs_err\": %.9g, \"classes\": [",
           ok ? "true" : "false", isinf(max_err) ? 1e300 : max_err);
    for (int r = 0; r < 8; ++r)
        printf("%s%d", r ? ", " : "", classes[r]);
    printf("], \"gpu_ms\": %.6f, \"repeats\": %d}\n", gpu_ms, repeats);

    free(w1);
    free(b1);
    free(w2);
    free(b2);
    free(x);
    free(h_ref);
    free(o_ref);
    free(p_ref);
    return ok ? 0 : 1;
}
