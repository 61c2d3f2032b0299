/*
 * gl_span.h — how far a pitched copy reaches: ROWS rows of WIDTH bytes, each
 * PITCH bytes after the one before, touch [start, start + span) with
 * span = PITCH * (ROWS - 1) + WIDTH (0 for no rows or an empty row).
 *
 * Both sides check a 2D copy's whole span against the session's memory
 * before touching it, so the sum must not wrap: a wrapped span would let a
 * huge pitch pass the check. With pitch >= width >= 1 the span bounds the
 * number of rows too, so a copy's work is bounded by the memory it names. Header-only; the interposer, the generated
 * dispatch and the backends share it.
 */
#ifndef GLEAM_SPAN_H
#define GLEAM_SPAN_H

#include <stdint.h>

/* 0 and *out = the span; -1 if it does not fit in 64 bits, or if rows
 * overlap (more than one row and a pitch under the width: CUDA refuses it,
 * and without the rule a zero pitch would let any number of rows pass a check
 * of one row's bytes). */
static inline int gl_span_bytes(uint64_t pitch, uint64_t width, uint64_t rows, uint64_t *out)
{
    uint64_t lead;

    if (rows > 1 && pitch < width)
        return -1;
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
