// Fails: its kernel writes through an address that is no allocation (made from argc
// at run time, so the compiler cannot drop the store as it may a write through a
// literal null pointer); the host device stops it with an illegal address and the
// program reports the error it gets back.
#include <cstdint>
#include <cstdio>

__global__ void write_stray(int *p) { p[threadIdx.x] = 1; }

int main(int argc, char **argv) {
    (void)argv;
    write_stray<<<1, 32>>>((int *)(uintptr_t)(argc * 4096));
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) {
        printf("CUDA error: %s\n", cudaGetErrorString(err));
        return 1;
    }
    printf("Test passed\n");
    return 0;
}
