// Floating-point math: f64 library calls, f32 with fast intrinsics, half/bf16, NaN rules,
// float-to-int conversions with rounding and saturation.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

extern "C" __global__ void f64_math(const double *x, const double *y, double *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    double a = x[i], b = y[i];
    double *o = out + 8 * i;
    o[0] = sqrt(a);
    o[1] = exp(b);
    o[2] = log(a);
    o[3] = sin(b);
    o[4] = cos(b);
    o[5] = pow(a, b);
    o[6] = fma(a, b, -a);
    o[7] = a / b;
}

extern "C" __global__ void f32_math(const float *x, const float *y, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float a = x[i], b = y[i];
    float *o = out + 12 * i;
    o[0] = sqrtf(a);
    o[1] = expf(b);
    o[2] = logf(a);
    o[3] = sinf(b);
    o[4] = cosf(b);
    o[5] = __expf(b);
    o[6] = __sinf(b);
    o[7] = __cosf(b);
    o[8] = rsqrtf(a);
    o[9] = __fdividef(b, a);
    o[10] = a / b;
    o[11] = __logf(a);
}

// Round trips through half and bfloat16, and arithmetic done in half.
extern "C" __global__ void half_bf16(const float *x, const float *y, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    __half hx = __float2half(x[i]), hy = __float2half(y[i]);
    __nv_bfloat16 bx = __float2bfloat16(x[i]);
    float *o = out + 5 * i;
    o[0] = __half2float(hx);
    o[1] = __half2float(__hadd(hx, hy));
    o[2] = __half2float(__hmul(hx, hy));
    o[3] = __bfloat162float(bx);
    o[4] = __half2float(__hlt(hx, hy) ? hx : hy);
}

// Comparisons where NaN must make ordered tests false and fmin/fmax pick the number.
extern "C" __global__ void nan_compare(const float *x, const float *y, float *fout, int *flags,
                                       double *dout, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float a = x[i], b = y[i];
    fout[2 * i] = fminf(a, b);
    fout[2 * i + 1] = fmaxf(a, b);
    dout[i] = fmax((double)a, (double)b * 2.0);
    flags[i] = (isnan(a) != 0) | (a < b) << 1 | (a <= b) << 2 | (a == b) << 3 | (a != b) << 4 |
               (a >= b) << 5 | (a > b) << 6 | (!(a < b)) << 7 | (isinf(b) != 0) << 8;
}

// Every float-to-int rounding mode, saturation to [0, 1], and the plain C casts.
extern "C" __global__ void float_to_int(const float *x, int *iout, unsigned *uout, float *sat,
                                        long long *lout, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float a = x[i];
    iout[5 * i] = __float2int_rn(a);
    iout[5 * i + 1] = __float2int_rz(a);
    iout[5 * i + 2] = __float2int_ru(a);
    iout[5 * i + 3] = __float2int_rd(a);
    iout[5 * i + 4] = (int)a;
    uout[i] = __float2uint_rn(a);
    sat[i] = __saturatef(a);
    lout[i] = __float2ll_rz(a * 1e6f);
}

// Float-to-float rounding (cvt.rXi.f32.f32), double-to-float conversions with every rounding
// mode, and the exact f32 library functions.
extern "C" __global__ void float_rounding_exact(const float *x, const double *w, float *out,
                                               int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float a = x[i];
    double b = w[i];
    int e;
    float *o = out + 14 * i;
    o[0] = floorf(a);
    o[1] = ceilf(a);
    o[2] = truncf(a);
    o[3] = roundf(a);
    o[4] = rintf(a);
    o[5] = fmodf(a, 0.75f);
    o[6] = ldexpf(a, (i % 9) - 4);
    float mant = frexpf(a, &e);
    o[7] = mant + (float)e * 16.0f;
    o[8] = copysignf(1.5f, a) + fabsf(a);
    o[9] = __double2float_rn(b);
    o[10] = __double2float_rz(b);
    o[11] = __double2float_ru(b);
    o[12] = __double2float_rd(b);
    o[13] = (float)__double2int_rn(b * 1e-30) + (float)__double2ll_rd(b * 1e-29);
}

// Library functions nvcc expands into long instruction sequences.
extern "C" __global__ void f32_special(const float *x, const float *y, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float a = x[i], b = y[i];
    float *o = out + 8 * i;
    o[0] = tanhf(b);
    o[1] = atan2f(b, a);
    o[2] = erff(b);
    o[3] = cbrtf(b);
    o[4] = log1pf(a);
    o[5] = expm1f(b);
    o[6] = hypotf(a, b);
    o[7] = powf(a, b);
}
