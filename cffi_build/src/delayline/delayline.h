/* The lab's delay line (see delayline.c). Declarations shared with the cdef. */
#ifndef GL_DELAYLINE_H
#define GL_DELAYLINE_H

#include <stdint.h>

#define GL_DELAY_BUCKETS 7

/* Written by the forwarding thread only; lateness = sent - due, bucket edges
 * 10, 50, 100, 200, 500, 1000 us. */
typedef struct {
    uint64_t forwarded, bytes, dropped, send_errors;
    uint64_t late_sum_ns, late_max_ns;
    uint64_t late_hist[GL_DELAY_BUCKETS];
} gl_delay_stats;

/* An AF_PACKET socket on `ifname` (receive != 0: it reads every frame arriving
 * there); the fd, or -errno. */
int gl_delay_open(const char *ifname, int receive);
/* Forward rx -> tx with `delay_ns` until a socket fails; returns -errno. */
int gl_delay_run(int rx, int tx, int64_t delay_ns, gl_delay_stats *stats);

#endif
