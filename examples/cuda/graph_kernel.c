/*
 * graph_kernel.c — kernel nodes: a chain of saxpy nodes launched many times (each launch
 * adds up, so order and count show), the node's parameters read back, changed in the graph
 * and in the instantiated graph (cuGraphExecKernelNodeSetParams, as jacobiCudaGraphs does),
 * disabled, the `extra` form of parameters, a whole-graph update (cuGraphExecUpdate), and
 * the errors a wrong node or update gets. One JSON verdict.
 *
 * Usage: graph_kernel [KERNELS.ptx|KERNELS.fatbin]
 */
#include "graph_common.h"

int main(int argc, char **argv)
{
    graph_env e = graph_setup(argc, argv);
    const int n = 1000;
    CUdeviceptr x = device_floats(n, 1.0f), y = device_floats(n, 0.0f);

    /* y = 2x + y, then y = 3x + y: 5 per launch. */
    saxpy_args a1 = {2.0f, x, y, n, {0}}, a2 = {3.0f, x, y, n, {0}};
    CUDA_KERNEL_NODE_PARAMS p1 = saxpy_params(&e, &a1), p2 = saxpy_params(&e, &a2);
    CUgraph g;
    CUgraphNode k1, k2;
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphAddKernelNode(&k1, g, NULL, 0, &p1));
    CHECK(cuGraphAddKernelNode(&k2, g, &k1, 1, &p2));
    a1.a = 100.0f; /* the node copied its arguments when it was made */
    CUgraphExec ex;
    CHECK(cuGraphInstantiate(&ex, g, 0));
    for (int i = 0; i < 4; i++)
        CHECK(cuGraphLaunch(ex, e.stream));
    CHECK(cuStreamSynchronize(e.stream));
    expect("four_launches", device_all(y, n, 20.0f));

    /* The node's parameters read back: the function and the copied arguments. */
    CUDA_KERNEL_NODE_PARAMS got;
    CHECK(cuGraphKernelNodeGetParams(k1, &got));
    expect("get_params", got.func == e.saxpy && got.gridDimX == p1.gridDimX
                         && got.kernelParams != NULL && *(float *)got.kernelParams[0] == 2.0f
                         && *(int *)got.kernelParams[3] == n);

    /* Changed in the exec only: y = 10x + y and 3x + y: 13 per launch. */
    saxpy_args a3 = {10.0f, x, y, n, {0}};
    CUDA_KERNEL_NODE_PARAMS p3 = saxpy_params(&e, &a3);
    CHECK(cuGraphExecKernelNodeSetParams(ex, k1, &p3));
    CHECK(cuGraphLaunch(ex, e.stream));
    CHECK(cuStreamSynchronize(e.stream));
    expect("exec_set_params", device_all(y, n, 33.0f));

    /* Disabled in the exec: 3 per launch; enabled again. */
    unsigned enabled = 0;
    CHECK(cuGraphNodeSetEnabled(ex, k1, 0));
    CHECK(cuGraphNodeGetEnabled(ex, k1, &enabled));
    CHECK(cuGraphLaunch(ex, e.stream));
    CHECK(cuGraphNodeSetEnabled(ex, k1, 1));
    CHECK(cuStreamSynchronize(e.stream));
    expect("disabled_node", enabled == 0 && device_all(y, n, 36.0f));

    /* The `extra` form: the packed buffer as given (float, pad, x, y, int). */
    struct {
        float a;
        int pad;
        CUdeviceptr x, y;
        int n, pad2;
    } packed = {1.0f, 0, x, y, n, 0};
    size_t size = 28; /* the parameters end at n */
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    CUDA_KERNEL_NODE_PARAMS pe = p1;
    pe.kernelParams = NULL, pe.extra = extra;
    CUgraph g2;
    CUgraphNode ke;
    CUgraphExec ex2;
    CHECK(cuGraphCreate(&g2, 0));
    CHECK(cuGraphAddKernelNode(&ke, g2, NULL, 0, &pe));
    CHECK(cuGraphInstantiate(&ex2, g2, 0));
    CHECK(cuGraphLaunch(ex2, e.stream));
    CHECK(cuStreamSynchronize(e.stream));
    expect("extra_form", device_all(y, n, 37.0f));

    /* A whole-graph update from a graph of the same shape: 1x + 1x per launch. */
    CHECK(cuGraphKernelNodeSetParams(k1, &pe));
    saxpy_args a4 = {1.0f, x, y, n, {0}};
    CUDA_KERNEL_NODE_PARAMS p4 = saxpy_params(&e, &a4);
    CHECK(cuGraphKernelNodeSetParams(k2, &p4));
    CUgraphExecUpdateResultInfo info;
    expect_result("exec_update", cuGraphExecUpdate(ex, g, &info), CUDA_SUCCESS);
    CHECK(cuGraphLaunch(ex, e.stream));
    CHECK(cuStreamSynchronize(e.stream));
    expect("updated_graph_runs", info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS
                                 && device_all(y, n, 39.0f));
    /* ... but not from a graph of another shape. */
    expect_result("exec_update_topology", cuGraphExecUpdate(ex, g2, &info),
                  CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    expect("update_topology_result", info.result == CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);

    /* Wrong uses. */
    CUgraphNode bad;
    CUDA_KERNEL_NODE_PARAMS pz = p2;
    pz.gridDimX = 0;
    expect_result("empty_grid", cuGraphAddKernelNode(&bad, g, NULL, 0, &pz),
                  CUDA_ERROR_INVALID_VALUE);
    expect_result("dependency_of_another_graph", cuGraphAddKernelNode(&bad, g2, &k1, 1, &p2),
                  CUDA_ERROR_INVALID_VALUE);
    CUgraph cyc;
    CUgraphNode c1, c2;
    CUgraphExec cex;
    CHECK(cuGraphCreate(&cyc, 0));
    CHECK(cuGraphAddEmptyNode(&c1, cyc, NULL, 0));
    CHECK(cuGraphAddEmptyNode(&c2, cyc, &c1, 1));
    CHECK(cuGraphAddDependencies(cyc, &c2, &c1, 1));
    expect_result("cycle_refused", cuGraphInstantiate(&cex, cyc, 0), CUDA_ERROR_INVALID_VALUE);

    CHECK(cuGraphExecDestroy(ex));
    CHECK(cuGraphExecDestroy(ex2));
    CHECK(cuGraphDestroy(g));
    CHECK(cuGraphDestroy(g2));
    CHECK(cuGraphDestroy(cyc));
    return verdict();
}
