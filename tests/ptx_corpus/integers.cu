// Integer arithmetic: division and remainder in every width and sign, bit tricks,
// high and wide multiplies.

extern "C" __global__ void int_div_rem(const int *a32, const int *b32, const long long *a64,
                                       const long long *b64, int *s32, unsigned *u32,
                                       long long *s64, unsigned long long *u64, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int a = a32[i], b = b32[i];
    long long c = a64[i], d = b64[i];
    s32[2 * i] = a / b;
    s32[2 * i + 1] = a % b;
    u32[2 * i] = (unsigned)a / (unsigned)b;
    u32[2 * i + 1] = (unsigned)a % (unsigned)b;
    s64[2 * i] = c / d;
    s64[2 * i + 1] = c % d;
    u64[2 * i] = (unsigned long long)c / (unsigned long long)d;
    u64[2 * i + 1] = (unsigned long long)c % (unsigned long long)d;
}

// Division by constants (the compiler turns these into mul.hi and shifts).
extern "C" __global__ void int_div_const(const int *a, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int v = a[i];
    out[4 * i] = v / 7;
    out[4 * i + 1] = v % 10;
    out[4 * i + 2] = (int)((unsigned)v / 3u);
    out[4 * i + 3] = v / -16;
}

extern "C" __global__ void bit_tricks(const unsigned *x, const unsigned *y,
                                      const unsigned long long *w, unsigned *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    unsigned a = x[i], b = y[i];
    unsigned long long c = w[i];
    unsigned *o = out + 14 * i;
    o[0] = __popc(a);
    o[1] = __clz(a);
    o[2] = __brev(a);
    o[3] = __byte_perm(a, b, b & 0x7777);
    o[4] = __funnelshift_l(a, b, b & 63);
    o[5] = __funnelshift_r(a, b, b & 63);
    o[6] = __funnelshift_lc(a, b, b & 63);
    o[7] = __ffs(a);
    o[8] = (a >> (b & 15)) & ((1u << ((b >> 4) & 15)) - 1u);   // bfe.u32-like
    o[9] = (unsigned)(((int)a << (b & 7)) >> ((b >> 8) & 15)); // sign-extending field
    o[10] = __popcll(c);
    o[11] = __clzll(c);
    o[12] = __ffsll((long long)c);
    o[13] = (unsigned)(__brevll(c) >> 17);
}

extern "C" __global__ void mul_hi_wide(const unsigned *x, const unsigned *y,
                                       const unsigned long long *w, unsigned long long *out,
                                       int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    unsigned a = x[i], b = y[i];
    unsigned long long c = w[i], d = w[i + n];
    unsigned long long *o = out + 6 * i;
    o[0] = __umulhi(a, b);
    o[1] = (unsigned long long)(unsigned)__mulhi((int)a, (int)b);
    o[2] = (unsigned long long)a * b;                        // mul.wide.u32
    o[3] = (unsigned long long)((long long)(int)a * (int)b); // mul.wide.s32
    o[4] = __umul64hi(c, d);
    o[5] = (unsigned long long)__mul64hi((long long)c, (long long)d);
}

// Bit fields through inline PTX (bfe, bfi), integer averages, sad, mul24, 64-bit min/max/abs.
extern "C" __global__ void bitfield_and_misc(const unsigned *x, const unsigned *y,
                                             const long long *w, unsigned *out,
                                             long long *out64, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    unsigned a = x[i], b = y[i], pos = b & 31, len = (b >> 8) & 31, r;
    int s;
    unsigned *o = out + 8 * i;
    asm("bfe.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(pos), "r"(len));
    o[0] = r;
    asm("bfe.s32 %0, %1, %2, %3;" : "=r"(s) : "r"(a), "r"(pos), "r"(len));
    o[1] = (unsigned)s;
    asm("bfi.b32 %0, %1, %2, %3, %4;" : "=r"(r) : "r"(b), "r"(a), "r"(pos), "r"(len));
    o[2] = r;
    o[3] = __uhadd(a, b);
    o[4] = (unsigned)__rhadd((int)a, (int)b);
    o[5] = __usad(a, b, 7u);
    o[6] = (unsigned)__mul24((int)a, (int)b);
    o[7] = __umul24(a, b);
    long long c = w[i], d = w[i + n];
    out64[3 * i] = llabs(c) ^ (long long)(c < d);
    out64[3 * i + 1] = (long long)max((unsigned long long)c, (unsigned long long)d);
    out64[3 * i + 2] = min(c, d);
}
