/*
 * seeded.h — table keys from digests a peer may choose (a client's blob
 * references and claims, a server's summary): a digest's first 8 bytes mixed
 * with a secret of the table, so that chosen digests cannot pile up on one
 * bucket or probe run. The mix is a bijection: distinct prefixes stay
 * distinct keys.
 */
#ifndef GLEAM_SEEDED_H
#define GLEAM_SEEDED_H

#include <stdint.h>
#include <sys/random.h>
#include <sys/types.h>
#include <time.h>

static inline uint64_t gl_seeded_mix(uint64_t x, uint64_t seed)
{
    x ^= seed;
    x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
    return x ^ (x >> 31);
}

/* A table's secret: from the kernel, else (no entropy yet) from the clock and
 * the table's address. */
static inline uint64_t gl_new_seed(const void *salt)
{
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        seed = (uint64_t)(uintptr_t)salt ^ ((uint64_t)t.tv_sec << 32) ^ (uint64_t)t.tv_nsec;
    }
    return seed;
}

#endif
