/*
 * session.c — the connection to the local gleam agent: finding its control
 * socket, the cuda_attach request (one CBOR control frame), the HELLO or FAIL
 * answer, the socket I/O every later envelope uses, and the session's fate
 * (gl_ready). Nothing here runs before cuInit: no constructor touches the
 * network.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "gl_bytes.h"
#include "internal.h"

/* ST_FORKED: a child forked after the session was attached. The session is
 * the parent's (its socket, its server, its memory): the child answers every
 * call CUDA_ERROR_NOT_INITIALIZED, as NVIDIA's driver does in a child forked
 * after cuInit, and never touches the socket. */
enum { ST_NONE, ST_READY, ST_LOST, ST_FORKED };

static atomic_int g_state = ST_NONE;
static int g_fd = -1;
static gl_session_hello g_hello;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static CUresult g_init_result = CUDA_ERROR_NO_DEVICE;

CUresult gl_ready(void)
{
    switch (atomic_load(&g_state)) {
    case ST_READY: return CUDA_SUCCESS;
    case ST_LOST: return CUDA_ERROR_DEVICE_UNAVAILABLE;
    default: return CUDA_ERROR_NOT_INITIALIZED; /* ST_NONE, ST_FORKED */
    }
}

const gl_session_hello *gl_session(void)
{
    int state = atomic_load(&g_state);
    return state == ST_NONE || state == ST_FORKED ? NULL : &g_hello;
}

void gl_lost(const char *why)
{
    int expected = ST_READY;

    if (atomic_compare_exchange_strong(&g_state, &expected, ST_LOST)) {
        gl_log(GL_LOG_ERROR, "gleam", "lost the CUDA server: %s", why);
        /* Wake anything blocked on the socket; the fd stays open so that no
         * other file can take its number while a thread still uses it. */
        shutdown(g_fd, SHUT_RDWR);
    }
}

static int send_iov(int fd, struct iovec *iov, int n)
{
    struct msghdr msg;

    while (n > 0) {
        memset(&msg, 0, sizeof msg);
        msg.msg_iov = iov;
        msg.msg_iovlen = (size_t)n;
        ssize_t k = sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        /* Skip what went out; a partial write leaves the rest of one iovec. */
        while (n > 0 && (size_t)k >= iov->iov_len) {
            k -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + k;
            iov->iov_len -= (size_t)k;
        }
    }
    return 0;
}

/* 1 on success, 0 at EOF, -1 on error. */
static int recv_all(int fd, void *buf, size_t n)
{
    uint8_t *p = buf;

    while (n > 0) {
        ssize_t k = recv(fd, p, n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k == 0 ? 0 : -1;
        p += k;
        n -= (size_t)k;
    }
    return 1;
}

/* The agent ends a session by sending FAIL and closing: a one-way call sent
 * after that fails with EPIPE while the reason still waits, unread, on the
 * socket. 1 and the reason when a FAIL is next in line, else 0. */
static int pending_fail(char *why, size_t cap)
{
    uint8_t buf[GL_ENV_HEADER_SIZE + GL_FAIL_REASON_MAX];
    ssize_t k = recv(g_fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);

    if (k < (ssize_t)GL_ENV_HEADER_SIZE || buf[GL_ENV_TYPE_AT] != GL_ENV_FAIL)
        return 0;
    size_t len = gl_get_u32(buf);
    size_t have = (size_t)k - GL_ENV_HEADER_SIZE;
    snprintf(why, cap, "%.*s", (int)(len < have ? len : have), (const char *)buf + GL_ENV_HEADER_SIZE);
    return 1;
}

int gl_io_sendv(struct iovec *iov, int n)
{
    char why[GL_FAIL_REASON_MAX + 64];

    if (gl_ready() != CUDA_SUCCESS)
        return -1;
    uint8_t note[GL_ENV_HEADER_SIZE + GL_RING_NOTE_SIZE];
    struct iovec note_iov = {note, sizeof note};
    int in_ring = gl_ring_put(g_fd, iov, n, note);
    if (in_ring >= 0 && send_iov(g_fd, in_ring ? &note_iov : iov, in_ring ? 1 : n) == 0)
        return 0;
    int err = errno;
    if (!pending_fail(why, sizeof why))
        snprintf(why, sizeof why, "cannot send to the agent: %s", strerror(err));
    gl_lost(why);
    return -1;
}

int gl_io_recv(void *buf, size_t n)
{
    char why[128];
    int rc;

    if (gl_ready() != CUDA_SUCCESS)
        return -1;
    rc = recv_all(g_fd, buf, n);
    if (rc == 1)
        return 0;
    if (rc == 0)
        snprintf(why, sizeof why, "the agent closed the connection");
    else
        snprintf(why, sizeof why, "cannot read from the agent: %s", strerror(errno));
    gl_lost(why);
    return -1;
}

/* ------------------------------------------------------------- attaching */

/* GLEAM_CUDA_SOCKET, else $GLEAM_STATE_DIR/control.sock, else the default
 * state directory's (the agent's own rule for where it listens). */
static int socket_path(char *out, size_t cap)
{
    const char *env = getenv("GLEAM_CUDA_SOCKET");
    const char *dir = getenv("GLEAM_STATE_DIR");
    const char *xdg = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");
    int n;

    if (env != NULL && env[0] != '\0')
        n = snprintf(out, cap, "%s", env);
    else if (dir != NULL && dir[0] != '\0')
        n = snprintf(out, cap, "%s/control.sock", dir);
    else if (xdg != NULL && xdg[0] != '\0')
        n = snprintf(out, cap, "%s/gleam/control.sock", xdg);
    else
        n = snprintf(out, cap, "%s/.local/state/gleam/control.sock", home ? home : "");
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* Minimal CBOR writer: exactly the three item kinds the request needs. */
typedef struct {
    uint8_t buf[1024];
    size_t len;
    int overflow;
} cbor;

static void cbor_head(cbor *c, uint8_t major, uint64_t v)
{
    uint8_t h[9];
    size_t n;

    if (v < 24) {
        h[0] = (uint8_t)(major << 5 | v);
        n = 1;
    } else if (v <= 0xff) {
        h[0] = (uint8_t)(major << 5 | 24);
        h[1] = (uint8_t)v;
        n = 2;
    } else if (v <= 0xffff) {
        h[0] = (uint8_t)(major << 5 | 25);
        h[1] = (uint8_t)(v >> 8);
        h[2] = (uint8_t)v;
        n = 3;
    } else {
        h[0] = (uint8_t)(major << 5 | 26);
        for (int i = 0; i < 4; i++)
            h[1 + i] = (uint8_t)(v >> (24 - 8 * i));
        n = 5;
    }
    if (c->len + n > sizeof c->buf) {
        c->overflow = 1;
        return;
    }
    memcpy(c->buf + c->len, h, n);
    c->len += n;
}

static void cbor_text(cbor *c, const char *s)
{
    size_t n = strlen(s);

    cbor_head(c, 3, n);
    if (c->overflow || c->len + n > sizeof c->buf) {
        c->overflow = 1;
        return;
    }
    memcpy(c->buf + c->len, s, n);
    c->len += n;
}

static void program_name(char *out, size_t cap)
{
    FILE *f = fopen("/proc/self/comm", "r");

    out[0] = '\0';
    if (f != NULL) {
        if (fgets(out, (int)cap, f) == NULL)
            out[0] = '\0';
        fclose(f);
    }
    out[strcspn(out, "\n")] = '\0';
}

/* Builds the 4-byte big-endian length + CBOR map of the attach request. "run"
 * tags the session with `gleam-peer run`'s id (GLEAM_RUN_ID), so that run can
 * ask the agent for its sessions' account once the program ended. */
static int attach_request(cbor *c)
{
    const char *peer = getenv("GLEAM_CUDA_PEER");
    const char *run = getenv("GLEAM_RUN_ID");
    char program[64];
    size_t body;

    program_name(program, sizeof program);
    c->len = 4;
    c->overflow = 0;
    cbor_head(c, 5, 2);
    cbor_text(c, "op");
    cbor_text(c, "cuda_attach");
    cbor_text(c, "args");
    cbor_head(c, 5, 4);
    cbor_text(c, "peer");
    cbor_text(c, peer ? peer : "");
    cbor_text(c, "run");
    cbor_text(c, run ? run : "");
    cbor_text(c, "pid");
    cbor_head(c, 0, (uint64_t)getpid());
    cbor_text(c, "program");
    cbor_text(c, program);
    if (c->overflow)
        return -1;
    body = c->len - 4;
    for (int i = 0; i < 4; i++)
        c->buf[i] = (uint8_t)(body >> (24 - 8 * i));
    return 0;
}

/* recv_all of the answer's first bytes, which may carry the hand-over ring's
 * descriptor (gl_ring.h): the ring is adopted when one comes. */
static int recv_first(int fd, uint8_t *buf, size_t n)
{
    union {
        struct cmsghdr align;
        char bytes[CMSG_SPACE(sizeof(int))];
    } control;
    struct iovec iov = {buf, n};
    struct msghdr msg;
    ssize_t k;

    do {
        memset(&msg, 0, sizeof msg);
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.bytes;
        msg.msg_controllen = sizeof control.bytes;
        k = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    } while (k < 0 && errno == EINTR);
    if (k <= 0)
        return k == 0 ? 0 : -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS
            && c->cmsg_len == CMSG_LEN(sizeof(int))) {
            int ring;
            memcpy(&ring, CMSG_DATA(c), sizeof ring);
            gl_ring_adopt(ring);
        }
    }
    return (size_t)k == n ? 1 : recv_all(fd, buf + k, n - (size_t)k);
}

/* Reads the HELLO (into g_hello) or FAIL; fills why on failure. */
static int read_hello(int fd, char *why, size_t cap)
{
    uint8_t h[GL_ENV_HEADER_SIZE];
    uint32_t len;

    if (recv_first(fd, h, sizeof h) != 1) {
        snprintf(why, cap, "the agent closed the connection before answering");
        return -1;
    }
    len = gl_get_u32(h);
    if (h[GL_ENV_TYPE_AT] == GL_ENV_FAIL) {
        char reason[GL_FAIL_REASON_MAX + 1];
        size_t keep = len < sizeof reason - 1 ? len : sizeof reason - 1;
        if (recv_all(fd, reason, keep) != 1)
            keep = 0;
        reason[keep] = '\0';
        snprintf(why, cap, "%s", keep ? reason : "the agent refused the session");
        return -1;
    }
    if (h[GL_ENV_TYPE_AT] != GL_ENV_HELLO || len != sizeof g_hello) {
        snprintf(why, cap, "unexpected answer from the agent (type %u, %u bytes)",
                 h[GL_ENV_TYPE_AT], len);
        return -1;
    }
    if (recv_all(fd, &g_hello, sizeof g_hello) != 1) {
        snprintf(why, cap, "the agent closed the connection during the hello");
        return -1;
    }
    if (g_hello.magic != GL_HELLO_MAGIC || g_hello.version != GL_HELLO_VERSION) {
        snprintf(why, cap, "the agent speaks another session version (%u)", g_hello.version);
        return -1;
    }
    if (g_hello.device_count < 0 || g_hello.device_count > GL_MAX_DEVICES)
        g_hello.device_count = g_hello.device_count < 0 ? 0 : GL_MAX_DEVICES;
    g_hello.server[sizeof g_hello.server - 1] = '\0';
    g_hello.line[sizeof g_hello.line - 1] = '\0';
    for (int i = 0; i < GL_MAX_DEVICES; i++)
        g_hello.devices[i].name[GL_NAME_LEN - 1] = '\0';
    return 0;
}

static int connect_agent(char *why, size_t cap)
{
    struct sockaddr_un sa;
    struct iovec iov;
    cbor req;
    int fd;

    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (socket_path(sa.sun_path, sizeof sa.sun_path) != 0) {
        snprintf(why, cap, "the agent's socket path is too long");
        return -1;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, cap, "cannot create a socket: %s", strerror(errno));
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (errno == ENOENT || errno == ECONNREFUSED)
            snprintf(why, cap, "no gleam agent at %s (start one with gleam-peer up)", sa.sun_path);
        else
            snprintf(why, cap, "cannot reach the gleam agent at %s: %s", sa.sun_path,
                     strerror(errno));
        close(fd);
        return -1;
    }
    if (attach_request(&req) != 0) {
        snprintf(why, cap, "the attach request is too long (GLEAM_CUDA_PEER or GLEAM_RUN_ID?)");
        close(fd);
        return -1;
    }
    iov.iov_base = req.buf;
    iov.iov_len = req.len;
    if (send_iov(fd, &iov, 1) != 0) {
        snprintf(why, cap, "cannot send to the agent: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (read_hello(fd, why, cap) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Under `gleam-peer run` (which sets GLEAM_SESSION_LINE=1 unless --quiet) the
 * program's user is told, once, where its session runs and why: the agent wrote
 * the words into the HELLO. A program run by hand stays silent unless asked. */
static void say_where(void)
{
    const char *want = getenv("GLEAM_SESSION_LINE");

    if (want != NULL && want[0] != '\0' && strcmp(want, "0") != 0 && g_hello.line[0] != '\0')
        fprintf(stderr, "gleam: %s\n", g_hello.line);
}

/* In the child of a fork: the parent's session is not the child's. The
 * socket is closed here (the parent's copy stays open), so nothing the child
 * does (its exit included) can write into the parent's stream. Only
 * async-signal-safe calls: the child may have been forked by any thread. */
static void forked_child(void)
{
    int state = atomic_load(&g_state);
    if (state != ST_READY && state != ST_LOST)
        return;
    atomic_store(&g_state, ST_FORKED);
    close(g_fd);
    g_fd = -1;
    g_init_result = CUDA_ERROR_NOT_INITIALIZED;
}

static void attach_once(void)
{
    char why[GL_FAIL_REASON_MAX + 64];
    int fd = connect_agent(why, sizeof why);

    if (fd < 0) {
        gl_log(GL_LOG_ERROR, "cuInit", "no CUDA device: %s", why);
        g_init_result = CUDA_ERROR_NO_DEVICE;
        return;
    }
    g_fd = fd;
    gl_va_init(g_hello.va_base, g_hello.va_size);
    if (pthread_atfork(NULL, NULL, forked_child) != 0) {
        gl_log(GL_LOG_ERROR, "cuInit", "cannot watch for fork()");
        close(fd);
        g_fd = -1;
        g_init_result = CUDA_ERROR_OPERATING_SYSTEM;
        return;
    }
    atomic_store(&g_state, ST_READY);
    gl_batch_start();
    g_init_result = CUDA_SUCCESS;
    say_where();
}

CUresult gl_attach(void)
{
    pthread_once(&g_once, attach_once);
    return g_init_result;
}
