// Pitched memory: cudaMallocPitch, cudaMemcpy2D in every direction (with
// offsets and host pitches wider than a row), cudaMemset2D, a kernel over
// pitched rows, cudaMalloc3D with cudaMemcpy3D and cudaMemset3D, and the
// errors a GPU gives for a pitch narrower than the row.
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

__global__ void scale_rows(float *m, size_t pitch, int width, int height, float k)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < width && y < height) {
        float *row = (float *)((char *)m + y * pitch);
        row[x] = row[x] * k + (float)y;
    }
}

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    printf("{\"ok\": false, \"call\": \"%s\", \"error\": \"%s\"}\n", #call, cudaGetErrorName(e_)); \
    return 1; } } while (0)

enum { W = 333, H = 77, HOST_PITCH = 400 };  // floats; rows are not a multiple of 512 bytes

static float host_in[H][HOST_PITCH], host_out[H][HOST_PITCH], host_back[H][W];

int main()
{
    int bad = 0;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < HOST_PITCH; x++)
            host_in[y][x] = (float)(y * 1000 + x), host_out[y][x] = -1.0f;

    // 2D: host (pitch 400 floats) -> pitched device, a kernel, device -> host.
    float *dev;
    size_t pitch = 0;
    CHECK(cudaMallocPitch((void **)&dev, &pitch, W * sizeof(float), H));
    bad += pitch < W * sizeof(float) || pitch % 4 != 0;
    CHECK(cudaMemcpy2D(dev, pitch, host_in, HOST_PITCH * sizeof(float), W * sizeof(float), H,
                       cudaMemcpyHostToDevice));
    scale_rows<<<dim3((W + 127) / 128, H), 128>>>(dev, pitch, W, H, 2.0f);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy2D(host_out, HOST_PITCH * sizeof(float), dev, pitch, W * sizeof(float), H,
                       cudaMemcpyDeviceToHost));
    for (int y = 0; y < H; y++) {
        for (int x = 0; x < W; x++)
            bad += host_out[y][x] != host_in[y][x] * 2.0f + (float)y;
        for (int x = W; x < HOST_PITCH; x++)  // the host pitch's padding is left alone
            bad += host_out[y][x] != -1.0f;
    }

    // A sub-rectangle device -> device (a second pitched allocation, async on
    // a stream), then back packed (host pitch = width) with an offset.
    float *dev2;
    size_t pitch2 = 0;
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMallocPitch((void **)&dev2, &pitch2, W * sizeof(float), H));
    CHECK(cudaMemset2DAsync(dev2, pitch2, 0, W * sizeof(float), H, s));
    CHECK(cudaMemcpy2DAsync((char *)dev2 + 5 * pitch2 + 10 * sizeof(float), pitch2,
                            (char *)dev + 3 * pitch + 7 * sizeof(float), pitch,
                            100 * sizeof(float), 40, cudaMemcpyDeviceToDevice, s));
    CHECK(cudaMemcpy2DAsync(host_back, W * sizeof(float), dev2, pitch2, W * sizeof(float), H,
                            cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            int in = y >= 5 && y < 45 && x >= 10 && x < 110;
            float want = in ? host_out[y - 5 + 3][x - 10 + 7] : 0.0f;
            bad += host_back[y][x] != want;
        }

    // cudaMemset2D of a band, read with cudaMemcpy2D into a narrow host buffer.
    static unsigned char band[H][16];
    CHECK(cudaMemset2D((char *)dev2 + 16, pitch2, 0xab, 16, H));
    CHECK(cudaMemcpy2D(band, 16, (char *)dev2 + 16, pitch2, 16, H, cudaMemcpyDeviceToHost));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < 16; x++)
            bad += band[y][x] != 0xab;

    // 3D: a pitched volume, filled from a packed host volume, a plane cleared,
    // read back through cudaMemcpy3D with an offset extent.
    enum { X = 50, Y = 9, Z = 6 };
    static int vol[Z][Y][X], vol_back[Z][Y][X];
    for (int z = 0; z < Z; z++)
        for (int y = 0; y < Y; y++)
            for (int x = 0; x < X; x++)
                vol[z][y][x] = z * 10000 + y * 100 + x;
    cudaExtent extent = make_cudaExtent(X * sizeof(int), Y, Z);
    cudaPitchedPtr dvol;
    CHECK(cudaMalloc3D(&dvol, extent));
    cudaMemcpy3DParms up = {};
    up.srcPtr = make_cudaPitchedPtr(vol, X * sizeof(int), X, Y);
    up.dstPtr = dvol;
    up.extent = extent;
    up.kind = cudaMemcpyHostToDevice;
    CHECK(cudaMemcpy3D(&up));
    cudaPitchedPtr plane2 = dvol;
    plane2.ptr = (char *)dvol.ptr + 2 * dvol.pitch * Y;
    CHECK(cudaMemset3D(plane2, 0, make_cudaExtent(X * sizeof(int), Y, 1)));
    memset(vol_back, 0xff, sizeof vol_back);
    cudaMemcpy3DParms down = {};
    down.srcPtr = dvol;
    down.srcPos = make_cudaPos(4 * sizeof(int), 1, 1);
    down.dstPtr = make_cudaPitchedPtr(vol_back, X * sizeof(int), X, Y);
    down.dstPos = make_cudaPos(4 * sizeof(int), 1, 1);
    down.extent = make_cudaExtent((X - 8) * sizeof(int), Y - 2, Z - 2);
    down.kind = cudaMemcpyDeviceToHost;
    CHECK(cudaMemcpy3D(&down));
    for (int z = 0; z < Z; z++)
        for (int y = 0; y < Y; y++)
            for (int x = 0; x < X; x++) {
                int in = z >= 1 && z < Z - 1 && y >= 1 && y < Y - 1 && x >= 4 && x < X - 4;
                int want = !in ? -1 : z == 2 ? 0 : vol[z][y][x];
                bad += vol_back[z][y][x] != want;
            }

    // A pitch narrower than the row is refused, as on a GPU.
    cudaError_t narrow = cudaMemcpy2D(dev, 8, host_in, HOST_PITCH * sizeof(float),
                                      W * sizeof(float), 2, cudaMemcpyHostToDevice);
    CHECK(cudaFree(dev));
    CHECK(cudaFree(dev2));
    CHECK(cudaFree(dvol.ptr));
    CHECK(cudaStreamDestroy(s));
    printf("{\"ok\": %s, \"mismatches\": %d, \"narrow_pitch\": \"%s\"}\n",
           bad == 0 ? "true" : "false", bad, cudaGetErrorName(narrow));
    return bad != 0;
}
