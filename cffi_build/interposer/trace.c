/*
 * trace.c — GLEAM_TRACE=1: one stderr line per exported call, per symbol
 * resolved that gleam does not forward, and per export-table slot cudart
 * calls, and the result of each call that fails, so a user can see where
 * and why a program stops. GLEAM_TRACE=errors prints only the results of
 * the calls that fail: a few lines where the whole trace of a PyTorch run is
 * hundreds of thousands (scripts/gpu-check.sh keeps it on for its runs
 * through gleam, which a GPU machine's few minutes do not let one repeat).
 * A failure that NVIDIA's driver gives too (a program's probe for an export
 * table or a symbol a driver may lack) is not an error worth a line there.
 * The flags are read once, when the library loads; with the per-thread mark
 * of such a probe they are the only state here.
 */
#include <stdio.h>
#include <stdlib.h>

#include "client.h"
#include "gl_client_gen.h"

#include <string.h>

int gl_trace_on;
int gl_trace_errors;
static __thread int g_as_driver; /* the call in progress failed as the driver would */

__attribute__((constructor)) static void read_trace_flag(void)
{
    const char *env = getenv("GLEAM_TRACE");

    gl_trace_errors = env != NULL && env[0] != '\0' && env[0] != '0';
    gl_trace_on = gl_trace_errors && strcmp(env, "errors") != 0;
}

void gl_trace_call(const char *name)
{
    fprintf(stderr, "gleam: trace: %s\n", name);
}

void gl_trace_as_driver(void)
{
    g_as_driver = gl_trace_errors;
}

CUresult gl_trace_result(const char *name, CUresult r)
{
    const char *code = NULL;
    int as_driver = g_as_driver;

    g_as_driver = 0;
    if (r != CUDA_SUCCESS && (gl_trace_on || !as_driver)) {
        gli_cuGetErrorName(r, &code, 0);
        fprintf(stderr, "gleam: trace: %s -> %s%s\n", name, code ? code : "an unknown code",
                as_driver ? " (as NVIDIA's driver answers)" : "");
    }
    return r;
}
