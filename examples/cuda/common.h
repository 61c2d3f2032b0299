/*
 * common.h — the few helpers every example shares: checking a CUresult, finding and reading
 * the kernel image, a clock, and a fixed-seed generator for test data.
 *
 * Plain driver-API code on purpose: the examples build and run unchanged against NVIDIA's
 * libcuda on a real GPU and against gleam's interposer.
 */
#ifndef GLEAM_EXAMPLE_COMMON_H
#define GLEAM_EXAMPLE_COMMON_H

#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Every call is checked: the program names the failing call, its code and the code's name. */
#define CHECK(call)                                                                       \
    do {                                                                                  \
        CUresult check_r_ = (call);                                                       \
        if (check_r_ != CUDA_SUCCESS) {                                                   \
            example_fail(#call, check_r_, __FILE__, __LINE__);                            \
        }                                                                                 \
    } while (0)

static inline const char *example_error_name(CUresult r)
{
    const char *name = NULL;
    if (cuGetErrorName(r, &name) != CUDA_SUCCESS || name == NULL)
        return "unknown error";
    return name;
}

static inline void example_fail(const char *call, CUresult r, const char *file, int line)
{
    fprintf(stderr, "%s:%d: %s failed: %d (%s)\n", file, line, call, (int)r,
            example_error_name(r));
    exit(2);
}

/*
 * The kernel image: argv[1] when given, else $GLEAM_EXAMPLE_KERNELS, else the path the
 * Makefile baked in (the kernels.ptx shipped in the gleam package). PTX or fatbin.
 */
#ifndef GLEAM_DEFAULT_KERNELS
#define GLEAM_DEFAULT_KERNELS ""
#endif

static inline const char *example_kernels_path(const char *arg)
{
    if (arg != NULL && arg[0] != '\0')
        return arg;
    const char *env = getenv("GLEAM_EXAMPLE_KERNELS");
    if (env != NULL && env[0] != '\0')
        return env;
    if (GLEAM_DEFAULT_KERNELS[0] != '\0')
        return GLEAM_DEFAULT_KERNELS;
    fprintf(stderr, "no kernel image: pass a .ptx/.fatbin path or set GLEAM_EXAMPLE_KERNELS\n");
    exit(2);
}

/*
 * The whole file plus a NUL: cuModuleLoadData reads PTX as a C string; a fatbin carries its
 * own size and ignores the extra byte.
 */
static inline void *example_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        exit(2);
    }
    if (fseek(f, 0, SEEK_END) != 0) {
        perror(path);
        exit(2);
    }
    long len = ftell(f);
    if (len < 0 || fseek(f, 0, SEEK_SET) != 0) {
        perror(path);
        exit(2);
    }
    char *buf = malloc((size_t)len + 1);
    if (buf == NULL || fread(buf, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "%s: cannot read\n", path);
        exit(2);
    }
    buf[len] = '\0';
    fclose(f);
    if (size != NULL)
        *size = (size_t)len;
    return buf;
}

/* cuInit, device 0 and its primary context (the one the runtime API uses), made current. */
static inline CUdevice example_primary_context(void)
{
    CUdevice dev;
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    return dev;
}

/* Loads the example kernels into the current context. */
static inline CUmodule example_load_kernels(const char *arg)
{
    const char *path = example_kernels_path(arg);
    void *image = example_read_file(path, NULL);
    CUmodule mod;
    CHECK(cuModuleLoadData(&mod, image));
    free(image); /* the driver keeps its own copy */
    return mod;
}

static inline double example_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A 32-bit LCG (Numerical Recipes constants): the same data on every machine. */
static inline float example_uniform(uint32_t *state, float lo, float hi)
{
    *state = *state * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)(*state >> 8) / 16777216.0f;
}

static inline unsigned example_blocks(size_t n, unsigned block)
{
    return (unsigned)((n + block - 1) / block);
}

/* A positive integer argument, or exit(2) naming it. */
static inline long long example_count(const char *s, const char *what)
{
    char *end = NULL;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (s == NULL || *end != '\0' || v < 1) {
        fprintf(stderr, "%s must be a positive integer\n", what);
        exit(2);
    }
    return v;
}

/*
 * The arguments of a program with modes: an optional kernel image first, then the mode. The
 * mode's index in argv (*image set when one was given), or -1 when no mode is there.
 */
static inline int example_mode_index(int argc, char **argv, int (*is_mode)(const char *),
                                     const char **image)
{
    int m = 1;
    *image = NULL;
    if (argc > 1 && !is_mode(argv[1]))
        *image = argv[m++];
    return m < argc && is_mode(argv[m]) ? m : -1;
}

#endif /* GLEAM_EXAMPLE_COMMON_H */
