/*
 * graph_replay.c — a step of many small kernels captured once and replayed: the step is the
 * best case for remoting, one graph launch instead of a launch per kernel. Usage:
 *
 *   graph_replay [KERNELS] KERNELS_PER_STEP STEPS
 *
 * Each kernel adds 1 to every element (saxpy with a = 1 and x = 1); the result must be
 * KERNELS_PER_STEP * STEPS. One JSON verdict.
 */
#include "graph_common.h"

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: graph_replay [KERNELS] KERNELS_PER_STEP STEPS\n");
        return 2;
    }
    long long steps = example_count(argv[argc - 1], "STEPS");
    long long per_step = example_count(argv[argc - 2], "KERNELS_PER_STEP");
    graph_env e = graph_setup(argc > 3 ? 2 : 1, argv);
    const int n = 256;
    CUdeviceptr x = device_floats(n, 1.0f), y = device_floats(n, 0.0f);
    saxpy_args k = {1.0f, x, y, n, {0}};
    void *args[4] = {&k.a, &k.x, &k.y, &k.n};
    CUgraph g;
    CHECK(cuStreamBeginCapture(e.stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (long long i = 0; i < per_step; i++)
        CHECK(cuLaunchKernel(e.saxpy, example_blocks(n, 128), 1, 1, 128, 1, 1, 0, e.stream, args,
                             NULL));
    CHECK(cuStreamEndCapture(e.stream, &g));
    CUgraphExec ex;
    CHECK(cuGraphInstantiate(&ex, g, 0));
    for (long long i = 0; i < steps; i++)
        CHECK(cuGraphLaunch(ex, e.stream));
    CHECK(cuStreamSynchronize(e.stream));
    expect("sum", device_all(y, n, (float)(per_step * steps)));
    CHECK(cuGraphExecDestroy(ex));
    CHECK(cuGraphDestroy(g));
    return verdict();
}
