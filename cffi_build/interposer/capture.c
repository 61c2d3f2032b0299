/*
 * capture.c — stream capture (CUDA graphs) is not supported: the queries
 * answer "not capturing", which is true of every stream, so libraries that
 * ask before each copy (CuPy, cudart) carry on; beginning a capture is
 * CUDA_ERROR_NOT_SUPPORTED with one line. The thread's capture mode is kept
 * per thread, as CUDA does, so that exchanging it round-trips.
 */
#include <stdio.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "internal.h"

#define GL_CU_STREAM_CAPTURE_STATUS_NONE 0
#define GL_CU_STREAM_CAPTURE_MODE_RELAXED 2

static __thread CUstreamCaptureMode t_mode; /* 0: CU_STREAM_CAPTURE_MODE_GLOBAL */

static CUresult check_stream(CUstream hStream)
{
    CUresult r = gl_ready();

    if (r != CUDA_SUCCESS)
        return r;
    return gl_check_handle(GL_H_STREAM, (uint64_t)(uintptr_t)hStream);
}

CUresult gli_cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus,
                                 int ptds)
{
    CUresult r = check_stream(hStream);

    (void)ptds;
    if (r != CUDA_SUCCESS)
        return r;
    if (captureStatus == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *captureStatus = GL_CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

/* CUDA leaves the other outputs undefined when the stream is not capturing;
 * gleam zeroes them. */
CUresult gli_cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                       cuuint64_t *id_out, CUgraph *graph_out,
                                       const CUgraphNode **dependencies_out,
                                       const CUgraphEdgeData **edgeData_out,
                                       size_t *numDependencies_out, int ptds)
{
    CUresult r = gli_cuStreamIsCapturing(hStream, captureStatus_out, ptds);

    if (r != CUDA_SUCCESS)
        return r;
    if (id_out)
        *id_out = 0;
    if (graph_out)
        *graph_out = NULL;
    if (dependencies_out)
        *dependencies_out = NULL;
    if (edgeData_out)
        *edgeData_out = NULL;
    if (numDependencies_out)
        *numDependencies_out = 0;
    return CUDA_SUCCESS;
}

CUresult gli_cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                       cuuint64_t *id_out, CUgraph *graph_out,
                                       const CUgraphNode **dependencies_out,
                                       size_t *numDependencies_out, int ptds)
{
    return gli_cuStreamGetCaptureInfo_v3(hStream, captureStatus_out, id_out, graph_out,
                                         dependencies_out, NULL, numDependencies_out, ptds);
}

CUresult gli_cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                    cuuint64_t *id_out, int ptds)
{
    return gli_cuStreamGetCaptureInfo_v3(hStream, captureStatus_out, id_out, NULL, NULL, NULL,
                                         NULL, ptds);
}

CUresult gli_cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode, int ptds)
{
    CUresult r = check_stream(hStream);

    (void)mode;
    (void)ptds;
    if (r != CUDA_SUCCESS)
        return r;
    gl_log(GL_LOG_ERROR, "cuStreamBeginCapture", "stream capture (CUDA graphs) is not "
           "supported; returning CUDA_ERROR_NOT_SUPPORTED");
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult gli_cuStreamBeginCapture(CUstream hStream, int ptds)
{
    return gli_cuStreamBeginCapture_v2(hStream, 0, ptds);
}

/* No stream is ever capturing, so ending a capture is out of order. */
CUresult gli_cuStreamEndCapture(CUstream hStream, CUgraph *phGraph, int ptds)
{
    CUresult r = check_stream(hStream);

    (void)ptds;
    if (r != CUDA_SUCCESS)
        return r;
    if (phGraph == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *phGraph = NULL;
    return CUDA_ERROR_ILLEGAL_STATE;
}

CUresult gli_cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode, int ptds)
{
    (void)ptds;
    if (mode == NULL || *mode < 0 || *mode > GL_CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = t_mode;
    t_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

CUresult gli_cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags,
                                    int ptds)
{
    if (flags > 1) /* CU_EVENT_RECORD_DEFAULT, CU_EVENT_RECORD_EXTERNAL */
        return CUDA_ERROR_INVALID_VALUE;
    return glw_cuEventRecord(hEvent, hStream, ptds);
}
