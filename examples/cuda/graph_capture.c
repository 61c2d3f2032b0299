/*
 * graph_capture.c — stream capture: a step (copy in from the program's memory, kernels, a
 * memset, copy out) captured into a graph and replayed with new input; a fork and join across
 * two streams through events; the capture queries (status, id, graph, dependencies, as the
 * runtime and PyTorch ask them); dependencies replaced; capturing into an existing graph; a
 * host function and external event nodes captured; and the rules: a fork not joined back,
 * a synchronous call in the default (global) capture mode, the same call in relaxed mode,
 * synchronizing the capturing stream, the legacy stream while a blocking stream captures,
 * a captured event queried, a wait on an event recorded outside the capture. One JSON verdict.
 *
 * Usage: graph_capture [KERNELS.ptx|KERNELS.fatbin]
 */
#include "graph_common.h"

#define N 512

static int g_host_calls;

static void count_call(void *data)
{
    (void)data;
    g_host_calls++;
}

static void saxpy_on(const graph_env *e, CUstream s, saxpy_args *k)
{
    void *args[4] = {&k->a, &k->x, &k->y, &k->n};
    CHECK(cuLaunchKernel(e->saxpy, example_blocks((size_t)k->n, 128), 1, 1, 128, 1, 1, 0, s, args,
                         NULL));
}

static CUresult end(CUstream s, CUgraph *g)
{
    *g = (CUgraph)0x1;
    return cuStreamEndCapture(s, g);
}

int main(int argc, char **argv)
{
    graph_env e = graph_setup(argc, argv);
    const size_t bytes = N * sizeof(float);
    CUstream s = e.stream, s2, blocking;
    CHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
    CUdeviceptr x, y, w;
    CHECK(cuMemAlloc(&x, bytes));
    y = device_floats(N, 0.0f), w = device_floats(N, 0.0f);
    float in[N], out[N];

    /* One step: x <- in; y = 0; y = 2x + y; y = 1x + y; host call; out <- y. */
    CUgraph g;
    CUstreamCaptureStatus status;
    cuuint64_t id = 0;
    CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuMemcpyHtoDAsync(x, in, bytes, s));
    CHECK(cuMemsetD32Async(y, 0, N, s));
    saxpy_args k2 = {2.0f, x, y, N, {0}}, k1 = {1.0f, x, y, N, {0}};
    saxpy_on(&e, s, &k2);
    saxpy_on(&e, s, &k1);
    CHECK(cuLaunchHostFunc(s, count_call, NULL));
    CHECK(cuMemcpyDtoHAsync(out, y, bytes, s));
    CHECK(cuStreamIsCapturing(s, &status));
    expect("capturing", status == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CUgraph during = NULL;
    const CUgraphNode *deps = NULL;
    size_t ndeps = 0;
    CHECK(cuStreamGetCaptureInfo(s, &status, &id, &during, &deps, &ndeps));
    expect("capture_info", id != 0 && during != NULL && ndeps == 1 && deps != NULL);
    CHECK(cuStreamEndCapture(s, &g));
    CHECK(cuStreamIsCapturing(s, &status));
    expect("capture_ended", status == CU_STREAM_CAPTURE_STATUS_NONE && g_host_calls == 0);
    size_t count = 0;
    CHECK(cuGraphGetNodes(g, NULL, &count));
    expect("step_nodes", count == 6);
    CUgraphExec ex;
    CHECK(cuGraphInstantiate(&ex, g, 0));
    int replay = 1;
    for (int round = 1; round <= 3; round++) {
        for (int i = 0; i < N; i++)
            in[i] = (float)(round + i % 5);
        CHECK(cuGraphLaunch(ex, s));
        CHECK(cuStreamSynchronize(s));
        for (int i = 0; i < N; i++)
            replay &= out[i] == 3.0f * in[i];
    }
    expect("replay_with_new_input", replay && g_host_calls == 3);

    /* Fork and join: s2 joins through an event, works, and is joined back. */
    CUevent fork, join;
    CHECK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    CHECK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
    CUgraph gf;
    saxpy_args kw = {4.0f, y, w, N, {0}}, ky = {1.0f, w, y, N, {0}};
    CHECK(cuMemsetD32(w, 0, N));
    CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    saxpy_on(&e, s, &k2); /* y += 2x */
    CHECK(cuEventRecord(fork, s));
    CHECK(cuStreamWaitEvent(s2, fork, 0));
    CHECK(cuStreamIsCapturing(s2, &status));
    expect("forked_stream_captures", status == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    saxpy_on(&e, s2, &kw); /* w += 4y */
    CHECK(cuEventRecord(join, s2));
    CHECK(cuStreamWaitEvent(s, join, 0));
    saxpy_on(&e, s, &ky); /* y += w */
    CHECK(cuStreamEndCapture(s, &gf));
    CHECK(cuStreamIsCapturing(s2, &status));
    expect("joined_stream_released", status == CU_STREAM_CAPTURE_STATUS_NONE);
    CUgraphExec ef;
    CHECK(cuGraphInstantiate(&ef, gf, 0));
    CHECK(cuMemsetD32(y, 0, N));
    for (int i = 0; i < N; i++)
        in[i] = 1.0f;
    CHECK(cuMemcpyHtoD(x, in, bytes));
    CHECK(cuGraphLaunch(ef, s));
    CHECK(cuStreamSynchronize(s));
    expect("fork_join", device_all(y, N, 10.0f) && device_all(w, N, 8.0f));

    /* A fork not joined back. */
    CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuEventRecord(fork, s));
    CHECK(cuStreamWaitEvent(s2, fork, 0));
    saxpy_on(&e, s2, &kw);
    CUgraph bad;
    expect_result("unjoined", end(s, &bad), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    expect("unjoined_no_graph", bad == NULL);

    /* Global mode: a synchronous allocation invalidates the capture. */
    CUdeviceptr p = 0;
    CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    saxpy_on(&e, s, &k1);
    expect_result("sync_call_in_global_mode", cuMemAlloc(&p, 64),
                  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK(cuStreamIsCapturing(s, &status));
    expect("invalidated_status", status == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    expect_result("invalidated_stream_refuses_work", cuMemsetD32Async(y, 0, N, s),
                  CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    expect_result("invalidated_end", end(s, &bad), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    expect("invalidated_no_graph", bad == NULL);
    /* ... allowed in relaxed mode. */
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuThreadExchangeStreamCaptureMode(&mode));
    expect_result("sync_call_in_relaxed_mode", cuMemAlloc(&p, 64), CUDA_SUCCESS);
    CHECK(cuThreadExchangeStreamCaptureMode(&mode));
    expect("mode_restored", mode == CU_STREAM_CAPTURE_MODE_RELAXED);
    saxpy_on(&e, s, &k1);
    expect_result("relaxed_end", end(s, &bad), CUDA_SUCCESS);
    CHECK(cuGraphDestroy(bad));
    CHECK(cuMemFree(p));

    /* Synchronizing the capturing stream; a captured event queried. */
    CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    expect_result("sync_capturing_stream", cuStreamSynchronize(s),
                  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    expect_result("sync_end", end(s, &bad), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK(cuEventRecord(fork, s));
    expect_result("captured_event_query", cuEventQuery(fork), CUDA_ERROR_CAPTURED_EVENT);
    expect_result("captured_event_end", end(s, &bad), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    /* The legacy stream while a blocking stream captures. */
    CHECK(cuStreamBeginCapture(blocking, CU_STREAM_CAPTURE_MODE_RELAXED));
    expect_result("legacy_stream_implicit", cuMemsetD32Async(y, 0, N, NULL),
                  CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    expect_result("legacy_end", end(blocking, &bad), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    /* A wait on an event recorded outside any capture. */
    CHECK(cuEventRecord(join, s2));
    CHECK(cuStreamSynchronize(s2));
    CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    expect_result("wait_outside_capture", cuStreamWaitEvent(s, join, 0),
                  CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
    expect_result("isolation_end", end(s, &bad), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    /* External event nodes; dependencies replaced; capturing into a graph. */
    CUgraph into;
    CUgraphNode first;
    CHECK(cuGraphCreate(&into, 0));
    CHECK(cuGraphAddEmptyNode(&first, into, NULL, 0));
    CHECK(cuStreamBeginCaptureToGraph(s, into, &first, NULL, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuEventRecordWithFlags(fork, s, CU_EVENT_RECORD_EXTERNAL));
    CHECK(cuStreamWaitEvent(s, join, CU_EVENT_WAIT_EXTERNAL));
    CHECK(cuStreamUpdateCaptureDependencies(s, &first, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES));
    CHECK(cuLaunchHostFunc(s, count_call, NULL));
    CUgraph same;
    CHECK(cuStreamEndCapture(s, &same));
    CUgraphNode dependents[4];
    size_t ndep = 4;
    CHECK(cuGraphNodeGetDependentNodes(first, dependents, &ndep));
    count = 0;
    CHECK(cuGraphGetNodes(into, NULL, &count));
    expect("captured_into_graph", same == into && count == 4 && ndep == 2);
    CUgraphNodeType types[4] = {0};
    CUgraphNode all[4];
    count = 4;
    CHECK(cuGraphGetNodes(into, all, &count));
    for (size_t i = 0; i < count; i++)
        CHECK(cuGraphNodeGetType(all[i], &types[i]));
    expect("external_event_nodes", types[1] == CU_GRAPH_NODE_TYPE_EVENT_RECORD
                                   && types[2] == CU_GRAPH_NODE_TYPE_WAIT_EVENT
                                   && types[3] == CU_GRAPH_NODE_TYPE_HOST);

    CHECK(cuGraphExecDestroy(ex));
    CHECK(cuGraphExecDestroy(ef));
    CHECK(cuGraphDestroy(g));
    CHECK(cuGraphDestroy(gf));
    CHECK(cuGraphDestroy(into));
    return verdict();
}
