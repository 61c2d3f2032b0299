/*
 * pingpong.h — raw socket round-trip references for `gleam-peer bench calls`:
 * what a plain blocking socket costs between two processes, measured in the
 * same run as gleam's waiting calls (peer/bench/pingpong.py runs each side as a
 * process of its own, so the reference crosses processes as the agents do).
 *
 * Ownership: the caller owns `fd` (a connected, blocking stream socket: Unix or
 * TCP with TCP_NODELAY, set by the caller) and closes it; these functions never
 * close it. No global state.
 */
#ifndef GLEAM_PINGPONG_H
#define GLEAM_PINGPONG_H

/* cdef: begin */
/* Answer every msg_size-byte message on `fd` with the same bytes until the peer
 * closes. Returns the messages answered (warm-up included), or -1 on bad
 * arguments or a socket error other than the peer's close. */
long long gl_pingpong_echo(int fd, int msg_size);

/* Mean seconds per round trip of msg_size bytes over `count` sequential
 * exchanges with an echo on `fd`, after an untimed warm-up. Negative on bad
 * arguments or a socket error. */
double gl_pingpong_time(int fd, int count, int msg_size);

/* A relay: every message read from up_fd goes to down_fd and every message
 * read from down_fd back to up_fd, each direction on a thread of its own (as
 * the client agent's uplink and downlink), until either side closes. The
 * chain program -> relay -> echo is the waiting call's path with nothing of
 * gleam on it. Returns the messages relayed toward down_fd, or -1. */
long long gl_pingpong_relay(int up_fd, int down_fd, int msg_size);
/* cdef: end */

#endif /* GLEAM_PINGPONG_H */
