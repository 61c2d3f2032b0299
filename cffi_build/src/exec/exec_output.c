/*
 * exec_output.c — what a reply carries after its bytes (gl_session.h, the
 * trailer): the server's notes on an error, then the output of the session's
 * kernels (device printf, a failed assertion's message) that CUDA's flush
 * points released.
 *
 * CUDA prints the printf FIFO only at the flush points its programming guide
 * names: a kernel launch (at its start), a synchronisation (context, stream,
 * event), a blocking copy, a module's load or unload (cuModuleLoad*,
 * cuModuleUnload: not libraries, which cudart unloads as the program exits,
 * when CUDA says the FIFO is not flushed), and a context's destruction
 * (cuCtxDestroy, cudaDeviceReset's cuDevicePrimaryCtxReset). The executor
 * moves the FIFO into the session's output queue before running such a call
 * (ptx_devrt_flush), and every reply takes what the queue holds; a program
 * sees the output with the reply of its next waiting call, or, after one-way
 * flush points, at its next reply or when it exits (glOutputTake). Output
 * that does not fit one reply waits on the server, and the reply says so.
 */
#include <string.h>

#include "executor.h"
#include "gl_bytes.h"
#include "gl_session.h"
#include "ptx/ptx_devrt.h"

int gl_call_flushes_output(int call)
{
    switch (call) {
    case GL_CALL_glLaunch:
    case GL_CALL_glLaunchCluster:
    case GL_CALL_cuCtxSynchronize:
    case GL_CALL_cuStreamSynchronize:
    case GL_CALL_cuEventSynchronize:
    case GL_CALL_glMemcpyDtoH:
    case GL_CALL_glMemcpyHtoD:
    case GL_CALL_cuMemcpyDtoD:
    case GL_CALL_glMemcpy2DHtoD:
    case GL_CALL_glMemcpy2DDtoH:
    case GL_CALL_glMemcpy2DDtoD:
    case GL_CALL_glModuleLoad:
    case GL_CALL_glModuleLoadStaged:
    case GL_CALL_cuModuleUnload:
    case GL_CALL_cuCtxDestroy:
    case GL_CALL_cuDevicePrimaryCtxReset:
        return 1;
    default:
        return 0;
    }
}

size_t gl_reply_trailer(gl_exec *x, uint8_t *out, size_t cap, int error)
{
    size_t used = 0;
    /* The reply that reports an error carries the reasons, first. */
    if (error && cap > GL_SECTION_HEADER_SIZE) {
        size_t room = cap - GL_SECTION_HEADER_SIZE;
        uint32_t n = (uint32_t)gl_notes_take(&x->notes, out + GL_SECTION_HEADER_SIZE,
                                             room < GL_REPLY_NOTES_MAX ? room : GL_REPLY_NOTES_MAX);
        if (n > 0) {
            gl_section_header(out, GL_SECTION_NOTES, 0, n);
            used = GL_SECTION_HEADER_SIZE + n;
        }
    }
    if (x->devrt != NULL && ptx_devrt_pending(x->devrt) > 0) {
        size_t room = cap - used;
        int more;
        used += ptx_devrt_take(x->devrt, out + used,
                               room < GL_REPLY_OUTPUT_MAX ? room : GL_REPLY_OUTPUT_MAX, &more);
    }
    return used;
}

CUresult gx_glOutputTake(gl_exec *x)
{
    (void)x; /* the reply's trailer is the answer */
    return CUDA_SUCCESS;
}
