/*
 * gl_ring.h — the hand-over ring: how a large envelope goes from the program
 * to its client agent through shared memory instead of the Unix socket.
 *
 * Why: read off the socket, every byte of a copy crossed the kernel twice
 * (the program's send, the agent's read), in pieces of the socket's buffer,
 * with a sleep and a wake-up of each side per piece. Through the ring the
 * program copies the envelope once into memory both map, and the agent copies
 * it once into its journal block; the socket carries a 16-byte note in its
 * place, so the order of everything the program sends stays the socket's.
 * Measured (docs/benchmarks.md): the program's CPU per GB of a copy fell by a
 * third; the client agent's stayed, its copy out taking the place of the
 * socket's kernel time.
 *
 * The agent creates the ring (a sealed memfd: neither side can shrink it
 * under the other) and passes its descriptor with the HELLO (SCM_RIGHTS). A
 * program without it, or an envelope smaller than GL_RING_MIN or larger than
 * half the ring, uses the socket as before.
 *
 * The memfd: one page of head (gl_ring_head), then `size` bytes of data. The
 * program writes an envelope at stream position `at` (data[at % size], never
 * across the end: it skips to the next lap instead), then sends a RING
 * envelope whose body is the note (u64 at, u64 len). The agent copies the
 * envelope out, then stores `released` = at + len; the program writes over
 * nothing the agent has not released.
 *
 * Trust: the agent reads the ring's bytes once, into its own memory, and
 * checks that copy (the program may write the ring at any time); it writes
 * the head's counters and reads nothing of the head but `waiting`. Only the
 * program and its own agent map the ring: no other session's bytes pass it.
 */
#ifndef GLEAM_RING_H
#define GLEAM_RING_H

#include <stdint.h>

/* cdef: begin */
#define GL_RING_HEAD_SIZE 4096
/* Envelopes from this size go through the ring: below it the socket's copy
 * is cheap and a note would cost as much as the bytes. */
#define GL_RING_MIN 65536
/* The smallest ring's data: it holds four of the smallest envelopes it takes
 * (and two of the largest, half its size). */
#define GL_RING_SMALLEST (4 * GL_RING_MIN)
/* The RING envelope's body: u64 at, u64 len (little-endian). */
#define GL_RING_NOTE_SIZE 16

typedef struct {
    uint64_t released;   /* the agent: stream bytes it has copied out (atomic) */
    uint32_t wake;       /* futex word: the agent bumps it after a release the program waits for */
    uint32_t waiting;    /* the program: it sleeps on wake until released moves */
} gl_ring_head;
/* cdef: end */

#endif /* GLEAM_RING_H */
