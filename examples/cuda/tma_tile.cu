// One 16x16 tile of a row-major float matrix, loaded into shared memory by
// the Tensor Memory Accelerator (capability 9.0+) through a tensor map that
// the host encoded, then written out by the block's threads. The map is a
// kernel parameter (__grid_constant__), as cuBLASLt's and cuDNN's are.
// examples/cuda/tensor_maps.py runs it; scripts/gen-example-kernels.sh makes
// peer/cuda/ptx/tma_tile.ptx from it.
#include <cuda.h>

#define TILE 16

extern "C" __global__ void tma_tile(const __grid_constant__ CUtensorMap map, float *out, int x,
                                    int y)
{
    __shared__ alignas(128) float tile[TILE * TILE];
    __shared__ alignas(8) unsigned long long bar;
    unsigned tile_s = (unsigned)__cvta_generic_to_shared(tile);
    unsigned bar_s = (unsigned)__cvta_generic_to_shared(&bar);
    unsigned done = 0;

    // One thread arms the barrier for the tile's bytes and starts the copy;
    // every thread waits for the barrier's first phase to complete.
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar_s));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar_s),
                     "r"((unsigned)sizeof tile)
                     : "memory");
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                     " [%0], [%1, {%2, %3}], [%4];" ::"r"(tile_s),
                     "l"((unsigned long long)&map), "r"(x), "r"(y), "r"(bar_s)
                     : "memory");
    }
    while (!done)
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done)
                     : "r"(bar_s)
                     : "memory");
    for (unsigned i = threadIdx.x; i < TILE * TILE; i += blockDim.x)
        out[i] = tile[i];
}
