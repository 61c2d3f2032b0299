/* hostspeed.c — see hostspeed.h. Ownership: the three matrices are malloc'd
 * and freed here; nothing outlives the call. */
#define _POSIX_C_SOURCE 199309L
#include "hostspeed.h"

#include <stdlib.h>
#include <time.h>

static double now_seconds(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0.0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* c += a * b, row-major, i-k-j order so the inner loop streams rows and the
 * compiler can vectorise it: roughly what a simple host kernel achieves. */
static void sgemm(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++) {
        float *crow = c + (size_t)i * (size_t)n;
        for (int k = 0; k < n; k++) {
            const float aik = a[(size_t)i * (size_t)n + (size_t)k];
            const float *brow = b + (size_t)k * (size_t)n;
            for (int j = 0; j < n; j++) crow[j] += aik * brow[j];
        }
    }
}

double gl_host_sgemm_gflops(int n, double min_seconds) {
    if (n < 16 || n > 1024 || !(min_seconds >= 0.0)) return -1.0;
    size_t count = (size_t)n * (size_t)n;
    float *a = malloc(count * sizeof *a);
    float *b = malloc(count * sizeof *b);
    float *c = calloc(count, sizeof *c);
    double rate = -2.0;
    if (a != NULL && b != NULL && c != NULL) {
        for (size_t i = 0; i < count; i++) {
            a[i] = (float)(i % 7) * 0.25f;
            b[i] = (float)(i % 5) * 0.5f;
        }
        sgemm(n, a, b, c); /* warm caches and page in the buffers */
        long runs = 0;
        double start = now_seconds(), elapsed = 0.0;
        do {
            sgemm(n, a, b, c);
            runs++;
            elapsed = now_seconds() - start;
        } while (elapsed < min_seconds);
        /* Read a result so the products cannot be optimised away. */
        volatile float sink = c[count / 2];
        (void)sink;
        rate = elapsed > 0.0 ? 2.0 * (double)n * (double)n * (double)n * (double)runs / elapsed / 1e9
                             : -3.0;
    }
    free(a);
    free(b);
    free(c);
    return rate;
}
