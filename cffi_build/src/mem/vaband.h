/*
 * vaband.h — where a backend puts a new session's virtual range.
 *
 * A session that moves to another server keeps its range (docs/consistency.md),
 * so the range must be free there too. A range the kernel or the driver picks
 * lies among that process's own libraries and heaps, which are where every
 * other process has its own (measured here: one migration in five between
 * agents on one machine found the range taken). New ranges therefore go to a
 * random 1 GiB-aligned place in a band far from where Linux maps anything
 * (16-80 TiB: the heap sits by the program, near 85 TiB for PIE, and mmap grows
 * down from 128 TiB); a backend tries GL_VA_BAND_TRIES places, then lets the
 * kernel or the driver choose.
 *
 * No state; the randomness comes from getrandom().
 */
#ifndef GLEAM_VABAND_H
#define GLEAM_VABAND_H

#include <stdint.h>

#define GL_VA_BAND_TRIES 16
#define GL_VA_BAND_LO (16ull << 40)
#define GL_VA_BAND_HI (80ull << 40)

static inline int gl_va_in_band(uint64_t addr)
{
    return addr >= GL_VA_BAND_LO && addr < GL_VA_BAND_HI;
}

/* A random place in the band for size bytes, or 0 when there is none (size too
 * large, or no randomness). */
uint64_t gl_va_band_pick(uint64_t size);

/* SIZE bytes of zeroed, readable and writable memory mapped at a place in the
 * band (GL_VA_BAND_TRIES tries), or NULL. Freed with munmap. */
void *gl_va_band_map(uint64_t size);

#endif
