/*
 * ptxfuzz.c — a mutation fuzzer of the PTX loader for sanitizer builds (the
 * hypothesis tests drive the same entry without sanitizers):
 *   make asan && ./ptxfuzz 2000 SEED.ptx ...   (seeds: tests/ptx_corpus)
 * With PTXFUZZ_RUN=1 each mutation changes one digit (an offset, an
 * immediate, a register) and every kernel that still translates runs on a
 * small grid whose only memory is a 4 KiB arena: the interpreter's own checks
 * must catch whatever the mutated code does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx/ptx.h"

static const char *const vocab[] = {"{", "}", "(", ")", "[", "]", ";", ",", "@%p1", ".entry",
                                    ".func", "call.uni", "bra $L__BB0_1;", "0fFFFFFFFF", "-",
                                    "+", ".param .b8 x[4096];", "ret;", "exit;", "%tid.x", "_",
                                    "|", "<", ">", "ld.param.v4.u32", "\n", ".reg .pred %p<3>;"};

/* Runs every kernel of M on one small block: pointer parameters point into
 * a 4 KiB buffer, the only memory it may touch; a short time limit. */
static uint64_t arena[512];
static void run_all(ptx_module *m)
{
    uint64_t params[64];
    for (int k = 0; k < 64; k++)
        params[k] = (uint64_t)(uintptr_t)arena + (uint64_t)(k % 8) * 64;
    uint64_t ranges[2] = {(uint64_t)(uintptr_t)arena, sizeof arena};
    for (size_t k = 0; k < ptx_module_nkernels(m); k++) {
        unsigned grid[3] = {2, 1, 1}, block[3] = {64, 1, 1};
        char err[256];
        uint64_t insns;
        setenv("GLEAM_PTX_TIMEOUT_S", "0.02", 1);
        gl_ptx_run(m, ptx_module_kernel_name(m, k), grid, block, 256, params, sizeof params,
                   ranges, 1, 1, &insns, err, sizeof err);
    }
}

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 1000;
    int run = getenv("PTXFUZZ_RUN") != NULL;
    unsigned seed = 12345;
    for (int a = 2; a < argc; a++) {
        FILE *f = fopen(argv[a], "rb");
        if (!f)
            continue;
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        char *orig = malloc((size_t)n);
        if (fread(orig, 1, (size_t)n, f) != (size_t)n)
            return 2;
        fclose(f);
        char *buf = malloc((size_t)n * 3 + 1024);
        long ok = 0;
        for (long it = 0; it < iters; it++) {
            size_t len = (size_t)n;
            memcpy(buf, orig, len);
            int muts = run ? 1 : 1 + rand_r(&seed) % 6;
            for (int k = 0; k < muts; k++) {
                size_t at = len ? (size_t)rand_r(&seed) % len : 0;
                int kind = run ? 4 : rand_r(&seed) % 4;
                if (kind == 4) { /* a digit changed: offsets, immediates, registers */
                    while (at < len && (buf[at] < '0' || buf[at] > '9'))
                        at++;
                    if (at < len)
                        buf[at] = (char)('0' + rand_r(&seed) % 10);
                } else if (kind == 0) { /* delete */
                    size_t d = 1 + (size_t)rand_r(&seed) % 100;
                    if (at + d > len) d = len - at;
                    memmove(buf + at, buf + at + d, len - at - d);
                    len -= d;
                } else if (kind == 1 && len + 64 < (size_t)n * 3) { /* insert a token */
                    const char *t = vocab[rand_r(&seed) % (sizeof vocab / sizeof vocab[0])];
                    size_t tl = strlen(t);
                    memmove(buf + at + tl, buf + at, len - at);
                    memcpy(buf + at, t, tl);
                    len += tl;
                } else if (kind == 2 && len) {
                    buf[at] ^= (char)(1 + rand_r(&seed) % 255);
                } else {
                    len = at;
                }
            }
            char err[256];
            ptx_module *m;
            if (ptx_module_load(buf, len, &m, err, sizeof err) == 0) {
                ok++;
                if (run)
                    run_all(m);
                ptx_module_free(m);
            }
        }
        printf("%s: %ld mutations, %ld translated\n", argv[a], iters, ok);
        free(buf);
        free(orig);
    }
    return 0;
}
