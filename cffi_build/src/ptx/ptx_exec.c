/*
 * ptx_exec.c — the interpreter: one handler per opcode of ptx_ops.h, each a
 * loop over the active lanes of a warp (the full-warp case is a plain loop
 * the compiler can vectorise), and the warp's dispatch loop.
 *
 * Divergence: each lane has a pc; the warp runs the group of lanes with the
 * lowest pc, and parked lanes rejoin when the group reaches their pc (or the
 * group jumps past it). For the code nvcc emits (reconvergence points after
 * the divergent region) this reconverges at the immediate post-dominator, and
 * for any CFG it makes progress: some lane always runs. Out-of-line calls
 * (recursion, calls through a pointer) give each calling lane a frame above
 * its caller's (per-lane frame pointers into local memory, the callee's
 * registers saved there); the lanes that did not call wait at the return pc.
 * Thread-safety: a warp is run by one thread; handlers touch only the warp,
 * its block and memory (device memory through __atomic builtins for atomics).
 * No global state besides the read-only handler table.
 */
#include <fenv.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "ptx_bits.h"
#include "ptx_int.h"
#include "ptx_wmma.h"

#define LANES(m, ...)                                                                        \
    do {                                                                                      \
        if ((m) == PTX_FULL) {                                                                \
            for (int l = 0; l < PTX_LANES; l++) {                                             \
                __VA_ARGS__;                                                                  \
            }                                                                                 \
        } else {                                                                              \
            for (uint32_t mm_ = (m); mm_; mm_ &= mm_ - 1) {                                   \
                int l = __builtin_ctz(mm_);                                                   \
                __VA_ARGS__;                                                                  \
            }                                                                                 \
        }                                                                                     \
    } while (0)

#define U64(x) ((uint64_t)(x))
/* Out of line of the type-generic expressions, so that unsigned types do
 * not warn about comparisons that are constant for them. */
static inline int is_m1(uint64_t v) { return v == ~(uint64_t)0; }
static inline int is_neg(int64_t v) { return v < 0; }
#define H(name) static int h_##name(ptx_warp *w, const ptx_insn *i, uint32_t m)
#define RD(k) (w->r[i->d[k]])
#define RS(k) (w->r[i->s[k]])

/* Per-type access: C type, load from a slot, store into a slot, width, sign. */
#define CT_s16 int16_t
#define CT_u16 uint16_t
#define CT_s32 int32_t
#define CT_u32 uint32_t
#define CT_s64 int64_t
#define CT_u64 uint64_t
#define CT_f32 float
#define CT_f64 double
#define WT_s16 int64_t
#define WT_u16 uint64_t
#define WT_s32 int64_t
#define WT_u32 uint64_t
#define WT_s64 __int128
#define WT_u64 unsigned __int128
#define LD_s16(v) ((int16_t)(uint16_t)(v))
#define LD_u16(v) ((uint16_t)(v))
#define LD_s32(v) ((int32_t)(uint32_t)(v))
#define LD_u32(v) ((uint32_t)(v))
#define LD_s64(v) ((int64_t)(v))
#define LD_u64(v) ((uint64_t)(v))
#define LD_f32(v) f32of(v)
#define LD_f64(v) f64of(v)
#define ST_s16(x) ((uint64_t)(uint16_t)(x))
#define ST_u16(x) ((uint64_t)(uint16_t)(x))
#define ST_s32(x) ((uint64_t)(uint32_t)(x))
#define ST_u32(x) ((uint64_t)(uint32_t)(x))
#define ST_s64(x) ((uint64_t)(x))
#define ST_u64(x) ((uint64_t)(x))
#define ST_f32(x) bits32(x)
#define ST_f64(x) bits64(x)
#define W_s16 16
#define W_u16 16
#define W_s32 32
#define W_u32 32
#define W_s64 64
#define W_u64 64
#define SG_s16 1
#define SG_u16 0
#define SG_s32 1
#define SG_u32 0
#define SG_s64 1
#define SG_u64 0
#define MIN_s16 INT16_MIN
#define MIN_s32 INT32_MIN
#define MIN_s64 INT64_MIN
#define MIN_u16 0
#define MIN_u32 0
#define MIN_u64 0

#define EACH_INT(M, ...) M(s16, __VA_ARGS__) M(u16, __VA_ARGS__) M(s32, __VA_ARGS__) \
    M(u32, __VA_ARGS__) M(s64, __VA_ARGS__) M(u64, __VA_ARGS__)

/* ---------------------------------------------------------------- misc */

H(nop)
{
    (void)w, (void)i, (void)m;
    return 0;
}
H(ctl)
{
    (void)w, (void)i, (void)m;
    return 0;
}
H(fence)
{
    (void)w, (void)i, (void)m;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return 0;
}
/* bar.warp.sync: the waiting is done before it runs (sync_must_hold holds the
 * group until its mask's parked lanes arrive); what is left is the ordering
 * of memory among the lanes that met. */
H(warpsync)
{
    (void)w, (void)i, (void)m;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return 0;
}

/* ---------------------------------------------------- integer arithmetic */

/* The sources of a handler with N operands, and their per-lane loads as the
 * C type of T (a, b, c); a shift's amount b is a u32 whatever T is. */
#define SRCS_1 const uint64_t *A = RS(0)
#define SRCS_2 const uint64_t *A = RS(0), *B = RS(1)
#define SRCS_3 const uint64_t *A = RS(0), *B = RS(1), *C = RS(2)
#define LOADS_1(T) CT_##T a = LD_##T(A[l]);
#define LOADS_2(T) LOADS_1(T) CT_##T b = LD_##T(B[l]);
#define LOADS_3(T) LOADS_2(T) CT_##T c = LD_##T(C[l]);
#define LOADS_SHIFT(T) LOADS_1(T) uint32_t b = (uint32_t)B[l];

/* An integer handler: EXPR sees a, b, c as loaded by LOADS and the type's
 * ct (C type), wt (double width), W (bits), SG (signed), WM (width mask),
 * MINV (least value). */
#define INT_OP(T, name, N, LOADS, expr)                                                       \
    H(name##_##T)                                                                             \
    {                                                                                         \
        typedef CT_##T ct __attribute__((unused));                                            \
        typedef WT_##T wt __attribute__((unused));                                            \
        enum { W = W_##T, SG = SG_##T };                                                      \
        const uint64_t WM __attribute__((unused)) = ~U64(0) >> (64 - W);                      \
        const ct MINV __attribute__((unused)) = (ct)MIN_##T;                                  \
        uint64_t *D = RD(0);                                                                  \
        SRCS_##N;                                                                             \
        LANES(m, {                                                                            \
            LOADS(T)                                                                          \
            D[l] = ST_##T(expr);                                                              \
        });                                                                                   \
        return 0;                                                                             \
    }
#define BIN(T, name, expr) INT_OP(T, name, 2, LOADS_2, expr)
#define TER(T, name, expr) INT_OP(T, name, 3, LOADS_3, expr)
#define UN(T, name, expr) INT_OP(T, name, 1, LOADS_1, expr)
/* Shifts: the amount is a u32 and saturates at the width. */
#define SHIFT(T, name, expr) INT_OP(T, name, 2, LOADS_SHIFT, expr)

EACH_INT(BIN, add, U64(a) + U64(b))
EACH_INT(BIN, sub, U64(a) - U64(b))
EACH_INT(BIN, mullo, U64(a) * U64(b))
EACH_INT(BIN, mulhi, (uint64_t)(((wt)a * (wt)b) >> W))
EACH_INT(TER, mad, U64(a) * U64(b) + U64(c))
EACH_INT(TER, madhi, (uint64_t)(((wt)a * (wt)b) >> W) + U64(c))
/* Division by zero has no trap on a GPU (the result is unspecified): all
 * ones; MIN / -1 wraps. */
EACH_INT(BIN, div, b == 0 ? ~U64(0) : (SG && a == MINV && is_m1(U64(b)))
                                          ? U64(a) : U64(a / b))
EACH_INT(BIN, rem, b == 0 ? U64(a) : (SG && is_m1(U64(b))) ? 0 : U64(a % b))
EACH_INT(BIN, min, a < b ? a : b)
EACH_INT(BIN, max, a > b ? a : b)
EACH_INT(UN, neg, U64(0) - U64(a))
EACH_INT(UN, abs, (SG && is_neg((int64_t)a)) ? U64(0) - U64(a) : U64(a))
EACH_INT(BIN, and, U64(a) & U64(b))
EACH_INT(BIN, or, U64(a) | U64(b))
EACH_INT(BIN, xor, U64(a) ^ U64(b))
EACH_INT(UN, not, ~U64(a))
EACH_INT(UN, cnot, a == 0 ? 1 : 0)
EACH_INT(SHIFT, shl, b >= W ? 0 : U64(a) << b)
EACH_INT(SHIFT, shr, b >= W ? ((SG && is_neg((int64_t)a)) ? ~U64(0) : 0) : U64(a >> b))
EACH_INT(UN, popc, __builtin_popcountll(U64(a) & WM))

static inline uint64_t brev64(uint64_t x)
{
    x = (x >> 1 & 0x5555555555555555ull) | (x & 0x5555555555555555ull) << 1;
    x = (x >> 2 & 0x3333333333333333ull) | (x & 0x3333333333333333ull) << 2;
    x = (x >> 4 & 0x0f0f0f0f0f0f0f0full) | (x & 0x0f0f0f0f0f0f0f0full) << 4;
    return __builtin_bswap64(x);
}
#define WMASK(T) (~U64(0) >> (64 - W_##T))
EACH_INT(UN, clz, (U64(a) & WM) == 0 ? W : __builtin_clzll(U64(a) & WM) - (64 - W))
EACH_INT(UN, brev, brev64(U64(a) & WM) >> (64 - W))

/* mul.wide / mad.wide: sources of width W, result 2W. */
#define WIDE(T, WTT, STW)                                                                     \
    H(mulwide_##T)                                                                            \
    {                                                                                         \
        uint64_t *D = RD(0);                                                                  \
        const uint64_t *A = RS(0), *B = RS(1);                                                \
        LANES(m, D[l] = STW((WTT)LD_##T(A[l]) * (WTT)LD_##T(B[l])));                          \
        return 0;                                                                             \
    }                                                                                         \
    H(madwide_##T)                                                                            \
    {                                                                                         \
        uint64_t *D = RD(0);                                                                  \
        const uint64_t *A = RS(0), *B = RS(1), *C = RS(2);                                    \
        LANES(m, D[l] = STW((uint64_t)((WTT)LD_##T(A[l]) * (WTT)LD_##T(B[l])) + C[l]));       \
        return 0;                                                                             \
    }
WIDE(s16, int32_t, ST_u32)
WIDE(u16, uint32_t, ST_u32)
WIDE(s32, int64_t, ST_u64)
WIDE(u32, uint64_t, ST_u64)

static inline int64_t sx24(uint32_t v) { return (int32_t)(v << 8) >> 8; }
H(mul24_s32)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0), *B = RS(1);
    LANES(m, D[l] = ST_u32((uint64_t)(sx24((uint32_t)A[l]) * sx24((uint32_t)B[l]))));
    return 0;
}
H(mul24_u32)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0), *B = RS(1);
    LANES(m, D[l] = ST_u32((A[l] & 0xffffff) * (B[l] & 0xffffff)));
    return 0;
}
H(mad24_s32)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0), *B = RS(1), *C = RS(2);
    LANES(m, D[l] = ST_u32((uint64_t)(sx24((uint32_t)A[l]) * sx24((uint32_t)B[l])) + C[l]));
    return 0;
}
H(mad24_u32)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0), *B = RS(1), *C = RS(2);
    LANES(m, D[l] = ST_u32((A[l] & 0xffffff) * (B[l] & 0xffffff) + C[l]));
    return 0;
}
/* sad: |a - b| + c, the difference taken in VT (wide enough for T). */
#define SAD(T, VT)                                                                            \
    H(sad_##T)                                                                                \
    {                                                                                         \
        uint64_t *D = RD(0);                                                                  \
        SRCS_3;                                                                               \
        LANES(m, {                                                                            \
            VT a = LD_##T(A[l]), b = LD_##T(B[l]);                                            \
            D[l] = ST_u32((uint64_t)(a > b ? a - b : b - a) + C[l]);                          \
        });                                                                                   \
        return 0;                                                                             \
    }
SAD(s32, int64_t)
SAD(u32, uint32_t)
static inline uint64_t sat32(int64_t v)
{
    return ST_u32(v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : v);
}
H(add_sat_s32)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0), *B = RS(1);
    LANES(m, D[l] = sat32((int64_t)LD_s32(A[l]) + LD_s32(B[l])));
    return 0;
}
/* min/max.{s16,u16}x2: each 16-bit half on its own. mode bit 0: max; bit 1:
 * signed; bit 2: .relu (a negative result becomes 0). */
H(minmax16x2)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0), *B = RS(1);
    int mx = i->mode & 1, sg = i->mode >> 1 & 1, relu = i->mode >> 2 & 1;
    LANES(m, {
        uint32_t a = (uint32_t)A[l], b = (uint32_t)B[l], out = 0;
        for (int h = 0; h < 32; h += 16) {
            int32_t x = sg ? (int16_t)(uint16_t)(a >> h) : (int32_t)(uint16_t)(a >> h);
            int32_t y = sg ? (int16_t)(uint16_t)(b >> h) : (int32_t)(uint16_t)(b >> h);
            int32_t v = mx ? (x > y ? x : y) : (x < y ? x : y);
            if (relu && v < 0)
                v = 0;
            out |= (uint32_t)(uint16_t)v << h;
        }
        D[l] = out;
    });
    return 0;
}
H(sub_sat_s32)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0), *B = RS(1);
    LANES(m, D[l] = sat32((int64_t)LD_s32(A[l]) - LD_s32(B[l])));
    return 0;
}

/* add.cc / addc / sub.cc / subc / mad{c}.lo.cc / mad{c}.hi.cc: MODE is the
 * kind (0 add, 1 sub, 2 mad.lo, 3 mad.hi) | 0x10 reads CC | 0x20 writes CC |
 * 0x40 64-bit. For subtraction CC is the borrow. */
H(carry)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0), *B = RS(1), *C = RS(2);
    int kind = i->mode & 3, use = i->mode & 0x10, set = i->mode & 0x20, w64 = i->mode & 0x40;
    uint32_t cc = w->cc, out = 0;
    LANES(m, {
        unsigned __int128 a = w64 ? A[l] : (uint32_t)A[l], b = w64 ? B[l] : (uint32_t)B[l];
        unsigned __int128 cin = use ? (cc >> l & 1) : 0, r;
        int bits = w64 ? 64 : 32;
        if (kind == 0)
            r = a + b + cin;
        else if (kind == 1)
            r = a - b - cin;
        else {
            unsigned __int128 c = w64 ? C[l] : (uint32_t)C[l], p = a * b;
            p = kind == 2 ? (p & (w64 ? ~U64(0) : 0xffffffffu)) : p >> bits;
            r = p + c + cin;
        }
        out |= (uint32_t)((r >> bits) & 1) << l;
        D[l] = w64 ? (uint64_t)r : (uint32_t)r;
    });
    if (set)
        w->cc = (cc & ~m) | (out & m);
    return 0;
}

/* ------------------------------------------------------------------ bits */

/* The bit-field ops have 32- and 64-bit forms only. */
#define EACH_BITS(M) M(s32) M(u32) M(s64) M(u64)

#define BFE(T)                                                                                \
    H(bfe_##T)                                                                                \
    {                                                                                         \
        uint64_t *D = RD(0);                                                                  \
        const uint64_t *A = RS(0), *B = RS(1), *C = RS(2);                                    \
        LANES(m, {                                                                            \
            uint64_t a = U64(LD_##T(A[l])) & WMASK(T);                                        \
            unsigned pos = (unsigned)B[l] & 0xff, len = (unsigned)C[l] & 0xff;                \
            unsigned avail = pos >= W_##T ? 0 : W_##T - pos, n = len < avail ? len : avail;    \
            uint64_t x = pos >= W_##T ? 0 : a >> pos;                                         \
            uint64_t r = n >= 64 ? x : x & ((U64(1) << n) - 1);                               \
            if (SG_##T && len > 0) {                                                          \
                unsigned sp = pos + len - 1 < W_##T - 1 ? pos + len - 1 : W_##T - 1;          \
                if ((a >> sp) & 1 && n < 64)                                                  \
                    r |= ~U64(0) << n;                                                        \
            }                                                                                 \
            D[l] = ST_##T(r);                                                                 \
        });                                                                                   \
        return 0;                                                                             \
    }
EACH_BITS(BFE)

#define BFI(T)                                                                                \
    H(bfi_##T)                                                                                \
    {                                                                                         \
        uint64_t *D = RD(0);                                                                  \
        const uint64_t *A = RS(0), *B = RS(1), *C = RS(2), *E = RS(3);                        \
        LANES(m, {                                                                            \
            uint64_t a = A[l], b = B[l];                                                      \
            unsigned pos = (unsigned)C[l] & 0xff, len = (unsigned)E[l] & 0xff;                \
            uint64_t r = b;                                                                   \
            if (pos < W_##T && len > 0) {                                                     \
                unsigned n = len < W_##T - pos ? len : W_##T - pos;                           \
                uint64_t mk = (n >= 64 ? ~U64(0) : (U64(1) << n) - 1) << pos;                 \
                r = (b & ~mk) | ((a << pos) & mk);                                            \
            }                                                                                 \
            D[l] = ST_##T(r);                                                                 \
        });                                                                                   \
        return 0;                                                                             \
    }
EACH_BITS(BFI)

/* bfind: the position of the most significant non-sign bit, ~0 if none. */
#define BFIND(T)                                                                              \
    H(bfind_##T)                                                                              \
    {                                                                                         \
        uint64_t *D = RD(0);                                                                  \
        const uint64_t *A = RS(0);                                                            \
        LANES(m, {                                                                            \
            uint64_t a = U64(LD_##T(A[l])) & WMASK(T);                                        \
            if (SG_##T && ((a >> (W_##T - 1)) & 1))                                           \
                a = ~a & WMASK(T);                                                            \
            uint64_t pos = a == 0 ? 0xffffffffu : (uint64_t)(63 - __builtin_clzll(a));         \
            D[l] = (i->mode && a != 0) ? (W_##T - 1) - pos : pos;                             \
        });                                                                                   \
        return 0;                                                                             \
    }
EACH_BITS(BFIND)

H(prmt)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0), *B = RS(1), *C = RS(2);
    int mode = i->mode;
    LANES(m, {
        uint64_t x = (uint64_t)(uint32_t)B[l] << 32 | (uint32_t)A[l];
        uint32_t c = (uint32_t)C[l], r = 0;
        unsigned s = c & 3;
        for (unsigned k = 0; k < 4; k++) {
            unsigned sel;
            int sign = 0;
            switch (mode) {
            case 0: {
                unsigned nib = (c >> (4 * k)) & 0xf;
                sel = nib & 7;
                sign = nib >> 3;
                break;
            }
            case 1: sel = (s + k) & 7; break;            /* f4e */
            case 2: sel = (s - k) & 7; break;            /* b4e */
            case 3: sel = s; break;                      /* rc8 */
            case 4: sel = k < s ? s : k; break;          /* ecl */
            case 5: sel = k > s ? s : k; break;          /* ecr */
            default: sel = (s & 1) * 2 + (k & 1); break; /* rc16 */
            }
            uint32_t byte = (uint32_t)(x >> (8 * sel)) & 0xff;
            if (sign)
                byte = (byte & 0x80) ? 0xff : 0;
            r |= byte << (8 * k);
        }
        D[l] = r;
    });
    return 0;
}

static inline uint64_t lop3(uint64_t a, uint64_t b, uint64_t c, unsigned lut)
{
    uint64_t r = 0;
    for (unsigned k = 0; k < 8; k++)
        if (lut >> k & 1)
            r |= (k & 4 ? a : ~a) & (k & 2 ? b : ~b) & (k & 1 ? c : ~c);
    return r;
}
H(lop3_32)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0), *B = RS(1), *C = RS(2);
    LANES(m, D[l] = ST_u32(lop3(A[l], B[l], C[l], i->mode)));
    return 0;
}
H(lop3_64)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0), *B = RS(1), *C = RS(2);
    LANES(m, D[l] = lop3(A[l], B[l], C[l], i->mode));
    return 0;
}

#define SHF(name, amount, expr)                                                               \
    H(name)                                                                                   \
    {                                                                                         \
        uint64_t *D = RD(0);                                                                  \
        const uint64_t *A = RS(0), *B = RS(1), *C = RS(2);                                    \
        LANES(m, {                                                                            \
            uint64_t x = (uint64_t)(uint32_t)B[l] << 32 | (uint32_t)A[l];                     \
            uint32_t c = (uint32_t)C[l];                                                      \
            unsigned n = amount;                                                              \
            D[l] = ST_u32(expr);                                                              \
        });                                                                                   \
        return 0;                                                                             \
    }
SHF(shf_l_wrap, c & 31, (x << n) >> 32)
SHF(shf_l_clamp, c > 32 ? 32 : c, (x << n) >> 32)
SHF(shf_r_wrap, c & 31, x >> n)
SHF(shf_r_clamp, c > 32 ? 32 : c, x >> n)

/* bmsk: a mask of b bits from bit a (PTX ISA 7.6, "bmsk"). Wrap takes both
 * modulo 32; clamp gives 0 from a position of 32 or more, and the mask runs to
 * bit 31 when a width of 32 or more (or a + b) passes it. */
static inline uint32_t bmsk(uint32_t a, uint32_t b, int clamp)
{
    uint32_t a1 = a & 31, b1 = b & 31, sum = a1 + b1;
    uint32_t low = ~0u << a1, high = sum >= 32 ? 0 : ~0u << sum;
    if (clamp && a >= 32)
        low = 0;
    if (sum >= 32 || (clamp && b >= 32))
        high = 0;
    else if (b1 == 0)
        high = ~0u;
    return low & ~high;
}
H(bmsk_wrap)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0), *B = RS(1);
    LANES(m, D[l] = ST_u32(bmsk((uint32_t)A[l], (uint32_t)B[l], 0)));
    return 0;
}
H(bmsk_clamp)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0), *B = RS(1);
    LANES(m, D[l] = ST_u32(bmsk((uint32_t)A[l], (uint32_t)B[l], 1)));
    return 0;
}

H(dp4a)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0), *B = RS(1), *C = RS(2);
    int sa = i->mode & 1, sb = i->mode & 2;
    LANES(m, {
        uint32_t a = (uint32_t)A[l], b = (uint32_t)B[l];
        int64_t acc = sa || sb ? (int64_t)LD_s32(C[l]) : (int64_t)(uint32_t)C[l];
        for (int k = 0; k < 4; k++) {
            int64_t x = sa ? (int8_t)(a >> (8 * k)) : (uint8_t)(a >> (8 * k));
            int64_t y = sb ? (int8_t)(b >> (8 * k)) : (uint8_t)(b >> (8 * k));
            acc += x * y;
        }
        D[l] = ST_u32(acc);
    });
    return 0;
}
H(dp2a)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0), *B = RS(1), *C = RS(2);
    int sa = i->mode & 1, sb = i->mode & 2, hi = i->mode & 4 ? 2 : 0;
    LANES(m, {
        uint32_t a = (uint32_t)A[l], b = (uint32_t)B[l];
        int64_t acc = sa || sb ? (int64_t)LD_s32(C[l]) : (int64_t)(uint32_t)C[l];
        for (int k = 0; k < 2; k++) {
            int64_t x = sa ? (int16_t)(a >> (16 * k)) : (uint16_t)(a >> (16 * k));
            int64_t y = sb ? (int8_t)(b >> (8 * (k + hi))) : (uint8_t)(b >> (8 * (k + hi)));
            acc += x * y;
        }
        D[l] = ST_u32(acc);
    });
    return 0;
}

/* ------------------------------------------------------- floating point */

/* Directed rounding (.rz .rm .rp) switches the host's FP mode around the
 * loop; .rn is the host default. */
static const int fe_modes[4] = {FE_TONEAREST, FE_TOWARDZERO, FE_DOWNWARD, FE_UPWARD};
#define RND_BEGIN                                                                             \
    int rnd_ = i->mode & 3;                                                                   \
    if (rnd_)                                                                                 \
        fesetround(fe_modes[rnd_]);
#define RND_END                                                                               \
    if (rnd_)                                                                                 \
        fesetround(FE_TONEAREST);

static inline float satf(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }
static inline double satd(double x) { return x > 0.0 ? (x < 1.0 ? x : 1.0) : 0.0; }
#define SAT_f32 satf
#define SAT_f64 satd

/* A float handler under the instruction's rounding mode; SAT: whether the
 * op takes .sat (mode2 bit 0), which clamps the result to [0, 1]. */
#define FLT_OP(T, name, N, SAT, expr)                                                         \
    H(name##_##T)                                                                             \
    {                                                                                         \
        uint64_t *D = RD(0);                                                                  \
        SRCS_##N;                                                                             \
        RND_BEGIN                                                                             \
        LANES(m, {                                                                            \
            LOADS_##N(T)                                                                      \
            D[l] = ST_##T(expr);                                                              \
        });                                                                                   \
        RND_END                                                                               \
        if (SAT && (i->mode2 & 1))                                                            \
            LANES(m, D[l] = ST_##T(SAT_##T(LD_##T(D[l]))));                                   \
        return 0;                                                                             \
    }
#define FBIN(T, name, expr) FLT_OP(T, name, 2, 1, expr)
#define FTER(T, name, expr) FLT_OP(T, name, 3, 1, expr)
#define FUN(T, name, expr) FLT_OP(T, name, 1, 0, expr)
/* lg2 of a negative number is +NaN: glibc's log2f answers -NaN or +NaN by the
 * symbol version a library links, and the compile tier must give the same bits */
#define LG2F(a) ((a) < 0.0f ? NAN : log2f(a))
#define LG2D(a) ((a) < 0.0 ? (double)NAN : log2(a))

#define EACH_FLT(M, ...) M(f32, __VA_ARGS__) M(f64, __VA_ARGS__)
EACH_FLT(FBIN, fadd, a + b)
EACH_FLT(FBIN, fsub, a - b)
EACH_FLT(FBIN, fmul, a * b)
EACH_FLT(FBIN, fdiv, a / b)
/* min/max return the number when one operand is NaN; .NaN (mode2 & 2) the NaN.
 * -0.0 is below +0.0 (IEEE 754-2019 minimum/maximumNumber): C's fminf/fmaxf may
 * answer either zero, and gcc's inline expansion and glibc's differ, so both
 * tiers spell it out (the compile tier's prelude has the same functions). */
#define PTX_MINMAX(name, T)                                                              \
    static inline T name##_min(T a, T b)                                                 \
    {                                                                                    \
        return isnan(a) ? b : isnan(b) ? a : a < b ? a : b < a ? b : signbit(a) ? a : b; \
    }                                                                                    \
    static inline T name##_max(T a, T b)                                                 \
    {                                                                                    \
        return isnan(a) ? b : isnan(b) ? a : a > b ? a : b > a ? b : signbit(a) ? b : a; \
    }
PTX_MINMAX(f32, float)
PTX_MINMAX(f64, double)
#define NANP(a, b) ((i->mode2 & 2) && (isnan(a) || isnan(b)))
FBIN(f32, fmin, NANP(a, b) ? NAN : f32_min(a, b))
FBIN(f64, fmin, NANP(a, b) ? (double)NAN : f64_min(a, b))
FBIN(f32, fmax, NANP(a, b) ? NAN : f32_max(a, b))
FBIN(f64, fmax, NANP(a, b) ? (double)NAN : f64_max(a, b))
FBIN(f32, fcopysign, copysignf(b, a))
FBIN(f64, fcopysign, copysign(b, a))
FTER(f32, ffma, fmaf(a, b, c))
FTER(f64, ffma, fma(a, b, c))
FUN(f32, fneg, -a)
FUN(f64, fneg, -a)
FUN(f32, fabs, fabsf(a))
FUN(f64, fabs, fabs(a))
FUN(f32, fsqrt, sqrtf(a))
FUN(f64, fsqrt, sqrt(a))
FUN(f32, frcp, 1.0f / a)
FUN(f64, frcp, 1.0 / a)
FUN(f32, frsqrt, 1.0f / sqrtf(a))
FUN(f64, frsqrt, 1.0 / sqrt(a))
FUN(f32, fsin, sinf(a))
FUN(f32, fcos, cosf(a))
FUN(f32, fex2, exp2f(a))
FUN(f32, flg2, LG2F(a))
FUN(f32, ftanh, tanhf(a))
FUN(f64, fex2, exp2(a))
FUN(f64, flg2, LG2D(a))

#define TESTP(T, CLS)                                                                         \
    H(ftestp_##T)                                                                             \
    {                                                                                         \
        const uint64_t *A = RS(0);                                                            \
        uint32_t r = 0;                                                                       \
        int mode = i->mode;                                                                   \
        LANES(m, {                                                                            \
            int c = fpclassify(LD_##T(A[l]));                                                 \
            int v = mode == 0   ? (c != FP_NAN && c != FP_INFINITE)                           \
                    : mode == 1 ? c == FP_INFINITE                                            \
                    : mode == 2 ? c != FP_NAN                                                 \
                    : mode == 3 ? c == FP_NAN                                                 \
                    : mode == 4 ? c == FP_NORMAL                                              \
                                : c == FP_SUBNORMAL;                                          \
            r |= (uint32_t)v << l;                                                            \
        });                                                                                   \
        w->p[i->d[0]] = (w->p[i->d[0]] & ~m) | (r & m);                                       \
        return 0;                                                                             \
    }
TESTP(f32, 0)
TESTP(f64, 0)

/* f16 and bf16 arithmetic: through f32, rounded to nearest even. */
static float h2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, mant = h & 0x3ff, x;
    if (e == 0) {
        float f = ldexpf((float)mant, -24);
        return sign ? -f : f;
    }
    if (e == 31)
        x = sign | 0x7f800000u | mant << 13;
    else
        x = sign | (e - 15 + 127) << 23 | mant << 13;
    return f32of(x);
}
static uint16_t f2h(float f)
{
    uint32_t x = (uint32_t)bits32(f);
    uint32_t sign = (x >> 16) & 0x8000, e = (x >> 23) & 0xff, mant = x & 0x7fffff;
    if (e == 0xff)
        return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
    int ne = (int)e - 127 + 15;
    if (ne >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (ne <= 0) {
        if (ne < -10)
            return (uint16_t)sign;
        mant |= 0x800000;
        unsigned shift = (unsigned)(14 - ne);
        uint32_t hm = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (hm & 1)))
            hm++;
        return (uint16_t)(sign | hm);
    }
    uint32_t hm = mant >> 13, rem = mant & 0x1fff;
    uint32_t h = sign | (uint32_t)ne << 10 | hm;
    if (rem > 0x1000 || (rem == 0x1000 && (hm & 1)))
        h++;
    return (uint16_t)h;
}
static float bf2f(uint16_t b) { return f32of((uint32_t)b << 16); }
static uint16_t f2bf(float f)
{
    uint32_t x = (uint32_t)bits32(f);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}
static inline float hload(uint64_t v, int bf) { return bf ? bf2f((uint16_t)v) : h2f((uint16_t)v); }
static inline uint64_t hstore(float f, int bf) { return bf ? f2bf(f) : f2h(f); }

/* aux: bit 0 bf16, bit 1 a packed pair (.f16x2 / .bf16x2). */
#define HOP(name, n, expr)                                                                    \
    static inline float name##_1(float a, float b, float c)                                  \
    {                                                                                         \
        (void)b, (void)c;                                                                     \
        return expr;                                                                          \
    }                                                                                         \
    H(name)                                                                                   \
    {                                                                                         \
        uint64_t *D = RD(0);                                                                  \
        const uint64_t *A = RS(0), *B = RS(n > 1 ? 1 : 0), *C = RS(n > 2 ? 2 : 0);            \
        int bf = (int)(i->aux & 1), x2 = (int)(i->aux & 2), sat = i->mode2 & 1;                   \
        int relu = i->mode2 & 4, nanp = i->mode2 & 2; /* nanp: min/max.NaN */                \
        LANES(m, {                                                                            \
            uint64_t out = 0;                                                                 \
            for (int h = 0; h < (x2 ? 2 : 1); h++) {                                          \
                float a = hload(A[l] >> (16 * h), bf), b = hload(B[l] >> (16 * h), bf);       \
                float r = name##_1(a, b, hload(C[l] >> (16 * h), bf));                        \
                uint64_t v = hstore(sat ? satf(r) : relu && r < 0.0f ? 0.0f : r, bf);         \
                /* .relu of a NaN and .NaN of a NaN input: the canonical NaN */               \
                int canon = (relu && r != r) || (nanp && (a != a || b != b));                \
                out |= (canon ? 0x7fffu : v) << (16 * h);                                     \
            }                                                                                 \
            D[l] = out;                                                                       \
        });                                                                                   \
        return 0;                                                                             \
    }
HOP(hadd, 2, a + b)
HOP(hsub, 2, a - b)
HOP(hmul, 2, a * b)
HOP(hfma, 3, fmaf(a, b, c))
HOP(hneg, 1, -a)
HOP(habs, 1, fabsf(a))
HOP(hmin, 2, fminf(a, b))
HOP(hmax, 2, fmaxf(a, b))

/* ------------------------------------------------------------ predicates */

/* Writes setp's result R (lanes M) combined with its third operand. */
static inline int setp_finish(ptx_warp *w, const ptx_insn *i, uint32_t m, uint32_t r)
{
    uint32_t q = ~r;
    int comb = i->mode & 3;
    if (comb) {
        uint32_t c = w->p[i->s[2]];
        if (i->mode & 0x10)
            c = ~c;
        if (comb == 1)
            r &= c, q &= c;
        else if (comb == 2)
            r |= c, q |= c;
        else
            r ^= c, q ^= c;
    }
    w->p[i->d[0]] = (w->p[i->d[0]] & ~m) | (r & m);
    if (i->aux)
        w->p[i->d[1]] = (w->p[i->d[1]] & ~m) | (q & m);
    return 0;
}

#define SETP(T, name, expr)                                                                   \
    H(setp_##name##_##T)                                                                      \
    {                                                                                         \
        SRCS_2;                                                                               \
        uint32_t r = 0;                                                                       \
        LANES(m, {                                                                            \
            LOADS_2(T)                                                                        \
            r |= (uint32_t)(expr) << l;                                                       \
        });                                                                                   \
        return setp_finish(w, i, m, r);                                                       \
    }
#define ICMPS(T, x)                                                                           \
    SETP(T, eq, a == b) SETP(T, ne, a != b) SETP(T, lt, a < b) SETP(T, le, a <= b)             \
    SETP(T, gt, a > b) SETP(T, ge, a >= b)
EACH_INT(ICMPS, 0)
#define FCMPS(T, x)                                                                           \
    ICMPS(T, x)                                                                               \
    SETP(T, equ, a == b || isnan(a) || isnan(b)) SETP(T, neu, !(a == b))                       \
    SETP(T, ltu, !(a >= b)) SETP(T, leu, !(a > b)) SETP(T, gtu, !(a <= b))                     \
    SETP(T, geu, !(a < b)) SETP(T, num, !isnan(a) && !isnan(b))                               \
    SETP(T, nan, isnan(a) || isnan(b))
/* Float "ne" is ordered: false when either is NaN. */
#undef ICMPS
#define ICMPS(T, x)                                                                           \
    SETP(T, eq, a == b) SETP(T, ne, a != b && a == a && b == b) SETP(T, lt, a < b)            \
    SETP(T, le, a <= b) SETP(T, gt, a > b) SETP(T, ge, a >= b)
EACH_FLT(FCMPS, 0)

H(hsetp)
{
    const uint64_t *A = RS(0), *B = RS(1);
    int bf = i->mode2 >> 8 & 1, cmp = i->mode2 & 0xff;
    uint32_t r = 0;
    LANES(m, {
        float a = hload(A[l], bf), b = hload(B[l], bf);
        int un = isnan(a) || isnan(b), v;
        switch (cmp) {
        case 0: v = a == b; break;
        case 1: v = a != b && !un; break;
        case 2: v = a < b; break;
        case 3: v = a <= b; break;
        case 4: v = a > b; break;
        case 5: v = a >= b; break;
        case 6: v = a == b || un; break;
        case 7: v = a != b; break;
        case 8: v = !(a >= b); break;
        case 9: v = !(a > b); break;
        case 10: v = !(a <= b); break;
        case 11: v = !(a < b); break;
        case 12: v = !un; break; /* num */
        default: v = un; break;  /* nan */
        }
        r |= (uint32_t)v << l;
    });
    return setp_finish(w, i, m, r);
}

H(selp)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0), *B = RS(1);
    uint32_t c = w->p[i->s[2]];
    LANES(m, D[l] = (c >> l & 1) ? A[l] : B[l]);
    return 0;
}
#define PBIN(name, op)                                                                        \
    H(name)                                                                                   \
    {                                                                                         \
        uint32_t a = w->p[i->s[0]], b = w->p[i->s[1]];                                        \
        if (i->mode & 1)                                                                      \
            a = ~a;                                                                           \
        if (i->mode & 2)                                                                      \
            b = ~b;                                                                           \
        w->p[i->d[0]] = (w->p[i->d[0]] & ~m) | ((a op b) & m);                                \
        return 0;                                                                             \
    }
PBIN(pand, &)
PBIN(por, |)
PBIN(pxor, ^)
H(pnot)
{
    w->p[i->d[0]] = (w->p[i->d[0]] & ~m) | (~w->p[i->s[0]] & m);
    return 0;
}
H(pmov)
{
    w->p[i->d[0]] = (w->p[i->d[0]] & ~m) | (w->p[i->s[0]] & m);
    return 0;
}

/* ------------------------------------------------------ moves, conversions */

H(mov)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0);
    LANES(m, D[l] = A[l]);
    return 0;
}
H(pack2_32)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0), *B = RS(1);
    LANES(m, D[l] = (uint32_t)A[l] | (uint64_t)(uint32_t)B[l] << 32);
    return 0;
}
H(pack2_16)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0), *B = RS(1);
    LANES(m, D[l] = (uint16_t)A[l] | (uint64_t)(uint16_t)B[l] << 16);
    return 0;
}
H(pack4_16)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0), *B = RS(1), *C = RS(2), *E = RS(3);
    LANES(m, D[l] = (uint16_t)A[l] | (uint64_t)(uint16_t)B[l] << 16
                    | (uint64_t)(uint16_t)C[l] << 32 | (uint64_t)(uint16_t)E[l] << 48);
    return 0;
}
/* A register as two halves of UT, the low one first. */
#define UNPACK2(name, UT)                                                                     \
    H(name)                                                                                   \
    {                                                                                         \
        uint64_t *D0 = RD(0), *D1 = RD(1);                                                    \
        const uint64_t *A = RS(0);                                                            \
        LANES(m, {                                                                            \
            uint64_t v = A[l];                                                                \
            D0[l] = (UT)v;                                                                    \
            D1[l] = (UT)(v >> (8 * sizeof(UT)));                                              \
        });                                                                                   \
        return 0;                                                                             \
    }
UNPACK2(unpack2_32, uint32_t)
UNPACK2(unpack2_16, uint16_t)
H(unpack4_16)
{
    uint64_t *D0 = RD(0), *D1 = RD(1), *D2 = RD(2), *D3 = RD(3);
    const uint64_t *A = RS(0);
    LANES(m, {
        uint64_t v = A[l];
        D0[l] = (uint16_t)v;
        D1[l] = (uint16_t)(v >> 16);
        D2[l] = (uint16_t)(v >> 32);
        D3[l] = (uint16_t)(v >> 48);
    });
    return 0;
}

/* Integer widening without saturation: sign- or zero-extension. */
H(cvt_ext)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0);
    switch (i->aux >> 8) {
    case CK_S8: LANES(m, D[l] = (uint64_t)(int64_t)(int8_t)A[l]); break;
    case CK_U8: LANES(m, D[l] = (uint8_t)A[l]); break;
    case CK_S16: LANES(m, D[l] = (uint64_t)(int64_t)(int16_t)A[l]); break;
    case CK_U16: LANES(m, D[l] = (uint16_t)A[l]); break;
    case CK_S32: LANES(m, D[l] = (uint64_t)(int64_t)(int32_t)A[l]); break;
    case CK_U32: LANES(m, D[l] = (uint32_t)A[l]); break;
    default: LANES(m, D[l] = A[l]); break;
    }
    return 0;
}

static const int64_t ck_min[] = {0, INT8_MIN, 0, INT16_MIN, 0, INT32_MIN, 0, INT64_MIN};
static const uint64_t ck_max[] = {UINT8_MAX, INT8_MAX, UINT16_MAX, INT16_MAX,
                                  UINT32_MAX, INT32_MAX, UINT64_MAX, INT64_MAX};
static int ck_signed(int k) { return k == CK_S8 || k == CK_S16 || k == CK_S32 || k == CK_S64; }

static uint64_t int_store(int dk, uint64_t v)
{
    switch (dk) {
    case CK_U8: case CK_S8: return (uint8_t)v;
    case CK_U16: case CK_S16: return (uint16_t)v;
    case CK_U32: case CK_S32: return (uint32_t)v;
    default: return v;
    }
}

/* A float to an integer kind: rounded by RND (0 / 5..8 = none, rni, rzi, rmi,
 * rpi), NaN to 0, clamped to the destination's range (PTX saturates). */
static uint64_t f2int(double x, int dk, int rnd)
{
    if (isnan(x))
        return 0;
    switch (rnd) {
    case 5: x = nearbyint(x); break;
    case 7: x = floor(x); break;
    case 8: x = ceil(x); break;
    default: x = trunc(x); break;
    }
    if (ck_signed(dk)) {
        double lo = (double)ck_min[dk], hi = (double)(int64_t)ck_max[dk];
        if (x <= lo)
            return int_store(dk, (uint64_t)ck_min[dk]);
        if (x >= hi)
            return int_store(dk, ck_max[dk]);
        return int_store(dk, (uint64_t)(int64_t)x);
    }
    if (x <= 0)
        return 0;
    if (x >= (double)ck_max[dk])
        return ck_max[dk];
    return (uint64_t)x;
}

static double round_int(double x, int rnd)
{
    switch (rnd) {
    case 5: return nearbyint(x);
    case 6: return trunc(x);
    case 7: return floor(x);
    case 8: return ceil(x);
    default: return x;
    }
}

/* An integer source of kind SK: a signed kind's value in *SV, an unsigned
 * one's in *UV, the other 0. */
static void int_load(uint64_t v, int sk, int64_t *sv, uint64_t *uv)
{
    *sv = 0;
    *uv = 0;
    switch (sk) {
    case CK_S8: *sv = (int8_t)v; break;
    case CK_S16: *sv = (int16_t)v; break;
    case CK_S32: *sv = (int32_t)v; break;
    case CK_S64: *sv = (int64_t)v; break;
    case CK_U8: *uv = (uint8_t)v; break;
    case CK_U16: *uv = (uint16_t)v; break;
    case CK_U32: *uv = (uint32_t)v; break;
    default: *uv = v; break;
    }
}

/* A float source of kind SK (f64, f32, f16, else bf16) as a double. */
static double float_load(uint64_t v, int sk)
{
    return sk == CK_F64 ? f64of(v) : sk == CK_F32 ? (double)f32of(v)
           : sk == CK_F16 ? (double)h2f((uint16_t)v) : (double)bf2f((uint16_t)v);
}

static uint64_t cvt1(uint64_t v, int dk, int sk, int rnd, int sat)
{
    int sfloat = sk >= CK_F16, dfloat = dk >= CK_F16;
    if (!sfloat && !dfloat) {
        int64_t sv;
        uint64_t uv;
        int neg = 0;
        int_load(v, sk, &sv, &uv);
        if (ck_signed(sk)) {
            neg = sv < 0;
            uv = (uint64_t)sv;
        }
        if (sat) {
            if (neg)
                return int_store(dk, ck_signed(dk) && sv >= ck_min[dk] ? uv
                                                                       : (uint64_t)ck_min[dk]);
            if (uv > ck_max[dk])
                return int_store(dk, ck_max[dk]);
        }
        return int_store(dk, uv);
    }
    if (!dfloat) {
        double x = float_load(v, sk);
        return f2int(x, dk, rnd);
    }
    /* to a float: from an integer or a float */
    int fr = rnd >= 1 && rnd <= 4 ? rnd - 1 : 0;
    if (fr)
        fesetround(fe_modes[fr]);
    uint64_t out;
    if (!sfloat) {
        int64_t sv;
        uint64_t uv;
        int sgn = ck_signed(sk);
        int_load(v, sk, &sv, &uv);
        if (dk == CK_F64)
            out = bits64(sgn ? (double)sv : (double)uv);
        else {
            float f = sgn ? (float)sv : (float)uv;
            if (sat)
                f = satf(f);
            out = dk == CK_F32 ? bits32(f) : dk == CK_F16 ? f2h(f) : f2bf(f);
        }
        if (dk == CK_F64 && sat)
            out = bits64(satd(f64of(out)));
    } else {
        double x = float_load(v, sk);
        x = round_int(x, rnd);
        if (dk == CK_F64)
            out = bits64(sat ? satd(x) : x);
        else {
            volatile double xv = x; /* the rounding mode applies to this narrowing */
            float f = (float)xv;
            if (sat)
                f = satf(f);
            out = dk == CK_F32 ? bits32(f) : dk == CK_F16 ? f2h(f) : f2bf(f);
        }
    }
    if (fr)
        fesetround(FE_TONEAREST);
    return out;
}

H(cvt)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0);
    int dk = i->aux & 0xff, sk = (int)(i->aux >> 8), rnd = i->mode, sat = i->mode2;
    if (dk == CK_S32 && sk == CK_F32 && !sat && (rnd == 6 || rnd == 0)) {
        LANES(m, {
            float f = f32of(A[l]);
            D[l] = isnan(f) ? 0 : f >= 2147483648.0f ? 0x7fffffffu
                   : f < -2147483648.0f ? 0x80000000u : ST_u32((int32_t)f);
        });
        return 0;
    }
    if (dk == CK_F32 && (sk == CK_S32 || sk == CK_U32) && rnd <= 1 && !sat) {
        if (sk == CK_S32)
            LANES(m, D[l] = bits32((float)LD_s32(A[l])));
        else
            LANES(m, D[l] = bits32((float)LD_u32(A[l])));
        return 0;
    }
    LANES(m, D[l] = cvt1(A[l], dk, sk, rnd, sat));
    return 0;
}

static uint64_t now_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
H(clock)
{
    uint64_t *D = RD(0), t = (uint32_t)now_ns(CLOCK_MONOTONIC);
    LANES(m, D[l] = t);
    return 0;
}
H(clock64)
{
    uint64_t *D = RD(0), t = now_ns(CLOCK_MONOTONIC);
    LANES(m, D[l] = t);
    return 0;
}
H(globaltimer)
{
    uint64_t *D = RD(0), t = now_ns(CLOCK_REALTIME);
    LANES(m, D[l] = t);
    return 0;
}

/* Shared-space addresses are offsets in the block's buffer; local-space
 * addresses offsets in the thread's frame; generic ones host addresses. */
H(cvta_shared)
{
    uint64_t *D = RD(0), base = (uint64_t)(uintptr_t)w->b->shared;
    const uint64_t *A = RS(0);
    LANES(m, D[l] = A[l] + base);
    return 0;
}
H(cvta_to_shared)
{
    uint64_t *D = RD(0), base = (uint64_t)(uintptr_t)w->b->shared;
    const uint64_t *A = RS(0);
    LANES(m, D[l] = A[l] - base);
    return 0;
}
static inline uint64_t frame_of(const ptx_warp *w, int l)
{
    return (uint64_t)(uintptr_t)w->b->local + ((uint64_t)w->index * 32 + (uint64_t)l) * w->b->local_size;
}
H(cvta_local)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0);
    LANES(m, D[l] = A[l] + frame_of(w, l) + w->fp[l]);
    return 0;
}
H(cvta_to_local)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0);
    LANES(m, D[l] = A[l] - frame_of(w, l) - w->fp[l]);
    return 0;
}
H(isspacep)
{
    const uint64_t *A = RS(0);
    ptx_block *b = w->b;
    uint64_t sb = (uint64_t)(uintptr_t)b->shared, lb = (uint64_t)(uintptr_t)b->local;
    uint32_t r = 0;
    LANES(m, {
        uint64_t a = A[l];
        int in_s = a - sb < b->shared_size, in_l = a - lb < b->local_total;
        int v = i->mode == 2 ? in_s : i->mode == 3 ? in_l : (!in_s && !in_l);
        r |= (uint32_t)v << l;
    });
    w->p[i->d[0]] = (w->p[i->d[0]] & ~m) | (r & m);
    return 0;
}

/* ---------------------------------------------------------------- memory */

#define SX1(x) ((uint64_t)(int64_t)(int8_t)(x))
#define SX2(x) ((uint64_t)(int64_t)(int16_t)(x))
#define SX4(x) ((uint64_t)(int64_t)(int32_t)(x))
#define SX8(x) ((uint64_t)(x))

/* A vector access of AUX elements of N bytes at [ab + imm]; per lane, its
 * address a, checked for alignment, and p = WHERE(a, size), the host pointer
 * of [a, a+size) or NULL (a fault). */
#define MEM_ACCESS(N)                                                                         \
    ptx_block *b = w->b;                                                                      \
    const uint64_t *A = w->r[i->ab];                                                          \
    unsigned vec = i->aux;                                                                    \
    uint64_t size = (uint64_t)(N) * vec, off = (uint64_t)i->imm;                              \
    (void)b
#define MEM_LANE(PT, WHERE)                                                                   \
    uint64_t a = A[l] + off;                                                                  \
    if (a & (size - 1))                                                                       \
        return ptx_fault(w, i, a, PTX_E_MISALIGNED);                                          \
    PT *p = WHERE(a, size);                                                                   \
    if (p == NULL)                                                                            \
        return ptx_fault(w, i, a, PTX_E_ILLEGAL_ADDRESS)

#define MEMOPS(cls, WHERE)                                                                    \
    MEMOP(cls, 1, uint8_t, SX1, WHERE)                                                        \
    MEMOP(cls, 2, uint16_t, SX2, WHERE)                                                       \
    MEMOP(cls, 4, uint32_t, SX4, WHERE)                                                       \
    MEMOP(cls, 8, uint64_t, SX8, WHERE)
#define MEMOP(cls, N, UT, SX, WHERE)                                                          \
    H(ld_##cls##N)                                                                            \
    {                                                                                         \
        MEM_ACCESS(N);                                                                        \
        LANES(m, {                                                                            \
            MEM_LANE(const uint8_t, WHERE);                                                   \
            for (unsigned v = 0; v < vec; v++) {                                              \
                UT x;                                                                         \
                memcpy(&x, p + (size_t)v * N, N);                                             \
                w->r[i->d[v]][l] = i->mode ? SX(x) : (uint64_t)x;                             \
            }                                                                                 \
        });                                                                                   \
        return 0;                                                                             \
    }                                                                                         \
    STOP(cls, N, UT, WHERE)

#define STOP(cls, N, UT, WHERE)                                                               \
    H(st_##cls##N)                                                                            \
    {                                                                                         \
        MEM_ACCESS(N);                                                                        \
        LANES(m, {                                                                            \
            MEM_LANE(uint8_t, WHERE);                                                         \
            for (unsigned v = 0; v < vec; v++) {                                              \
                UT x = (UT)w->r[i->s[v]][l];                                                  \
                memcpy(p + (size_t)v * N, &x, N);                                             \
            }                                                                                 \
        });                                                                                   \
        return 0;                                                                             \
    }

static inline uint8_t *at_shared(ptx_block *b, uint64_t a, uint64_t size)
{
    return a <= b->shared_size && b->shared_size - a >= size ? b->shared + a : NULL;
}
static inline uint8_t *at_local(ptx_warp *w, int l, uint64_t a, uint64_t size)
{
    ptx_block *b = w->b;
    a += w->fp[l]; /* local addresses are relative to the lane's frame */
    if (a > b->local_size || b->local_size - a < size)
        return NULL;
    return b->local + ((uint64_t)w->index * 32 + (uint64_t)l) * b->local_size + a;
}
#define W_G(a, size) ptx_gaddr(b, a, size)
#define W_S(a, size) at_shared(b, a, size)
#define W_L(a, size) at_local(w, l, a, size)
MEMOPS(g, W_G)
MEMOPS(s, W_S)
MEMOPS(l, W_L)
#undef STOP
#define STOP(cls, N, UT, WHERE)
static inline const uint8_t *at_param(ptx_block *b, uint64_t a, uint64_t size)
{
    return a <= b->params_len && b->params_len - a >= size ? b->params + a : NULL;
}
#define W_P(a, size) at_param(b, a, size)
MEMOPS(p, W_P)

/* Atomics: TK 0 u32, 1 s32, 2 u64, 3 s64, 4 f32, 5 f64; OP add min max inc
 * dec and or xor exch cas. Blocks run on several host threads, so even
 * shared memory goes through __atomic (cheap when uncontended). */
static uint64_t atom1(uint8_t *p, int op, int tk, uint64_t b, uint64_t c)
{
    if (tk == 0 || tk == 1 || tk == 4) {
        uint32_t *q = (uint32_t *)p, bv = (uint32_t)b, old, nv;
        switch (op) {
        case 0:
            if (tk != 4)
                return __atomic_fetch_add(q, bv, __ATOMIC_RELAXED);
            break;
        case 5: return __atomic_fetch_and(q, bv, __ATOMIC_RELAXED);
        case 6: return __atomic_fetch_or(q, bv, __ATOMIC_RELAXED);
        case 7: return __atomic_fetch_xor(q, bv, __ATOMIC_RELAXED);
        case 8: return __atomic_exchange_n(q, bv, __ATOMIC_RELAXED);
        case 9: {
            uint32_t exp = bv;
            __atomic_compare_exchange_n(q, &exp, (uint32_t)c, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED);
            return exp;
        }
        default: break;
        }
        old = __atomic_load_n(q, __ATOMIC_RELAXED);
        do {
            switch (op) {
            case 0: nv = (uint32_t)bits32(f32of(old) + f32of(bv)); break;
            case 1:
                nv = tk == 1 ? ((int32_t)bv < (int32_t)old ? bv : old)
                     : tk == 4 ? (uint32_t)bits32(f32_min(f32of(old), f32of(bv)))
                               : (bv < old ? bv : old);
                break;
            case 2:
                nv = tk == 1 ? ((int32_t)bv > (int32_t)old ? bv : old)
                     : tk == 4 ? (uint32_t)bits32(f32_max(f32of(old), f32of(bv)))
                               : (bv > old ? bv : old);
                break;
            case 3: nv = old >= bv ? 0 : old + 1; break;
            default: nv = (old == 0 || old > bv) ? bv : old - 1; break;
            }
        } while (!__atomic_compare_exchange_n(q, &old, nv, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
        return old;
    }
    uint64_t *q = (uint64_t *)p, old, nv;
    switch (op) {
    case 0:
        if (tk != 5)
            return __atomic_fetch_add(q, b, __ATOMIC_RELAXED);
        break;
    case 5: return __atomic_fetch_and(q, b, __ATOMIC_RELAXED);
    case 6: return __atomic_fetch_or(q, b, __ATOMIC_RELAXED);
    case 7: return __atomic_fetch_xor(q, b, __ATOMIC_RELAXED);
    case 8: return __atomic_exchange_n(q, b, __ATOMIC_RELAXED);
    case 9: {
        uint64_t exp = b;
        __atomic_compare_exchange_n(q, &exp, c, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
        return exp;
    }
    default: break;
    }
    old = __atomic_load_n(q, __ATOMIC_RELAXED);
    do {
        switch (op) {
        case 0: nv = bits64(f64of(old) + f64of(b)); break;
        case 1:
            nv = tk == 3 ? ((int64_t)b < (int64_t)old ? b : old)
                 : tk == 5 ? bits64(f64_min(f64of(old), f64of(b))) : (b < old ? b : old);
            break;
        case 2:
            nv = tk == 3 ? ((int64_t)b > (int64_t)old ? b : old)
                 : tk == 5 ? bits64(f64_max(f64of(old), f64of(b))) : (b > old ? b : old);
            break;
        case 3: nv = old >= b ? 0 : old + 1; break;
        default: nv = (old == 0 || old > b) ? b : old - 1; break;
        }
    } while (!__atomic_compare_exchange_n(q, &old, nv, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return old;
}

#define ATOM(name, WHERE)                                                                     \
    H(name)                                                                                   \
    {                                                                                         \
        ptx_block *b = w->b;                                                                  \
        const uint64_t *A = w->r[i->ab], *B = RS(0), *C = RS(1);                              \
        uint64_t *D = RD(0);                                                                  \
        int tk = (int)i->aux, size = tk == 0 || tk == 1 || tk == 4 ? 4 : 8;                   \
        LANES(m, {                                                                            \
            uint64_t a = A[l] + (uint64_t)i->imm;                                             \
            if (a & (uint64_t)(size - 1))                                                     \
                return ptx_fault(w, i, a, PTX_E_MISALIGNED);                                  \
            uint8_t *p = WHERE(a, (uint64_t)size);                                            \
            if (p == NULL)                                                                    \
                return ptx_fault(w, i, a, PTX_E_ILLEGAL_ADDRESS);                             \
            uint64_t old = atom1(p, i->mode, tk, B[l], i->mode == 9 ? C[l] : 0);              \
            D[l] = size == 4 ? (uint32_t)old : old;                                           \
        });                                                                                   \
        return 0;                                                                             \
    }
ATOM(atom_g, W_G)
ATOM(atom_s, W_S)

/* cp.async: MODE bytes from global [ab + imm] to shared [s0 + aux]; only the
 * first src-size (s1) bytes are read, the rest is zero-filled. */
H(cpasync)
{
    ptx_block *b = w->b;
    const uint64_t *A = w->r[i->ab], *S = RS(0), *N = RS(1);
    uint64_t size = i->mode;
    LANES(m, {
        uint64_t ga = A[l] + (uint64_t)i->imm, sa = S[l] + (uint64_t)(int64_t)(int32_t)i->aux;
        uint64_t n = N[l] < size ? N[l] : size;
        if ((ga | sa) & (size - 1))
            return ptx_fault(w, i, ga, PTX_E_MISALIGNED);
        uint8_t *dst = at_shared(b, sa, size);
        const uint8_t *from = n ? ptx_gaddr(b, ga, n) : dst;
        if (dst == NULL || from == NULL)
            return ptx_fault(w, i, dst == NULL ? sa : ga, PTX_E_ILLEGAL_ADDRESS);
        uint8_t tmp[16] = {0};
        memcpy(tmp, from, n);
        memcpy(dst, tmp, size);
    });
    return 0;
}

/* ------------------------------------------------------------- warp-wide */

H(shfl)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0), *B = RS(1), *C = RS(2);
    uint64_t out[PTX_LANES];
    uint32_t pv = 0;
    int mode = i->mode;
    LANES(m, {
        uint32_t bval = (uint32_t)B[l] & 31, cval = (uint32_t)C[l];
        uint32_t seg = (cval >> 8) & 31;
        int maxl = (int)((l & seg) | (cval & 31 & ~seg)), minl = (int)(l & seg), j;
        int ok;
        switch (mode) {
        case 0: j = l - (int)bval; ok = j >= maxl; break;
        case 1: j = l + (int)bval; ok = j <= maxl; break;
        case 2: j = l ^ (int)bval; ok = j <= maxl; break;
        default: j = minl | (int)(bval & ~seg); ok = j <= maxl; break;
        }
        if (!ok || j < 0 || j > 31)
            j = l;
        /* A source lane that does not run this shfl with us (inactive,
         * exited, or beyond a partial warp) gives 0, as GPUs do: PTX leaves
         * it undefined, and the cuda-samples reduction's last warp (a
         * membermask of its first lanes, offsets up to 16) sums right only
         * so. Its register here holds the lane's earlier value. */
        out[l] = m >> j & 1 ? (uint32_t)A[j] : 0;
        pv |= (uint32_t)ok << l;
    });
    LANES(m, D[l] = out[l]);
    if (i->mode2)
        w->p[i->d[1]] = (w->p[i->d[1]] & ~m) | (pv & m);
    return 0;
}

/* The lanes a warp-wide .sync instruction combines for lane L: those of L's
 * membermask that run it with L. Lanes may name different masks (cooperative
 * groups' labeled_partition gives each bucket its own, from match.any), and
 * each group then gets its own answer: a mask is never widened to the warp.
 * A lane outside its own mask is undefined in PTX; it counts itself here. */
static inline uint32_t sync_group(const uint64_t *mask, int l, uint32_t m)
{
    return ((uint32_t)mask[l] | 1u << l) & m;
}

/* vote: S0 the predicate (MODE 1: negated), S1 the membermask. */
static inline uint32_t vote_bits(ptx_warp *w, const ptx_insn *i, uint32_t m)
{
    uint32_t p = w->p[i->s[0]];
    return (i->mode ? ~p : p) & m;
}
#define VOTE(name, lane_true)                                                                \
    H(name)                                                                                   \
    {                                                                                         \
        const uint64_t *M = RS(1);                                                            \
        uint32_t v = vote_bits(w, i, m), r = 0;                                               \
        LANES(m, {                                                                            \
            uint32_t g = sync_group(M, l, m), in = v & g;                                     \
            r |= (uint32_t)(lane_true) << l;                                                  \
        });                                                                                   \
        w->p[i->d[0]] = (w->p[i->d[0]] & ~m) | r;                                             \
        return 0;                                                                             \
    }
VOTE(vote_all, in == g)
VOTE(vote_any, in != 0)
VOTE(vote_uni, in == 0 || in == g)
#undef VOTE
H(vote_ballot)
{
    uint64_t *D = RD(0);
    const uint64_t *M = RS(1);
    uint32_t v = vote_bits(w, i, m), out[PTX_LANES];
    LANES(m, out[l] = v & sync_group(M, l, m));
    LANES(m, D[l] = out[l]);
    return 0;
}
/* redux.sync: MODE 0 add 1 min 2 max 3 and 4 or 5 xor, | 8 signed; S1 the
 * membermask. */
static uint32_t redux_over(int op, int sg, const uint64_t *A, uint32_t g)
{
    uint32_t acc = op == 1 ? (sg ? (uint32_t)INT32_MAX : UINT32_MAX)
                   : op == 2 ? (sg ? (uint32_t)INT32_MIN : 0) : op == 3 ? UINT32_MAX : 0;
    for (; g; g &= g - 1) {
        uint32_t v = (uint32_t)A[__builtin_ctz(g)];
        switch (op) {
        case 0: acc += v; break;
        case 1: acc = sg ? ((int32_t)v < (int32_t)acc ? v : acc) : (v < acc ? v : acc); break;
        case 2: acc = sg ? ((int32_t)v > (int32_t)acc ? v : acc) : (v > acc ? v : acc); break;
        case 3: acc &= v; break;
        case 4: acc |= v; break;
        default: acc ^= v; break;
        }
    }
    return acc;
}
H(redux)
{
    uint64_t *D = RD(0);
    const uint64_t *A = RS(0), *M = RS(1);
    uint32_t out[PTX_LANES];
    LANES(m, out[l] = redux_over(i->mode & 7, i->mode & 8, A, sync_group(M, l, m)));
    LANES(m, D[l] = out[l]);
    return 0;
}
H(activemask)
{
    uint64_t *D = RD(0);
    LANES(m, D[l] = m);
    return 0;
}
/* match: S0 the value (MODE 1: 64 bits), S1 the membermask. */
H(match_any)
{
    uint64_t *D = RD(0), mk = i->mode ? ~U64(0) : 0xffffffffu;
    const uint64_t *A = RS(0), *M = RS(1);
    uint64_t out[PTX_LANES];
    LANES(m, {
        uint32_t same = 0;
        for (uint32_t q = sync_group(M, l, m); q; q &= q - 1) {
            int k = __builtin_ctz(q);
            if ((A[k] & mk) == (A[l] & mk))
                same |= 1u << k;
        }
        out[l] = same;
    });
    LANES(m, D[l] = out[l]);
    return 0;
}
H(match_all)
{
    uint64_t *D = RD(0), mk = i->mode ? ~U64(0) : 0xffffffffu;
    const uint64_t *A = RS(0), *M = RS(1);
    uint64_t out[PTX_LANES];
    uint32_t pv = 0;
    LANES(m, {
        uint32_t g = sync_group(M, l, m), all = 1;
        for (uint32_t q = g; q; q &= q - 1)
            all &= (A[__builtin_ctz(q)] & mk) == (A[l] & mk);
        out[l] = all ? g : 0;
        pv |= all << l;
    });
    LANES(m, D[l] = out[l]);
    if (i->fk >> (2 * PTX_F_D1) & 3)
        w->p[i->d[1]] = (w->p[i->d[1]] & ~m) | pv;
    return 0;
}

/* ----------------------------------------------------------------- table */

#define h_devcall ptx_h_devcall /* in ptx_builtin.c */
#define h_wmma_load ptx_h_wmma_load /* in ptx_exec_wmma.c */
#define h_wmma_store ptx_h_wmma_store
#define h_wmma_mma ptx_h_wmma_mma
#define h_cvt_tf32 ptx_h_cvt_tf32
#define PTX_HANDLER(n) h_##n,
const ptx_fn ptx_handlers[PTX_NOPS] = {PTX_OPS(PTX_HANDLER)};
#define PTX_NAME(n) #n,
const char *const ptx_op_names[PTX_NOPS] = {PTX_OPS(PTX_NAME)};

/* ------------------------------------------------------------- dispatch */

/* Where the running group at PC next meets parked lanes (UINT32_MAX: none):
 * the lowest pc of the parked lanes other than those at PC, but of the lanes
 * holding at a .sync only those ahead of PC (at PC too when AT). */
static uint32_t next_merge(const ptx_warp *w, uint32_t pc, int at)
{
    uint32_t nxt = UINT32_MAX;
    for (uint32_t q = w->parked; q; q &= q - 1) {
        int l = __builtin_ctz(q);
        uint32_t lp = w->lpc[l];
        int ok = (w->syncwait >> l & 1) ? lp > pc || (at && lp == pc) : lp != pc || at;
        if (ok && lp < nxt)
            nxt = lp;
    }
    return nxt;
}

/* The group with the lowest pc runs next; lanes holding at a .sync
 * instruction (syncwait) only once no other lane can run, so that the lanes
 * they wait for arrive first. Lanes at the chosen pc all join, holding or
 * not. */
int ptx_warp_select(ptx_warp *w)
{
    uint32_t cand = w->parked & ~w->syncwait;
    if (cand == 0)
        cand = w->parked;
    if (cand == 0) {
        w->mask = 0;
        w->merge_pc = UINT32_MAX;
        return 0;
    }
    uint32_t lo = UINT32_MAX;
    for (uint32_t q = cand; q; q &= q - 1) {
        uint32_t pc = w->lpc[__builtin_ctz(q)];
        lo = pc < lo ? pc : lo;
    }
    uint32_t grp = 0;
    for (uint32_t q = w->parked; q; q &= q - 1) {
        int l = __builtin_ctz(q);
        if (w->lpc[l] == lo)
            grp |= 1u << l;
    }
    w->pc = lo;
    w->mask = grp;
    w->parked &= ~grp;
    w->syncwait &= ~grp;
    w->merge_pc = next_merge(w, lo, 0);
    return 1;
}

/* Whether group M must hold at the warp-wide .sync instruction I (its member
 * mask is operand K) because lanes of the mask are parked elsewhere and may
 * still come: PTX says each lane waits there for the others of its mask.
 * nvcc may place a divergent region's join block before the region (a loop
 * body's tail), where the lowest-pc rule would run the lanes that skipped
 * the region through the next .sync without the others (cdpQuadtree's
 * ballots lost points). Lanes that already hold elsewhere are not waited
 * for: when every lane holds, the lowest group goes on. */
static int sync_must_hold(const ptx_warp *w, const ptx_insn *i, int k, uint32_t em, uint32_t m)
{
    uint32_t others = w->parked & ~w->syncwait & ~m;
    if (others == 0)
        return 0;
    uint32_t members = 0;
    for (uint32_t q = em; q; q &= q - 1)
        members |= (uint32_t)w->r[i->s[k]][__builtin_ctz(q)];
    return (members & others) != 0;
}

int ptx_sync_hold(const ptx_warp *w, const ptx_insn *i, uint32_t em, uint32_t m)
{
    int k = ptx_sync_mask_operand(i->op);
    return em && w->parked && k >= 0 && sync_must_hold(w, i, k, em, m);
}

static inline void park(ptx_warp *w, uint32_t lanes, uint32_t pc)
{
    for (uint32_t q = lanes; q; q &= q - 1)
        w->lpc[__builtin_ctz(q)] = pc;
    w->parked |= lanes;
}

/* Lanes EM leave the waiting lists of out-of-line calls (they exited, or
 * returned from the call the entry stands for); emptied entries free their
 * waiting lanes at the return pc. */
static void unwait(ptx_warp *w, uint32_t em, int only)
{
    for (uint32_t u = w->cw_used; u; u &= u - 1) {
        int e = __builtin_ctz(u);
        if (only >= 0 && e != only)
            continue;
        w->cw[e].outstanding &= ~em;
        if (w->cw[e].outstanding == 0) {
            park(w, w->cw[e].waiting & w->live, w->cw[e].ret_pc);
            w->cw_used &= ~(1u << e);
        }
    }
}

static inline uint8_t *lane_frame(const ptx_warp *w, int l)
{
    return w->b->local + ((uint64_t)w->index * 32 + (uint64_t)l) * w->b->local_size;
}

static inline uint32_t a16(uint32_t v) { return (v + 15) / 16 * 16; }

/* An out-of-line call by lanes EM of group M at PC: each lane gets a frame
 * above its caller's (arguments copied in, its registers saved), the lanes of
 * M that do not call wait until the callers are back. */
static int do_ocall(ptx_warp *w, const ptx_insn *i, uint32_t em, uint32_t m, uint32_t pc)
{
    const ptx_kernel *k = w->b->k;
    const ptx_ocall *oc = &k->ocalls[i->aux];
    uint64_t lsz = w->b->local_size;
    uint32_t others = m & ~em, e = UINT32_MAX;
    if (others && w->cw_used != 0xffffu) {
        e = (uint32_t)__builtin_ctz(~w->cw_used);
        w->cw[e].waiting = others;
        w->cw[e].outstanding = em;
        w->cw[e].ret_pc = pc + 1;
        w->cw_used |= 1u << e;
    } else if (others)
        park(w, others, pc + 1);
    for (uint32_t q = em; q; q &= q - 1) {
        int l = __builtin_ctz(q);
        int32_t bi = oc->body;
        if (bi < 0) {
            uint64_t v = w->r[i->s[0]][l], fid = v & 0xffffffffu;
            if ((v & ~0xffffffffull) != PTX_FUNC_TAG || fid >= k->nfuncs
                || (bi = k->body_of[fid]) < 0)
                return ptx_fault(w, i, v, PTX_E_LAUNCH_FAILED);
        }
        const ptx_body *bd = &k->bodies[bi];
        uint64_t fp = w->fp[l], nfp = fp + oc->k;
        if (nfp + bd->frame > lsz) /* too deep a recursion */
            return ptx_fault(w, i, nfp, PTX_E_LAUNCH_FAILED);
        uint8_t *base = lane_frame(w, l), *fr = base + nfp;
        uint32_t top = 0;
        for (uint32_t a = 0; a < oc->nargs; a++) {
            uint32_t off = oc->off[oc->nret + a], size = oc->size[oc->nret + a];
            if (top + size > bd->rets || fp + off + size > lsz)
                return ptx_fault(w, i, fp + off, PTX_E_LAUNCH_FAILED);
            memcpy(fr + top, base + fp + off, size);
            top += a16(size);
        }
        uint32_t hdr[4] = {pc + 1, (uint32_t)fp, i->aux, e};
        memcpy(fr + bd->hdr, hdr, sizeof hdr);
        for (uint32_t r = 0; r < bd->nr; r++)
            memcpy(fr + bd->save + 8 * r, &w->r[bd->rb + r][l], 8);
        for (uint32_t p = 0; p < bd->np; p++)
            fr[bd->save + 8 * bd->nr + p] = (uint8_t)(w->p[bd->pb + p] >> l & 1);
        w->fp[l] = (uint32_t)nfp;
        w->frames_moved = 1;
        w->lpc[l] = bd->entry;
        w->parked |= 1u << l;
    }
    return 0;
}

/* Lanes EM return from out-of-line body I->aux to their callers. */
static int do_oret(ptx_warp *w, const ptx_insn *i, uint32_t em)
{
    const ptx_kernel *k = w->b->k;
    const ptx_body *bd = &k->bodies[i->aux];
    uint64_t lsz = w->b->local_size;
    for (uint32_t q = em; q; q &= q - 1) {
        int l = __builtin_ctz(q);
        uint8_t *base = lane_frame(w, l), *fr = base + w->fp[l];
        uint32_t hdr[4];
        memcpy(hdr, fr + bd->hdr, sizeof hdr);
        if (hdr[2] >= k->nocalls)
            return ptx_fault(w, i, 0, PTX_E_LAUNCH_FAILED);
        const ptx_ocall *oc = &k->ocalls[hdr[2]];
        uint64_t ofp = hdr[1];
        for (uint32_t j = 0; j < oc->nret; j++) {
            uint32_t size = oc->size[j] < 16 ? oc->size[j] : 16;
            if (ofp + oc->off[j] + size > lsz)
                return ptx_fault(w, i, ofp + oc->off[j], PTX_E_LAUNCH_FAILED);
            memcpy(base + ofp + oc->off[j], fr + bd->rets + 16 * j, size);
        }
        for (uint32_t r = 0; r < bd->nr; r++)
            memcpy(&w->r[bd->rb + r][l], fr + bd->save + 8 * r, 8);
        for (uint32_t p = 0; p < bd->np; p++) {
            uint32_t bit = (uint32_t)fr[bd->save + 8 * bd->nr + p] << l;
            w->p[bd->pb + p] = (w->p[bd->pb + p] & ~(1u << l)) | bit;
        }
        w->fp[l] = (uint32_t)ofp;
        w->lpc[l] = hdr[0];
        w->parked |= 1u << l;
        if (hdr[3] < 16 && (w->cw_used >> hdr[3] & 1))
            unwait(w, 1u << l, (int)hdr[3]);
    }
    return 0;
}

void ptx_bar_arrive(ptx_warp *w, const ptx_insn *i, uint32_t em, uint32_t pc)
{
    w->bar = i;
    if (i->mode & 3) { /* bar.red: gather this warp's predicates */
        uint32_t p = w->p[i->s[2]];
        p = ((i->mode & 0x10) ? ~p : p) & em;
        w->b->red_popc += (uint32_t)__builtin_popcount(p);
        w->b->red_all &= (em & ~p) == 0;
        w->b->red_any |= p != 0;
    }
    /* Lanes of a warp nearly always wait at one barrier: their resume pc is
     * kept once (bar_pc) and written to each lane's lpc only when another
     * barrier sees lanes of the warp too (ptx_bar_release) */
    if (w->atbar == 0)
        w->bar_pc = pc + 1;
    else if (w->bar_pc != pc + 1) {
        if (w->bar_pc != PTX_BAR_MIXED)
            for (uint32_t q = w->atbar; q; q &= q - 1)
                w->lpc[__builtin_ctz(q)] = w->bar_pc;
        for (uint32_t q = em; q; q &= q - 1)
            w->lpc[__builtin_ctz(q)] = pc + 1;
        w->bar_pc = PTX_BAR_MIXED;
    }
    w->atbar |= em;
}

void ptx_bar_release(ptx_warp *w)
{
    uint32_t lanes = w->atbar;
    w->atbar = 0;
    w->bar = NULL;
    if (lanes != 0 && w->bar_pc != PTX_BAR_MIXED && w->parked == 0 && w->syncwait == 0) {
        /* what ptx_warp_select picks: every waiting lane at one pc, no other
         * lane parked */
        w->pc = w->bar_pc;
        w->mask = lanes;
        w->merge_pc = UINT32_MAX;
        return;
    }
    if (w->bar_pc != PTX_BAR_MIXED)
        for (uint32_t q = lanes; q; q &= q - 1)
            w->lpc[__builtin_ctz(q)] = w->bar_pc;
    w->parked |= lanes;
    ptx_warp_select(w);
}

int ptx_warp_run(ptx_warp *w)
{
    const ptx_insn *code = w->b->k->code;
    uint32_t pc = w->pc, m = w->mask, mpc = w->merge_pc;
    uint64_t n = 0;
    int rc = 0;
    if (m == 0)
        goto reselect;
    for (;;) {
        if (pc == mpc) { /* parked lanes waiting here rejoin */
            uint32_t join = 0;
            for (uint32_t q = w->parked; q; q &= q - 1) {
                int l = __builtin_ctz(q);
                if (w->lpc[l] == pc)
                    join |= 1u << l;
            }
            m |= join;
            w->parked &= ~join;
            w->syncwait &= ~join;
            mpc = next_merge(w, pc, 0);
        }
        const ptx_insn *i = code + pc;
        uint32_t em = m;
        if (i->guard) {
            uint32_t g = w->p[i->guard & ~PTX_GUARD_NEG];
            em &= (i->guard & PTX_GUARD_NEG) ? ~g : g;
        }
        if (em && w->parked) {
            int k = ptx_sync_mask_operand(i->op);
            if (k >= 0 && sync_must_hold(w, i, k, em, m)) {
                park(w, m, pc);
                w->syncwait |= m;
                goto reselect;
            }
        }
        n += (uint64_t)__builtin_popcount(em);
        if (i->fn != NULL) {
            if (em && (rc = i->fn(w, i, em)) != 0)
                break;
            pc++;
            continue;
        }
        switch (i->ctl) {
        case PTX_C_BRA: {
            uint32_t t = i->aux;
            if (t <= pc) {
                uint64_t be = ++w->b->backedges;
                if ((be & 0xfff) == 0 && (rc = ptx_deadline_check(w->b)))
                    goto out;
                /* a loop lets the block's other warps, and in a cooperative
                 * grid the other blocks, run now and then: one may wait
                 * for another (a grid barrier spins on memory). The branch
                 * runs again when the warp resumes. */
                if ((be & w->b->yield_mask) == 0) {
                    rc = PTX_WARP_YIELD;
                    goto out;
                }
            }
            if (em == 0 || t == pc + 1) {
                pc++;
                continue;
            }
            if (em == m) { /* uniform */
                if (t > mpc) {
                    park(w, m, t);
                    goto reselect;
                }
                if (t <= pc && w->syncwait) /* back to lanes holding at a .sync? */
                    mpc = next_merge(w, t, 1);
                pc = t;
                continue;
            }
            park(w, em, t);
            m &= ~em;
            if (t < pc + 1) { /* the lanes going back run first */
                park(w, m, pc + 1);
                goto reselect;
            }
            pc++;
            mpc = t < mpc ? t : mpc;
            continue;
        }
        case PTX_C_OCALL:
            if (em == 0) {
                pc++;
                continue;
            }
            if ((rc = do_ocall(w, i, em, m, pc)) != 0)
                goto out;
            goto reselect;
        case PTX_C_ORET:
            if (em == 0) {
                pc++;
                continue;
            }
            if (em != m)
                park(w, m & ~em, pc + 1);
            if ((rc = do_oret(w, i, em)) != 0)
                goto out;
            goto reselect;
        case PTX_C_EXIT:
        case PTX_C_RET:
            w->live &= ~em;
            m &= ~em;
            if (w->cw_used)
                unwait(w, em, -1);
            if (m == 0)
                goto reselect;
            pc++;
            continue;
        case PTX_C_BAR:
            ptx_bar_arrive(w, i, em, pc);
            m &= ~em;
            if (m == 0)
                goto reselect;
            pc++;
            continue;
        case PTX_C_TRAP:
            if (em) {
                rc = ptx_fault(w, i, 0, PTX_E_LAUNCH_FAILED);
                goto out;
            }
            pc++;
            continue;
        default:
            rc = ptx_fault(w, i, 0, PTX_E_LAUNCH_FAILED);
            goto out;
        }
    reselect:
        w->pc = pc;
        m = 0;
        if (!ptx_warp_select(w))
            goto out;
        pc = w->pc;
        m = w->mask;
        mpc = w->merge_pc;
    }
out:
    w->pc = pc;
    w->mask = rc && rc != PTX_WARP_YIELD ? 0 : m;
    w->merge_pc = mpc;
    w->insns += n;
    return rc;
}
