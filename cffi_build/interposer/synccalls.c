/*
 * synccalls.c — GLEAM_CUDA_SYNC_CALLS=1: every forwarded one-way call waits
 * for the server, the way other remoting systems forward calls by default.
 *
 * A benchmark knob (gleam-peer bench remoting, mode `sync`), not a mode a
 * program needs: after each one-way record the interposer sends a
 * cuCtxSynchronize and waits for its reply, so the call has run on the server
 * before the program's next one starts. One round trip per call, nothing in
 * flight.
 */
#include <stdlib.h>

#include "gl_calls.h"
#include "internal.h"

int gl_sync_calls(void)
{
    static int on = -1; /* read once; a race only reads the same value twice */

    if (on < 0) {
        const char *env = getenv("GLEAM_CUDA_SYNC_CALLS");
        on = env != NULL && env[0] == '1';
    }
    return on;
}

CUresult gl_sync_after_oneway(void)
{
    /* Calls made before a context exists (cuCtxCreate's own record) have
     * nothing to wait on: the next call with a context waits for them too. */
    if (!gl_sync_calls() || gl_ctx_current() == 0)
        return CUDA_SUCCESS;
    return gl_wait(GL_CALL_cuCtxSynchronize, GL_EMIT_CTX, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
}
