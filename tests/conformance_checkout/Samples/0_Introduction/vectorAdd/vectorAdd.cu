// Passes: scales a vector on the device and checks it on the host. Its inputs
// are found as cuda-samples find theirs: ./data (the sample's own folder) and
// ../../../Common/data (the checkout's Common folder).
#include <cstdio>
#include <cstdlib>

__global__ void scale(const float *in, float *out, float k, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * k;
}

static int read_int(const char *path) {
    FILE *f = fopen(path, "r");
    int v = -1;
    if (!f || fscanf(f, "%d", &v) != 1) { fprintf(stderr, "cannot read %s\n", path); exit(1); }
    fclose(f);
    return v;
}

int main() {
    int n = read_int("./data/count.txt");
    float k = (float)read_int("../../../Common/data/scale.txt");
    float *h = (float *)malloc(n * sizeof(float)), *d_in, *d_out;
    for (int i = 0; i < n; i++) h[i] = (float)i;
    if (cudaMalloc(&d_in, n * sizeof(float)) != cudaSuccess ||
        cudaMalloc(&d_out, n * sizeof(float)) != cudaSuccess) { printf("Test failed: alloc\n"); return 1; }
    cudaMemcpy(d_in, h, n * sizeof(float), cudaMemcpyHostToDevice);
    scale<<<(n + 255) / 256, 256>>>(d_in, d_out, k, n);
    cudaMemcpy(h, d_out, n * sizeof(float), cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; i++)
        if (h[i] != (float)i * k) { printf("Test failed at %d\n", i); return 1; }
    printf("scaled %d values by %g\nTest passed\n", n, k);
    return 0;
}
