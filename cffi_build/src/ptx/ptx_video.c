/*
 * ptx_video.c — the handler of the SIMD video instructions (ptx_video.h),
 * as the PTX ISA's semantics state them: each of the 2 (half-word) or 4
 * (byte) elements of a and b is picked by its selector from the 8 bytes or
 * 4 half-words of {b, a}, sign- or zero-extended by its operand's type, and
 * operated on in full precision; .sat clamps the result to the element range
 * of .dtype. The secondary operation then either accumulates (d = c plus the
 * full-precision results of the masked elements, modulo 2^32) or merges
 * (the masked elements of d take their result's low bits, the others c's).
 * Thread-safety: as every handler, one warp on one thread.
 */
#include "ptx_int.h"
#include "ptx_video.h"

/* Element k (width bits wide) of the 64-bit pair {b, a}, extended. */
static int64_t element(uint64_t ba, unsigned k, unsigned width, int is_signed)
{
    uint64_t v = ba >> (k * width) & ((1ull << width) - 1);
    if (is_signed && (v >> (width - 1)) != 0)
        return (int64_t)(v | ~((1ull << width) - 1));
    return (int64_t)v;
}

static int64_t operate(int op, int64_t x, int64_t y)
{
    switch (op) {
    case PTX_V_ADD: return x + y;
    case PTX_V_SUB: return x - y;
    /* rounds half away from zero for positive sums, the shift floors the rest */
    case PTX_V_AVRG: return x + y >= 0 ? (x + y + 1) >> 1 : (x + y) >> 1;
    case PTX_V_ABSDIFF: return x > y ? x - y : y - x;
    case PTX_V_MIN: return x < y ? x : y;
    case PTX_V_MAX: return x > y ? x : y;
    case PTX_V_SET_EQ: return x == y;
    case PTX_V_SET_NE: return x != y;
    case PTX_V_SET_LT: return x < y;
    case PTX_V_SET_LE: return x <= y;
    case PTX_V_SET_GT: return x > y;
    default: return x >= y; /* PTX_V_SET_GE */
    }
}

static int64_t clamp(int64_t v, unsigned width, int is_signed)
{
    int64_t lo = is_signed ? -(1ll << (width - 1)) : 0;
    int64_t hi = is_signed ? (1ll << (width - 1)) - 1 : (1ll << width) - 1;
    return v < lo ? lo : v > hi ? hi : v;
}

static uint32_t vsimd(const ptx_insn *i, uint32_t a, uint32_t b, uint32_t c)
{
    unsigned f = i->mode2, n = f & PTX_VF_FOUR ? 4 : 2, width = 32 / n;
    uint64_t ba = (uint64_t)b << 32 | a;
    uint32_t mask = (uint32_t)i->imm, emask = (uint32_t)((1ull << width) - 1);
    uint32_t d = f & PTX_VF_ADD ? c : 0;
    for (unsigned k = 0; k < n; k++) {
        unsigned sa = i->aux >> (PTX_VSEL_BITS * k) & 7;
        unsigned sb = i->aux >> (PTX_VSEL_B_SHIFT + PTX_VSEL_BITS * k) & 7;
        int64_t t = operate(i->mode, element(ba, sa, width, f & PTX_VF_ASIGNED),
                            element(ba, sb, width, f & PTX_VF_BSIGNED));
        if (f & PTX_VF_SAT)
            t = clamp(t, width, f & PTX_VF_DSIGNED);
        int on = mask >> k & 1;
        if (f & PTX_VF_ADD)
            d += on ? (uint32_t)t : 0;
        else
            d |= ((on ? (uint32_t)t : c >> (k * width)) & emask) << (k * width);
    }
    return d;
}

int h_vsimd(ptx_warp *w, const ptx_insn *i, uint32_t m)
{
    uint64_t *D = w->r[i->d[0]];
    const uint64_t *A = w->r[i->s[0]], *B = w->r[i->s[1]], *C = w->r[i->s[2]];
    for (uint32_t mm = m; mm; mm &= mm - 1) {
        int l = __builtin_ctz(mm);
        D[l] = vsimd(i, (uint32_t)A[l], (uint32_t)B[l], (uint32_t)C[l]);
    }
    return 0;
}
