/*
 * graph_event.c — event record and wait nodes: one graph records an event after its kernel,
 * a second graph on another stream waits for it before adding to the same buffer, so the
 * second sees the first's result whatever order the streams run in; the event's node
 * parameters read and changed, and the record node's event queried after the launch. One
 * JSON verdict.
 *
 * Usage: graph_event [KERNELS.ptx|KERNELS.fatbin]
 */
#include "graph_common.h"

int main(int argc, char **argv)
{
    graph_env e = graph_setup(argc, argv);
    const int n = 512;
    CUdeviceptr x = device_floats(n, 1.0f), y = device_floats(n, 0.0f);
    CUdeviceptr w = device_floats(n, 0.0f);
    CUevent done, other;
    CHECK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
    CHECK(cuEventCreate(&other, CU_EVENT_DISABLE_TIMING));
    CUstream s2;
    CHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));

    /* Graph A: y = 3x + y, then record `done`. */
    saxpy_args ka = {3.0f, x, y, n, {0}};
    CUDA_KERNEL_NODE_PARAMS pa = saxpy_params(&e, &ka);
    CUgraph ga, gb;
    CUgraphNode a1, a2, b1, b2;
    CHECK(cuGraphCreate(&ga, 0));
    CHECK(cuGraphAddKernelNode(&a1, ga, NULL, 0, &pa));
    CHECK(cuGraphAddEventRecordNode(&a2, ga, &a1, 1, done));
    /* Graph B: wait for `done`, then w = 1·y + w. */
    saxpy_args kb = {1.0f, y, w, n, {0}};
    CUDA_KERNEL_NODE_PARAMS pb = saxpy_params(&e, &kb);
    CHECK(cuGraphCreate(&gb, 0));
    CHECK(cuGraphAddEventWaitNode(&b1, gb, NULL, 0, done));
    CHECK(cuGraphAddKernelNode(&b2, gb, &b1, 1, &pb));
    CUgraphExec ea, eb;
    CHECK(cuGraphInstantiate(&ea, ga, 0));
    CHECK(cuGraphInstantiate(&eb, gb, 0));
    for (int i = 0; i < 2; i++) {
        CHECK(cuGraphLaunch(ea, e.stream));
        CHECK(cuGraphLaunch(eb, s2));
    }
    CHECK(cuStreamSynchronize(s2));
    CHECK(cuStreamSynchronize(e.stream));
    /* y: 3 then 6; w: 3 then 9. */
    expect("wait_sees_record", device_all(y, n, 6.0f) && device_all(w, n, 9.0f));
    expect_result("recorded_event_complete", cuEventQuery(done), CUDA_SUCCESS);

    CUevent got = NULL;
    CHECK(cuGraphEventRecordNodeGetEvent(a2, &got));
    expect("record_node_event", got == done);
    CHECK(cuGraphEventWaitNodeGetEvent(b1, &got));
    expect("wait_node_event", got == done);
    CHECK(cuGraphEventWaitNodeSetEvent(b1, other));
    CHECK(cuGraphEventWaitNodeGetEvent(b1, &got));
    expect("wait_node_event_set", got == other);
    CHECK(cuGraphExecEventRecordNodeSetEvent(ea, a2, other));
    CHECK(cuGraphLaunch(ea, e.stream));
    CHECK(cuStreamSynchronize(e.stream));
    expect_result("exec_record_event_set", cuEventQuery(other), CUDA_SUCCESS);

    CUgraphNodeType type;
    CHECK(cuGraphNodeGetType(a2, &type));
    expect("record_node_type", type == CU_GRAPH_NODE_TYPE_EVENT_RECORD);
    CHECK(cuGraphNodeGetType(b1, &type));
    expect("wait_node_type", type == CU_GRAPH_NODE_TYPE_WAIT_EVENT);

    CHECK(cuGraphExecDestroy(ea));
    CHECK(cuGraphExecDestroy(eb));
    CHECK(cuGraphDestroy(ga));
    CHECK(cuGraphDestroy(gb));
    return verdict();
}
