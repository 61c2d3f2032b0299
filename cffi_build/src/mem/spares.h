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
 * A reused buffer still holds its last owner's bytes: every user writes what
 * it reads before reading it (a block's or blob's length never covers bytes
 * it did not write), as with any malloc'd memory.
 *
 * Threads: any; one mutex, held for a scan of at most GL_SPARE_SLOTS entries.
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
    GL_SPARE_MIB = 64      /* the most the spares hold */
};

typedef struct {
    uint64_t count, bytes; /* buffers waiting, and their bytes */
    uint64_t reused;       /* requests served by one since the process started */
} gl_spare_counts;

void gl_spare_counts_get(gl_spare_counts *out);
/* cdef: end */

#define GL_SPARE_BYTES ((uint64_t)GL_SPARE_MIB << 20)

#endif
