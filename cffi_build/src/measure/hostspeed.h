/* hostspeed.h — measure the FP32 speed of this CPU as a software device.
 *
 * The host backend's "GPU" is the CPU; peers rank it by this figure, so it
 * must come from running code, not from a table. No global state; the
 * caller owns nothing (work buffers are allocated and freed inside).
 */
#ifndef GLEAM_HOSTSPEED_H
#define GLEAM_HOSTSPEED_H

/* Run an n x n x n single-precision matrix product repeatedly for at least
 * min_seconds and return the rate in GFLOP/s (2*n^3 flops per product).
 * Returns a negative value if n is out of range (16..1024) or memory is short. */
/* cdef: begin */
double gl_host_sgemm_gflops(int n, double min_seconds);
/* cdef: end */

#endif
