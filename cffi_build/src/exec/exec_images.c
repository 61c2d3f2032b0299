/*
 * exec_images.c — module and library images that arrive in parts. An
 * envelope carries at most one copy chunk, so the interposer sends a larger
 * image as glImagePart records and then one glModuleLoadStaged or
 * glLibraryLoadStaged, which loads what was staged and empties the stage.
 * The records of one image are consecutive in the session's stream (the
 * interposer sends them under one lock), so one stage per session suffices.
 * Ownership: the stage's bytes belong to the session (freed at close).
 */
#include <stdlib.h>
#include <string.h>

#include "executor.h"
#include "gl_calls.h"

/* Larger than any image seen (PyTorch's largest fatbin container is a few
 * hundred MB with every architecture); a bound, so a client cannot make the
 * server hold unbounded memory. */
#define GL_STAGED_MAX ((size_t)1 << 30)

void gl_staged_free(gl_staged_image *s)
{
    free(s->bytes);
    s->bytes = NULL;
    s->len = s->cap = 0;
}

CUresult gx_glImagePart(gl_exec *x, const void *bytes, size_t n)
{
    gl_staged_image *s = &x->staged;

    if (n > GL_STAGED_MAX - s->len)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (s->len + n > s->cap) {
        size_t cap = s->cap ? s->cap : (size_t)4 << 20;
        while (cap < s->len + n)
            cap = cap > GL_STAGED_MAX / 2 ? GL_STAGED_MAX : cap * 2;
        uint8_t *b = realloc(s->bytes, cap);
        if (b == NULL)
            return CUDA_ERROR_OUT_OF_MEMORY;
        s->bytes = b;
        s->cap = cap;
    }
    memcpy(s->bytes + s->len, bytes, n);
    s->len += n;
    return CUDA_SUCCESS;
}

/* Both staged loads: the backend's ordinary load of what was staged, and the
 * stage emptied whatever the load answered. */
static CUresult load_staged(gl_exec *x, int is_lib, void *out)
{
    CUresult r = CUDA_ERROR_INVALID_IMAGE;

    if (x->staged.len > 0 && is_lib)
        r = ((gl_fn_glLibraryLoad)gl_exec_slot(x, GL_CALL_glLibraryLoad))(
            (CUlibrary *)out, x->staged.bytes, x->staged.len);
    else if (x->staged.len > 0)
        r = ((gl_fn_glModuleLoad)gl_exec_slot(x, GL_CALL_glModuleLoad))(
            (CUmodule *)out, x->staged.bytes, x->staged.len);
    gl_staged_free(&x->staged);
    return r;
}

CUresult gx_glModuleLoadStaged(gl_exec *x, CUmodule *module)
{
    return load_staged(x, 0, module);
}

CUresult gx_glLibraryLoadStaged(gl_exec *x, CUlibrary *library)
{
    return load_staged(x, 1, library);
}
