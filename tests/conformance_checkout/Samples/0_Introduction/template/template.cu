// Fails: its kernel writes through a null pointer, so the host device stops it
// with an illegal address and the program reports the error it gets back.
#include <cstdio>

__global__ void write_null(int *p) { p[threadIdx.x] = 1; }

int main() {
    write_null<<<1, 32>>>(nullptr);
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) {
        printf("CUDA error: %s\n", cudaGetErrorString(err));
        return 1;
    }
    printf("Test passed\n");
    return 0;
}
