/*
 * spares.h — large buffers kept for reuse instead of going back to the kernel.
 *
 * The data plane holds every payload in a buffer of its own: the client agent
 * reads each envelope into a journal block (jlog.h), the serving agent copies
 * each cacheable payload into a shelf blob (shelf.h). Both are about a copy
 * chunk (1 MiB), and both are freed as fast as new ones come: journal blocks
 * once the server has answered, shelf blobs as the full RAM tier evicts one
 * for each new one. A buffer that size freed to malloc is unmapped, and the
 * next one pays for fresh pages: a fault and a zeroed page per 4 KiB, which
 * perf showed costing each agent as much CPU as sealing or hashing the bytes
 * (docs/benchmarks.md, "Host-to-device"). Freed large buffers therefore wait
 * here, process-wide and bounded in count and bytes, for the next request of
 * nearly their size.
 *
 * Past the warm bound (GL_SPARE_MIB), a freed buffer is kept lazily: its pages
 * are given to the kernel with MADV_FREE, which takes them back only when it
 * needs memory. A client agent's journal frees half its bound (512 MiB) at
 * each checkpoint and fills it again from the next copies; kept lazily, those
 * copies land in pages still mapped instead of paying a fault and a zeroed
 * page per 4 KiB (perf: a fifth of the client agent's CPU per GB). The memory
 * shows in the process's RSS (as LazyFree in smaps) until the kernel takes it.
 *
 * A reused buffer still holds its last owner's bytes (or zeros, where the
 * kernel took a lazy page back): every user writes what
 * it reads before reading it (a block's or blob's length never covers bytes
 * it did not write), as with any malloc'd memory.
 *
 * Threads: any; one mutex, held for a scan of at most GL_SPARE_SLOTS +
 * GL_SPARE_LAZY_SLOTS entries (and a madvise when a buffer goes lazy).
 */
#ifndef GLEAM_SPARES_H
#define GLEAM_SPARES_H

#include <stddef.h>
#include <stdint.h>

/* At least need bytes, uninitialised, page-aligned from GL_SPARE_MIN bytes up
 * (so a user can start its bytes on a page and write them with O_DIRECT); *cap:
 * how many the buffer holds (hand it back to gl_spare_free). NULL: no memory. */
void *gl_spare_alloc(size_t need, size_t *cap);
/* Keeps p (cap bytes, from gl_spare_alloc) for a later request, or frees it. */
void gl_spare_free(void *p, size_t cap);

/* cdef: begin */
enum {
    GL_SPARE_MIN = 262144, /* 256 KiB; smaller requests: malloc's own bins serve them */
    GL_SPARE_SLOTS = 64,
    GL_SPARE_MIB = 64,     /* the most the warm spares hold */
    GL_SPARE_LAZY_SLOTS = 1024,
    GL_SPARE_LAZY_MIB = 1024 /* the most the lazy spares hold (a journal's default bound) */
};

typedef struct {
    uint64_t count, bytes; /* warm buffers waiting, and their bytes */
    uint64_t lazy, lazy_bytes; /* lazy ones (their pages the kernel's to take back) */
    uint64_t reused;       /* requests served by one since the process started */
} gl_spare_counts;

void gl_spare_counts_get(gl_spare_counts *out);
/* cdef: end */

#define GL_SPARE_BYTES ((uint64_t)GL_SPARE_MIB << 20)
#define GL_SPARE_LAZY_BYTES ((uint64_t)GL_SPARE_LAZY_MIB << 20)

#endif
