/* The lab's delay line: one direction of a link, forwarded with a fixed delay.
 *
 * A thread calls gl_delay_run(rx, tx, delay) and it never returns unless a
 * socket fails: every frame that arrives on the rx interface leaves on the tx
 * interface `delay` nanoseconds after the kernel received it. Frames keep
 * their order, nothing is coalesced or answered here (TCP's ACKs are delayed
 * exactly like its data, which keeps the kernels' RTT estimates honest), and
 * a full queue drops at the tail like a real one.
 *
 * Ownership: the caller owns both sockets (gl_delay_open) and the stats
 * struct, which this thread writes without locks (a reader may see counters a
 * frame apart). All other state lives on this thread's heap, freed on return.
 * No global state.
 *
 * Timing: the arrival time is the kernel's receive timestamp (SO_TIMESTAMPNS),
 * so a late wake-up of this thread does not add to the delay; the departure
 * is waited for with ppoll until SPIN_NS before it is due, then by spinning,
 * since a sleeping thread wakes tens of microseconds late on a loaded machine.
 * Frames are read and sent with their virtio-net header (PACKET_VNET_HDR) so
 * that the veths' 64 KiB GSO frames pass whole, segmented by the kernel after
 * the tx interface, and the forwarder handles a few thousand frames a second
 * at 1 Gbit/s instead of eighty thousand.
 */

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "delayline.h"

#ifndef PACKET_VNET_HDR
#define PACKET_VNET_HDR 15
#endif
#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

#define VNET_HDR 10                      /* struct virtio_net_hdr */
#define MAX_FRAME (VNET_HDR + 65536 + 4096)
#define ARENA (8u << 20)                 /* queued bytes; ~60 ms at 1 Gbit/s */
#define SLOTS 8192
#define SPIN_NS 40000
#define BURST 64

typedef struct {
    uint32_t off, len;
    int64_t due;
} slot_t;

typedef struct {
    unsigned char *arena;
    slot_t *slots;
    uint32_t head, count, wr;            /* oldest slot, queued slots, arena write offset */
} queue_t;

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t real_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int gl_delay_open(const char *ifname, int receive) {
    unsigned index = if_nametoindex(ifname);
    if (index == 0)
        return -errno;
    /* A sending socket binds protocol 0: it receives nothing. */
    int proto = receive ? htons(ETH_P_ALL) : 0;
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, proto);
    if (fd < 0)
        return -errno;
    int one = 1, size = 8 << 20;
    struct sockaddr_ll addr = {0};
    addr.sll_family = AF_PACKET;
    addr.sll_protocol = (unsigned short)proto;
    addr.sll_ifindex = (int)index;
    if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) < 0)
        goto fail;
    if (receive) {
        /* Not ours to forward: what the other direction sends out here. Older
         * kernels lack the option; gl_delay_run also checks sll_pkttype. */
        (void)setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
        if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) < 0)
            goto fail;
        /* Root may exceed rmem_max: a burst must wait here, not be dropped. */
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) < 0)
            (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    } else if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) < 0) {
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    }
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0)
        goto fail;
    return fd;
fail:;
    int err = errno;
    close(fd);
    return -err;
}

/* Where the next frame can be written whole, or NULL when the queue is full. */
static unsigned char *reserve(queue_t *q, uint32_t *off) {
    if (q->count == SLOTS)
        return NULL;
    if (q->count == 0)
        q->wr = 0;
    uint32_t oldest = q->count ? q->slots[q->head].off : 0;
    uint32_t at = q->wr;
    /* Strict comparisons: the write offset never catches up with the oldest
     * frame, so wr == oldest always means "not wrapped". */
    if (q->count && at < oldest) {       /* live bytes wrap: free is [wr, oldest) */
        if (at + MAX_FRAME >= oldest)
            return NULL;
    } else if (at + MAX_FRAME > ARENA) { /* no room before the end: start again at 0 */
        if (q->count && MAX_FRAME >= oldest)
            return NULL;
        at = 0;
    }
    *off = at;
    return q->arena + at;
}

static void record_lateness(gl_delay_stats *st, int64_t late) {
    static const int64_t edges[GL_DELAY_BUCKETS - 1] = {
        10000, 50000, 100000, 200000, 500000, 1000000};
    int b = 0;
    while (b < GL_DELAY_BUCKETS - 1 && late >= edges[b])
        b++;
    st->late_hist[b]++;
    st->late_sum_ns += (uint64_t)late;
    if ((uint64_t)late > st->late_max_ns)
        st->late_max_ns = (uint64_t)late;
}

/* Send every frame that is due; return the wait until the next one (-1: none). */
static int64_t send_due(queue_t *q, int tx, gl_delay_stats *st) {
    while (q->count) {
        slot_t *s = &q->slots[q->head];
        int64_t now = mono_ns();
        if (s->due > now)
            return s->due - now;
        if (send(tx, q->arena + s->off, s->len, 0) < 0)
            st->send_errors++;           /* the shaper's queue was full: a drop */
        else {
            st->forwarded++;
            st->bytes += s->len - VNET_HDR;
        }
        record_lateness(st, now - s->due);
        q->head = (q->head + 1) % SLOTS;
        q->count--;
    }
    return -1;
}

/* Read what has arrived (at most BURST frames); 0, or -errno on a socket error. */
static int receive_some(queue_t *q, int rx, int64_t delay, unsigned char *scratch,
                        gl_delay_stats *st) {
    for (int n = 0; n < BURST; n++) {
        uint32_t off = 0;
        unsigned char *dst = reserve(q, &off);
        int full = dst == NULL;
        char control[256];
        struct sockaddr_ll from;
        struct iovec iov = {full ? scratch : dst, MAX_FRAME};
        struct msghdr msg = {0};
        msg.msg_name = &from;
        msg.msg_namelen = sizeof from;
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        ssize_t got = recvmsg(rx, &msg, MSG_DONTWAIT);
        if (got < 0)
            return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -errno;
        if (from.sll_pkttype == PACKET_OUTGOING || got <= VNET_HDR)
            continue;
        if (full || (msg.msg_flags & MSG_TRUNC)) {
            st->dropped++;
            continue;
        }
        /* The kernel's receive time, moved onto the monotonic clock. */
        int64_t now = mono_ns(), arrived = now;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
                struct timespec ts;
                memcpy(&ts, CMSG_DATA(c), sizeof ts);
                int64_t age = real_ns() - ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
                if (age > 0 && age < 1000000000)
                    arrived = now - age;
            }
        }
        uint32_t tail = (q->head + q->count) % SLOTS;
        q->slots[tail] = (slot_t){off, (uint32_t)got, arrived + delay};
        q->count++;
        q->wr = off + (uint32_t)got;
    }
    return 0;
}

int gl_delay_run(int rx, int tx, int64_t delay_ns, gl_delay_stats *stats) {
    /* Sleeps end when asked, not up to 50 us later (the default slack). */
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    queue_t q = {0};
    q.arena = malloc(ARENA);
    q.slots = calloc(SLOTS, sizeof *q.slots);
    unsigned char *scratch = malloc(MAX_FRAME);
    int rc = -ENOMEM;
    if (!q.arena || !q.slots || !scratch)
        goto out;
    for (;;) {
        int64_t wait = send_due(&q, tx, stats);
        struct pollfd pfd = {rx, POLLIN, 0};
        struct timespec ts = {0, 0}, *timeout = NULL;
        if (wait >= 0) {
            int64_t sleep = wait > SPIN_NS ? wait - SPIN_NS : 0;
            ts.tv_sec = sleep / 1000000000;
            ts.tv_nsec = sleep % 1000000000;
            timeout = &ts;
        }
        int ready = ppoll(&pfd, 1, timeout, NULL);
        if (ready < 0 && errno != EINTR) {
            rc = -errno;
            goto out;
        }
        if (ready > 0) {
            if (pfd.revents & (POLLERR | POLLNVAL)) {
                rc = -EIO;
                goto out;
            }
            rc = receive_some(&q, rx, delay_ns, scratch, stats);
            if (rc < 0)
                goto out;
        }
    }
out:
    free(q.arena);
    free(q.slots);
    free(scratch);
    return rc;
}
