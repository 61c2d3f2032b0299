/*
 * caller.c — whose code called: the loaded objects (shared library or
 * executable) that asked for cudart's interface table are cudart's. A launch
 * made from one of them gets the error cudart expects from NVIDIA's driver
 * for a launch configuration the device cannot run (CUresult 9, which cudart
 * reports as cudaErrorInvalidConfiguration), while a driver-API program gets
 * CUDA_ERROR_INVALID_VALUE, as cuLaunchKernel documents. State: a short list
 * of object base addresses under a mutex; one process rarely holds more than
 * a few copies of cudart (CuPy's, PyTorch's, cuda.bindings').
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>

#include "internal.h"

__thread const void *gl_caller;

#define GL_CUDART_OBJECTS 16
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static const void *g_cudart[GL_CUDART_OBJECTS];
static int g_n;

/* The base address of the object that holds code address pc, or NULL. */
static const void *object_of(const void *pc)
{
    Dl_info info;

    if (pc == NULL || dladdr(pc, &info) == 0)
        return NULL;
    return info.dli_fbase;
}

void gl_caller_mark_cudart(void)
{
    const void *base = object_of(gl_caller);

    if (base == NULL)
        return;
    pthread_mutex_lock(&g_lock);
    int known = 0;
    for (int i = 0; i < g_n; i++)
        known |= g_cudart[i] == base;
    if (!known && g_n < GL_CUDART_OBJECTS)
        g_cudart[g_n++] = base;
    pthread_mutex_unlock(&g_lock);
}

int gl_caller_is_cudart(void)
{
    const void *base = object_of(gl_caller);
    int yes = 0;

    if (base == NULL)
        return 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_n; i++)
        yes |= g_cudart[i] == base;
    pthread_mutex_unlock(&g_lock);
    return yes;
}
