/*
 * accumulate.c — device state that carries across steps: STEPS times, upload x_k, add it
 * into an accumulator that lives in device memory (acc += x_k, on the device), and read the
 * accumulator back, checked against the same float additions on the CPU. Between steps it
 * reads one line from stdin: a gate, so that whoever drives it (a test killing or moving the
 * server) acts between two steps. With "global" it also takes the address of a module
 * global (cuModuleGetGlobal), a call whose answer only the server that gave it can honour.
 * With "missing" it first asks for a kernel that does not exist and expects the error
 * CUDA reports for it, once: a moved session must not report it again.
 *
 * Usage: accumulate KERNELS STEPS [gate] [global] [missing] [elements=N]
 *        (N floats, default 65536)
 * Prints "step K checksum 0x..." per step, then a JSON verdict.
 */
#include <string.h>

#include "common.h"

static const char global_ptx[] =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .global .align 4 .f32 gleam_scale;\n";

int main(int argc, char **argv)
{
    int n = 1 << 16;
    int steps = argc > 2 ? atoi(argv[2]) : 8;
    int gate = 0, global = 0, missing = 0;
    for (int i = 3; i < argc; ++i) {
        gate |= strcmp(argv[i], "gate") == 0;
        global |= strcmp(argv[i], "global") == 0;
        missing |= strcmp(argv[i], "missing") == 0;
        if (strncmp(argv[i], "elements=", 9) == 0 && atoi(argv[i] + 9) > 0)
            n = atoi(argv[i] + 9);
    }
    const size_t bytes = (size_t)n * sizeof(float);

    CUdevice dev = example_primary_context();
    CUmodule mod = example_load_kernels(argc > 1 ? argv[1] : NULL);
    CUfunction add;
    CHECK(cuModuleGetFunction(&add, mod, "vector_add"));
    if (missing) {
        CUfunction none;
        CUresult r = cuModuleGetFunction(&none, mod, "gleam_no_such_kernel");
        if (r == CUDA_SUCCESS)
            r = cuCtxSynchronize(); /* a forwarded call's error surfaces at the next wait */
        if (r != CUDA_ERROR_NOT_FOUND) {
            fprintf(stderr, "expected CUDA_ERROR_NOT_FOUND for a missing kernel, got %d\n", r);
            return 1;
        }
    }
    if (global) {
        CUmodule gmod;
        CUdeviceptr scale;
        size_t size;
        CHECK(cuModuleLoadData(&gmod, global_ptx));
        CHECK(cuModuleGetGlobal(&scale, &size, gmod, "gleam_scale"));
    }

    float *x = malloc(bytes), *acc = malloc(bytes), *got = malloc(bytes);
    if (x == NULL || acc == NULL || got == NULL) {
        fprintf(stderr, "out of host memory\n");
        return 2;
    }
    CUdeviceptr dx, dacc;
    CHECK(cuMemAlloc(&dx, bytes));
    CHECK(cuMemAlloc(&dacc, bytes));
    CHECK(cuMemsetD32(dacc, 0, (size_t)n));
    memset(acc, 0, bytes);

    uint32_t seed = 2024;
    int bad = 0, count = n;
    void *params[] = {&dacc, &dx, &dacc, &count};
    char line[64];
    for (int k = 0; k < steps; ++k) {
        if (gate && k > 0 && fgets(line, sizeof line, stdin) == NULL)
            break;
        for (int i = 0; i < n; ++i)
            x[i] = example_uniform(&seed, -1.0f, 1.0f);
        /* The program reuses x at once: the journal must keep its own copy. */
        CHECK(cuMemcpyHtoD(dx, x, bytes));
        CHECK(cuLaunchKernel(add, example_blocks((size_t)n, 256), 1, 1, 256, 1, 1, 0, NULL,
                             params, NULL));
        CHECK(cuMemcpyDtoH(got, dacc, bytes));
        uint32_t sum = 0;
        for (int i = 0; i < n; ++i) {
            acc[i] = acc[i] + x[i];
            if (got[i] != acc[i])
                ++bad;
            uint32_t bits;
            memcpy(&bits, &got[i], sizeof bits);
            sum = sum * 31u + bits;
        }
        printf("step %d checksum 0x%08x\n", k, sum);
        fflush(stdout);
    }

    CHECK(cuMemFree(dx));
    CHECK(cuMemFree(dacc));
    CHECK(cuModuleUnload(mod));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    printf("{\"example\": \"accumulate\", \"ok\": %s, \"steps\": %d, \"mismatches\": %d}\n",
           bad ? "false" : "true", steps, bad);
    return bad ? 1 : 0;
}
