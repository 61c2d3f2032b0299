/*
 * handover.c — the client agent's end of the hand-over ring (handover.h).
 */
#define _GNU_SOURCE /* memfd_create */
#include "handover.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gl_bytes.h"

int gl_handover_create(uint64_t size)
{
    long page = sysconf(_SC_PAGESIZE);
    if (size < GL_RING_SMALLEST || page <= 0 || size % (uint64_t)page
        || GL_RING_HEAD_SIZE % page)
        return -EINVAL;
    int fd = memfd_create("gleam-handover", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    /* Sealed so that the program cannot shrink it under the agent's mapping
     * (a read past the end would kill the agent with SIGBUS). */
    if (ftruncate(fd, (off_t)(GL_RING_HEAD_SIZE + size)) != 0
        || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        int err = errno;
        close(fd);
        return -err;
    }
    return fd;
}

int gl_handover_map(gl_handover *r, int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -errno;
    if (st.st_size < GL_RING_HEAD_SIZE + GL_RING_SMALLEST
        || (fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK) == 0)
        return -EINVAL;
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return -errno;
    gl_handover_unmap(r);
    r->head = m;
    r->data = (uint8_t *)m + GL_RING_HEAD_SIZE;
    r->size = (uint64_t)st.st_size - GL_RING_HEAD_SIZE;
    r->next = 0;
    return 0;
}

void gl_handover_unmap(gl_handover *r)
{
    if (r->head)
        munmap(r->head, GL_RING_HEAD_SIZE + r->size);
    r->head = NULL;
}

int gl_handover_locate(const gl_handover *r, const uint8_t note[GL_RING_NOTE_SIZE],
                       const uint8_t **src, uint64_t *at, uint64_t *len)
{
    uint64_t a = gl_get_u64(note), n = gl_get_u64(note + 8);
    /* The program skips at most the rest of one lap, so a note never lies more
     * than the ring's size past the last one. */
    if (!r->head || a < r->next || a - r->next >= r->size || n < GL_ENV_HEADER_SIZE
        || n > r->size || a % r->size + n > r->size)
        return -1;
    *src = r->data + a % r->size;
    *at = a;
    *len = n;
    return 0;
}

void gl_handover_release(gl_handover *r, uint64_t end)
{
    r->next = end;
    __atomic_store_n(&r->head->released, end, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&r->head->waiting, __ATOMIC_SEQ_CST)) {
        __atomic_add_fetch(&r->head->wake, 1, __ATOMIC_SEQ_CST);
        syscall(SYS_futex, &r->head->wake, FUTEX_WAKE, 1, NULL, NULL, 0);
    }
}
