/*
 * graph_host.c — host functions: graph host nodes between a copy to the program's memory and
 * a copy from it (the node runs after the one and before the other, at every launch), then
 * cuLaunchHostFunc and cuStreamAddCallback on streams: each runs once, in stream order, after
 * the work before it and before the work after it (a pinned buffer it fills is what a later
 * copy sends), on a thread of the driver's, without blocking the program's thread (a host
 * function that waits for the program to launch more work finishes), with CUDA calls from it
 * refused (CUDA_ERROR_NOT_PERMITTED), and a callback told its stream and status. One JSON
 * verdict.
 *
 * Usage: graph_host [KERNELS.ptx|KERNELS.fatbin]
 */
#include <pthread.h>
#include <stdatomic.h>

#include "graph_common.h"

#define N 256

static float g_seen[N], *g_pinned;
static int g_calls;

/* A host node: what the copy before it brought, plus one, into the pinned buffer. */
static void add_one(void *data)
{
    (void)data;
    for (int i = 0; i < N; i++)
        g_pinned[i] = g_seen[i] + 1.0f;
    g_calls++;
}

static atomic_int g_released, g_saw_release;
static CUresult g_in_fn;
static pthread_t g_fn_thread;

/* Waits (10 s at most) for the program to say it went on, then fills the buffer. */
static void wait_for_program(void *data)
{
    for (int i = 0; i < 10000 && !atomic_load(&g_released); i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    atomic_store(&g_saw_release, atomic_load(&g_released));
    CUdeviceptr d;
    g_in_fn = cuMemAlloc(&d, 16); /* not permitted in a host function */
    g_fn_thread = pthread_self();
    for (int i = 0; i < N; i++)
        ((float *)data)[i] = 42.0f;
}

static int g_order[4], g_norder;
static CUstream g_cb_stream;
static CUresult g_cb_status = -1;

static void on_callback(CUstream stream, CUresult status, void *data)
{
    g_cb_stream = stream;
    g_cb_status = status;
    g_order[g_norder++] = (int)(intptr_t)data;
}

static void note(void *data)
{
    g_order[g_norder++] = (int)(intptr_t)data;
}

int main(int argc, char **argv)
{
    graph_env e = graph_setup(argc, argv);
    const size_t bytes = N * sizeof(float);
    CHECK(cuMemAllocHost((void **)&g_pinned, bytes));
    CUdeviceptr x = device_floats(N, 1.0f), y = device_floats(N, 0.0f), z;
    CHECK(cuMemAlloc(&z, bytes));
    float out[N];

    /* y += 2x; y -> seen; host: pinned = seen + 1; pinned -> z; z -> out. */
    saxpy_args k = {2.0f, x, y, N, {0}};
    CUDA_KERNEL_NODE_PARAMS kp = saxpy_params(&e, &k);
    CUDA_MEMCPY3D down = linear_copy(CU_MEMORYTYPE_HOST, g_seen, 0, CU_MEMORYTYPE_DEVICE, NULL,
                                     y, bytes);
    CUDA_HOST_NODE_PARAMS hp = {add_one, NULL};
    CUDA_MEMCPY3D up = linear_copy(CU_MEMORYTYPE_DEVICE, NULL, z, CU_MEMORYTYPE_HOST, g_pinned,
                                   0, bytes);
    CUDA_MEMCPY3D back = linear_copy(CU_MEMORYTYPE_HOST, out, 0, CU_MEMORYTYPE_DEVICE, NULL, z,
                                     bytes);
    CUgraph g;
    CUgraphNode n[5];
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphAddKernelNode(&n[0], g, NULL, 0, &kp));
    CHECK(cuGraphAddMemcpyNode(&n[1], g, &n[0], 1, &down, NULL));
    CHECK(cuGraphAddHostNode(&n[2], g, &n[1], 1, &hp));
    CHECK(cuGraphAddMemcpyNode(&n[3], g, &n[2], 1, &up, NULL));
    CHECK(cuGraphAddMemcpyNode(&n[4], g, &n[3], 1, &back, NULL));
    CUgraphExec ex;
    CHECK(cuGraphInstantiate(&ex, g, 0));
    int ordered = 1;
    for (int round = 1; round <= 3; round++) {
        CHECK(cuGraphLaunch(ex, e.stream));
        CHECK(cuStreamSynchronize(e.stream));
        ordered &= host_all(out, N, 2.0f * round + 1.0f);
    }
    expect("host_node_between_copies", ordered && g_calls == 3);
    CUDA_HOST_NODE_PARAMS got;
    CHECK(cuGraphHostNodeGetParams(n[2], &got));
    expect("host_node_params", got.fn == add_one && got.userData == NULL);

    /* cuLaunchHostFunc: the function fills a pinned buffer that the next copy sends; it waits
     * for this thread to have launched more work, which must not wait for it. */
    float *pinned2;
    CHECK(cuMemAllocHost((void **)&pinned2, bytes));
    memset(pinned2, 0, bytes);
    CHECK(cuLaunchHostFunc(e.stream, wait_for_program, pinned2));
    CHECK(cuMemcpyHtoDAsync(z, pinned2, bytes, e.stream));
    void *args[4] = {&k.a, &k.x, &k.y, &k.n};
    CHECK(cuLaunchKernel(e.saxpy, example_blocks(N, 128), 1, 1, 128, 1, 1, 0, e.stream, args,
                         NULL));
    expect_result("query_while_pending", cuStreamQuery(e.stream), CUDA_ERROR_NOT_READY);
    atomic_store(&g_released, 1);
    CHECK(cuStreamSynchronize(e.stream));
    CHECK(cuMemcpyDtoH(out, z, bytes));
    expect("host_func_before_later_work", host_all(out, N, 42.0f));
    expect("program_not_blocked", atomic_load(&g_saw_release) == 1);
    expect_result("cuda_call_not_permitted", g_in_fn, CUDA_ERROR_NOT_PERMITTED);
    expect("runs_on_another_thread", !pthread_equal(g_fn_thread, pthread_self()));

    /* Callbacks and host functions in stream order, a callback told its stream and status. */
    CUstream s2;
    CHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CUevent ev;
    CHECK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CHECK(cuLaunchHostFunc(e.stream, note, (void *)1));
    CHECK(cuEventRecord(ev, e.stream));
    CHECK(cuStreamWaitEvent(s2, ev, 0));
    CHECK(cuStreamAddCallback(s2, on_callback, (void *)2, 0));
    CHECK(cuLaunchHostFunc(s2, note, (void *)3));
    CHECK(cuStreamSynchronize(s2));
    expect("callbacks_in_order", g_norder == 3 && g_order[0] == 1 && g_order[1] == 2
                                 && g_order[2] == 3);
    expect("callback_stream_and_status", g_cb_stream == s2 && g_cb_status == CUDA_SUCCESS);
    CUDA_HOST_NODE_PARAMS none = {NULL, NULL};
    CUgraphNode bad;
    expect_result("host_node_without_function", cuGraphAddHostNode(&bad, g, NULL, 0, &none),
                  CUDA_ERROR_INVALID_VALUE);
    expect_result("callback_flags", cuStreamAddCallback(s2, on_callback, NULL, 1),
                  CUDA_ERROR_INVALID_VALUE);

    CHECK(cuGraphExecDestroy(ex));
    CHECK(cuGraphDestroy(g));
    CHECK(cuMemFreeHost(g_pinned));
    CHECK(cuMemFreeHost(pinned2));
    return verdict();
}
