/* pingpong.c — see pingpong.h. */
#include "pingpong.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PP_MAX_MSG 4096
#define PP_WARMUP 200

static int pp_exact(int fd, char *buf, int n, int sending)
{
    int done = 0;
    while (done < n) {
        ssize_t k = sending ? send(fd, buf + done, (size_t)(n - done), MSG_NOSIGNAL)
                            : recv(fd, buf + done, (size_t)(n - done), 0);
        if (k <= 0)
            return -1;
        done += (int)k;
    }
    return 0;
}

typedef struct {
    int fd;
    int msg_size;
} pp_echo_args;

static void *pp_echo(void *arg)
{
    pp_echo_args *a = arg;
    char buf[PP_MAX_MSG];
    while (pp_exact(a->fd, buf, a->msg_size, 0) == 0 && pp_exact(a->fd, buf, a->msg_size, 1) == 0) {
    }
    return NULL;
}

static int pp_tcp_pair(int fds[2])
{
    struct sockaddr_in addr;
    socklen_t len = sizeof addr;
    int one = 1, listener = socket(AF_INET, SOCK_STREAM, 0);
    if (listener < 0)
        return -1;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(listener, 1) != 0
        || getsockname(listener, (struct sockaddr *)&addr, &len) != 0) {
        close(listener);
        return -1;
    }
    fds[0] = socket(AF_INET, SOCK_STREAM, 0);
    if (fds[0] < 0 || connect(fds[0], (struct sockaddr *)&addr, sizeof addr) != 0) {
        close(listener);
        return -1;
    }
    fds[1] = accept(listener, NULL, NULL);
    close(listener);
    if (fds[1] < 0)
        return -1;
    setsockopt(fds[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fds[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return 0;
}

double gl_pingpong_rtt(int unix_socket, int count, int msg_size)
{
    int fds[2];
    char buf[PP_MAX_MSG];
    pthread_t echo;
    pp_echo_args args;
    struct timespec t0, t1;
    double result = -1.0;

    if (count <= 0 || msg_size <= 0 || msg_size > PP_MAX_MSG)
        return -1.0;
    if (unix_socket ? socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0 : pp_tcp_pair(fds) != 0)
        return -1.0;
    memset(buf, 0x5a, sizeof buf);
    args.fd = fds[1];
    args.msg_size = msg_size;
    if (pthread_create(&echo, NULL, pp_echo, &args) != 0)
        goto out;
    for (int i = 0; i < PP_WARMUP + count; i++) {
        if (i == PP_WARMUP)
            clock_gettime(CLOCK_MONOTONIC, &t0);
        if (pp_exact(fds[0], buf, msg_size, 1) != 0 || pp_exact(fds[0], buf, msg_size, 0) != 0)
            break;
        if (i == PP_WARMUP + count - 1) {
            clock_gettime(CLOCK_MONOTONIC, &t1);
            result = ((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9)
                     / count;
        }
    }
    shutdown(fds[0], SHUT_RDWR);
    pthread_join(echo, NULL);
out:
    close(fds[0]);
    close(fds[1]);
    return result;
}
