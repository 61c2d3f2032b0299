/*
 * graph_common.h — what the CUDA graph examples (graph_*.c) share: a context with the example
 * kernels, a saxpy kernel node, float buffers on both sides, and the checks they report in one
 * JSON verdict ({"ok": ..., "failed": [...], plus figures}).
 *
 * Driver API against NVIDIA's cuda.h: the programs run unchanged on a GPU and through gleam.
 */
#ifndef GLEAM_EXAMPLE_GRAPH_COMMON_H
#define GLEAM_EXAMPLE_GRAPH_COMMON_H

#include <math.h>

#include "common.h"

static int g_checks, g_failed;
static char g_failures[4096];

/* One named check of the verdict. */
static inline void expect(const char *name, int cond)
{
    g_checks++;
    if (cond)
        return;
    g_failed++;
    size_t len = strlen(g_failures);
    snprintf(g_failures + len, sizeof g_failures - len, "%s\"%s\"", len ? ", " : "", name);
}

/* A call's result as a check (the program goes on either way). */
static inline void expect_result(const char *name, CUresult got, CUresult want)
{
    if (got != want)
        fprintf(stderr, "%s: got %d (%s), want %d\n", name, (int)got, example_error_name(got),
                (int)want);
    expect(name, got == want);
}

static inline int verdict(void)
{
    printf("{\"ok\": %s, \"checks\": %d, \"failed\": [%s]}\n", g_failed ? "false" : "true",
           g_checks, g_failures);
    return g_failed ? 1 : 0;
}

typedef struct {
    CUdevice dev;
    CUmodule mod;
    CUfunction saxpy, vector_add;
    CUstream stream;
} graph_env;

static inline graph_env graph_setup(int argc, char **argv)
{
    graph_env e;
    e.dev = example_primary_context();
    e.mod = example_load_kernels(argc > 1 ? argv[1] : NULL);
    CHECK(cuModuleGetFunction(&e.saxpy, e.mod, "saxpy"));
    CHECK(cuModuleGetFunction(&e.vector_add, e.mod, "vector_add"));
    CHECK(cuStreamCreate(&e.stream, CU_STREAM_NON_BLOCKING));
    return e;
}

/* y = a * x + y over n floats, as a kernel node's parameters (args must outlive the call). */
typedef struct {
    float a;
    CUdeviceptr x, y;
    int n;
    void *args[4];
} saxpy_args;

static inline CUDA_KERNEL_NODE_PARAMS saxpy_params(const graph_env *e, saxpy_args *s)
{
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    s->args[0] = &s->a, s->args[1] = &s->x, s->args[2] = &s->y, s->args[3] = &s->n;
    p.func = e->saxpy;
    p.gridDimX = example_blocks((size_t)s->n, 128), p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 128, p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = s->args;
    return p;
}

static inline CUdeviceptr device_floats(size_t n, float value)
{
    CUdeviceptr d;
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = value;
    CHECK(cuMemAlloc(&d, n * sizeof *h));
    CHECK(cuMemcpyHtoD(d, h, n * sizeof *h));
    free(h);
    return d;
}

/* Whether the n floats at d all equal value. */
static inline int device_all(CUdeviceptr d, size_t n, float value)
{
    float *h = malloc(n * sizeof *h);
    CHECK(cuMemcpyDtoH(h, d, n * sizeof *h));
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++)
        ok = fabsf(h[i] - value) < 1e-4f;
    if (!ok)
        fprintf(stderr, "device value %g, want %g\n", (double)h[0], (double)value);
    free(h);
    return ok;
}

static inline int host_all(const float *h, size_t n, float value)
{
    for (size_t i = 0; i < n; i++)
        if (fabsf(h[i] - value) >= 1e-4f) {
            fprintf(stderr, "host value %g at %zu, want %g\n", (double)h[i], i, (double)value);
            return 0;
        }
    return 1;
}

/* A CUDA_MEMCPY3D of n bytes, one row, between two places of the given kinds. */
static inline CUDA_MEMCPY3D linear_copy(CUmemorytype dst_type, void *dst_host,
                                        CUdeviceptr dst_dev, CUmemorytype src_type,
                                        const void *src_host, CUdeviceptr src_dev, size_t n)
{
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = src_type, c.srcHost = src_host, c.srcDevice = src_dev;
    c.dstMemoryType = dst_type, c.dstHost = dst_host, c.dstDevice = dst_dev;
    c.WidthInBytes = n, c.Height = 1, c.Depth = 1;
    return c;
}

#endif /* GLEAM_EXAMPLE_GRAPH_COMMON_H */
