/*
 * spares.c — large buffers kept for reuse (spares.h).
 */
#include "spares.h"

#include <pthread.h>
#include <stdlib.h>

/* Fresh buffers are rounded up to this, so that one freed after a request of
 * a few bytes more or less still fits the next. */
#define GRAIN ((size_t)64 << 10)
#define PAGE ((size_t)4096)

static struct {
    pthread_mutex_t mu;
    void *buf[GL_SPARE_SLOTS];
    size_t cap[GL_SPARE_SLOTS];
    int n;
    uint64_t bytes, reused;
} spares = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The smallest spare that holds need bytes and is at most a quarter larger:
 * a small request never pins a large buffer. */
static void *take(size_t need, size_t *cap)
{
    int best = -1;
    pthread_mutex_lock(&spares.mu);
    for (int i = 0; i < spares.n; i++) {
        size_t c = spares.cap[i];
        if (c >= need && c - need <= need / 4 && (best < 0 || c < spares.cap[best]))
            best = i;
    }
    void *p = NULL;
    if (best >= 0) {
        p = spares.buf[best];
        *cap = spares.cap[best];
        spares.n--;
        spares.buf[best] = spares.buf[spares.n];
        spares.cap[best] = spares.cap[spares.n];
        spares.bytes -= *cap;
        spares.reused++;
    }
    pthread_mutex_unlock(&spares.mu);
    return p;
}

void *gl_spare_alloc(size_t need, size_t *cap)
{
    if (need < GL_SPARE_MIN) {
        *cap = need;
        return malloc(need ? need : 1);
    }
    void *p = take(need, cap);
    if (p)
        return p;
    size_t c = (need + GRAIN - 1) / GRAIN * GRAIN;
    if (posix_memalign(&p, PAGE, c) != 0)
        return NULL;
    *cap = c;
    return p;
}

void gl_spare_free(void *p, size_t cap)
{
    if (p && cap >= GL_SPARE_MIN) {
        pthread_mutex_lock(&spares.mu);
        if (spares.n < GL_SPARE_SLOTS && spares.bytes + cap <= GL_SPARE_BYTES) {
            spares.buf[spares.n] = p;
            spares.cap[spares.n] = cap;
            spares.n++;
            spares.bytes += cap;
            p = NULL;
        }
        pthread_mutex_unlock(&spares.mu);
    }
    free(p);
}

void gl_spare_counts_get(gl_spare_counts *out)
{
    pthread_mutex_lock(&spares.mu);
    out->count = (uint64_t)spares.n;
    out->bytes = spares.bytes;
    out->reused = spares.reused;
    pthread_mutex_unlock(&spares.mu);
}
