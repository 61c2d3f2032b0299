// Kernels of tests/test_ptx_wmma.py: one warp multiplies one tile with wmma,
// D = alpha * (A B + C), for each multiplicand type and layout. Leading
// dimensions (strides) are parameters, C's and D's memory layout too (c_col bit
// 0; bit 1 saturates integer sums); alpha
// scales the accumulator element by element, as user code does. Built with
// `nvcc -ptx -arch=compute_80` into wmma.ptx (committed).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

// Integer multiplicands saturate or wrap (c_col's bit 1: .satfinite).
template <typename Frag, typename In>
__device__ void mma(wmma::fragment<wmma::accumulator, 16, 16, 16, int> &fc, const Frag &fa,
                    const In &fb, int c_col)
{
    wmma::mma_sync(fc, fa, fb, fc, (c_col & 2) != 0);
}
template <typename Acc, typename Frag, typename In>
__device__ void mma(Acc &fc, const Frag &fa, const In &fb, int)
{
    wmma::mma_sync(fc, fa, fb, fc);
}

template <typename In, typename Frag, typename Acc, int M, int N, int K, typename LA, typename LB>
__device__ void tile(const In *a, int lda, const In *b, int ldb, const Acc *c, int ldc, Acc *d,
                     int ldd, int c_col, Acc alpha)
{
    wmma::fragment<wmma::matrix_a, M, N, K, Frag, LA> fa;
    wmma::fragment<wmma::matrix_b, M, N, K, Frag, LB> fb;
    wmma::fragment<wmma::accumulator, M, N, K, Acc> fc;
    wmma::layout_t lc = (c_col & 1) ? wmma::mem_col_major : wmma::mem_row_major;
    wmma::load_matrix_sync(fa, a, lda);
    wmma::load_matrix_sync(fb, b, ldb);
    wmma::load_matrix_sync(fc, c, ldc, lc);
    mma(fc, fa, fb, c_col);
    for (int i = 0; i < fc.num_elements; i++)
        fc.x[i] = alpha * fc.x[i];
    wmma::store_matrix_sync(d, fc, ldd, lc);
}

// tf32: the multiplicands are floats rounded to tf32 in the fragment.
template <typename LA, typename LB>
__device__ void tile_tf32(const float *a, int lda, const float *b, int ldb, const float *c,
                          int ldc, float *d, int ldd, int c_col, float alpha)
{
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, LA> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, LB> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> fc;
    wmma::layout_t lc = c_col ? wmma::mem_col_major : wmma::mem_row_major;
    wmma::load_matrix_sync(fa, a, lda);
    wmma::load_matrix_sync(fb, b, ldb);
    for (int i = 0; i < fa.num_elements; i++)
        fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
    for (int i = 0; i < fb.num_elements; i++)
        fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
    wmma::load_matrix_sync(fc, c, ldc, lc);
    wmma::mma_sync(fc, fa, fb, fc);
    for (int i = 0; i < fc.num_elements; i++)
        fc.x[i] = alpha * fc.x[i];
    wmma::store_matrix_sync(d, fc, ldd, lc);
}

#define R wmma::row_major
#define C wmma::col_major
#define KERNEL(name, In, Frag, Acc, M, N, K, LA, LB)                                          \
    extern "C" __global__ void name(const In *a, int lda, const In *b, int ldb, const Acc *c, \
                                    int ldc, Acc *d, int ldd, int c_col, Acc alpha)           \
    {                                                                                         \
        tile<In, Frag, Acc, M, N, K, LA, LB>(a,      lda, b, ldb, c, ldc, d, ldd, c_col,      \
                                                  alpha);                                     \
    }

KERNEL(f16_rr, half, half, float, 16, 16, 16, R, R)
KERNEL(f16_rc, half, half, float, 16, 16, 16, R, C)
KERNEL(f16_cr, half, half, float, 16, 16, 16, C, R)
KERNEL(f16_cc, half, half, float, 16, 16, 16, C, C)
KERNEL(f16_half_rc, half, half, half, 16, 16, 16, R, C)
KERNEL(bf16_rc, __nv_bfloat16, __nv_bfloat16, float, 16, 16, 16, R, C)
KERNEL(bf16_cr, __nv_bfloat16, __nv_bfloat16, float, 16, 16, 16, C, R)
KERNEL(u8_rc, unsigned char, unsigned char, int, 16, 16, 16, R, C)
KERNEL(u8_cr, unsigned char, unsigned char, int, 16, 16, 16, C, R)
KERNEL(s8_rr, signed char, signed char, int, 16, 16, 16, R, R)
KERNEL(s8_cc, signed char, signed char, int, 16, 16, 16, C, C)
KERNEL(f64_rc, double, double, double, 8, 8, 4, R, C)
KERNEL(f64_cr, double, double, double, 8, 8, 4, C, R)

extern "C" __global__ void tf32_rc(const float *a, int lda, const float *b, int ldb,
                                   const float *c, int ldc, float *d, int ldd, int c_col,
                                   float alpha)
{
    tile_tf32<R, C>(a, lda, b, ldb, c, ldc, d, ldd, c_col, alpha);
}
extern "C" __global__ void tf32_cr(const float *a, int lda, const float *b, int ldb,
                                   const float *c, int ldc, float *d, int ldd, int c_col,
                                   float alpha)
{
    tile_tf32<C, R>(a, lda, b, ldb, c, ldc, d, ldd, c_col, alpha);
}
