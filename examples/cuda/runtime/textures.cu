// CUDA arrays, textures and surfaces with the runtime API: cudaMallocArray,
// cudaMalloc3DArray (3D, layered, cubemap, surface load/store),
// cudaMallocMipmappedArray with its levels, copies to, from and between
// arrays (cudaMemcpy2DToArray, cudaMemcpy2DFromArray, cudaMemcpy3D,
// cudaMemcpy2DArrayToArray), texture objects over arrays, mipmapped arrays,
// linear and pitched memory (point and linear filtering, wrap, clamp, border
// and normalized coordinates, element and normalized-float reads), surface
// objects, the descriptor queries, and a copy past an array's end. The CPU
// computes every expected value (linear filtering with the 1.8 fixed-point
// weights of the programming guide; a GPU may round its blend differently,
// hence the small tolerance there). One JSON line at the end.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    printf("{\"ok\": false, \"call\": \"%s\", \"error\": \"%s\"}\n", #call, cudaGetErrorName(e_)); \
    return 1; } } while (0)

enum { W = 40, H = 24, N = W * H };

__global__ void sample2d(float4 *out, cudaTextureObject_t t, int w, int h, float dx, float dy,
                         float scale)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < w && y < h)
        out[y * w + x] = tex2D<float4>(t, (x + dx) * scale, (y + dy) * scale);
}

__global__ void sample2d_uchar(uchar4 *out, cudaTextureObject_t t, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < w && y < h)
        out[y * w + x] = tex2D<uchar4>(t, x + 0.5f, y + 0.5f);
}

__global__ void sample_shapes(float *out, cudaTextureObject_t t3, cudaTextureObject_t tl,
                              cudaTextureObject_t tc, cudaTextureObject_t tm,
                              cudaTextureObject_t tlin, cudaTextureObject_t tp)
{
    int i = threadIdx.x;  // 64 threads
    out[i] = tex3D<float>(t3, i % 4 + 0.5f, i / 4 % 4 + 0.5f, i / 16 + 0.5f);
    out[64 + i] = tex2DLayered<float>(tl, i % 8 + 0.5f, 0.5f, i / 8);
    float u = (i % 8 + 0.5f) / 8.0f * 2.0f - 1.0f;
    out[128 + i] = texCubemap<float>(tc, u, -1.0f, 0.25f);      // the -y face
    out[192 + i] = tex2DLod<float>(tm, 0.3f, 0.6f, (float)(i % 4));
    out[256 + i] = tex1Dfetch<float>(tlin, i * 3 - 8);           // outside reads 0
    out[320 + i] = tex2D<float>(tp, (i % 8 + 0.5f) / 8.0f * 3.0f, 0.4f);  // wraps
}

__global__ void surface_invert(cudaSurfaceObject_t s, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x >= w || y >= h)
        return;
    uchar4 v = surf2Dread<uchar4>(s, x * 4, y);
    surf2Dwrite(make_uchar4(255 - v.x, 255 - v.y, 255 - v.z, v.w), s, x * 4, y);
    if (x == 0)  // a write past the row: dropped with cudaBoundaryModeZero
        surf2Dwrite(make_uchar4(1, 2, 3, 4), s, w * 4, y, cudaBoundaryModeZero);
}

static float texel_in[H][W];
static uchar4 rgba_in[H][W], rgba_out[H][W], rgba_back[H][W];
static float4 sampled[N];

// Linear memory of `size` bytes (pitch 0), or pitched memory of size x height texels.
static cudaResourceDesc memory_resource(void *p, cudaChannelFormatDesc f, size_t size,
                                        size_t height, size_t pitch)
{
    cudaResourceDesc r = {};
    r.resType = pitch ? cudaResourceTypePitch2D : cudaResourceTypeLinear;
    if (pitch) {
        r.res.pitch2D.devPtr = p;
        r.res.pitch2D.desc = f;
        r.res.pitch2D.width = size;
        r.res.pitch2D.height = height;
        r.res.pitch2D.pitchInBytes = pitch;
    } else {
        r.res.linear.devPtr = p;
        r.res.linear.desc = f;
        r.res.linear.sizeInBytes = size;
    }
    return r;
}

static float clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

// What linear filtering gives at unnormalized (x, y), with clamp addressing.
static float bilinear(float x, float y)
{
    double xb = x - 0.5, yb = y - 0.5;
    double fx = rint(xb * 256.0), fy = rint(yb * 256.0);
    int i = (int)floor(fx / 256.0), j = (int)floor(fy / 256.0);
    float a = (float)(fx - i * 256.0) / 256.0f, b = (float)(fy - j * 256.0) / 256.0f;
    auto at = [](int jj, int ii) {
        return texel_in[(int)clampf((float)jj, 0, H - 1)][(int)clampf((float)ii, 0, W - 1)];
    };
    return (1 - a) * (1 - b) * at(j, i) + a * (1 - b) * at(j, i + 1) + (1 - a) * b * at(j + 1, i) +
           a * b * at(j + 1, i + 1);
}

int main()
{
    int bad = 0;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            texel_in[y][x] = (float)((x * 7 + y * 13) % 31);
            rgba_in[y][x] = make_uchar4(x * 5, y * 9, (x + y) * 3, 200);
        }

    // A 2D float array, linear filtering at texel corners and centres.
    cudaChannelFormatDesc fdesc = cudaCreateChannelDesc<float>();
    cudaArray_t arr;
    CHECK(cudaMallocArray(&arr, &fdesc, W, H));
    CHECK(cudaMemcpy2DToArray(arr, 0, 0, texel_in, W * sizeof(float), W * sizeof(float), H,
                              cudaMemcpyHostToDevice));
    cudaResourceDesc res = {};
    res.resType = cudaResourceTypeArray;
    res.res.array.array = arr;
    cudaTextureDesc td = {};
    td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
    td.filterMode = cudaFilterModeLinear;
    td.readMode = cudaReadModeElementType;
    cudaTextureObject_t tex;
    CHECK(cudaCreateTextureObject(&tex, &res, &td, NULL));
    float4 *dout;
    CHECK(cudaMalloc(&dout, sizeof sampled));
    sample2d<<<dim3(1, H), 64>>>(dout, tex, W, H, 0.3f, 0.7f, 1.0f);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(sampled, dout, sizeof sampled, cudaMemcpyDeviceToHost));
    int linear_bad = 0;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            linear_bad += fabsf(sampled[y * W + x].x - bilinear(x + 0.3f, y + 0.7f)) > 2e-3f;
    bad += linear_bad;

    // Descriptor queries: the array's and the texture object's.
    cudaChannelFormatDesc got;
    cudaExtent ext;
    unsigned int flags = 99;
    CHECK(cudaArrayGetInfo(&got, &ext, &flags, arr));
    bad += got.x != 32 || got.f != cudaChannelFormatKindFloat || ext.width != W ||
           ext.height != H || ext.depth != 0 || flags != 0;
    cudaResourceDesc res_back;
    cudaTextureDesc td_back;
    CHECK(cudaGetTextureObjectResourceDesc(&res_back, tex));
    CHECK(cudaGetTextureObjectTextureDesc(&td_back, tex));
    bad += res_back.resType != cudaResourceTypeArray || res_back.res.array.array != arr ||
           td_back.filterMode != cudaFilterModeLinear;

    // uchar4: element reads, a copy between arrays, a surface that inverts it.
    cudaChannelFormatDesc cdesc = cudaCreateChannelDesc<uchar4>();
    cudaArray_t rgba, rgba2;
    CHECK(cudaMallocArray(&rgba, &cdesc, W, H, cudaArraySurfaceLoadStore));
    CHECK(cudaMallocArray(&rgba2, &cdesc, W, H));
    CHECK(cudaMemcpy2DToArray(rgba, 0, 0, rgba_in, W * 4, W * 4, H, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy2DArrayToArray(rgba2, 0, 0, rgba, 0, 0, W * 4, H));
    res.res.array.array = rgba2;
    td.filterMode = cudaFilterModePoint;
    cudaTextureObject_t texc;
    CHECK(cudaCreateTextureObject(&texc, &res, &td, NULL));
    uchar4 *dc;
    CHECK(cudaMalloc(&dc, sizeof rgba_out));
    sample2d_uchar<<<dim3(1, H), 64>>>(dc, texc, W, H);
    CHECK(cudaMemcpy(rgba_out, dc, sizeof rgba_out, cudaMemcpyDeviceToHost));
    bad += memcmp(rgba_out, rgba_in, sizeof rgba_in) != 0;
    res.res.array.array = rgba;
    cudaSurfaceObject_t surf;
    CHECK(cudaCreateSurfaceObject(&surf, &res));
    surface_invert<<<dim3(1, H), 64>>>(surf, W, H);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy2DFromArray(rgba_back, W * 4, rgba, 0, 0, W * 4, H, cudaMemcpyDeviceToHost));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            uchar4 a = rgba_in[y][x], b = rgba_back[y][x];
            bad += b.x != 255 - a.x || b.y != 255 - a.y || b.z != 255 - a.z || b.w != a.w;
        }
    // ... and normalized-float reads of the same texels, to device memory through an array
    td.readMode = cudaReadModeNormalizedFloat;
    td.normalizedCoords = 1;
    td.addressMode[0] = td.addressMode[1] = cudaAddressModeWrap;
    res.res.array.array = rgba2;
    cudaTextureObject_t texn;
    CHECK(cudaCreateTextureObject(&texn, &res, &td, NULL));
    sample2d<<<dim3(1, H), 64>>>(dout, texn, W, H, 0.5f + W, 0.5f - H, 1.0f / W);
    CHECK(cudaMemcpy(sampled, dout, sizeof sampled, cudaMemcpyDeviceToHost));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            // (x + 0.5 + W) / W wraps to x; y uses 1/W too: row floor(frac((y + 0.5 - H) / W) * H)
            float v = (y + 0.5f - H) / W;
            int row = (int)floorf((v - floorf(v)) * H);
            float4 s = sampled[y * W + x];
            uchar4 t = rgba_in[row][x];
            bad += fabsf(s.x - t.x / 255.0f) > 1e-6f || fabsf(s.w - t.w / 255.0f) > 1e-6f;
        }

    // 3D, layered and cubemap arrays; a mipmapped array; linear and pitched memory.
    static float vol[4][4][4], layers[8][1][8], faces[6][8][8], level0[16][16], lin[64],
        pitched[4][32], out[384];
    for (int i = 0; i < 64; i++)
        ((float *)vol)[i] = (float)i, ((float *)layers)[i] = 100.0f + i, lin[i] = 0.5f * i;
    for (int i = 0; i < 6 * 64; i++)
        ((float *)faces)[i] = (float)(i / 64 * 1000 + i % 64);
    for (int i = 0; i < 128; i++)
        ((float *)pitched)[i] = (float)i;
    cudaArray_t a3, al, ac;
    CHECK(cudaMalloc3DArray(&a3, &fdesc, make_cudaExtent(4, 4, 4)));
    CHECK(cudaMalloc3DArray(&al, &fdesc, make_cudaExtent(8, 1, 8), cudaArrayLayered));
    CHECK(cudaMalloc3DArray(&ac, &fdesc, make_cudaExtent(8, 8, 6), cudaArrayCubemap));
    cudaArray_t targets[3] = {a3, al, ac};
    void *sources[3] = {vol, layers, faces};
    cudaExtent extents[3] = {make_cudaExtent(4, 4, 4), make_cudaExtent(8, 1, 8),
                             make_cudaExtent(8, 8, 6)};
    for (int k = 0; k < 3; k++) {
        cudaMemcpy3DParms p = {};
        p.srcPtr = make_cudaPitchedPtr(sources[k], extents[k].width * 4, extents[k].width,
                                       extents[k].height);
        p.dstArray = targets[k];
        p.extent = extents[k];
        p.kind = cudaMemcpyHostToDevice;
        CHECK(cudaMemcpy3D(&p));
    }
    cudaMipmappedArray_t mip;
    CHECK(cudaMallocMipmappedArray(&mip, &fdesc, make_cudaExtent(16, 16, 0), 4));
    for (int l = 0; l < 4; l++) {
        int n = 16 >> l;
        for (int y = 0; y < n; y++)
            for (int x = 0; x < n; x++)
                level0[y][x] = (float)(l * 1000 + y * n + x);
        cudaArray_t level;
        CHECK(cudaGetMipmappedArrayLevel(&level, mip, l));
        CHECK(cudaMemcpy2DToArray(level, 0, 0, level0, 16 * 4, n * 4, n, cudaMemcpyHostToDevice));
    }
    float *dlin, *dp;
    size_t dpitch;
    CHECK(cudaMalloc(&dlin, sizeof lin));
    CHECK(cudaMemcpy(dlin, lin, sizeof lin, cudaMemcpyHostToDevice));
    CHECK(cudaMallocPitch((void **)&dp, &dpitch, 8 * 4, 4));
    CHECK(cudaMemcpy2D(dp, dpitch, pitched, 32 * 4, 8 * 4, 4, cudaMemcpyHostToDevice));

    cudaTextureObject_t objs[6];
    cudaTextureDesc pt = {};
    pt.filterMode = cudaFilterModePoint;
    pt.readMode = cudaReadModeElementType;
    for (int k = 0; k < 3; k++) {
        cudaResourceDesc r = {};
        r.resType = cudaResourceTypeArray;
        r.res.array.array = targets[k];
        pt.normalizedCoords = k == 2;
        CHECK(cudaCreateTextureObject(&objs[k], &r, &pt, NULL));
    }
    cudaResourceDesc rm = {};
    rm.resType = cudaResourceTypeMipmappedArray;
    rm.res.mipmap.mipmap = mip;
    cudaTextureDesc mt = pt;
    mt.normalizedCoords = 1;
    mt.maxMipmapLevelClamp = 3.0f;
    CHECK(cudaCreateTextureObject(&objs[3], &rm, &mt, NULL));
    cudaResourceDesc rl = memory_resource(dlin, fdesc, sizeof lin, 0, 0);
    pt.normalizedCoords = 0;
    CHECK(cudaCreateTextureObject(&objs[4], &rl, &pt, NULL));
    cudaResourceDesc rp = memory_resource(dp, fdesc, 8, 4, dpitch);
    cudaTextureDesc wt = pt;
    wt.normalizedCoords = 1;
    wt.addressMode[0] = wt.addressMode[1] = cudaAddressModeWrap;
    CHECK(cudaCreateTextureObject(&objs[5], &rp, &wt, NULL));
    float *dshapes;
    CHECK(cudaMalloc(&dshapes, sizeof out));
    sample_shapes<<<1, 64>>>(dshapes, objs[0], objs[1], objs[2], objs[3], objs[4], objs[5]);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(out, dshapes, sizeof out, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 64; i++) {
        bad += out[i] != vol[i / 16][i / 4 % 4][i % 4];
        bad += out[64 + i] != layers[i / 8][0][i % 8];
        // -y face (3): s = x (u), t = -z / |y| -> row floor((-0.25 + 1) / 2 * 8) = 3
        bad += out[128 + i] != faces[3][3][i % 8];
        int l = i % 4, n = 16 >> l;
        bad += out[192 + i] != (float)(l * 1000 + (int)(0.6f * n) * n + (int)(0.3f * n));
        int j = i * 3 - 8;
        bad += out[256 + i] != (j >= 0 && j < 64 ? lin[j] : 0.0f);
        float u = (i % 8 + 0.5f) / 8.0f * 3.0f;
        bad += out[320 + i] != pitched[(int)(0.4f * 4)][(int)((u - floorf(u)) * 8)];
    }

    // A copy past the array's end is refused.
    cudaError_t past = cudaMemcpy2DToArray(arr, 8, 0, texel_in, W * 4, W * 4, H,
                                           cudaMemcpyHostToDevice);
    bad += past != cudaErrorInvalidValue;
    cudaGetLastError();

    for (int k = 0; k < 6; k++)
        CHECK(cudaDestroyTextureObject(objs[k]));
    CHECK(cudaDestroyTextureObject(tex));
    CHECK(cudaDestroyTextureObject(texc));
    CHECK(cudaDestroyTextureObject(texn));
    CHECK(cudaDestroySurfaceObject(surf));
    CHECK(cudaFreeMipmappedArray(mip));
    for (cudaArray_t a : {arr, rgba, rgba2, a3, al, ac})
        CHECK(cudaFreeArray(a));
    CHECK(cudaDeviceSynchronize());
    printf("{\"ok\": %s, \"mismatches\": %d, \"linear_mismatches\": %d}\n",
           bad ? "false" : "true", bad, linear_bad);
    return bad != 0;
}
