/*
 * exec_tensormap.c — the server's half of a tensor-map request: the request
 * is the client's bytes, so it is read into an aligned copy, its kind and
 * rank bounded, and the memory it names checked against the session's
 * before the backend encodes the map (the real driver on the cuda backend,
 * src/hostdev/hostdev_tensormap.c on the host device). A replaced map's bytes go to
 * the backend as they came: only its driver can read them, and the new start
 * is checked like any other.
 */
#include <string.h>

#include "executor.h"
#include "gl_calls.h"
#include "gl_tensormap.h"

CUresult gx_glTensorMapEncode(gl_exec *x, void *tensorMap, const void *request, size_t n)
{
    gl_tmap_request q;
    uint64_t extent = 1;

    if (n != sizeof q)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&q, request, sizeof q);
    if (q.kind < GL_TMAP_TILED || q.kind > GL_TMAP_REPLACE)
        return CUDA_ERROR_INVALID_VALUE;
    if (q.kind != GL_TMAP_REPLACE && gl_tmap_extent(&q, &extent) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = gl_exec_check_dptr(x, q.address, extent);
    if (r != CUDA_SUCCESS)
        return r;
    return ((gl_fn_glTensorMapEncode)gl_exec_slot(x, GL_CALL_glTensorMapEncode))(tensorMap, &q,
                                                                                 sizeof q);
}
