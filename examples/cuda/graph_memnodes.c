/*
 * graph_memnodes.c — memory alloc and free nodes: a graph allocates a buffer, fills and uses
 * it and frees it, launched again and again; a graph whose allocation outlives it (freed by
 * the program with cuMemFreeAsync, then by another graph's free node), relaunching one whose
 * allocation is still live (refused unless instantiated to free it on launch), the graph
 * memory attributes, and the same allocation captured from cuMemAllocAsync/cuMemFreeAsync.
 * One JSON verdict.
 *
 * Usage: graph_memnodes [KERNELS.ptx|KERNELS.fatbin]
 */
#include "graph_common.h"

static CUDA_MEM_ALLOC_NODE_PARAMS alloc_params(CUdevice dev, size_t bytes)
{
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.poolProps.location.id = dev;
    p.bytesize = bytes;
    return p;
}

static cuuint64_t attribute(CUdevice dev, CUgraphMem_attribute attr)
{
    cuuint64_t v = 0;
    CHECK(cuDeviceGetGraphMemAttribute(dev, attr, &v));
    return v;
}

int main(int argc, char **argv)
{
    graph_env e = graph_setup(argc, argv);
    const int n = 1024;
    const size_t bytes = n * sizeof(float);
    CUdeviceptr y = device_floats(n, 0.0f);
    float out[1024];

    /* alloc t; t = 4.0f; y = 1·t + y; free t */
    CUDA_MEM_ALLOC_NODE_PARAMS ap = alloc_params(e.dev, bytes);
    CUgraph g;
    CUgraphNode al, set, k, fr;
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphAddMemAllocNode(&al, g, NULL, 0, &ap));
    CUdeviceptr t = ap.dptr;
    CUDA_MEMSET_NODE_PARAMS mp;
    memset(&mp, 0, sizeof mp);
    mp.dst = t, mp.value = 0x40800000u, mp.elementSize = 4, mp.width = n, mp.height = 1;
    CHECK(cuGraphAddMemsetNode(&set, g, &al, 1, &mp, NULL));
    saxpy_args ka = {1.0f, t, y, n, {0}};
    CUDA_KERNEL_NODE_PARAMS kp = saxpy_params(&e, &ka);
    CHECK(cuGraphAddKernelNode(&k, g, &set, 1, &kp));
    CHECK(cuGraphAddMemFreeNode(&fr, g, &k, 1, t));
    CUDA_MEM_ALLOC_NODE_PARAMS got;
    CHECK(cuGraphMemAllocNodeGetParams(al, &got));
    CUdeviceptr freed = 0;
    CHECK(cuGraphMemFreeNodeGetParams(fr, &freed));
    expect("node_params", t != 0 && got.dptr == t && got.bytesize == bytes && freed == t);
    CUgraphExec ex;
    CHECK(cuGraphInstantiate(&ex, g, 0));
    CHECK(cuGraphDestroy(g)); /* the exec keeps what it needs */
    for (int i = 0; i < 3; i++)
        CHECK(cuGraphLaunch(ex, e.stream));
    CHECK(cuStreamSynchronize(e.stream));
    expect("alloc_use_free_each_launch", device_all(y, n, 12.0f));
    expect("nothing_in_use_after_free",
           attribute(e.dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT) == 0);

    /* An allocation that outlives its graph's launch. */
    CUDA_MEM_ALLOC_NODE_PARAMS ap2 = alloc_params(e.dev, bytes);
    CUgraph g2;
    CUgraphNode al2, set2;
    CHECK(cuGraphCreate(&g2, 0));
    CHECK(cuGraphAddMemAllocNode(&al2, g2, NULL, 0, &ap2));
    CUDA_MEMSET_NODE_PARAMS mp2 = mp;
    mp2.dst = ap2.dptr, mp2.value = 0x40000000u; /* 2.0f */
    CHECK(cuGraphAddMemsetNode(&set2, g2, &al2, 1, &mp2, NULL));
    CUgraphExec ex2;
    CHECK(cuGraphInstantiate(&ex2, g2, 0));
    CHECK(cuGraphLaunch(ex2, e.stream));
    CHECK(cuStreamSynchronize(e.stream));
    CHECK(cuMemcpyDtoH(out, ap2.dptr, bytes));
    expect("allocation_outlives_launch", host_all(out, n, 2.0f));
    expect("in_use_while_live", attribute(e.dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT) >= bytes
                                && attribute(e.dev, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH) >= bytes);
    expect_result("relaunch_while_live", cuGraphLaunch(ex2, e.stream), CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemFreeAsync(ap2.dptr, e.stream)); /* the program frees it ... */
    CHECK(cuGraphLaunch(ex2, e.stream));       /* ... so the graph may allocate it again */
    /* ... and another graph's free node frees it this time. */
    CUgraph gf;
    CUgraphNode onlyfree;
    CUgraphExec exf;
    CHECK(cuGraphCreate(&gf, 0));
    CHECK(cuGraphAddMemFreeNode(&onlyfree, gf, NULL, 0, ap2.dptr));
    CHECK(cuGraphInstantiate(&exf, gf, 0));
    CHECK(cuGraphLaunch(exf, e.stream));
    CHECK(cuStreamSynchronize(e.stream));
    CHECK(cuGraphLaunch(ex2, e.stream)); /* free again: allowed */
    CHECK(cuGraphLaunch(exf, e.stream));
    CHECK(cuStreamSynchronize(e.stream));
    CHECK(cuGraphExecDestroy(ex2));
    CUgraphExec ex3;
    CHECK(cuGraphInstantiateWithFlags(&ex3, g2, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
    expect_result("auto_free_on_launch", cuGraphLaunch(ex3, e.stream), CUDA_SUCCESS);
    expect_result("auto_free_again", cuGraphLaunch(ex3, e.stream), CUDA_SUCCESS);
    CHECK(cuMemFreeAsync(ap2.dptr, e.stream));
    CHECK(cuStreamSynchronize(e.stream));
    cuuint64_t zero = 0;
    CHECK(cuDeviceSetGraphMemAttribute(e.dev, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &zero));
    cuuint64_t one = 1;
    expect_result("set_current_refused",
                  cuDeviceSetGraphMemAttribute(e.dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &one),
                  CUDA_ERROR_INVALID_VALUE);
    CHECK(cuDeviceGraphMemTrim(e.dev));

    /* The same through stream capture: cuMemAllocAsync and cuMemFreeAsync become nodes. */
    CUgraph gc;
    CUdeviceptr u = 0;
    CHECK(cuStreamBeginCapture(e.stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuMemAllocAsync(&u, bytes, e.stream));
    CHECK(cuMemsetD32Async(u, 0x3f800000u, n, e.stream)); /* 1.0f */
    saxpy_args kc = {3.0f, u, y, n, {0}};
    void *args[4] = {&kc.a, &kc.x, &kc.y, &kc.n};
    CHECK(cuLaunchKernel(e.saxpy, example_blocks(n, 128), 1, 1, 128, 1, 1, 0, e.stream, args,
                         NULL));
    CHECK(cuMemFreeAsync(u, e.stream));
    CHECK(cuStreamEndCapture(e.stream, &gc));
    CUgraphNode roots[2];
    size_t nroots = 2;
    CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
    CHECK(cuGraphGetRootNodes(gc, roots, &nroots));
    CHECK(cuGraphNodeGetType(roots[0], &type));
    expect("captured_alloc_node", nroots == 1 && type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && u != 0);
    CUgraphExec exc;
    CHECK(cuGraphInstantiate(&exc, gc, 0));
    CHECK(cuMemsetD32(y, 0, n));
    CHECK(cuGraphLaunch(exc, e.stream));
    CHECK(cuGraphLaunch(exc, e.stream));
    CHECK(cuStreamSynchronize(e.stream));
    expect("captured_alloc_runs", device_all(y, n, 6.0f));

    CHECK(cuGraphExecDestroy(ex));
    CHECK(cuGraphExecDestroy(ex3));
    CHECK(cuGraphExecDestroy(exf));
    CHECK(cuGraphExecDestroy(exc));
    CHECK(cuGraphDestroy(g2));
    CHECK(cuGraphDestroy(gf));
    CHECK(cuGraphDestroy(gc));
    return verdict();
}
