/*
 * gl_span.h — how far a pitched copy reaches: ROWS rows of WIDTH bytes, each
 * PITCH bytes after the one before, touch [start, start + span) with
 * span = PITCH * (ROWS - 1) + WIDTH (0 for no rows or an empty row).
 *
 * Both sides check a 2D copy's whole span against the session's memory
 * before touching it, so the sum must not wrap: a wrapped span would let a
 * huge pitch pass the check. Header-only; the interposer, the generated
 * dispatch and the backends share it.
 */
#ifndef GLEAM_SPAN_H
#define GLEAM_SPAN_H

#include <stdint.h>

/* 0 and *out = the span, or -1 if it does not fit in 64 bits. */
static inline int gl_span_bytes(uint64_t pitch, uint64_t width, uint64_t rows, uint64_t *out)
{
    uint64_t lead;

    if (rows == 0 || width == 0) {
        *out = 0;
        return 0;
    }
    if (__builtin_mul_overflow(pitch, rows - 1, &lead) ||
        __builtin_add_overflow(lead, width, out))
        return -1;
    return 0;
}

#endif
