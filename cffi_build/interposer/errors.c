/*
 * errors.c — cuGetErrorName / cuGetErrorString for every CUresult of CUDA's
 * cuda.h (common/error_names.c, generated from cffi_build/cuda_errors.txt).
 * Both work before cuInit, as NVIDIA's do.
 */
#include <stddef.h>

#include "gl_client_gen.h"
#include "gl_error_names.h"
#include "internal.h"

static CUresult answer(const char *text, const char **pStr)
{
    if (pStr == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *pStr = text;
    return text != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult gli_cuGetErrorName(CUresult error, const char **pStr, int ptds)
{
    (void)ptds;
    return answer(gl_cuda_error_name((int)error), pStr);
}

CUresult gli_cuGetErrorString(CUresult error, const char **pStr, int ptds)
{
    (void)ptds;
    return answer(gl_cuda_error_text((int)error), pStr);
}
