/*
 * graph_child.c — child graph and empty nodes, and the graph itself: a graph embeds a copy of
 * a child (changing the child afterwards changes nothing of the parent), runs it between its
 * own nodes (an empty node joins two branches), and is cloned, queried (nodes, roots, edges,
 * dependencies, dependents, types), edited (an edge removed and added, a node destroyed) and
 * launched into another graph's capture. One JSON verdict.
 *
 * Usage: graph_child [KERNELS.ptx|KERNELS.fatbin]
 */
#include "graph_common.h"

int main(int argc, char **argv)
{
    graph_env e = graph_setup(argc, argv);
    const int n = 300;
    CUdeviceptr x = device_floats(n, 1.0f), y = device_floats(n, 0.0f);

    /* child: y = 2x + y, then y = 5x + y */
    saxpy_args c1 = {2.0f, x, y, n, {0}}, c2 = {5.0f, x, y, n, {0}};
    CUDA_KERNEL_NODE_PARAMS p1 = saxpy_params(&e, &c1), p2 = saxpy_params(&e, &c2);
    CUgraph child, g;
    CUgraphNode k1, k2;
    CHECK(cuGraphCreate(&child, 0));
    CHECK(cuGraphAddKernelNode(&k1, child, NULL, 0, &p1));
    CHECK(cuGraphAddKernelNode(&k2, child, &k1, 1, &p2));

    /* parent: two branches (child, and y = 10x + y) joined by an empty node, then the child
     * again after it. */
    saxpy_args c3 = {10.0f, x, y, n, {0}};
    CUDA_KERNEL_NODE_PARAMS p3 = saxpy_params(&e, &c3);
    CUgraphNode a, b, join, again;
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphAddChildGraphNode(&a, g, NULL, 0, child));
    CHECK(cuGraphAddKernelNode(&b, g, NULL, 0, &p3));
    CUgraphNode both[2] = {a, b};
    CHECK(cuGraphAddEmptyNode(&join, g, both, 2));
    CHECK(cuGraphAddChildGraphNode(&again, g, &join, 1, child));
    /* The parent holds copies: a node added to the child now is not in them. */
    CUgraphNode extra;
    CHECK(cuGraphAddKernelNode(&extra, child, &k2, 1, &p3));
    CUgraphExec ex;
    CHECK(cuGraphInstantiate(&ex, g, 0));
    CHECK(cuGraphLaunch(ex, e.stream));
    CHECK(cuStreamSynchronize(e.stream));
    expect("child_graphs_and_join", device_all(y, n, 24.0f)); /* 7 + 10 + 7 */

    /* Queries. */
    size_t count = 0;
    CHECK(cuGraphGetNodes(g, NULL, &count));
    expect("node_count", count == 4);
    CUgraphNode roots[4];
    count = 4;
    CHECK(cuGraphGetRootNodes(g, roots, &count));
    expect("roots", count == 2 && ((roots[0] == a && roots[1] == b)
                                   || (roots[0] == b && roots[1] == a)));
    CUgraphNode from[8], to[8];
    count = 8;
    CHECK(cuGraphGetEdges(g, from, to, &count));
    expect("edges", count == 3);
    CUgraphNode deps[4];
    count = 4;
    CHECK(cuGraphNodeGetDependencies(join, deps, &count));
    expect("dependencies", count == 2);
    count = 4;
    CHECK(cuGraphNodeGetDependentNodes(join, deps, &count));
    expect("dependents", count == 1 && deps[0] == again);
    CUgraphNodeType type;
    CHECK(cuGraphNodeGetType(a, &type));
    expect("child_type", type == CU_GRAPH_NODE_TYPE_GRAPH);
    CHECK(cuGraphNodeGetType(join, &type));
    expect("empty_type", type == CU_GRAPH_NODE_TYPE_EMPTY);
    CUgraph embedded;
    CHECK(cuGraphChildGraphNodeGetGraph(a, &embedded));
    count = 0;
    CHECK(cuGraphGetNodes(embedded, NULL, &count));
    expect("embedded_copy", embedded != child && count == 2);

    /* A clone, its nodes found from the original's, edited and run. */
    CUgraph clone;
    CUgraphNode b_clone, join_clone;
    CHECK(cuGraphClone(&clone, g));
    CHECK(cuGraphNodeFindInClone(&b_clone, b, clone));
    CHECK(cuGraphNodeFindInClone(&join_clone, join, clone));
    CHECK(cuGraphRemoveDependencies(clone, &b_clone, &join_clone, 1));
    CHECK(cuGraphDestroyNode(b_clone));
    count = 0;
    CHECK(cuGraphGetNodes(clone, NULL, &count));
    expect("clone_edited", count == 3);
    expect_result("edge_removed_twice", cuGraphRemoveDependencies(g, &b, &b, 1),
                  CUDA_ERROR_INVALID_VALUE);
    CUgraphExec ec;
    CHECK(cuGraphInstantiate(&ec, clone, 0));
    CHECK(cuGraphLaunch(ec, e.stream));
    CHECK(cuStreamSynchronize(e.stream));
    expect("clone_runs", device_all(y, n, 38.0f)); /* + 7 + 7 */

    /* An instantiated graph launched into a capture becomes a child graph node. */
    CUgraph captured;
    CHECK(cuStreamBeginCapture(e.stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuGraphLaunch(ec, e.stream));
    CHECK(cuGraphLaunch(ec, e.stream));
    CHECK(cuStreamEndCapture(e.stream, &captured));
    count = 0;
    CHECK(cuGraphGetNodes(captured, NULL, &count));
    CUgraphNode first;
    size_t one = 1;
    CHECK(cuGraphGetRootNodes(captured, &first, &one));
    CHECK(cuGraphNodeGetType(first, &type));
    expect("launch_captured_as_child", count == 2 && type == CU_GRAPH_NODE_TYPE_GRAPH);
    CUgraphExec ecap;
    CHECK(cuGraphInstantiate(&ecap, captured, 0));
    CHECK(cuGraphLaunch(ecap, e.stream));
    CHECK(cuStreamSynchronize(e.stream));
    expect("captured_launches_run", device_all(y, n, 66.0f)); /* + 14 + 14 */

    CHECK(cuGraphExecDestroy(ex));
    CHECK(cuGraphExecDestroy(ec));
    CHECK(cuGraphExecDestroy(ecap));
    CHECK(cuGraphDestroy(g));
    CHECK(cuGraphDestroy(clone));
    CHECK(cuGraphDestroy(child));
    CHECK(cuGraphDestroy(captured));
    return verdict();
}
