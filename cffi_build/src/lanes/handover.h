/*
 * handover.h — the client agent's end of the hand-over ring (gl_ring.h): the
 * memfd it creates for a session's program, and the copy of each envelope the
 * program left there into a journal block of the agent's own.
 *
 * Threads: create from any; the rest only on the session's uplink thread.
 */
#ifndef GLEAM_HANDOVER_H
#define GLEAM_HANDOVER_H

#include <stddef.h>
#include <stdint.h>

#include "gl_ring.h"

/* cdef: begin */
/* A sealed memfd (neither side can shrink or grow it) of GL_RING_HEAD_SIZE +
 * size bytes, size a multiple of the page and at least GL_RING_SMALLEST; the
 * caller passes it to the program and to gl_pump_ring, then closes it.
 * Returns the descriptor, or -errno. */
int gl_handover_create(uint64_t size);
/* cdef: end */

typedef struct {
    gl_ring_head *head;  /* NULL: no ring */
    uint8_t *data;
    uint64_t size;
    uint64_t next;       /* the stream position past the last envelope taken */
} gl_handover;

/* Maps the memfd fd (from gl_handover_create; the caller keeps fd): 0 or -errno. */
int gl_handover_map(gl_handover *r, int fd);
void gl_handover_unmap(gl_handover *r);
/* Where the envelope a RING note names lies: 0 and *src, *len (inside the
 * ring, past everything taken before), or -1 for a note no program of ours
 * writes (no ring, out of the ring, behind the last one, across the end). */
int gl_handover_locate(const gl_handover *r, const uint8_t note[GL_RING_NOTE_SIZE],
                       const uint8_t **src, uint64_t *at, uint64_t *len);
/* The envelope ending at stream position end is copied out: the program may
 * write over it (and is woken when it waits for the room). */
void gl_handover_release(gl_handover *r, uint64_t end);

#endif /* GLEAM_HANDOVER_H */
