/*
 * profiler.c — cuProfilerStart / cuProfilerStop (and cudart's
 * cudaProfilerStart/Stop, which call them). They turn collection on and off
 * for the active profiling tool; a program through gleam has none attached
 * to its device (the device is another machine's), so each has nothing to do
 * and succeeds, as NVIDIA's do without a tool. Documented errors kept: no
 * current context is CUDA_ERROR_INVALID_CONTEXT. No state.
 */
#include "gl_client_gen.h"
#include "internal.h"

static CUresult profiler_switch(void)
{
    return gl_ctx_current() != 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult gls_cuProfilerStart(int ptds)
{
    (void)ptds;
    return profiler_switch();
}

CUresult gls_cuProfilerStop(int ptds)
{
    (void)ptds;
    return profiler_switch();
}
