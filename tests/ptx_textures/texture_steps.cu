// State kept in CUDA arrays across gated steps, for tests/test_consistency.py:
// each step uploads a bias (32 KiB: the journal grows, so checkpoints come),
// samples one array through a texture object (linear filtering), adds the
// samples and the bias into device memory, and writes the other array through
// a surface object (the two swap each step), then prints a checksum of both. Between steps it reads a line
// from stdin, so a test moves the session at a known point; a move that lost the
// array's contents, its texture or its surface gives other checksums.
//   texture_steps IGNORED STEPS gate      (the arguments of gleam's GatedRun)
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

enum { W = 64, H = 32 };

__global__ void step(float *acc, const float *bias, cudaTextureObject_t t, cudaSurfaceObject_t s,
                     int k)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x >= W || y >= H)
        return;
    float v = tex2D<float>(t, x + 0.25f * (k % 4), y + 0.75f);
    acc[y * W + x] += v + bias[(y * W + x) * 4 + k % 4];
    surf2Dwrite(v * 0.5f + (float)(x ^ y ^ k), s, x * 4, y);
}

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #call, cudaGetErrorName(e_)); exit(1); } } while (0)

int main(int argc, char **argv)
{
    int steps = argc > 2 ? atoi(argv[2]) : 4, gate = argc > 3;
    static float init[H][W], acc[H * W], arr_back[H][W], bias[H * W * 4];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            init[y][x] = (float)((x * 5 + y * 3) % 17);
    cudaChannelFormatDesc f = cudaCreateChannelDesc<float>();
    cudaArray_t a[2];
    cudaTextureObject_t t[2];
    cudaSurfaceObject_t s[2];
    cudaTextureDesc td = {};
    td.filterMode = cudaFilterModeLinear;
    td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
    for (int i = 0; i < 2; i++) {
        CHECK(cudaMallocArray(&a[i], &f, W, H, cudaArraySurfaceLoadStore));
        CHECK(cudaMemcpy2DToArray(a[i], 0, 0, init, W * 4, W * 4, H, cudaMemcpyHostToDevice));
        cudaResourceDesc r = {};
        r.resType = cudaResourceTypeArray;
        r.res.array.array = a[i];
        CHECK(cudaCreateTextureObject(&t[i], &r, &td, NULL));
        CHECK(cudaCreateSurfaceObject(&s[i], &r));
    }
    float *dacc, *dbias;
    CHECK(cudaMalloc(&dacc, sizeof acc));
    CHECK(cudaMalloc(&dbias, sizeof bias));
    CHECK(cudaMemset(dacc, 0, sizeof acc));
    char line[16];
    for (int k = 0; k < steps; k++) {
        if (gate && k > 0 && fgets(line, sizeof line, stdin) == NULL)
            return 1;
        for (int i = 0; i < H * W * 4; i++)
            bias[i] = (float)((i * 7 + k * 11) % 13) * 0.125f;
        CHECK(cudaMemcpy(dbias, bias, sizeof bias, cudaMemcpyHostToDevice));
        step<<<dim3(1, H), W>>>(dacc, dbias, t[k % 2], s[(k + 1) % 2], k);
        CHECK(cudaGetLastError());
        CHECK(cudaMemcpy(acc, dacc, sizeof acc, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy2DFromArray(arr_back, W * 4, a[(k + 1) % 2], 0, 0, W * 4, H,
                                    cudaMemcpyDeviceToHost));
        double sum = 0, arr = 0;
        for (int i = 0; i < W * H; i++)
            sum += acc[i] * (1 + i % 7), arr += ((float *)arr_back)[i] * (1 + i % 5);
        printf("step %d %.6f %.6f\n", k, sum, arr);
        fflush(stdout);
    }
    printf("{\"ok\": true}\n");
    return 0;
}
