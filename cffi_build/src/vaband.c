/*
 * vaband.c — a random place for a new session's range (vaband.h).
 */
#include "vaband.h"

#include <sys/random.h>
#include <sys/types.h>

#define BAND_LO (16ull << 40)
#define BAND_HI (80ull << 40)
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
