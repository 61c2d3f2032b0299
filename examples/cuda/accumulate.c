/*
 * accumulate.c — device state that carries across steps: STEPS times, upload x_k, add it
 * into an accumulator that lives in device memory (acc += x_k, on the device), and read the
 * accumulator back, checked against the same float additions on the CPU. Between steps it
 * reads one line from stdin: a gate, so that whoever drives it (a test killing or moving the
 * server) acts between two steps. With "global" it also takes the address of a module
 * global (cuModuleGetGlobal), a call whose answer only the server that gave it can honour.
 * With "missing" it first asks for a kernel that does not exist and expects the error
 * CUDA reports for it, once: a moved session must not report it again.
 * With "vars" each step also runs a kernel that counts the steps in a module variable (a
 * `__device__` global, from 100) and reads the count back: a moved session must carry the
 * variable's contents, not restart it from its initial value.
 *
 * Usage: accumulate KERNELS STEPS [gate] [global] [missing] [vars] [elements=N]
 *        (N floats, default 65536)
 * Prints "step K checksum 0x..." per step, then a JSON verdict.
 */
#include <string.h>

#include "common.h"

static const char global_ptx[] =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .global .align 4 .f32 gleam_scale;\n";

/* count[0] = ++gleam_steps (one thread). */
static const char vars_ptx[] =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .global .align 4 .u32 gleam_steps = 100;\n"
    ".visible .entry gleam_count(.param .u64 count)\n"
    "{\n"
    "    .reg .b32 %r<3>;\n    .reg .b64 %rd<3>;\n"
    "    ld.param.u64 %rd1, [count];\n"
    "    cvta.to.global.u64 %rd2, %rd1;\n"
    "    ld.global.u32 %r1, [gleam_steps];\n"
    "    add.s32 %r2, %r1, 1;\n"
    "    st.global.u32 [gleam_steps], %r2;\n"
    "    st.global.u32 [%rd2], %r2;\n"
    "    ret;\n"
    "}\n";

int main(int argc, char **argv)
{
    int n = 1 << 16;
    int steps = argc > 2 ? atoi(argv[2]) : 8;
    int gate = 0, global = 0, missing = 0, vars = 0;
    for (int i = 3; i < argc; ++i) {
        gate |= strcmp(argv[i], "gate") == 0;
        global |= strcmp(argv[i], "global") == 0;
        missing |= strcmp(argv[i], "missing") == 0;
        vars |= strcmp(argv[i], "vars") == 0;
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

    CUmodule vmod = NULL;
    CUfunction count_fn = NULL;
    CUdeviceptr dcount = 0;
    if (vars) {
        CHECK(cuModuleLoadData(&vmod, vars_ptx));
        CHECK(cuModuleGetFunction(&count_fn, vmod, "gleam_count"));
        CHECK(cuMemAlloc(&dcount, sizeof(uint32_t)));
    }
    void *count_params[] = {&dcount};

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
        if (vars) {
            uint32_t count = 0;
            CHECK(cuLaunchKernel(count_fn, 1, 1, 1, 1, 1, 1, 0, NULL, count_params, NULL));
            CHECK(cuMemcpyDtoH(&count, dcount, sizeof count));
            if (count != 101u + (uint32_t)k) {
                fprintf(stderr, "step %d: the module variable counts %u, not %u\n", k, count,
                        101u + (uint32_t)k);
                ++bad;
            }
            sum = sum * 31u + count;
        }
        printf("step %d checksum 0x%08x\n", k, sum);
        fflush(stdout);
    }

    CHECK(cuMemFree(dx));
    CHECK(cuMemFree(dacc));
    if (vars) {
        CHECK(cuMemFree(dcount));
        CHECK(cuModuleUnload(vmod));
    }
    CHECK(cuModuleUnload(mod));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    printf("{\"example\": \"accumulate\", \"ok\": %s, \"steps\": %d, \"mismatches\": %d}\n",
           bad ? "false" : "true", steps, bad);
    return bad ? 1 : 0;
}
