/*
 * graph_memcpy.c — memcpy nodes each way: host to device (the node reads the program's memory
 * when the graph runs, not when it was made), device to device, device to host, host to host,
 * a pitched 2D copy and a 3D copy with gaps between slices, in one graph whose edges order
 * them; the parameters changed in the instantiated graph.
 *
 * Usage: graph_memcpy [KERNELS.ptx|KERNELS.fatbin]
 */
#include "graph_common.h"

int main(int argc, char **argv)
{
    graph_env e = graph_setup(argc, argv);
    const size_t n = 4096, bytes = n * sizeof(float);
    float *in = malloc(bytes), *out = malloc(bytes), *mirror = malloc(bytes);
    CUdeviceptr a, b;
    CHECK(cuMemAlloc(&a, bytes));
    CHECK(cuMemAlloc(&b, bytes));

    /* in -> a -> b -> out -> mirror */
    CUDA_MEMCPY3D h2d = linear_copy(CU_MEMORYTYPE_DEVICE, NULL, a, CU_MEMORYTYPE_HOST, in, 0,
                                    bytes);
    CUDA_MEMCPY3D d2d = linear_copy(CU_MEMORYTYPE_DEVICE, NULL, b, CU_MEMORYTYPE_DEVICE, NULL, a,
                                    bytes);
    CUDA_MEMCPY3D d2h = linear_copy(CU_MEMORYTYPE_HOST, out, 0, CU_MEMORYTYPE_DEVICE, NULL, b,
                                    bytes);
    CUDA_MEMCPY3D h2h = linear_copy(CU_MEMORYTYPE_HOST, mirror, 0, CU_MEMORYTYPE_HOST, out, 0,
                                    bytes);
    CUgraph g;
    CUgraphNode c1, c2, c3, c4;
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphAddMemcpyNode(&c1, g, NULL, 0, &h2d, NULL));
    CHECK(cuGraphAddMemcpyNode(&c2, g, &c1, 1, &d2d, NULL));
    CHECK(cuGraphAddMemcpyNode(&c3, g, &c2, 1, &d2h, NULL));
    CHECK(cuGraphAddMemcpyNode(&c4, g, &c3, 1, &h2h, NULL));
    CUgraphExec ex;
    CHECK(cuGraphInstantiate(&ex, g, 0));
    int each = 1;
    for (int round = 1; round <= 3; round++) {
        for (size_t i = 0; i < n; i++)
            in[i] = (float)(round * 1000 + (int)i % 97); /* new contents before each launch */
        CHECK(cuGraphLaunch(ex, e.stream));
        CHECK(cuStreamSynchronize(e.stream));
        for (size_t i = 0; i < n; i++)
            each &= out[i] == in[i] && mirror[i] == in[i];
    }
    expect("copies_each_way_read_at_launch", each);

    /* The device-to-host node made to read another buffer, in the exec only. */
    CUdeviceptr z;
    CHECK(cuMemAlloc(&z, bytes));
    CHECK(cuMemsetD32(z, 0x40400000u, n)); /* 3.0f */
    CUDA_MEMCPY3D d2h_z = d2h;
    d2h_z.srcDevice = z;
    CHECK(cuGraphExecMemcpyNodeSetParams(ex, c3, &d2h_z, NULL));
    CHECK(cuGraphLaunch(ex, e.stream));
    CHECK(cuStreamSynchronize(e.stream));
    expect("exec_memcpy_set_params", host_all(out, n, 3.0f) && host_all(mirror, n, 3.0f));

    /* A 2D copy of 3 rows of 16 bytes between pitches 64 and 32, and a 3D copy of 2 slices
     * of 2 rows whose source slices are 4 rows apart. */
    unsigned char hsrc[256], hdst[256];
    for (int i = 0; i < 256; i++)
        hsrc[i] = (unsigned char)i, hdst[i] = 0xEE;
    CUdeviceptr p;
    CHECK(cuMemAlloc(&p, 256));
    CHECK(cuMemsetD8(p, 0, 256));
    CUDA_MEMCPY3D up;
    memset(&up, 0, sizeof up);
    up.srcMemoryType = CU_MEMORYTYPE_HOST, up.srcHost = hsrc, up.srcPitch = 64;
    up.dstMemoryType = CU_MEMORYTYPE_DEVICE, up.dstDevice = p, up.dstPitch = 32;
    up.WidthInBytes = 16, up.Height = 3, up.Depth = 1;
    CUDA_MEMCPY3D down;
    memset(&down, 0, sizeof down);
    down.srcMemoryType = CU_MEMORYTYPE_DEVICE, down.srcDevice = p, down.srcPitch = 32;
    down.srcHeight = 4;
    down.dstMemoryType = CU_MEMORYTYPE_HOST, down.dstHost = hdst, down.dstPitch = 16;
    down.dstHeight = 2;
    down.WidthInBytes = 16, down.Height = 2, down.Depth = 2;
    CUgraph g2;
    CUgraphNode u, d;
    CUgraphExec ex2;
    CHECK(cuGraphCreate(&g2, 0));
    CHECK(cuGraphAddMemcpyNode(&u, g2, NULL, 0, &up, NULL));
    CHECK(cuGraphAddMemcpyNode(&d, g2, &u, 1, &down, NULL));
    CHECK(cuGraphInstantiate(&ex2, g2, 0));
    CHECK(cuGraphLaunch(ex2, e.stream));
    CHECK(cuStreamSynchronize(e.stream));
    /* Slice 0 is device rows 0-1 (host rows 0-1 of the 2D copy), slice 1 is device rows 4-5:
     * row 4 and 5 were never written (zero). */
    int ok3d = 1;
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 16; c++) {
            ok3d &= hdst[r * 16 + c] == hsrc[r * 64 + c];
            ok3d &= hdst[32 + r * 16 + c] == 0;
        }
    expect("pitched_2d_and_3d", ok3d && hdst[64] == 0xEE);

    CHECK(cuGraphExecDestroy(ex));
    CHECK(cuGraphExecDestroy(ex2));
    CHECK(cuGraphDestroy(g));
    CHECK(cuGraphDestroy(g2));
    return verdict();
}
