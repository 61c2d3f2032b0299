/*
 * graph_host_errors.c — host functions after a device fault: a kernel writes outside every
 * allocation (CUDA_ERROR_ILLEGAL_ADDRESS, which ends the context), then cuLaunchHostFunc's
 * function is skipped and cuStreamAddCallback's callback runs with the error as its status,
 * as NVIDIA documents, and the stream's synchronize reports the fault. One JSON verdict.
 *
 * Usage: graph_host_errors [KERNELS.ptx|KERNELS.fatbin]
 */
#include "graph_common.h"

static int g_fn_ran, g_cb_ran;
static CUresult g_cb_status = CUDA_SUCCESS;

static void host_fn(void *data)
{
    (void)data;
    g_fn_ran = 1;
}

static void callback(CUstream stream, CUresult status, void *data)
{
    (void)stream, (void)data;
    g_cb_ran = 1;
    g_cb_status = status;
}

int main(int argc, char **argv)
{
    graph_env e = graph_setup(argc, argv);
    CUdeviceptr a = device_floats(256, 1.0f);
    CUdeviceptr outside = a + ((CUdeviceptr)1 << 36); /* in no allocation */
    int n = 256;
    void *args[] = {&a, &a, &outside, &n};
    CHECK(cuLaunchKernel(e.vector_add, 1, 1, 1, 256, 1, 1, 0, e.stream, args, NULL));
    CHECK(cuLaunchHostFunc(e.stream, host_fn, NULL));
    CHECK(cuStreamAddCallback(e.stream, callback, NULL, 0));
    expect_result("synchronize_reports_fault", cuStreamSynchronize(e.stream),
                  CUDA_ERROR_ILLEGAL_ADDRESS);
    expect("host_function_skipped", g_fn_ran == 0);
    expect("callback_told", g_cb_ran == 1 && g_cb_status == CUDA_ERROR_ILLEGAL_ADDRESS);
    return verdict();
}
