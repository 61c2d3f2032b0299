/*
 * ptx_exec_wmma.c — the handlers of wmma.load, wmma.store and wmma.mma (the
 * encoding: ptx_wmma.h), and of cvt to .tf32.
 *
 * A fragment's elements are spread over the warp in one fixed order (CUDA
 * leaves it unspecified): slot s of a fragment with P elements per register
 * is register s / (32 P), lane (s / P) mod 32, element s mod P of that
 * register (the low bits first), and holds element s mod E of the matrix's E.
 * C and D count their elements row by row; A and B in the order of the
 * layout they were loaded with (row by row for .row, column by column for
 * .col: wmma.mma's own layout qualifiers, which PTX requires to match the
 * loads', say which), so that a line of memory is consecutive slots and a
 * load or store moves whole registers. A fragment with more slots than
 * elements (f16's A and B at m16n16k16: 512 slots, 256 elements) holds every
 * element twice; wmma.mma and wmma.store read the first copy. Element-wise
 * code on a fragment (frag.x[i] = alpha * frag.x[i]) thus works on every
 * element.
 *
 * All three are warp-collective (.sync.aligned): all 32 lanes must run them
 * with one address and one stride, else the launch fails (a GPU's result is
 * undefined there). Products are exact in the accumulator's type (f16, bf16
 * and tf32 mantissas are at most 11 bits); sums are taken in order of k, in
 * f32 (f64 for dmma, with one rounding per multiply-add), so a sum may
 * differ in its last bits from a GPU's, whose adder tree is wider and orders
 * them otherwise. tf32 inputs keep their 10 leading mantissa bits (the low 13
 * are dropped). Integer sums wrap, or saturate with .satfinite.
 *
 * Thread-safety: touches only the warp, its block, and memory it checked.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ptx_bits.h"
#include "ptx_int.h"
#include "ptx_wmma.h"

#define MAXE 256 /* elements of the largest fragment (16 x 16) */

/* Every lane runs the instruction, and V (an address or stride) is the same
 * in each: 0, else the launch fails. */
static int collective(ptx_warp *w, const ptx_insn *i, uint32_t m, const uint64_t *v)
{
    if (m != PTX_FULL)
        return ptx_fault_why(w, i, 0, PTX_E_LAUNCH_FAILED,
                    "wmma needs all 32 lanes of the warp (it ran with fewer)");
    for (int l = 1; l < PTX_LANES && v != NULL; l++)
        if (v[l] != v[0])
            return ptx_fault_why(w, i, v[l], PTX_E_LAUNCH_FAILED,
                        "wmma's address and stride must be the same in every lane");
    return 0;
}

/* The registers a fragment's carriers hold, from carrier FIRST on (dst:
 * their d[] fields, else s[]). */
static void carried(const ptx_insn *i, unsigned first, int dst, unsigned n, uint32_t *regs)
{
    for (unsigned k = 0; k < n; k++) {
        const ptx_insn *c = i + 1 + first + k / 4;
        regs[k] = dst ? c->d[k % 4] : c->s[k % 4];
    }
}

/* The fragment's elements (raw bits, row by row) from its registers: the
 * first copy of each. PER elements of BITS bits per register (constants in
 * frag_move, so the loops unroll). */
static inline __attribute__((always_inline)) void
frag_read_k(const ptx_warp *w, unsigned nregs, unsigned n, const uint32_t *regs, uint64_t *el,
            unsigned per, unsigned bits)
{
    uint64_t mask = bits == 64 ? ~0ull : (1ull << (bits & 63)) - 1;
    for (unsigned r = 0; r < nregs && r * PTX_LANES * per < n; r++) {
        const uint64_t *R = w->r[regs[r]];
        uint64_t *out = el + r * PTX_LANES * per;
        for (int l = 0; l < PTX_LANES; l++)
            for (unsigned p = 0; p < per; p++)
                out[(unsigned)l * per + p] = (R[l] >> ((bits * p) & 63)) & mask;
    }
}

/* Writes the elements EL (row by row) into every slot of the fragment; N,
 * the element count, is a power of 2. */
static inline __attribute__((always_inline)) void
frag_write_k(ptx_warp *w, unsigned nregs, unsigned n, const uint32_t *regs, const uint64_t *el,
             unsigned per, unsigned bits)
{
    for (unsigned r = 0; r < nregs; r++) {
        uint64_t *R = w->r[regs[r]];
        const uint64_t *in = el + ((r * PTX_LANES * per) & (n - 1));
        for (int l = 0; l < PTX_LANES; l++) {
            uint64_t v = 0;
            for (unsigned p = 0; p < per; p++)
                v |= in[(unsigned)l * per + p] << ((bits * p) & 63);
            R[l] = v;
        }
    }
}

/* Reads the fragment's elements into EL, or writes EL into it (WRITE). */
static void frag_move(ptx_warp *w, const ptx_wmma_frag *f, const uint32_t *regs, uint64_t *el,
                      int write)
{
    unsigned n = (unsigned)f->rows * f->cols, r = f->nregs;
    switch (f->esize * 2 + write) {
    case 2: frag_read_k(w, r, n, regs, el, 4, 8); break;
    case 3: frag_write_k(w, r, n, regs, el, 4, 8); break;
    case 4: frag_read_k(w, r, n, regs, el, 2, 16); break;
    case 5: frag_write_k(w, r, n, regs, el, 2, 16); break;
    case 8: frag_read_k(w, r, n, regs, el, 1, 32); break;
    case 9: frag_write_k(w, r, n, regs, el, 1, 32); break;
    case 16: frag_read_k(w, r, n, regs, el, 1, 64); break;
    default: frag_write_k(w, r, n, regs, el, 1, 64); break;
    }
}

/* Where line LINE (a row, or a column for .col) of a load or store lies, or
 * NULL (after a fault). */
static uint8_t *line_at(ptx_warp *w, const ptx_insn *i, uint64_t base, uint64_t stride_b,
                        unsigned line, uint64_t len)
{
    ptx_block *b = w->b;
    uint64_t a = base + stride_b * line;
    uint8_t *p;
    if (i->mode & PTX_WM_SHARED)
        p = a <= b->shared_size && b->shared_size - a >= len ? b->shared + a : NULL;
    else
        p = ptx_gaddr(b, a, len);
    if (p == NULL)
        ptx_fault_why(w, i, a, PTX_E_ILLEGAL_ADDRESS, "");
    return p;
}

/* The shared part of a load and a store: the fragment, its registers, its
 * address and stride (in bytes), checked. 0, or the fault. */
static int access_of(ptx_warp *w, const ptx_insn *i, uint32_t m, int dst, ptx_wmma_frag *f,
                     uint32_t *regs, uint64_t *base, uint64_t *stride_b)
{
    int rc = collective(w, i, m, w->r[i->ab]);
    if (rc == 0)
        rc = collective(w, i, m, w->r[i->s[0]]);
    if (rc != 0)
        return rc;
    if (ptx_wmma_frag_of((int)i->aux, (int)(i->mode & PTX_WM_KIND), i->mode2, f) != 0)
        return ptx_fault_why(w, i, 0, PTX_E_LAUNCH_FAILED, "bad wmma encoding");
    carried(i, 0, dst, f->nregs, regs);
    *base = w->r[i->ab][0] + (uint64_t)i->imm;
    *stride_b = (uint64_t)(uint32_t)w->r[i->s[0]][0] * f->esize;
    /* "The starting address of each instance of the leading dimension must
     * be aligned with the size of the corresponding fragment in bytes." */
    uint64_t frag_b = (uint64_t)f->nregs * (f->esize == 8 ? 8 : 4);
    if (*base % frag_b != 0 || *stride_b % frag_b != 0)
        return ptx_fault_why(w, i, *base, PTX_E_MISALIGNED,
                    "wmma's address and stride must be multiples of the fragment's size");
    return 0;
}

/* One line of LEN elements of type T between memory P and the elements at
 * OUT / IN, STEP apart. */
#define COPY_IN(T)                                                                            \
    for (unsigned k = 0; k < len; k++) {                                                      \
        T v;                                                                                  \
        memcpy(&v, p + (size_t)k * sizeof(T), sizeof(T));                                     \
        out[k * step] = v;                                                                    \
    }
#define COPY_OUT(T)                                                                           \
    for (unsigned k = 0; k < len; k++) {                                                      \
        T v = (T)in[k * step];                                                                \
        memcpy(p + (size_t)k * sizeof(T), &v, sizeof(T));                                     \
    }

/* NCHUNKS chunks of type T (a register's elements) between a line at P and
 * consecutive lanes R. The host is little-endian, as the device. */
#define CHUNKS_IN(T)                                                                          \
    do {                                                                                      \
        for (unsigned k = 0; k < nchunks; k++) {                                              \
            T v;                                                                              \
            memcpy(&v, p + (size_t)k * sizeof(T), sizeof(T));                                 \
            R[k] = v;                                                                         \
        }                                                                                     \
    } while (0)
#define CHUNKS_OUT(T)                                                                         \
    do {                                                                                      \
        for (unsigned k = 0; k < nchunks; k++) {                                              \
            T v = (T)R[k];                                                                    \
            memcpy(p + (size_t)k * sizeof(T), &v, sizeof(T));                                 \
        }                                                                                     \
    } while (0)

/* Lines in fragment order (A and B, or C and D in a row layout): each
 * register lane holds PER consecutive elements of a line, so a line moves
 * in chunks of PER elements straight between memory and the registers (and
 * into every copy of a fragment that holds its elements twice). */
static int transfer_direct(ptx_warp *w, const ptx_insn *i, const ptx_wmma_frag *f,
                           const uint32_t *regs, uint64_t base, uint64_t stride_b,
                           unsigned lines, unsigned len, int load)
{
    unsigned per = f->per_reg, n = (unsigned)f->rows * f->cols, nchunks = len / per;
    unsigned copies = (unsigned)f->nregs * PTX_LANES * per / n, copy_regs = f->nregs / copies;
    int wide = per * f->esize == 8;
    for (unsigned ln = 0; ln < lines; ln++) {
        uint8_t *p = line_at(w, i, base, stride_b, ln, (uint64_t)len * f->esize);
        if (p == NULL)
            return w->b->err;
        /* a line never crosses a register: 32 P is a multiple of every shape's line */
        unsigned s = ln * len, r = s / (PTX_LANES * per), lane = (s / per) % PTX_LANES;
        for (unsigned c = 0; c < copies; c++) {
            uint64_t *R = w->r[regs[r + c * copy_regs]] + lane;
            if (!load && c == 0) {
                if (wide)
                    CHUNKS_OUT(uint64_t);
                else
                    CHUNKS_OUT(uint32_t);
            } else if (load) {
                if (wide)
                    CHUNKS_IN(uint64_t);
                else
                    CHUNKS_IN(uint32_t);
            }
        }
    }
    return 0;
}

/* A load (LOAD) or a store: memory's lines to the fragment's registers, or
 * back. A and B fragments hold their elements in the order of their layout
 * (wmma.mma knows it), C and D row by row whatever the layout: a column
 * layout moves them through EL, transposed. */
static int transfer(ptx_warp *w, const ptx_insn *i, uint32_t m, int load)
{
    ptx_wmma_frag f;
    uint32_t regs[PTX_WMMA_MAX_REGS];
    uint64_t base, stride_b, el[MAXE];
    int rc = access_of(w, i, m, load, &f, regs, &base, &stride_b);
    if (rc != 0)
        return rc;
    int col = (i->mode & PTX_WM_COL) != 0;
    unsigned lines = col ? f.cols : f.rows, len = col ? f.rows : f.cols;
    if ((i->mode & PTX_WM_KIND) != PTX_WM_C || !col)
        return transfer_direct(w, i, &f, regs, base, stride_b, lines, len, load);
    if (!load)
        frag_move(w, &f, regs, el, 0);
    /* element k of column ln is the logical (k, ln) */
    unsigned step = f.cols;
    for (unsigned ln = 0; ln < lines; ln++) {
        uint8_t *p = line_at(w, i, base, stride_b, ln, (uint64_t)len * f.esize);
        if (p == NULL)
            return w->b->err;
        uint64_t *out = el + ln;
        const uint64_t *in = out;
        switch (f.esize * 2 + !load) {
        case 4: COPY_IN(uint16_t); break;
        case 5: COPY_OUT(uint16_t); break;
        case 8: COPY_IN(uint32_t); break;
        case 9: COPY_OUT(uint32_t); break;
        case 16: COPY_IN(uint64_t); break;
        default: COPY_OUT(uint64_t); break;
        }
    }
    if (load)
        frag_move(w, &f, regs, el, 1);
    return 0;
}

int ptx_h_wmma_load(ptx_warp *w, const ptx_insn *i, uint32_t m)
{
    return transfer(w, i, m, 1);
}

int ptx_h_wmma_store(ptx_warp *w, const ptx_insn *i, uint32_t m)
{
    return transfer(w, i, m, 0);
}

/* ------------------------------------------------------------- numbers */

/* Exact: the exponent is rebiased by a multiplication (which also scales
 * subnormal halves right); infinities and NaNs get an all-ones exponent and
 * keep their mantissa. No branch, so that loops of it vectorise. */
static inline float f16_to_f32(uint32_t h)
{
    uint32_t sign = (h & 0x8000u) << 16, em = h & 0x7fffu;
    uint32_t v = (uint32_t)bits32(f32of(em << 13) * 0x1p112f);
    return f32of(sign | v | (em >= 0x7c00u ? 0x7f800000u : 0));
}
static inline uint16_t f32_to_f16(float f)
{
    _Float16 v = (_Float16)f; /* round to nearest even, as cvt.rn.f16.f32 */
    uint16_t h;
    memcpy(&h, &v, 2);
    return h;
}

/* A multiplicand fragment's N elements as floats, straight from its
 * registers (exact: f16, bf16 and tf32 fit). */
static inline __attribute__((always_inline)) void
mult_f32(const ptx_warp *w, const uint32_t *regs, unsigned n, int type, float *out)
{
    unsigned per = type == PTX_WT_TF32 ? 1 : 2;
    for (unsigned r = 0; r * PTX_LANES * per < n; r++) {
        const uint64_t *R = w->r[regs[r]];
        float *o = out + r * PTX_LANES * per;
        switch (type) {
        case PTX_WT_F16:
            for (int l = 0; l < PTX_LANES; l++) {
                o[2 * l] = f16_to_f32((uint32_t)R[l] & 0xffffu);
                o[2 * l + 1] = f16_to_f32((uint32_t)R[l] >> 16);
            }
            break;
        case PTX_WT_BF16:
            for (int l = 0; l < PTX_LANES; l++) {
                o[2 * l] = f32of((uint32_t)R[l] << 16);
                o[2 * l + 1] = f32of((uint32_t)R[l] & 0xffff0000u);
            }
            break;
        default: /* tf32: the 10 leading mantissa bits */
            for (int l = 0; l < PTX_LANES; l++)
                o[l] = f32of((uint32_t)R[l] & 0xffffe000u);
            break;
        }
    }
}

/* D = A B + C for M x 16 results over K, in f32; the j loop vectorises
 * (products are exact in f32, so a fused multiply-add rounds the same). */
static inline __attribute__((always_inline)) void mma_f32(unsigned M, unsigned K, const float *a, const float *b, float *c)
{
    for (unsigned r = 0; r < M; r++)
        for (unsigned k = 0; k < K; k++) {
            float x = a[r * K + k];
            const float *bk = b + k * 16;
            float *cr = c + r * 16;
            for (unsigned j = 0; j < 16; j++)
                cr[j] += x * bk[j];
        }
}

static inline __attribute__((always_inline)) void mma_s32(const int32_t *a, const int32_t *b, int32_t *sum)
{
    for (unsigned r = 0; r < 16; r++)
        for (unsigned k = 0; k < 16; k++) {
            int32_t x = a[r * 16 + k];
            for (unsigned j = 0; j < 16; j++)
                sum[r * 16 + j] += x * b[k * 16 + j]; /* at most 16 x 255^2: no overflow */
        }
}

static inline __attribute__((always_inline)) void mma_f64(const double *a, const double *b, double *c)
{
    for (unsigned r = 0; r < 8; r++)
        for (unsigned k = 0; k < 4; k++)
            for (unsigned j = 0; j < 8; j++)
                c[r * 8 + j] = fma(a[r * 4 + k], b[k * 8 + j], c[r * 8 + j]);
}

/* A matrix of ROWS x COLS given column by column (a fragment loaded with
 * .col), row by row in place. */
#define TO_ROWS(T, x, rows, cols)                                                             \
    do {                                                                                      \
        T t_[MAXE];                                                                           \
        for (unsigned c_ = 0; c_ < (cols); c_++)                                              \
            for (unsigned r_ = 0; r_ < (rows); r_++)                                          \
                t_[r_ * (cols) + c_] = (x)[c_ * (rows) + r_];                                 \
        memcpy((x), t_, sizeof(T) * (rows) * (cols));                                         \
    } while (0)

static int64_t int_of(uint64_t v, int type)
{
    return type == PTX_WT_S8 ? (int64_t)(int8_t)v : (int64_t)(uint8_t)v;
}

static inline __attribute__((always_inline)) int wmma_mma(ptx_warp *w, const ptx_insn *i,
                                                          uint32_t m)
{
    int rc = collective(w, i, m, NULL);
    if (rc != 0)
        return rc;
    int ab = i->mode, ct = i->mode2 & 0xf, dt = (i->mode2 >> 4) & 0xf, shape = (int)i->aux;
    ptx_wmma_frag fa, fb, fc, fd;
    if (ptx_wmma_frag_of(shape, PTX_WM_A, ab, &fa) || ptx_wmma_frag_of(shape, PTX_WM_B, ab, &fb)
        || ptx_wmma_frag_of(shape, PTX_WM_C, ct, &fc)
        || ptx_wmma_frag_of(shape, PTX_WM_C, dt, &fd))
        return ptx_fault_why(w, i, 0, PTX_E_LAUNCH_FAILED, "bad wmma encoding");
    uint32_t ra[8], rb[8], rcg[8], rd[8];
    carried(i, 0, 0, fa.nregs, ra); /* carriers 0-1: s[] A, d[] D */
    carried(i, 0, 1, fd.nregs, rd);
    carried(i, 2, 0, fb.nregs, rb);
    carried(i, 4, 0, fc.nregs, rcg);
    uint64_t ea[MAXE], eb[MAXE], ec[MAXE], ed[MAXE];
    unsigned M = fa.rows, K = fa.cols, N = fb.cols, n = (unsigned)fd.rows * fd.cols;
    int a_col = (i->mode2 & PTX_WM_A_COL) != 0, b_col = (i->mode2 & PTX_WM_B_COL) != 0;
    if (ab == PTX_WT_F64 || ab == PTX_WT_U8 || ab == PTX_WT_S8) {
        frag_move(w, &fa, ra, ea, 0);
        frag_move(w, &fb, rb, eb, 0);
        if (a_col)
            TO_ROWS(uint64_t, ea, M, K);
        if (b_col)
            TO_ROWS(uint64_t, eb, K, N);
    }
    frag_move(w, &fc, rcg, ec, 0);
    if (ab == PTX_WT_F64) {
        double a[32], b[32], c[64];
        memcpy(a, ea, sizeof a);
        memcpy(b, eb, sizeof b);
        memcpy(c, ec, sizeof c);
        mma_f64(a, b, c);
        memcpy(ed, c, sizeof c);
    } else if (ab == PTX_WT_U8 || ab == PTX_WT_S8) {
        int32_t a[MAXE], b[MAXE], sum[MAXE] = {0};
        for (unsigned e = 0; e < MAXE; e++) {
            a[e] = (int32_t)int_of(ea[e], ab);
            b[e] = (int32_t)int_of(eb[e], ab);
        }
        mma_s32(a, b, sum);
        for (unsigned e = 0; e < n; e++) {
            int64_t v = (int64_t)(int32_t)(uint32_t)ec[e] + sum[e];
            if (i->mode2 & PTX_WM_SATFINITE)
                v = v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : v;
            ed[e] = (uint32_t)(int32_t)v;
        }
    } else {
        float a[MAXE], b[MAXE], c[MAXE];
        mult_f32(w, ra, M * K, ab, a);
        mult_f32(w, rb, K * N, ab, b);
        if (a_col)
            TO_ROWS(float, a, M, K);
        if (b_col)
            TO_ROWS(float, b, K, N);
        for (unsigned e = 0; e < n; e++)
            c[e] = ct == PTX_WT_F16 ? f16_to_f32((uint16_t)ec[e]) : f32of((uint32_t)ec[e]);
        mma_f32(M, K, a, b, c);
        for (unsigned e = 0; e < n; e++)
            ed[e] = dt == PTX_WT_F16 ? f32_to_f16(c[e]) : (uint32_t)bits32(c[e]);
    }
    frag_move(w, &fd, rd, ed, 1);
    return 0;
}

/* wmma.mma compiled twice: with AVX2 and FMA (8 floats a step), used when
 * the host has them, and for any x86-64. */
__attribute__((target("avx2,fma"))) static int wmma_mma_avx2(ptx_warp *w, const ptx_insn *i,
                                                             uint32_t m)
{
    return wmma_mma(w, i, m);
}
static int wmma_mma_any(ptx_warp *w, const ptx_insn *i, uint32_t m)
{
    return wmma_mma(w, i, m);
}
int ptx_h_wmma_mma(ptx_warp *w, const ptx_insn *i, uint32_t m)
{
    __builtin_cpu_init(); /* once per process in effect: later calls return at once */
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return wmma_mma_avx2(w, i, m);
    return wmma_mma_any(w, i, m);
}

/* cvt.{rna,rn,rz}.tf32.f32 (mode 0, 1, 2): an f32 with 10 mantissa bits,
 * the low 13 bits zero; NaN and infinities stay. */
int ptx_h_cvt_tf32(ptx_warp *w, const ptx_insn *i, uint32_t m)
{
    uint64_t *D = w->r[i->d[0]];
    const uint64_t *A = w->r[i->s[0]];
    for (uint32_t mm = m; mm; mm &= mm - 1) {
        int l = __builtin_ctz(mm);
        uint32_t x = (uint32_t)A[l], mag = x & 0x7fffffffu;
        if (mag < 0x7f800000u) { /* finite: the carry may reach the exponent (to infinity) */
            uint32_t low = mag & 0x1fffu;
            if (i->mode == 0)
                mag += 0x1000u;
            else if (i->mode == 1)
                mag += low > 0x1000u || (low == 0x1000u && (mag & 0x2000u)) ? 0x2000u : 0;
            x = (x & 0x80000000u) | (mag & 0xffffe000u);
        }
        D[l] = x;
    }
    return 0;
}
