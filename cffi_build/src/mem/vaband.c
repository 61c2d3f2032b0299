/*
 * vaband.c — a random place for a new session's range (vaband.h).
 */
#include "vaband.h"

#include <errno.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/types.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000 /* Linux 4.17; older kernels take it as a hint */
#endif

#define BAND_LO GL_VA_BAND_LO
#define BAND_HI GL_VA_BAND_HI
#define BAND_ALIGN (1ull << 30)

uint64_t gl_va_band_pick(uint64_t size)
{
    uint64_t r;

    if (size == 0 || size > BAND_HI - BAND_LO)
        return 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
        return 0;
    uint64_t slots = (BAND_HI - BAND_LO - size) / BAND_ALIGN + 1;
    return BAND_LO + r % slots * BAND_ALIGN;
}

void *gl_va_band_map(uint64_t size)
{
    for (int i = 0; i < GL_VA_BAND_TRIES; i++) {
        void *want = (void *)(uintptr_t)gl_va_band_pick(size);
        if (want == NULL)
            return NULL;
        void *p = mmap(want, size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == want)
            return p;
        if (p != MAP_FAILED)
            munmap(p, size); /* an old kernel took the address as a hint */
        else if (errno != EEXIST)
            return NULL; /* no band here (a smaller address space) */
    }
    return NULL;
}
