/*
 * exec_usage.c — what a session holds on its device, for the serving agent's
 * status (the device's used memory beside its total). Read from another thread
 * while the session's executor runs: one aligned 64-bit load, at worst a batch
 * old, which is all a status view needs. No state of its own.
 */
#include "executor.h"

uint64_t gl_exec_live_bytes(const gl_exec *x)
{
    return __atomic_load_n(&x->live_bytes, __ATOMIC_RELAXED);
}
