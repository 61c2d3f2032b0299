/*
 * nvrtc_cubin.c — a program that compiles its kernels at run time with NVRTC for the
 * device's real architecture, as NVIDIA's *_nvrtc samples do, and loads the cubin:
 * once with cuModuleLoadData (a kernel that reads a __constant__ found with
 * cuModuleGetGlobal and counts its launches in a __device__ variable), once through
 * cuLinkAddData (two relocatable programs, each added as CU_JIT_INPUT_CUBIN, the
 * kernel of one calling a function of the other). Every number is checked.
 *
 * Usage: nvrtc_cubin [OPTION...]   the architecture options to give NVRTC (for example
 *        --gpu-architecture=sm_75, or -arch sm_75); none: --gpu-architecture=sm_XY of the
 *        device, as the samples' nvrtc_helper.h asks.
 * Prints one JSON line: {"ok", "image" (what nvrtcGetCUBIN wrote: "ptx" or "elf"),
 * "load_mismatches", "launches", "link_mismatches"}.
 */
#include <nvrtc.h>

#include "common.h"

#define N 1000

static const char *SCALE_ADD =
    "__constant__ float scale;\n"
    "__device__ int launches;\n"
    "extern \"C\" __global__ void scale_add(float *y, const float *x, int n)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i] = scale * x[i] + y[i];\n"
    "    if (i == 0) atomicAdd(&launches, 1);\n"
    "}\n";
static const char *APPLY =
    "extern __device__ float twice(float v);\n"
    "extern \"C\" __global__ void apply(float *y, int n)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i] = twice(y[i]) + 1.0f;\n"
    "}\n";
static const char *TWICE = "__device__ float twice(float v) { return 2.0f * v; }\n";

#define NVRTC(call)                                                                        \
    do {                                                                                   \
        nvrtcResult nvrtc_r_ = (call);                                                     \
        if (nvrtc_r_ != NVRTC_SUCCESS) {                                                   \
            fprintf(stderr, "%s failed: %s\n", #call, nvrtcGetErrorString(nvrtc_r_));     \
            exit(2);                                                                       \
        }                                                                                  \
    } while (0)

/* The "cubin" NVRTC makes of src with the program's options (and -rdc=true if asked). */
static char *compile(const char *src, int nopts, const char **opts, int rdc, size_t *size)
{
    const char *all[16];
    int n = 0;
    for (int i = 0; i < nopts && n < 15; i++)
        all[n++] = opts[i];
    if (rdc)
        all[n++] = "--relocatable-device-code=true";
    nvrtcProgram prog;
    NVRTC(nvrtcCreateProgram(&prog, src, "nvrtc_cubin.cu", 0, NULL, NULL));
    nvrtcResult r = nvrtcCompileProgram(prog, n, all);
    size_t log_size = 0;
    NVRTC(nvrtcGetProgramLogSize(prog, &log_size));
    char *log = malloc(log_size + 1);
    if (log != NULL && nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS && log_size > 1)
        fprintf(stderr, "NVRTC log: %s\n", log);
    free(log);
    NVRTC(r);
    NVRTC(nvrtcGetCUBINSize(prog, size));
    if (*size == 0) {
        fprintf(stderr, "NVRTC made no cubin (a virtual architecture?)\n");
        exit(2);
    }
    char *cubin = malloc(*size);
    if (cubin == NULL)
        exit(2);
    NVRTC(nvrtcGetCUBIN(prog, cubin));
    NVRTC(nvrtcDestroyProgram(&prog));
    return cubin;
}

static int blocks(void)
{
    return (N + 127) / 128;
}

static int run_loaded(CUmodule mod, const float *x, int *launches)
{
    float y[N], scale = 2.5f;
    CUdeviceptr dx, dy, dscale, dlaunches;
    size_t scale_size = 0;
    CUfunction fn;
    int n = N, bad = 0;

    for (int i = 0; i < N; i++)
        y[i] = (float)(i % 7);
    CHECK(cuModuleGetFunction(&fn, mod, "scale_add"));
    CHECK(cuModuleGetGlobal(&dscale, &scale_size, mod, "scale"));
    CHECK(cuModuleGetGlobal(&dlaunches, NULL, mod, "launches"));
    if (scale_size != sizeof scale)
        return -1;
    CHECK(cuMemcpyHtoD(dscale, &scale, sizeof scale));
    CHECK(cuMemAlloc(&dx, sizeof y));
    CHECK(cuMemAlloc(&dy, sizeof y));
    CHECK(cuMemcpyHtoD(dx, x, sizeof y));
    CHECK(cuMemcpyHtoD(dy, y, sizeof y));
    void *params[] = {&dy, &dx, &n};
    CHECK(cuLaunchKernel(fn, blocks(), 1, 1, 128, 1, 1, 0, NULL, params, NULL));
    CHECK(cuLaunchKernel(fn, blocks(), 1, 1, 128, 1, 1, 0, NULL, params, NULL));
    float got[N];
    CHECK(cuMemcpyDtoH(got, dy, sizeof got));
    CHECK(cuMemcpyDtoH(launches, dlaunches, sizeof *launches));
    for (int i = 0; i < N; i++)
        bad += got[i] != scale * x[i] + (scale * x[i] + y[i]);
    CHECK(cuMemFree(dx));
    CHECK(cuMemFree(dy));
    return bad;
}

static int run_linked(int nopts, const char **opts)
{
    size_t apply_size, twice_size, linked_size;
    char *apply = compile(APPLY, nopts, opts, 1, &apply_size);
    char *twice = compile(TWICE, nopts, opts, 1, &twice_size);
    CUlinkState link;
    void *linked;
    CHECK(cuLinkCreate(0, NULL, NULL, &link));
    CHECK(cuLinkAddData(link, CU_JIT_INPUT_CUBIN, apply, apply_size, "apply", 0, NULL, NULL));
    CHECK(cuLinkAddData(link, CU_JIT_INPUT_CUBIN, twice, twice_size, "twice", 0, NULL, NULL));
    CHECK(cuLinkComplete(link, &linked, &linked_size));
    CUmodule mod;
    CUfunction fn;
    CHECK(cuModuleLoadData(&mod, linked));
    CHECK(cuLinkDestroy(link));
    CHECK(cuModuleGetFunction(&fn, mod, "apply"));

    float y[N];
    CUdeviceptr dy;
    int n = N, bad = 0;
    for (int i = 0; i < N; i++)
        y[i] = (float)i * 0.5f;
    CHECK(cuMemAlloc(&dy, sizeof y));
    CHECK(cuMemcpyHtoD(dy, y, sizeof y));
    void *params[] = {&dy, &n};
    CHECK(cuLaunchKernel(fn, blocks(), 1, 1, 128, 1, 1, 0, NULL, params, NULL));
    float got[N];
    CHECK(cuMemcpyDtoH(got, dy, sizeof got));
    for (int i = 0; i < N; i++)
        bad += got[i] != 2.0f * y[i] + 1.0f;
    CHECK(cuMemFree(dy));
    CHECK(cuModuleUnload(mod));
    free(apply);
    free(twice);
    return bad;
}

int main(int argc, char **argv)
{
    CUdevice dev;
    CUcontext ctx;
    int major = 0, minor = 0;
    char arch[64];
    const char *device_arch[] = {arch};
    const char **opts = (const char **)argv + 1;
    int nopts = argc - 1;

    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CHECK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    if (nopts == 0) {
        snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d%d", major, minor);
        opts = device_arch;
        nopts = 1;
    }
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));

    size_t size;
    char *image = compile(SCALE_ADD, nopts, opts, 0, &size);
    const char *kind = size >= 4 && memcmp(image, "\x7f" "ELF", 4) == 0 ? "elf" : "ptx";
    CUmodule mod;
    CHECK(cuModuleLoadData(&mod, image));
    free(image);

    float x[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(i % 13) - 6.0f;
    int launches = -1;
    int load_bad = run_loaded(mod, x, &launches);
    CHECK(cuModuleUnload(mod));
    int link_bad = run_linked(nopts, opts);
    int ok = load_bad == 0 && launches == 2 && link_bad == 0;
    printf("{\"ok\": %s, \"image\": \"%s\", \"load_mismatches\": %d, \"launches\": %d, "
           "\"link_mismatches\": %d}\n", ok ? "true" : "false", kind, load_bad, launches,
           link_bad);
    CHECK(cuDevicePrimaryCtxRelease(dev));
    return ok ? 0 : 1;
}
