/*
 * ranges.h — a sorted table of non-overlapping [base, base + size) ranges of
 * device addresses: the live allocations of a session, kept by the interposer
 * (to answer pointer checks and cuMemAlloc at once) and by the executor (to
 * check every pointer a batch names). Lookups are binary searches; the caller
 * keeps the table's invariants and does its own locking.
 */
#ifndef GLEAM_RANGES_H
#define GLEAM_RANGES_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t base, size;
    uintptr_t tag; /* the owner's use: a flag, a module handle */
} gl_range;

typedef struct {
    gl_range *r;
    size_t n, cap;
} gl_ranges;

/* Index of the first range whose base is greater than p (0 .. n). */
size_t gl_ranges_upper(const gl_ranges *t, uint64_t p);
/* The range holding [p, p + size), or NULL. */
const gl_range *gl_ranges_find(const gl_ranges *t, uint64_t p, uint64_t size);
/* Index of the range that starts exactly at base, or -1. */
long gl_ranges_index_of_base(const gl_ranges *t, uint64_t base);
/* Whether [p, p + size) lies inside r (its end included), without overflow. */
int gl_range_holds(const gl_range *r, uint64_t p, uint64_t size);
/* Makes room for one more range; -1 when out of memory (the table is unchanged). */
int gl_ranges_reserve(gl_ranges *t);
/* Inserts at index `at` (which keeps the order); -1 when out of memory. */
int gl_ranges_insert(gl_ranges *t, size_t at, gl_range r);
void gl_ranges_remove(gl_ranges *t, size_t at);
void gl_ranges_free(gl_ranges *t);

#endif /* GLEAM_RANGES_H */
