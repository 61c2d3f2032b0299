/*
 * exec_arrays.c — the server's half of creating arrays, mipmapped arrays,
 * texture and surface objects. The descriptor and the request are the
 * client's bytes: each is read into the executor's own copy, its sizes
 * bounded (gl_array_valid) before any product is formed, and the memory and
 * handles it names checked against the session's, before the backend sees
 * it. The backend then applies its device's rules (the real driver's on the
 * cuda backend; src/hostdev/hostdev_arrays.c and hostdev_textures.c on the host
 * device).
 */
#include <string.h>

#include "executor.h"
#include "gl_array.h"
#include "gl_calls.h"
#include "gl_span.h"
#include "texobj.h"

/* glArrayCreate and glMipmapCreate: exactly one gl_array_desc, valid, with
 * levels only for a mipmapped array, its storage (when given) in session
 * memory. Both slots take (handle out, desc, n, storage). */
typedef CUresult (*create_fn)(void **out, const void *desc, size_t n, CUdeviceptr storage);

static CUresult create(gl_exec *x, int call, void **out, const void *desc, size_t n,
                       CUdeviceptr storage)
{
    gl_array_desc d;
    int mipmap = call == GL_CALL_glMipmapCreate;
    if (n != sizeof d)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&d, desc, sizeof d);
    if ((mipmap ? d.levels == 0 : d.levels != 0) || !gl_array_valid(&d))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = storage != 0 ? gl_exec_check_dptr(x, storage, gl_array_bytes(&d))
                              : CUDA_SUCCESS;
    if (r != CUDA_SUCCESS)
        return r;
    return ((create_fn)gl_exec_slot(x, call))(out, &d, sizeof d, storage);
}

CUresult gx_glArrayCreate(gl_exec *x, CUarray *array, const void *desc, size_t n,
                          CUdeviceptr storage)
{
    return create(x, GL_CALL_glArrayCreate, (void **)array, desc, n, storage);
}

CUresult gx_glMipmapCreate(gl_exec *x, CUmipmappedArray *mipmap, const void *desc, size_t n,
                           CUdeviceptr storage)
{
    return create(x, GL_CALL_glMipmapCreate, (void **)mipmap, desc, n, storage);
}

/* Linear and pitched memory: a storable format and extents inside session memory. */
static CUresult check_memory(gl_exec *x, const gl_tex_request *q)
{
    uint32_t elem = gl_array_elem_bytes(q->format, q->channels);
    uint64_t bytes;
    if (elem == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (q->res_type == GL_RES_LINEAR) {
        if (q->width == 0)
            return CUDA_ERROR_INVALID_VALUE;
        return gl_exec_check_dptr(x, q->resource, q->width);
    }
    if (q->width == 0 || q->height == 0 || q->width > GL_ARRAY_EXTENT_MAX ||
        q->height > GL_ARRAY_EXTENT_MAX ||
        gl_span_bytes(q->pitch, q->width * elem, q->height, &bytes) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return gl_exec_check_dptr(x, q->resource, bytes);
}

CUresult gx_glTexObjectCreate(gl_exec *x, cuuint64_t *value, const void *request, size_t n)
{
    gl_tex_create c = {.resource = NULL, .object = NULL};
    CUresult r;

    if (n != sizeof c.q)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&c.q, request, sizeof c.q);
    int surface = c.q.kind == GL_TEX_SURFACE;
    int kind = surface ? GL_H_SURFOBJ : c.q.kind == GL_TEX_TEXTURE ? GL_H_TEXOBJ : -1;
    if (kind < 0)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = gl_exec_check_mint(x, kind, c.q.handle)) != CUDA_SUCCESS)
        return r;
    switch (c.q.res_type) {
    case GL_RES_ARRAY:
        r = gl_exec_handle(x, GL_H_ARRAY, c.q.resource, &c.resource);
        break;
    case GL_RES_MIPMAP:
        r = surface ? CUDA_ERROR_INVALID_VALUE
                    : gl_exec_handle(x, GL_H_MIPMAP, c.q.resource, &c.resource);
        break;
    case GL_RES_LINEAR:
    case GL_RES_PITCH2D:
        r = surface ? CUDA_ERROR_INVALID_VALUE : check_memory(x, &c.q);
        break;
    default:
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r != CUDA_SUCCESS)
        return r;
    r = ((gl_fn_glTexObjectCreate)gl_exec_slot(x, GL_CALL_glTexObjectCreate))(value, &c,
                                                                              sizeof c);
    if (r != CUDA_SUCCESS)
        return r;
    if ((r = gl_exec_bind(x, kind, c.q.handle, c.object)) != CUDA_SUCCESS) {
        int destroy = surface ? GL_CALL_cuSurfObjectDestroy : GL_CALL_cuTexObjectDestroy;
        ((gl_fn_cuTexObjectDestroy)gl_exec_slot(x, destroy))((CUtexObject)(uintptr_t)c.object);
    }
    return r;
}
