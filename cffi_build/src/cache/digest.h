/*
 * digest.h — the blob cache's content address: BLAKE3 (32 bytes, unkeyed).
 *
 * Why BLAKE3 and not SHA-256: the cache hashes every byte of every large
 * host-to-device copy on both agents, and SHA-256 with SHA-NI (~2 GB/s per
 * core) cost more CPU than the whole copy path's budget. BLAKE3's chunks are
 * independent, so 8 (AVX2) or 16 (AVX-512) of them run in the lanes of one
 * vector; like SHA-256, 128-bit security against collisions.
 *
 * The vector width is picked at the first call from what the CPU has
 * (portable C otherwise); gl_content_digest_use may pin one. Every width
 * gives the same digest. No allocation; re-entrant.
 */
#ifndef GLEAM_DIGEST_H
#define GLEAM_DIGEST_H

#include <stddef.h>
#include <stdint.h>

/* cdef: begin */
/* BLAKE3 of DATA[0..LEN) into OUT[32]. */
void gl_content_digest(const uint8_t *data, size_t len, uint8_t *out);

/* The implementation in use: "avx512", "avx2" or "portable". */
const char *gl_content_digest_kind(void);

/* The I-th implementation this build has, widest first (whether or not this
 * CPU runs it); NULL past the last. */
const char *gl_content_digest_kind_at(int i);

/* Pins the implementation KIND (one of the above) for the whole process:
 * 0, or -1 if this CPU cannot run it (nothing changes). For tests and
 * benchmarks. */
int gl_content_digest_use(const char *kind);
/* cdef: end */

#endif
