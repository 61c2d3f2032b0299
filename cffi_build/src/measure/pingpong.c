/* pingpong.c — see pingpong.h. */
#include "pingpong.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define PP_MAX_MSG 4096
/* Untimed exchanges first: the first round trips pay for cold caches and the
 * scheduler learning that both processes wake each other. */
#define PP_WARMUP 200

/* 1 when n bytes moved, 0 when the peer closed before the first byte, -1 on error
 * or a close mid-message. */
static int pp_exact(int fd, char *buf, int n, int sending)
{
    int done = 0;
    while (done < n) {
        ssize_t k = sending ? send(fd, buf + done, (size_t)(n - done), MSG_NOSIGNAL)
                            : recv(fd, buf + done, (size_t)(n - done), 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k == 0 && !sending && done == 0)
            return 0;
        if (k <= 0)
            return -1;
        done += (int)k;
    }
    return 1;
}

long long gl_pingpong_echo(int fd, int msg_size)
{
    char buf[PP_MAX_MSG];
    long long answered = 0;
    if (fd < 0 || msg_size <= 0 || msg_size > PP_MAX_MSG)
        return -1;
    for (;;) {
        int got = pp_exact(fd, buf, msg_size, 0);
        if (got == 0)
            return answered;
        if (got < 0 || pp_exact(fd, buf, msg_size, 1) < 0)
            return -1;
        answered++;
    }
}

static double pp_seconds(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) * 1e-9;
}

double gl_pingpong_time(int fd, int count, int msg_size)
{
    char buf[PP_MAX_MSG];
    struct timespec t0, t1;
    if (fd < 0 || count <= 0 || msg_size <= 0 || msg_size > PP_MAX_MSG)
        return -1.0;
    memset(buf, 0x5a, sizeof buf);
    for (int i = 0; i < PP_WARMUP + count; i++) {
        if (i == PP_WARMUP && clock_gettime(CLOCK_MONOTONIC, &t0) != 0)
            return -1.0;
        if (pp_exact(fd, buf, msg_size, 1) < 0 || pp_exact(fd, buf, msg_size, 0) != 1)
            return -1.0;
    }
    if (clock_gettime(CLOCK_MONOTONIC, &t1) != 0)
        return -1.0;
    return pp_seconds(&t0, &t1) / count;
}

typedef struct {
    int from, to, msg_size;
    long long moved;
} pp_direction;

/* Copies msg_size-byte messages from one socket to the other until a close. */
static void *pp_forward(void *arg)
{
    pp_direction *d = arg;
    char buf[PP_MAX_MSG];
    d->moved = 0;
    while (pp_exact(d->from, buf, d->msg_size, 0) == 1 && pp_exact(d->to, buf, d->msg_size, 1) == 1)
        d->moved++;
    /* Either side's end ends both directions (the other thread's read returns). */
    shutdown(d->to, SHUT_WR);
    shutdown(d->from, SHUT_RD);
    return NULL;
}

long long gl_pingpong_relay(int up_fd, int down_fd, int msg_size)
{
    if (up_fd < 0 || down_fd < 0 || msg_size <= 0 || msg_size > PP_MAX_MSG)
        return -1;
    pp_direction toward = {up_fd, down_fd, msg_size, 0};
    pp_direction back = {down_fd, up_fd, msg_size, 0};
    pthread_t t;
    if (pthread_create(&t, NULL, pp_forward, &back) != 0)
        return -1;
    pp_forward(&toward);
    shutdown(down_fd, SHUT_RD); /* the program is gone: no reply is waited for */
    pthread_join(t, NULL);
    return toward.moved;
}
