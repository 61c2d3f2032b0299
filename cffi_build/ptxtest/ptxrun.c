/*
 * ptxrun.c — standalone harness of gleam's PTX interpreter (not part of the
 * module build): loads a PTX file and runs SAXPY and a tiled SGEMM from
 * k.ptx (nvcc -ptx -O3 k.cu), checks the results against C, and prints
 * thread-instructions per second on one worker thread.
 *   make -C cffi_build/ptxtest && ./cffi_build/ptxtest/ptxrun cffi_build/ptxtest/k.ptx
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ptx/ptx.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)sz + 1);
    if (fread(b, 1, (size_t)sz, f) != (size_t)sz) { perror("read"); exit(2); }
    fclose(f);
    b[sz] = 0;
    *n = (size_t)sz;
    return b;
}

static int fails;
#define CHECK(c, ...) do { if (!(c)) { fails++; printf("FAIL: " __VA_ARGS__); printf("\n"); } } while (0)

static int run(ptx_module *m, const char *name, unsigned gx, unsigned gy, unsigned bx, unsigned by,
               unsigned shared, const void *params, size_t plen, uint64_t *ranges, size_t nr,
               unsigned threads, double *secs, uint64_t *insns)
{
    unsigned g[3] = {gx, gy, 1}, b[3] = {bx, by, 1};
    char err[256];
    double t0 = now();
    int rc = gl_ptx_run(m, name, g, b, shared, params, plen, ranges, nr, threads, insns, err,
                        sizeof err);
    *secs = now() - t0;
    if (rc)
        printf("%s: rc %d: %s\n", name, rc, err);
    return rc;
}

int main(int argc, char **argv)
{
    size_t n;
    char *text = slurp(argc > 1 ? argv[1] : "k.ptx", &n);
    char err[256];
    ptx_module *m = gl_ptx_load(text, n, err, sizeof err);
    if (!m) { printf("load: %s\n", err); return 1; }
    unsigned threads = argc > 2 ? (unsigned)atoi(argv[2]) : 1;
    double secs;
    uint64_t insns;
    /* SAXPY */
    {
        int N = 1 << 22;
        float *x = malloc(N * 4), *y = malloc(N * 4), a = 2.5f;
        for (int i = 0; i < N; i++) x[i] = (float)i, y[i] = 1.0f;
        uint8_t p[24];
        memcpy(p, &N, 4); memcpy(p + 4, &a, 4);
        uint64_t xp = (uintptr_t)x, yp = (uintptr_t)y;
        memcpy(p + 8, &xp, 8); memcpy(p + 16, &yp, 8);
        uint64_t r[4] = {xp, (uint64_t)N * 4, yp, (uint64_t)N * 4};
        if (run(m, "saxpy", (N + 255) / 256, 1, 256, 1, 0, p, 24, r, 2, threads, &secs, &insns) == 0) {
            int bad = 0;
            for (int i = 0; i < N; i++) bad += y[i] != fmaf(a, (float)i, 1.0f);
            CHECK(bad == 0, "saxpy: %d wrong", bad);
            printf("saxpy   N=%d threads=%u: %.3f s, %llu thread-insns, %.1f M thread-insns/s\n", N,
                   threads, secs, (unsigned long long)insns, insns / secs / 1e6);
        } else fails++;
        free(x); free(y);
    }
    /* SGEMM */
    {
        int M = 250, N2 = 256, K = 230;
        float *A = malloc(M * K * 4), *B = malloc(K * N2 * 4), *C = calloc(M * N2, 4);
        for (int i = 0; i < M * K; i++) A[i] = (float)((i * 7) % 13) - 6;
        for (int i = 0; i < K * N2; i++) B[i] = (float)((i * 5) % 11) - 5;
        uint8_t p[40];
        memcpy(p, &M, 4); memcpy(p + 4, &N2, 4); memcpy(p + 8, &K, 4);
        uint64_t ap = (uintptr_t)A, bp = (uintptr_t)B, cp = (uintptr_t)C;
        memcpy(p + 16, &ap, 8); memcpy(p + 24, &bp, 8); memcpy(p + 32, &cp, 8);
        uint64_t r[6] = {ap, (uint64_t)M * K * 4, bp, (uint64_t)K * N2 * 4, cp, (uint64_t)M * N2 * 4};
        if (run(m, "sgemm", (N2 + 15) / 16, (M + 15) / 16, 16, 16, 0, p, 40, r, 3, threads, &secs, &insns) == 0) {
            int bad = 0;
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N2; j++) {
                    float s = 0;
                    for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N2 + j];
                    bad += fabsf(s - C[i * N2 + j]) > 1e-3f;
                }
            CHECK(bad == 0, "sgemm: %d wrong", bad);
            printf("sgemm   %dx%dx%d threads=%u: %.3f s, %llu thread-insns, %.1f M thread-insns/s\n",
                   M, N2, K, threads, secs, (unsigned long long)insns, insns / secs / 1e6);
        } else fails++;
        free(A); free(B); free(C);
    }
    /* reduction: shfl, shared, a call, atomics, vote */
    {
        int N = 100000;
        float *x = malloc(N * 4), out[2] = {0, 0};
        double want = 0;
        for (int i = 0; i < N; i++) x[i] = (float)(i % 7) * 0.5f, want += x[i];
        uint8_t p[20];
        uint64_t xp = (uintptr_t)x, op = (uintptr_t)out;
        memcpy(p, &xp, 8); memcpy(p + 8, &op, 8); memcpy(p + 16, &N, 4);
        uint64_t r[4] = {xp, (uint64_t)N * 4, op, 8};
        if (r[2] < r[0]) { uint64_t t0 = r[0], t1 = r[1]; r[0] = r[2]; r[1] = r[3]; r[2] = t0; r[3] = t1; }
        if (run(m, "red", 1, 1, 256, 1, 8 * 4, p, 20, r, 2, threads, &secs, &insns) == 0) {
            /* red adds s + f(s, 3) where f = sum sin(s*i): compare loosely */
            double s = want, f = sin(0.0) + sin(s) + sin(2 * s);
            CHECK(fabs(out[0] - (s + f)) < 1e-2 * fabs(s), "red: got %f want %f", out[0], s + f);
        } else fails++;
        free(x);
    }
    gl_ptx_unload(m);
    free(text);
    printf(fails ? "%d FAILED\n" : "ok\n", fails);
    return fails != 0;
}
