/*
 * spares.c — large buffers kept for reuse (spares.h).
 */
#include "spares.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Fresh buffers are rounded up to this, so that one freed after a request of
 * a few bytes more or less still fits the next. */
#define GRAIN ((size_t)64 << 10)
#define PAGE ((size_t)4096)

/* One tier of spares: up to `slots` buffers and `limit` bytes. */
typedef struct {
    void **buf;
    size_t *cap;
    int n, slots;
    uint64_t bytes, limit;
} tier;

static void *warm_buf[GL_SPARE_SLOTS], *lazy_buf[GL_SPARE_LAZY_SLOTS];
static size_t warm_cap[GL_SPARE_SLOTS], lazy_cap[GL_SPARE_LAZY_SLOTS];

static struct {
    pthread_mutex_t mu;
    tier warm, lazy;
    uint64_t reused;
} spares = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .warm = {warm_buf, warm_cap, 0, GL_SPARE_SLOTS, 0, GL_SPARE_BYTES},
    .lazy = {lazy_buf, lazy_cap, 0, GL_SPARE_LAZY_SLOTS, 0, GL_SPARE_LAZY_BYTES},
};

/* The smallest spare of t that holds need bytes and is at most a quarter
 * larger (a small request never pins a large buffer), of equal ones the one
 * freed last: its lines are the likeliest still in the CPU's caches. A tier
 * keeps its spares in the order they were freed; under the mutex. */
static void *take_from(tier *t, size_t need, size_t *cap)
{
    int best = -1;
    for (int i = 0; i < t->n; i++) {
        size_t c = t->cap[i];
        if (c >= need && c - need <= need / 4 && (best < 0 || c <= t->cap[best]))
            best = i;
    }
    if (best < 0)
        return NULL;
    void *p = t->buf[best];
    *cap = t->cap[best];
    t->n--;
    memmove(&t->buf[best], &t->buf[best + 1], (size_t)(t->n - best) * sizeof t->buf[0]);
    memmove(&t->cap[best], &t->cap[best + 1], (size_t)(t->n - best) * sizeof t->cap[0]);
    t->bytes -= *cap;
    spares.reused++;
    return p;
}

/* Keeps p in t when it has room; under the mutex. */
static int keep_in(tier *t, void *p, size_t cap)
{
    if (t->n >= t->slots || t->bytes + cap > t->limit)
        return 0;
    t->buf[t->n] = p;
    t->cap[t->n] = cap;
    t->n++;
    t->bytes += cap;
    return 1;
}

static void *take(size_t need, size_t *cap)
{
    pthread_mutex_lock(&spares.mu);
    void *p = take_from(&spares.warm, need, cap);
    if (!p)
        p = take_from(&spares.lazy, need, cap);
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
        int kept = keep_in(&spares.warm, p, cap);
        /* Past the warm bound the kernel may take the pages back whenever it
         * needs memory (their bytes become zeros then, and the next user pays
         * the faults after all); until then the next user pays nothing. A
         * buffer from gl_spare_alloc is whole pages (page-aligned, its cap a
         * multiple of GRAIN). */
        if (!kept && madvise(p, cap, MADV_FREE) == 0)
            kept = keep_in(&spares.lazy, p, cap);
        pthread_mutex_unlock(&spares.mu);
        if (kept)
            return;
    }
    free(p);
}

void gl_spare_counts_get(gl_spare_counts *out)
{
    pthread_mutex_lock(&spares.mu);
    out->count = (uint64_t)spares.warm.n;
    out->bytes = spares.warm.bytes;
    out->lazy = (uint64_t)spares.lazy.n;
    out->lazy_bytes = spares.lazy.bytes;
    out->reused = spares.reused;
    pthread_mutex_unlock(&spares.mu);
}
