/*
 * ring.c — the program's end of the hand-over ring (gl_ring.h): a large
 * envelope is copied into memory the client agent maps, and a 16-byte RING
 * note goes on the socket in its place.
 *
 * One sender: gl_io_sendv's callers hold batch.c's g_emit, so g_pos and the
 * ring's data are this thread's while it sends. After a fork the child never
 * sends (session.c), so it never writes the parent's ring.
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "gl_bytes.h"
#include "gl_ring.h"
#include "gl_session.h"
#include "internal.h"

static gl_ring_head *g_head;  /* NULL: no ring, the socket carries everything */
static uint8_t *g_data;
static uint64_t g_size;
static uint64_t g_pos;        /* the stream position of the next envelope */

/* How long one sleep waits for the agent before checking that it is there. */
#define WAIT_NS 50000000L

void gl_ring_adopt(int fd)
{
    struct stat st;

    if (fd < 0)
        return;
    if (fstat(fd, &st) == 0 && st.st_size >= GL_RING_HEAD_SIZE + GL_RING_SMALLEST) {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m != MAP_FAILED) {
            g_head = m;
            g_data = (uint8_t *)m + GL_RING_HEAD_SIZE;
            g_size = (uint64_t)st.st_size - GL_RING_HEAD_SIZE;
        }
    }
    close(fd); /* the mapping keeps the memory; a ring that cannot map is no ring */
}

/* The agent hung up (it ended the session, or died): the caller says why. */
static int agent_gone(int sock)
{
    struct pollfd pfd = {.fd = sock, .events = POLLRDHUP};
    return poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Waits until len bytes at position at are free: 0, or -1 (errno EPIPE) when
 * the agent went away meanwhile. */
static int wait_room(int sock, uint64_t at, uint64_t len)
{
    for (;;) {
        uint32_t seen = __atomic_load_n(&g_head->wake, __ATOMIC_SEQ_CST);
        __atomic_store_n(&g_head->waiting, 1, __ATOMIC_SEQ_CST);
        uint64_t released = __atomic_load_n(&g_head->released, __ATOMIC_SEQ_CST);
        /* (released past at + len - size cannot be: the agent releases what it read,
         * and it read nothing not yet written; a program's own scribbles are its own.) */
        if (at + len - released <= g_size) {
            __atomic_store_n(&g_head->waiting, 0, __ATOMIC_RELAXED);
            return 0;
        }
        struct timespec t = {0, WAIT_NS};
        /* Not FUTEX_PRIVATE: the agent's process wakes it. */
        syscall(SYS_futex, &g_head->wake, FUTEX_WAIT, seen, &t, NULL, 0);
        if (agent_gone(sock)) {
            errno = EPIPE;
            return -1;
        }
    }
}

int gl_ring_put(int sock, const struct iovec *iov, int n,
                uint8_t note[GL_ENV_HEADER_SIZE + GL_RING_NOTE_SIZE])
{
    uint64_t len = 0;

    if (!g_head)
        return 0;
    for (int i = 0; i < n; i++)
        len += iov[i].iov_len;
    if (len < GL_RING_MIN || len > g_size / 2)
        return 0;
    uint64_t at = g_pos;
    if (at % g_size + len > g_size)
        at += g_size - at % g_size; /* never across the end: the next lap */
    if (wait_room(sock, at, len) != 0)
        return -1;
    uint8_t *dst = g_data + at % g_size;
    for (int i = 0; i < n; i++) {
        memcpy(dst, iov[i].iov_base, iov[i].iov_len);
        dst += iov[i].iov_len;
    }
    g_pos = at + len;
    gl_env_header(note, GL_ENV_RING, 0, GL_RING_NOTE_SIZE);
    gl_put_u64(note + GL_ENV_HEADER_SIZE, at);
    gl_put_u64(note + GL_ENV_HEADER_SIZE + 8, len);
    return 1;
}
