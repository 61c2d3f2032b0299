/*
 * pingpong.h — raw socket round-trip references for `gleam-peer bench calls`:
 * what a plain blocking socket pair costs, measured in the same run as
 * gleam's waiting calls.
 */
#ifndef GLEAM_PINGPONG_H
#define GLEAM_PINGPONG_H

/* Mean seconds per round trip of msg_size bytes over `count` sequential
 * exchanges with an echo thread: over a Unix socket pair (unix_socket != 0)
 * or a TCP loopback connection with TCP_NODELAY. Negative on failure. */
/* cdef: begin */
double gl_pingpong_rtt(int unix_socket, int count, int msg_size);
/* cdef: end */

#endif /* GLEAM_PINGPONG_H */
