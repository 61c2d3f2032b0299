/*
 * handles.c — minted handles: 0x67 | kind | 48-bit serial. The interposer
 * hands them out at once so that creating a stream or loading a module never
 * waits for the server; the executor binds its own objects to them.
 */
#include <stdatomic.h>

#include "gl_calls.h"
#include "internal.h"

#define GL_MINT_TAG 0x67u
#define GL_SERIAL_MASK ((UINT64_C(1) << 48) - 1)

static atomic_uint_fast64_t g_serial;

uint64_t gl_mint(int kind)
{
    uint64_t serial = (atomic_fetch_add(&g_serial, 1) + 1) & GL_SERIAL_MASK;

    return (uint64_t)GL_MINT_TAG << 56 | (uint64_t)(kind & 0xff) << 48 | serial;
}

CUresult gl_check_handle(int kind, uint64_t h)
{
    if (kind == GL_H_STREAM && h <= GL_CU_STREAM_PER_THREAD)
        return CUDA_SUCCESS; /* NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD */
    if (h >> 56 == GL_MINT_TAG && (int)((h >> 48) & 0xff) == kind && (h & GL_SERIAL_MASK) != 0)
        return CUDA_SUCCESS;
    return CUDA_ERROR_INVALID_HANDLE;
}

uint64_t gl_stream_arg(uint64_t h, int ptds)
{
    return h == 0 && ptds ? GL_CU_STREAM_PER_THREAD : h;
}
