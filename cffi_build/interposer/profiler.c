/*
 * profiler.c — cuProfilerStart and cuProfilerStop. NVIDIA's driver hands them
 * to "the active profiling tool for the current context"; a forwarded context
 * has none (a profiler would have to run beside the serving device), so, as
 * the driver does without a tool, they have no effect. They still answer
 * CUDA_ERROR_INVALID_CONTEXT without a current context, the one error the
 * documentation gives them. No state.
 */
#include "gl_calls.h"
#include "gl_client_gen.h"
#include "internal.h"

static CUresult profiler_control(void)
{
    uint64_t ctx = gl_ctx_current();

    if (ctx == 0 || gl_check_handle(GL_H_CTX, ctx) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    return CUDA_SUCCESS;
}

CUresult gls_cuProfilerStart(int ptds)
{
    (void)ptds;
    return profiler_control();
}

CUresult gls_cuProfilerStop(int ptds)
{
    (void)ptds;
    return profiler_control();
}
