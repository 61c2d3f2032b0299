/*
 * dplocal.h — the in-process link under a local pair of streams (dpstream.h,
 * gl_stream_pair): two bounded queues of frames, one per direction, between
 * the two ends of a session an agent serves for its own program. Nothing
 * leaves the process, so nothing is sealed; a frame is copied once, into the
 * queue, and handed to the receiver in place.
 *
 * Sides are 0 and 1; a side sends into the other's queue and receives from
 * its own. The link is closed by either side (gl_llink_close) or by either
 * side's release; the other side's receive then drains what is queued and
 * returns 0, its send returns GL_STREAM_E_CLOSED. Any number of threads may
 * send on a side; one thread receives on it.
 */
#ifndef GLEAM_DPLOCAL_H
#define GLEAM_DPLOCAL_H

#include <stddef.h>
#include <stdint.h>

typedef struct gl_llink gl_llink;

/* A link both sides hold (each releases once); NULL when out of memory. A
 * sender waits while its peer's queue holds max_queued bytes or more; no frame
 * is longer than max_frame. */
gl_llink *gl_llink_new(uint64_t max_queued, size_t max_frame);
/* Queues one frame, the parts' concatenation (total bytes, > 0): 0, or
 * GL_STREAM_E_CLOSED / GL_STREAM_E_NOMEM. */
int gl_llink_send(gl_llink *l, int side, const uint8_t *const *parts, const size_t *lens,
                  int nparts, size_t total);
/* The next frame for `side`, valid until its next receive or its release: its
 * length, or 0 once the link is closed and the queue empty. */
int64_t gl_llink_recv(gl_llink *l, int side, uint8_t **out);
void gl_llink_close(gl_llink *l);
/* `side` lets go: the link closes, and is freed with the second release. */
void gl_llink_release(gl_llink *l, int side);

#endif
