/*
 * texobj.c — texture and surface objects in the interposer. Creating one
 * mints its handle, sends the whole description in one waiting
 * glTexObjectCreate (include/gl_array.h: gl_tex_request) and hands the
 * program the value the server answers: the handle itself on gleam's host
 * device, its driver's object on a GPU (kernels receive that value, so it
 * must be the serving device's). The descriptors the program gave are kept
 * and answer the Get*Desc calls without a round trip; destroying one sends
 * its handle.
 *
 * State: the live objects of the process, by value (textures and surfaces
 * apart: a GPU numbers them separately), under one mutex; callers get
 * copies.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "gl_htable.h"
#include "internal.h"

typedef struct {
    uint64_t handle;
    CUDA_RESOURCE_DESC res;
    CUDA_TEXTURE_DESC tex;
    CUDA_RESOURCE_VIEW_DESC view;
    int has_view;
} texobj;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static gl_htable g_objects[2]; /* [surface]: value -> texobj * */

/* A copy of the live object of this value: 1, or 0 when there is none. */
static int find(uint64_t value, int surface, texobj *out)
{
    pthread_mutex_lock(&g_lock);
    gl_hslot *s = value != 0 ? gl_htable_find(&g_objects[surface], value) : NULL;
    if (s != NULL)
        *out = *(texobj *)s->val;
    pthread_mutex_unlock(&g_lock);
    return s != NULL;
}

/* The request's resource fields; INVALID_VALUE for an array this process
 * does not know (the server checks memory and handles again). */
static CUresult resource(gl_tex_request *q, const CUDA_RESOURCE_DESC *r)
{
    gl_array_info a;
    q->res_type = (uint32_t)r->resType;
    q->res_flags = r->flags;
    switch (r->resType) {
    case GL_RES_ARRAY:
        q->resource = (uint64_t)(uintptr_t)r->res.array.hArray;
        return gl_array_find(q->resource, 0, &a) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case GL_RES_MIPMAP:
        q->resource = (uint64_t)(uintptr_t)r->res.mipmap.hMipmappedArray;
        return gl_array_find(q->resource, 1, &a) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case GL_RES_LINEAR:
        q->resource = r->res.linear.devPtr;
        q->format = (uint32_t)r->res.linear.format;
        q->channels = r->res.linear.numChannels;
        q->width = r->res.linear.sizeInBytes;
        return CUDA_SUCCESS;
    case GL_RES_PITCH2D:
        q->resource = r->res.pitch2D.devPtr;
        q->format = (uint32_t)r->res.pitch2D.format;
        q->channels = r->res.pitch2D.numChannels;
        q->width = r->res.pitch2D.width;
        q->height = r->res.pitch2D.height;
        q->pitch = r->res.pitch2D.pitchInBytes;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

_Static_assert(sizeof(gl_tex_desc) == sizeof(CUDA_TEXTURE_DESC), "CUDA_TEXTURE_DESC's layout");
_Static_assert(sizeof(gl_view_desc) == sizeof(CUDA_RESOURCE_VIEW_DESC),
               "CUDA_RESOURCE_VIEW_DESC's layout");

static CUresult create(unsigned long long *out, const CUDA_RESOURCE_DESC *res,
                       const CUDA_TEXTURE_DESC *tex, const CUDA_RESOURCE_VIEW_DESC *view,
                       int ptds)
{
    int surface = tex == NULL;
    gl_tex_request q;
    texobj o;
    uint64_t value = 0;
    CUresult r;

    if (out == NULL || res == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    memset(&q, 0, sizeof q);
    memset(&o, 0, sizeof o);
    if ((r = resource(&q, res)) != CUDA_SUCCESS)
        return r;
    q.kind = surface ? GL_TEX_SURFACE : GL_TEX_TEXTURE;
    q.handle = gl_mint(surface ? GL_H_SURFOBJ : GL_H_TEXOBJ);
    q.value_is_handle = (uint32_t)gl_array_serves_host();
    if (!surface)
        memcpy(&q.tex, tex, sizeof q.tex);
    if (view != NULL) {
        q.has_view = 1;
        memcpy(&q.view, view, sizeof q.view);
    }
    if ((r = glw_glTexObjectCreate(&value, &q, sizeof q, ptds)) != CUDA_SUCCESS)
        return r;
    o.handle = q.handle;
    o.res = *res;
    if (!surface)
        o.tex = *tex;
    if (view != NULL)
        o.view = *view;
    o.has_view = view != NULL;
    texobj *kept = malloc(sizeof *kept);
    pthread_mutex_lock(&g_lock);
    int rc = kept == NULL ? -1 : gl_htable_put(&g_objects[surface], value, kept);
    if (rc == 0)
        *kept = o;
    pthread_mutex_unlock(&g_lock);
    if (rc != 0) { /* the program cannot be told of an object it could not destroy */
        free(kept);
        if (surface)
            glw_cuSurfObjectDestroy(q.handle, ptds);
        else
            glw_cuTexObjectDestroy(q.handle, ptds);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = value;
    return CUDA_SUCCESS;
}

CUresult gls_cuTexObjectCreate(CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc,
                               const CUDA_TEXTURE_DESC *pTexDesc,
                               const CUDA_RESOURCE_VIEW_DESC *pResViewDesc, int ptds)
{
    if (pTexDesc == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return create(pTexObject, pResDesc, pTexDesc, pResViewDesc, ptds);
}

CUresult gls_cuSurfObjectCreate(CUsurfObject *pSurfObject, const CUDA_RESOURCE_DESC *pResDesc,
                                int ptds)
{
    return create(pSurfObject, pResDesc, NULL, NULL, ptds);
}

static CUresult destroy(uint64_t value, int surface, int ptds)
{
    texobj o;
    if (!find(value, surface, &o))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = surface ? glw_cuSurfObjectDestroy(o.handle, ptds)
                         : glw_cuTexObjectDestroy(o.handle, ptds);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_lock);
    free(gl_htable_take(&g_objects[surface], value));
    pthread_mutex_unlock(&g_lock);
    return CUDA_SUCCESS;
}

CUresult gls_cuTexObjectDestroy(CUtexObject texObject, int ptds)
{
    return destroy(texObject, 0, ptds);
}

CUresult gls_cuSurfObjectDestroy(CUsurfObject surfObject, int ptds)
{
    return destroy(surfObject, 1, ptds);
}

/* What a Get*Desc call copies out of a live object. */
enum { GET_RESOURCE, GET_TEXTURE, GET_VIEW };

static CUresult get(void *out, uint64_t value, int surface, int what)
{
    texobj o;
    if (out == NULL || !find(value, surface, &o) || (what == GET_VIEW && !o.has_view))
        return CUDA_ERROR_INVALID_VALUE; /* (a view: "If no resource view was set") */
    if (what == GET_RESOURCE)
        memcpy(out, &o.res, sizeof o.res);
    else if (what == GET_TEXTURE)
        memcpy(out, &o.tex, sizeof o.tex);
    else
        memcpy(out, &o.view, sizeof o.view);
    return CUDA_SUCCESS;
}

CUresult gls_cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUtexObject texObject,
                                        int ptds)
{
    (void)ptds;
    return get(pResDesc, texObject, 0, GET_RESOURCE);
}

CUresult gls_cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC *pTexDesc, CUtexObject texObject,
                                       int ptds)
{
    (void)ptds;
    return get(pTexDesc, texObject, 0, GET_TEXTURE);
}

CUresult gls_cuTexObjectGetResourceViewDesc(CUDA_RESOURCE_VIEW_DESC *pResViewDesc,
                                            CUtexObject texObject, int ptds)
{
    (void)ptds;
    return get(pResViewDesc, texObject, 0, GET_VIEW);
}

CUresult gls_cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUsurfObject surfObject,
                                         int ptds)
{
    (void)ptds;
    return get(pResDesc, surfObject, 1, GET_RESOURCE);
}
