/*
 * hostdev_streams.c — streams and events of the host device. The executor
 * runs a session's calls in order on one thread, so every stream is complete
 * whenever a later call looks at it; an event's time is when its record ran.
 */
#include "hostdev.h"

CUresult hb_cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    (void)Flags;
    gl_hobj *o = gl_hobj_new(GL_H_STREAM, sizeof *o);
    if (o == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phStream = (CUstream)o;
    return CUDA_SUCCESS;
}

CUresult hb_cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    (void)priority;
    return hb_cuStreamCreate(phStream, flags);
}

static int is_object(CUstream s)
{
    return (uintptr_t)s > GL_CU_STREAM_PER_THREAD;
}

CUresult hb_cuStreamDestroy(CUstream hStream)
{
    if (!is_object(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    gl_hobj_free(hStream);
    return CUDA_SUCCESS;
}

CUresult hb_cuStreamSynchronize(CUstream hStream)
{
    (void)hStream;
    return CUDA_SUCCESS;
}

CUresult hb_cuStreamQuery(CUstream hStream)
{
    (void)hStream;
    return CUDA_SUCCESS;
}

CUresult hb_cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    (void)hStream, (void)hEvent, (void)Flags;
    return CUDA_SUCCESS;
}

/* CU_EVENT_DEFAULT, BLOCKING_SYNC, DISABLE_TIMING, INTERPROCESS; as CUDA
 * documents, an interprocess event must also disable timing. */
#define GL_EVENT_DISABLE_TIMING 0x2u
#define GL_EVENT_INTERPROCESS 0x4u

CUresult hb_cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    if ((Flags & ~0x7u) || ((Flags & GL_EVENT_INTERPROCESS) && !(Flags & GL_EVENT_DISABLE_TIMING)))
        return CUDA_ERROR_INVALID_VALUE;
    gl_hevent *e = gl_hobj_new(GL_H_EVENT, sizeof *e);
    if (e == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->flags = Flags;
    *phEvent = (CUevent)e;
    return CUDA_SUCCESS;
}

CUresult hb_cuEventRecord(CUevent hEvent, CUstream hStream)
{
    (void)hStream;
    gl_hevent *e = (gl_hevent *)hEvent;
    clock_gettime(CLOCK_MONOTONIC, &e->t);
    e->recorded = 1;
    return CUDA_SUCCESS;
}

CUresult hb_cuEventSynchronize(CUevent hEvent)
{
    (void)hEvent;
    return CUDA_SUCCESS;
}

CUresult hb_cuEventQuery(CUevent hEvent)
{
    (void)hEvent;
    return CUDA_SUCCESS;
}

CUresult hb_cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    gl_hevent *a = (gl_hevent *)hStart, *b = (gl_hevent *)hEnd;
    /* CUDA's answer for an event that keeps no time. */
    if ((a->flags | b->flags) & GL_EVENT_DISABLE_TIMING)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!a->recorded || !b->recorded)
        return CUDA_ERROR_NOT_READY;
    double ms = (double)(b->t.tv_sec - a->t.tv_sec) * 1e3
                + (double)(b->t.tv_nsec - a->t.tv_nsec) / 1e6;
    *pMilliseconds = (float)ms;
    return CUDA_SUCCESS;
}

CUresult hb_cuEventDestroy(CUevent hEvent)
{
    gl_hobj_free(hEvent);
    return CUDA_SUCCESS;
}
