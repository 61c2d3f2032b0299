/*
 * ptx_reference.c — the kernels of `gleam-peer bench ptx` written in plain C, one
 * thread, for the reference column: the same arithmetic as ptx_kernels.cu over
 * the same sizes. The benchmark compiles this with gcc -O2 and runs it once per
 * round; it prints one JSON object of wall times (seconds, best of REPS) and
 * checksums. Usage: ptx_reference N_VEC SGEMM_DIM REPS
 */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void saxpy(float a, const float *x, float *y, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = a * x[i] + y[i];
}

static float reduce(const float *x, int n)
{
    float acc = 0.0f;
    for (int i = 0; i < n; i++)
        acc += x[i];
    return acc;
}

#define TILE 16
static void sgemm(const float *A, const float *B, float *C, int M, int N, int K)
{
    /* Tiled like the kernel, so the comparison is of the machine, not the algorithm. */
    for (int i = 0; i < M * N; i++)
        C[i] = 0.0f;
    for (int i0 = 0; i0 < M; i0 += TILE)
        for (int k0 = 0; k0 < K; k0 += TILE)
            for (int j0 = 0; j0 < N; j0 += TILE)
                for (int i = i0; i < i0 + TILE && i < M; i++)
                    for (int k = k0; k < k0 + TILE && k < K; k++) {
                        float a = A[i * K + k];
                        for (int j = j0; j < j0 + TILE && j < N; j++)
                            C[i * N + j] += a * B[k * N + j];
                    }
}

static void histogram(const unsigned char *data, unsigned *bins, int n)
{
    for (int b = 0; b < 256; b++)
        bins[b] = 0;
    for (int i = 0; i < n; i++)
        bins[data[i]]++;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s N_VEC SGEMM_DIM REPS\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[1]), d = atoi(argv[2]), reps = atoi(argv[3]);
    if (n <= 0 || d <= 0 || reps <= 0)
        return 2;
    float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
    float *A = malloc(sizeof(float) * (size_t)d * d), *B = malloc(sizeof(float) * (size_t)d * d);
    float *C = malloc(sizeof(float) * (size_t)d * d);
    unsigned char *bytes = malloc((size_t)n);
    unsigned bins[256];
    if (!x || !y || !A || !B || !C || !bytes)
        return 1;
    for (int i = 0; i < n; i++) {
        x[i] = (float)(i % 1000) * 0.001f;
        y[i] = 1.0f;
        bytes[i] = (unsigned char)(i * 2654435761u >> 24);
    }
    for (int i = 0; i < d * d; i++) {
        A[i] = (float)(i % 7) * 0.5f;
        B[i] = (float)(i % 5) * 0.25f;
    }
    double best[4] = {1e30, 1e30, 1e30, 1e30};
    volatile float sink = 0.0f;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        saxpy(2.0f, x, y, n);
        double t1 = now();
        sink += reduce(x, n);
        double t2 = now();
        sgemm(A, B, C, d, d, d);
        double t3 = now();
        histogram(bytes, bins, n);
        double t4 = now();
        double t[4] = {t1 - t0, t2 - t1, t3 - t2, t4 - t3};
        for (int k = 0; k < 4; k++)
            if (t[k] < best[k])
                best[k] = t[k];
    }
    printf("{\"saxpy\": %.9f, \"reduce\": %.9f, \"sgemm\": %.9f, \"histogram\": %.9f, "
           "\"check\": %.3f}\n", best[0], best[1], best[2], best[3], (double)sink + C[0] + bins[0]);
    return 0;
}
