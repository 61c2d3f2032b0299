/*
 * procaddr.c — cuGetProcAddress: libcudart and cuda.bindings resolve every
 * entry point through it, by base name, CUDA version and stream semantics.
 * Names gleam does not forward get a trampoline that says so once and returns
 * CUDA_ERROR_NOT_SUPPORTED, so a program fails at the call it needs rather
 * than at start-up for calls it never makes.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gl_client_gen.h"
#include "internal.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char *g_names[1024];
static atomic_int g_warned[1024];
static int g_used;

/* The slot for an unknown name (same name, same slot), or -1 when full. */
static int unsupported_slot(const char *name)
{
    int slot = -1;
    int max = gl_unsupported_slot_count < 1024 ? gl_unsupported_slot_count : 1024;

    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_used; i++)
        if (strcmp(g_names[i], name) == 0)
            slot = i;
    if (slot < 0 && g_used < max && (g_names[g_used] = strdup(name)) != NULL)
        slot = g_used++;
    pthread_mutex_unlock(&g_lock);
    return slot;
}

CUresult gl_unsupported_call(int slot)
{
    const char *name = "?";

    if (slot < 0 || slot >= 1024)
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&g_lock);
    if (slot < g_used)
        name = g_names[slot];
    pthread_mutex_unlock(&g_lock);
    if (atomic_exchange(&g_warned[slot], 1) == 0) {
        const char *why = gl_refusal_reason(name);
        if (why != NULL)
            gl_log(GL_LOG_ERROR, name, "%s is not supported because %s; returning "
                   "CUDA_ERROR_NOT_SUPPORTED", name, why);
        else
            gl_log(GL_LOG_ERROR, name, "%s is not forwarded; returning CUDA_ERROR_NOT_SUPPORTED",
                   name);
    }
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult gl_not_forwarded(const char *name)
{
    if (gl_trace_on)
        gl_trace_call(name);
    return gl_unsupported_call(unsupported_slot(name));
}

/* The stub of an exported name gleam does not forward, or NULL. */
static void *unforwarded_stub(const char *symbol)
{
    for (int i = 0; i < gl_unforwarded_count; i++)
        if (strcmp(gl_unforwarded[i].name, symbol) == 0)
            return gl_unforwarded[i].fn;
    return NULL;
}

/* The best symbol for base: the stream flavour asked for when a twin exists,
 * the newest version not above cudaVersion. *matched tells whether any
 * symbol had that base at all. */
static const gl_symbol *best(const char *symbol, int cudaVersion, cuuint64_t flags, int *matched)
{
    int want_pt = 0;
    const gl_symbol *pick = NULL;

    *matched = 0;
    for (int i = 0; i < gl_symbol_count; i++) {
        if (strcmp(gl_symbols[i].base, symbol) != 0)
            continue;
        *matched = 1;
        if (gl_symbols[i].per_thread && (flags & GL_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
            want_pt = 1;
    }
    for (int i = 0; i < gl_symbol_count; i++) {
        const gl_symbol *s = &gl_symbols[i];
        if (strcmp(s->base, symbol) != 0 || s->per_thread != want_pt || s->since > cudaVersion)
            continue;
        if (pick == NULL || s->since > pick->since)
            pick = s;
    }
    if (*matched)
        return pick;
    /* Not a base name: an exact exported name (cuMemAlloc_v2) is itself. */
    for (int i = 0; i < gl_symbol_count; i++) {
        if (strcmp(gl_symbols[i].name, symbol) == 0) {
            *matched = 1;
            return gl_symbols[i].since <= cudaVersion ? &gl_symbols[i] : NULL;
        }
    }
    return NULL;
}

CUresult gli_cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                 cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus,
                                 int ptds)
{
    int matched, status = GL_CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult r = CUDA_SUCCESS;

    (void)ptds;
    if (symbol == NULL || pfn == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    const gl_symbol *s = best(symbol, cudaVersion, flags, &matched);
    *pfn = NULL;
    if (s != NULL) {
        *pfn = s->fn;
    } else if (matched) {
        status = GL_CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        r = CUDA_ERROR_NOT_FOUND;
    } else if (strncmp(symbol, "cu", 2) != 0) {
        /* Not a driver name at all (cudart asks for ""): the driver's answer. */
        status = GL_CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        r = CUDA_ERROR_NOT_FOUND;
    } else {
        /* Resolving is not calling: cudart resolves every name it knows at
         * start-up, so an unforwarded one is named once, when it is called. */
        void *stub = unforwarded_stub(symbol);
        int slot = stub != NULL ? -1 : unsupported_slot(symbol);
        if (stub != NULL) {
            *pfn = stub;
        } else if (slot >= 0) {
            *pfn = gl_unsupported_slots[slot];
        } else {
            status = GL_CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
            r = CUDA_ERROR_NOT_FOUND;
        }
    }
    if (symbolStatus)
        *symbolStatus = status;
    if (gl_trace_on && status == GL_CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT)
        fprintf(stderr, "gleam: trace: cuGetProcAddress(%s, %d): the version is not "
                "sufficient (as NVIDIA's driver answers)\n", symbol, cudaVersion);
    return r;
}

CUresult gli_cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                              int ptds)
{
    return gli_cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL, ptds);
}
