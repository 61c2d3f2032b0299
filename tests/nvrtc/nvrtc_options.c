/*
 * nvrtc_options.c — what NVRTC answers a compile with the options given in argv (NVRTC
 * only, no device): one JSON line with the compile's result, the cubin's size, what
 * nvrtcGetCUBIN wrote ("ptx", "elf" or "none"), whether that is byte for byte the
 * program's PTX, the PTX's .target and the log. tests/test_nvrtc_ptx.py runs it with and
 * without gleam's libgleam_nvrtc.so preloaded. Built with -DNVRTC_PROBE_LIBRARY it is a
 * shared library whose nvrtc_probe(argc, argv) does the same, for a process that reaches
 * NVRTC only through a library it opened with RTLD_LOCAL (Python's ctypes).
 */
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *SOURCE =
    "extern \"C\" __global__ void bump(float *x) { x[threadIdx.x] += 1.0f; }\n";

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

#ifdef NVRTC_PROBE_LIBRARY
#define PROBE __attribute__((visibility("default"))) int nvrtc_probe
#else
#define PROBE int main
#endif

PROBE(int argc, char **argv)
{
    nvrtcProgram prog;
    if (nvrtcCreateProgram(&prog, SOURCE, "bump.cu", 0, NULL, NULL) != NVRTC_SUCCESS)
        return 2;
    nvrtcResult compiled = nvrtcCompileProgram(prog, argc - 1, (const char *const *)argv + 1);
    size_t log_size = 0, cubin_size = 0, ptx_size = 0;
    nvrtcGetProgramLogSize(prog, &log_size);
    char *log = calloc(log_size + 1, 1);
    if (log == NULL || nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
        return 2;
    nvrtcResult sized = nvrtcGetCUBINSize(prog, &cubin_size);
    char *cubin = calloc(cubin_size + 1, 1), *ptx = NULL, target[64] = "";
    nvrtcResult got = cubin != NULL && cubin_size > 0 ? nvrtcGetCUBIN(prog, cubin) : NVRTC_SUCCESS;
    const char *kind = cubin_size == 0 ? "none"
                       : memcmp(cubin, "\x7f" "ELF", 4) == 0 ? "elf" : "ptx";
    int same = 0;
    if (nvrtcGetPTXSize(prog, &ptx_size) == NVRTC_SUCCESS && ptx_size > 1 &&
        (ptx = calloc(ptx_size, 1)) != NULL && nvrtcGetPTX(prog, ptx) == NVRTC_SUCCESS) {
        same = ptx_size == cubin_size && memcmp(ptx, cubin, ptx_size) == 0;
        const char *t = strstr(ptx, ".target ");
        if (t != NULL)
            sscanf(t + 8, "%63s", target);
    }
    printf("{\"compile\": %d, \"cubin_size_result\": %d, \"cubin_result\": %d, "
           "\"cubin_size\": %zu, \"cubin\": \"%s\", \"cubin_is_ptx\": %s, \"target\": ",
           (int)compiled, (int)sized, (int)got, cubin_size, kind, same ? "true" : "false");
    json_string(target);
    printf(", \"log\": ");
    json_string(log);
    printf("}\n");
    nvrtcDestroyProgram(&prog);
    free(log);
    free(cubin);
    free(ptx);
    fflush(stdout);
    return 0;
}
