/*
 * copybatch.c — cuMemcpyBatchAsync (CUDA 12.8; _v2 in 13.0 drops failIdx):
 * a batch of pointer-to-pointer copies in stream order. The copies of a batch
 * may run in any order on NVIDIA's driver; here they run one after another,
 * each routed by address like cuMemcpyAsync, which is one of the orders
 * allowed. The attributes are checked as the driver documents; their hints
 * (access order, location, overlap) change nothing on gleam's devices.
 */
#include <stdint.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "internal.h"

enum { ORDER_STREAM = 1, ORDER_ANY = 3 };

static CUresult check_attrs(const CUmemcpyAttributes *attrs, const size_t *idxs,
                            size_t nattrs, size_t count)
{
    if (attrs == NULL || idxs == NULL || nattrs == 0 || nattrs > count || idxs[0] != 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; k < nattrs; k++) {
        if ((k > 0 && idxs[k] <= idxs[k - 1]) || idxs[k] >= count)
            return CUDA_ERROR_INVALID_VALUE;
        if (attrs[k].srcAccessOrder < ORDER_STREAM || attrs[k].srcAccessOrder > ORDER_ANY)
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

static CUresult batch(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                      CUmemcpyAttributes *attrs, size_t *idxs, size_t nattrs, size_t *fail,
                      CUstream stream, int ptds)
{
    CUresult r;

    if (fail != NULL)
        *fail = SIZE_MAX; /* an error that is no single copy's */
    if (count == 0 || dsts == NULL || srcs == NULL || sizes == NULL ||
        (stream == NULL && !ptds)) /* the legacy stream is refused, as documented */
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = check_attrs(attrs, idxs, nattrs, count)) != CUDA_SUCCESS)
        return r;
    for (size_t i = 0; i < count; i++)
        if ((r = gl_copy_routed(dsts[i], srcs[i], sizes[i], stream, 1, ptds)) != CUDA_SUCCESS) {
            if (fail != NULL)
                *fail = i;
            return r;
        }
    return CUDA_SUCCESS;
}

CUresult gls_cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                size_t *failIdx, CUstream hStream, int ptds)
{
    return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream, ptds);
}

CUresult gls_cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                   size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
                                   size_t numAttrs, CUstream hStream, int ptds)
{
    return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, hStream, ptds);
}
