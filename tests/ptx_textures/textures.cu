// Kernels for tests/test_textures.py: each reads or writes a texture or
// surface object at coordinates taken from device memory and stores the raw
// 32-bit results, so the test compares them with values computed by hand.
// Built by nvcc 13 to textures.ptx (committed; the test rebuilds and compares
// when nvcc is present): nvcc -ptx -o textures.ptx textures.cu
#include <cuda_runtime.h>

__device__ static uint4 bits(float4 v)
{
    return make_uint4(__float_as_uint(v.x), __float_as_uint(v.y), __float_as_uint(v.z),
                      __float_as_uint(v.w));
}

__device__ static uint4 bits(int4 v)
{
    return make_uint4((unsigned)v.x, (unsigned)v.y, (unsigned)v.z, (unsigned)v.w);
}

__device__ static uint4 bits(uint4 v)
{
    return v;
}

// A kernel that stores bits(EXPR) for thread i, with c[i] its coordinates.
#define FETCH(NAME, C, EXPR)                                                            \
    extern "C" __global__ void NAME(uint4 *out, cudaTextureObject_t t, const C *c, int n) \
    {                                                                                   \
        int i = blockIdx.x * blockDim.x + threadIdx.x;                                  \
        if (i < n)                                                                      \
            out[i] = bits(EXPR);                                                        \
    }

FETCH(fetch1d, float, tex1D<float4>(t, c[i]))
FETCH(fetch2d, float2, tex2D<float4>(t, c[i].x, c[i].y))
FETCH(fetch2d_uint, float2, tex2D<uint4>(t, c[i].x, c[i].y))
FETCH(fetch2d_int, float2, tex2D<int4>(t, c[i].x, c[i].y))
FETCH(fetch3d, float4, tex3D<float4>(t, c[i].x, c[i].y, c[i].z))
FETCH(fetch1d_layered, float2, tex1DLayered<float4>(t, c[i].x, (int)c[i].y))
FETCH(fetch2d_layered, float4, tex2DLayered<float4>(t, c[i].x, c[i].y, (int)c[i].z))
FETCH(fetch_cube, float4, texCubemap<float4>(t, c[i].x, c[i].y, c[i].z))
FETCH(fetch_cube_layered, float4,
      texCubemapLayered<float4>(t, c[i].x, c[i].y, c[i].z, (int)c[i].w))
FETCH(fetch2d_lod, float4, tex2DLod<float4>(t, c[i].x, c[i].y, c[i].z))
// c[2i] = (x, y), c[2i + 1] = (dPdx.x, dPdx.y, dPdy.x, dPdy.y)
FETCH(fetch2d_grad, float4,
      tex2DGrad<float4>(t, c[2 * i].x, c[2 * i].y, make_float2(c[2 * i + 1].x, c[2 * i + 1].y),
                        make_float2(c[2 * i + 1].z, c[2 * i + 1].w)))
FETCH(fetch_linear, int, tex1Dfetch<float4>(t, c[i]))
FETCH(fetch_linear_uint, int, tex1Dfetch<uint4>(t, c[i]))

__device__ static float4 gather4(cudaTextureObject_t t, float4 c)
{
    switch ((int)c.z) {
    case 0: return tex2Dgather<float4>(t, c.x, c.y, 0);
    case 1: return tex2Dgather<float4>(t, c.x, c.y, 1);
    case 2: return tex2Dgather<float4>(t, c.x, c.y, 2);
    default: return tex2Dgather<float4>(t, c.x, c.y, 3);
    }
}
FETCH(gather, float4, gather4(t, c[i]))

// txq and suq have no CUDA C++ intrinsics: the queries by inline PTX.
extern "C" __global__ void query(unsigned *out, cudaTextureObject_t t, cudaSurfaceObject_t s)
{
    unsigned v[12];
    asm("txq.width.b32 %0, [%1];" : "=r"(v[0]) : "l"(t));
    asm("txq.height.b32 %0, [%1];" : "=r"(v[1]) : "l"(t));
    asm("txq.depth.b32 %0, [%1];" : "=r"(v[2]) : "l"(t));
    asm("txq.normalized_coords.b32 %0, [%1];" : "=r"(v[3]) : "l"(t));
    asm("txq.filter_mode.b32 %0, [%1];" : "=r"(v[4]) : "l"(t));
    asm("txq.addr_mode_0.b32 %0, [%1];" : "=r"(v[5]) : "l"(t));
    asm("txq.array_size.b32 %0, [%1];" : "=r"(v[6]) : "l"(t));
    asm("txq.num_mipmap_levels.b32 %0, [%1];" : "=r"(v[7]) : "l"(t));
    asm("txq.level.width.b32 %0, [%1], %2;" : "=r"(v[8]) : "l"(t), "r"(1));
    asm("suq.width.b32 %0, [%1];" : "=r"(v[9]) : "l"(s));
    asm("suq.height.b32 %0, [%1];" : "=r"(v[10]) : "l"(s));
    asm("suq.memory_layout.b32 %0, [%1];" : "=r"(v[11]) : "l"(s));
    for (int k = 0; k < 12; k++)
        out[k] = v[k];
}

// Surfaces, x in bytes: c[i] = (x, y); a read stores out[i], a write v[i].
#define SURFACE_MODE(MODE, BOUNDARY)                                                       \
    extern "C" __global__ void surf_read2d_##MODE(unsigned *out, cudaSurfaceObject_t s,    \
                                                  const int2 *c, int n)                    \
    {                                                                                      \
        int i = blockIdx.x * blockDim.x + threadIdx.x;                                     \
        if (i < n)                                                                         \
            out[i] = surf2Dread<unsigned>(s, c[i].x, c[i].y, BOUNDARY);                    \
    }                                                                                      \
    extern "C" __global__ void surf_write2d_##MODE(cudaSurfaceObject_t s, const int2 *c,   \
                                                   const unsigned *v, int n)               \
    {                                                                                      \
        int i = blockIdx.x * blockDim.x + threadIdx.x;                                     \
        if (i < n)                                                                         \
            surf2Dwrite<unsigned>(v[i], s, c[i].x, c[i].y, BOUNDARY);                      \
    }

SURFACE_MODE(trap, cudaBoundaryModeTrap)
SURFACE_MODE(clamp, cudaBoundaryModeClamp)
SURFACE_MODE(zero, cudaBoundaryModeZero)

// uchar4 texels: read with .v4.b8, written back +1 with .v4.b8
extern "C" __global__ void surf_bump_uchar4(cudaSurfaceObject_t s, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h)
        return;
    uchar4 v = surf2Dread<uchar4>(s, x * 4, y);
    surf2Dwrite(make_uchar4(v.x + 1, v.y + 1, v.z + 1, v.w + 1), s, x * 4, y);
}

// The other geometries: a 1D surface doubled in place, a 3D one's slice 2 row
// 1, a 2D layered one's layer 3 row 1, a 1D layered one's layer 2.
extern "C" __global__ void surf_layered_3d(cudaSurfaceObject_t s1, cudaSurfaceObject_t s3,
                                           cudaSurfaceObject_t s2l, cudaSurfaceObject_t s1l,
                                           int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    surf1Dwrite<float>(surf1Dread<float>(s1, i * 4) * 2.0f, s1, i * 4);
    surf3Dwrite<float2>(make_float2(i, -i), s3, i * 8, 1, 2);
    surf2DLayeredwrite<short>((short)(100 + i), s2l, i * 2, 1, 3);
    surf1DLayeredwrite<unsigned long long>(1000ull + i, s1l, i * 8, 2);
}
