/* ranges.c — see ranges.h. */
#include "ranges.h"

#include <stdlib.h>
#include <string.h>

size_t gl_ranges_upper(const gl_ranges *t, uint64_t p)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->r[mid].base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int gl_range_holds(const gl_range *r, uint64_t p, uint64_t size)
{
    return p >= r->base && size <= r->size && p - r->base <= r->size - size;
}

const gl_range *gl_ranges_find(const gl_ranges *t, uint64_t p, uint64_t size)
{
    size_t i = gl_ranges_upper(t, p);
    return i > 0 && gl_range_holds(&t->r[i - 1], p, size) ? &t->r[i - 1] : NULL;
}

long gl_ranges_index_of_base(const gl_ranges *t, uint64_t base)
{
    size_t i = gl_ranges_upper(t, base);
    return i > 0 && t->r[i - 1].base == base ? (long)(i - 1) : -1;
}

int gl_ranges_reserve(gl_ranges *t)
{
    if (t->n < t->cap)
        return 0;
    size_t cap = t->cap ? t->cap * 2 : 64;
    gl_range *r = realloc(t->r, cap * sizeof *r);
    if (r == NULL)
        return -1;
    t->r = r;
    t->cap = cap;
    return 0;
}

int gl_ranges_insert(gl_ranges *t, size_t at, gl_range r)
{
    if (gl_ranges_reserve(t) != 0)
        return -1;
    memmove(t->r + at + 1, t->r + at, (t->n - at) * sizeof *t->r);
    t->r[at] = r;
    t->n++;
    return 0;
}

void gl_ranges_remove(gl_ranges *t, size_t at)
{
    memmove(t->r + at, t->r + at + 1, (t->n - at - 1) * sizeof *t->r);
    t->n--;
}

void gl_ranges_free(gl_ranges *t)
{
    free(t->r);
    t->r = NULL;
    t->n = t->cap = 0;
}
