/*
 * graph_memset.c — memset nodes of 1-, 2- and 4-byte elements, a pitched 2D memset that
 * leaves the gaps between rows alone, a value changed in the instantiated graph, and the
 * element size CUDA refuses. One JSON verdict.
 *
 * Usage: graph_memset [KERNELS.ptx|KERNELS.fatbin]
 */
#include "graph_common.h"

static CUDA_MEMSET_NODE_PARAMS memset_params(CUdeviceptr dst, unsigned value, unsigned elem,
                                             size_t width, size_t height, size_t pitch)
{
    CUDA_MEMSET_NODE_PARAMS m;
    memset(&m, 0, sizeof m);
    m.dst = dst, m.value = value, m.elementSize = elem;
    m.width = width, m.height = height, m.pitch = pitch;
    return m;
}

int main(int argc, char **argv)
{
    graph_env e = graph_setup(argc, argv);
    CUdeviceptr d8, d16, d32, d2;
    CHECK(cuMemAlloc(&d8, 64));
    CHECK(cuMemAlloc(&d16, 128));
    CHECK(cuMemAlloc(&d32, 256));
    CHECK(cuMemAlloc(&d2, 4 * 32));
    CHECK(cuMemsetD8(d2, 0x11, 4 * 32));
    CUDA_MEMSET_NODE_PARAMS m8 = memset_params(d8, 0xAB, 1, 64, 1, 64);
    CUDA_MEMSET_NODE_PARAMS m16 = memset_params(d16, 0xBEEF, 2, 64, 1, 128);
    CUDA_MEMSET_NODE_PARAMS m32 = memset_params(d32, 0xDEADBEEFu, 4, 64, 1, 256);
    CUDA_MEMSET_NODE_PARAMS m2 = memset_params(d2, 0x7777, 2, 8, 4, 32); /* 16 of 32 bytes */
    CUgraph g;
    CUgraphNode n8, n16, n32, n2;
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphAddMemsetNode(&n8, g, NULL, 0, &m8, NULL));
    CHECK(cuGraphAddMemsetNode(&n16, g, &n8, 1, &m16, NULL));
    CHECK(cuGraphAddMemsetNode(&n32, g, NULL, 0, &m32, NULL));
    CHECK(cuGraphAddMemsetNode(&n2, g, NULL, 0, &m2, NULL));
    CUgraphExec ex;
    CHECK(cuGraphInstantiate(&ex, g, 0));
    CHECK(cuGraphLaunch(ex, e.stream));
    CHECK(cuStreamSynchronize(e.stream));

    unsigned char h8[64], h2[128];
    unsigned short h16[64];
    unsigned int h32[64];
    CHECK(cuMemcpyDtoH(h8, d8, sizeof h8));
    CHECK(cuMemcpyDtoH(h16, d16, sizeof h16));
    CHECK(cuMemcpyDtoH(h32, d32, sizeof h32));
    CHECK(cuMemcpyDtoH(h2, d2, sizeof h2));
    int ok = 1;
    for (int i = 0; i < 64; i++)
        ok &= h8[i] == 0xAB && h16[i] == 0xBEEF && h32[i] == 0xDEADBEEFu;
    expect("widths_1_2_4", ok);
    ok = 1;
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 32; c++)
            ok &= h2[r * 32 + c] == (c < 16 ? 0x77 : 0x11);
    expect("pitched_rows_and_gaps", ok);

    /* Read back, then changed in the exec. */
    CUDA_MEMSET_NODE_PARAMS got;
    CHECK(cuGraphMemsetNodeGetParams(n32, &got));
    expect("get_params", got.value == 0xDEADBEEFu && got.elementSize == 4 && got.width == 64);
    CUDA_MEMSET_NODE_PARAMS m32b = memset_params(d32, 7, 4, 64, 1, 256);
    CHECK(cuGraphExecMemsetNodeSetParams(ex, n32, &m32b, NULL));
    CHECK(cuGraphLaunch(ex, e.stream));
    CHECK(cuStreamSynchronize(e.stream));
    CHECK(cuMemcpyDtoH(h32, d32, sizeof h32));
    ok = 1;
    for (int i = 0; i < 64; i++)
        ok &= h32[i] == 7;
    expect("exec_set_value", ok);

    CUgraphNode bad;
    CUDA_MEMSET_NODE_PARAMS m3 = memset_params(d8, 1, 3, 8, 1, 24);
    expect_result("element_of_3_bytes", cuGraphAddMemsetNode(&bad, g, NULL, 0, &m3, NULL),
                  CUDA_ERROR_INVALID_VALUE);

    CHECK(cuGraphExecDestroy(ex));
    CHECK(cuGraphDestroy(g));
    return verdict();
}
