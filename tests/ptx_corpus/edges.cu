// Edge semantics where PTX defines what C leaves undefined: shift amounts past the width,
// bit fields past the word, subnormal floats (no flush to zero without -ftz), IEEE specials.

extern "C" __global__ void shift_edges(const unsigned *x, const unsigned *amount,
                                       const unsigned long long *w, unsigned *out,
                                       unsigned long long *out64, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    unsigned a = x[i], s = amount[i], r;
    int q;
    unsigned long long c = w[i], r64;
    long long q64;
    unsigned *o = out + 6 * i;
    asm("shl.b32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(s));
    o[0] = r;
    asm("shr.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(s));
    o[1] = r;
    asm("shr.s32 %0, %1, %2;" : "=r"(q) : "r"(a), "r"(s));
    o[2] = (unsigned)q;
    asm("bfe.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(s), "r"(s >> 8));
    o[3] = r;
    asm("bfe.s32 %0, %1, %2, %3;" : "=r"(q) : "r"(a), "r"(s & 63), "r"(s >> 16));
    o[4] = (unsigned)q;
    asm("bfi.b32 %0, %1, %2, %3, %4;" : "=r"(r) : "r"(s), "r"(a), "r"(s >> 4), "r"(s >> 12));
    o[5] = r;
    asm("shl.b64 %0, %1, %2;" : "=l"(r64) : "l"(c), "r"(s));
    out64[3 * i] = r64;
    asm("shr.u64 %0, %1, %2;" : "=l"(r64) : "l"(c), "r"(s));
    out64[3 * i + 1] = r64;
    asm("shr.s64 %0, %1, %2;" : "=l"(q64) : "l"(c), "r"(s));
    out64[3 * i + 2] = (unsigned long long)q64;
}

// IEEE-rounded operations written so nvcc cannot contract or reassociate them.
extern "C" __global__ void float_edges(const float *x, const float *y, float *out,
                                       double *dout, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float a = x[i], b = y[i];
    float *o = out + 7 * i;
    o[0] = __fadd_rn(a, b);
    o[1] = __fmul_rn(a, b);
    o[2] = __fdiv_rn(a, b);
    o[3] = __fsqrt_rn(a);
    o[4] = __frcp_rn(b);
    o[5] = __fsub_rn(a, b);
    o[6] = (float)(long long)i * 1e-45f + a; // a subnormal scale factor
    dout[2 * i] = (double)a * (double)b;
    dout[2 * i + 1] = __dadd_rn((double)a, 1e-310);
}
