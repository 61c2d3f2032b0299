/*
 * ptx_bits.h — a register slot's bits as f32 or f64 and back (the slots are
 * 64-bit; an f32 lives in the low half). Shared by the interpreter's
 * handlers (ptx_exec.c, ptx_exec_wmma.c). No state.
 */
#ifndef GLEAM_PTX_BITS_H
#define GLEAM_PTX_BITS_H

#include <stdint.h>
#include <string.h>

/* A value's bits as another type of the same size. */
#define PTX_BIT_CAST(name, From, To)                                                          \
    static inline To name(From v)                                                             \
    {                                                                                         \
        To t;                                                                                 \
        memcpy(&t, &v, sizeof t);                                                             \
        return t;                                                                             \
    }
PTX_BIT_CAST(f32_of_u32, uint32_t, float)
PTX_BIT_CAST(u32_of_f32, float, uint32_t)
PTX_BIT_CAST(f64of, uint64_t, double)
PTX_BIT_CAST(bits64, double, uint64_t)
#undef PTX_BIT_CAST

static inline float f32of(uint64_t v) { return f32_of_u32((uint32_t)v); }
static inline uint64_t bits32(float f) { return u32_of_f32(f); }

#endif /* GLEAM_PTX_BITS_H */
