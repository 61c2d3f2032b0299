/*
 * hostdev_textures.c — the host device's texture and surface objects: the
 * rules of cuTexObjectCreate and cuSurfObjectCreate (CUDA 13.0's cuda.h),
 * each broken one CUDA_ERROR_INVALID_VALUE (NOT_SUPPORTED for the resource
 * view formats gleam does not convert), and the texref the interpreter
 * samples (ptx_tex.h), built once at creation. The launch's resolver hands a
 * kernel's value to the interpreter only when it is a live object of the
 * session whose array (if any) is live too.
 *
 * Decisions where cuda.h is silent: a linear filter on a texture that returns
 * integers is refused (the programming guide: linear filtering only for
 * textures that return floats); linear and pitched memory must be 256-byte
 * aligned (what gleam's allocations are; NVIDIA documents the device's
 * TEXTURE_ALIGNMENT, 512) with a pitch that is a multiple of 32
 * (TEXTURE_PITCH_ALIGNMENT).
 */
#include <string.h>

#include "gl_array.h"
#include "hostdev_arrays.h"
#include "exec/texobj.h"

#define LINEAR_ALIGN 256u
#define PITCH_ALIGN 32u
#define LINEAR_MAX_ELEMENTS (1u << 27)  /* MAXIMUM_TEXTURE1D_LINEAR_WIDTH */
#define PITCH2D_MAX_WIDTH 131072u       /* MAXIMUM_TEXTURE2D_LINEAR_WIDTH */
#define PITCH2D_MAX_HEIGHT 65000u       /* MAXIMUM_TEXTURE2D_LINEAR_HEIGHT */
#define PITCH2D_MAX_PITCH 2097120u      /* MAXIMUM_TEXTURE2D_LINEAR_PITCH */

static void level_of(const gl_harray *a, uint32_t l, uint32_t first_layer, uint64_t layers,
                     ptx_texlevel *L)
{
    uint64_t w, h, d;
    uint32_t elem = gl_array_elem_bytes(a->d.format, a->d.channels);
    gl_array_level_dims(&a->d, l, &w, &h, &d);
    L->w = w;
    L->h = h;
    L->pitch = w * elem;
    L->slice = w * elem * h;
    L->d = layers ? layers : d;
    L->base = a->storage + gl_array_level_offset(&a->d, l) + (uint64_t)first_layer * L->slice;
}

/* The texref of an array or mipmapped array, through the request's view. */
static CUresult from_array(const gl_tex_request *q, gl_harray *a, ptx_texref *t)
{
    int shape = gl_array_shape(&a->d);
    int layered = gl_array_layered(shape);
    uint32_t nlevels = a->d.levels ? a->d.levels : 1;
    uint32_t first = 0, last = nlevels - 1, lay0 = 0;
    uint64_t layers = 0;
    uint64_t w, h, d;
    gl_array_level_dims(&a->d, 0, &w, &h, &d);
    if (!gl_harray_live(a))
        return CUDA_ERROR_INVALID_HANDLE;
    if (q->has_view) {
        if (q->view.format != 0)
            return CUDA_ERROR_NOT_SUPPORTED; /* reinterpreting the texels is not done */
        if (q->view.width != w || (a->d.height && q->view.height != h) ||
            (a->d.depth && !layered && q->view.depth != d) || q->view.first_level > q->view.last_level ||
            q->view.last_level >= nlevels || q->view.first_layer > q->view.last_layer ||
            (!layered && (q->view.first_layer || q->view.last_layer)) || (layered && q->view.last_layer >= d))
            return CUDA_ERROR_INVALID_VALUE;
        first = q->view.first_level;
        last = q->view.last_level;
        lay0 = q->view.first_layer;
        layers = layered ? (uint64_t)(q->view.last_layer - q->view.first_layer) + 1 : 0;
        if ((shape == GL_SHAPE_CUBE || shape == GL_SHAPE_CUBE_LAYERED) && layers % 6 != 0)
            return CUDA_ERROR_INVALID_VALUE;
    }
    t->kind = PTX_TEXK_ARRAY;
    t->shape = (uint32_t)shape;
    t->format = a->d.format;
    t->channels = a->d.channels;
    t->mipmapped = a->d.levels != 0;
    t->nlevels = last - first + 1;
    for (uint32_t l = first; l <= last; l++)
        level_of(a, l, lay0, layers, &t->level[l - first]);
    t->lo = a->storage;
    t->size = a->bytes;
    return CUDA_SUCCESS;
}

/* The texref of linear or pitched memory (the executor checked its reach). */
static CUresult from_memory(const gl_tex_request *q, ptx_texref *t)
{
    uint32_t elem = gl_array_elem_bytes(q->format, q->channels);
    ptx_texlevel *L = &t->level[0];
    if (q->has_view || q->resource % LINEAR_ALIGN != 0)
        return CUDA_ERROR_INVALID_VALUE;
    t->format = q->format;
    t->channels = q->channels;
    t->nlevels = 1;
    L->base = q->resource;
    L->d = 1;
    if (q->res_type == GL_RES_LINEAR) {
        if (q->width / elem == 0 || q->width / elem > LINEAR_MAX_ELEMENTS)
            return CUDA_ERROR_INVALID_VALUE;
        t->kind = PTX_TEXK_LINEAR;
        t->shape = GL_SHAPE_1D;
        L->w = q->width / elem;
        L->h = 1;
        L->pitch = L->slice = q->width;
        t->lo = q->resource;
        t->size = q->width;
        return CUDA_SUCCESS;
    }
    if (q->width > PITCH2D_MAX_WIDTH || q->height > PITCH2D_MAX_HEIGHT ||
        q->pitch > PITCH2D_MAX_PITCH || q->pitch % PITCH_ALIGN != 0)
        return CUDA_ERROR_INVALID_VALUE;
    t->kind = PTX_TEXK_PITCH2D;
    t->shape = GL_SHAPE_2D;
    L->w = q->width;
    L->h = q->height;
    L->pitch = q->pitch;
    L->slice = q->pitch * q->height;
    t->lo = q->resource;
    t->size = q->pitch * (q->height - 1) + q->width * elem;
    return CUDA_SUCCESS;
}

/* The sampling state of a texture object (cuTexObjectCreate's rules). */
static CUresult sampling(const gl_tex_request *q, ptx_texref *t)
{
    for (int k = 0; k < 3; k++)
        if ((uint32_t)q->tex.address[k] > GL_ADDR_BORDER)
            return CUDA_ERROR_INVALID_VALUE;
    if ((uint32_t)q->tex.filter > GL_FILTER_LINEAR ||
        (uint32_t)q->tex.mip_filter > GL_FILTER_LINEAR ||
        (q->tex.flags & ~GL_TRSF_KNOWN) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    int cube = t->shape == GL_SHAPE_CUBE || t->shape == GL_SHAPE_CUBE_LAYERED;
    if ((q->tex.flags & GL_TRSF_SEAMLESS_CUBEMAP) && !cube)
        return CUDA_ERROR_INVALID_VALUE;
    t->normalized = (q->tex.flags & GL_TRSF_NORMALIZED_COORDINATES) != 0;
    if (t->mipmapped && !t->normalized)
        return CUDA_ERROR_INVALID_VALUE; /* "for CUDA mipmapped arrays, this flag has to be set" */
    int int32 = t->format == GL_AD_U32 || t->format == GL_AD_S32;
    int intfmt = int32 || t->format == GL_AD_U8 || t->format == GL_AD_S8 ||
                 t->format == GL_AD_U16 || t->format == GL_AD_S16;
    t->read_int = int32 || (intfmt && (q->tex.flags & GL_TRSF_READ_AS_INTEGER));
    t->filter = t->kind == PTX_TEXK_LINEAR ? GL_FILTER_POINT : (uint32_t)q->tex.filter;
    if (t->filter == GL_FILTER_LINEAR && t->read_int)
        return CUDA_ERROR_INVALID_VALUE;
    t->mip_filter = (uint32_t)q->tex.mip_filter;
    t->srgb = (q->tex.flags & GL_TRSF_SRGB) != 0 && !t->read_int;
    for (int k = 0; k < 3; k++)
        t->address[k] = t->kind == PTX_TEXK_LINEAR ? GL_ADDR_CLAMP : (uint32_t)q->tex.address[k];
    memcpy(t->border, q->tex.border, sizeof t->border);
    t->mip_bias = q->tex.mip_bias;
    t->min_level = q->tex.min_level;
    t->max_level = q->tex.max_level;
    return CUDA_SUCCESS;
}

CUresult hb_glTexObjectCreate(cuuint64_t *value, const void *request, size_t n)
{
    gl_tex_create *c = (gl_tex_create *)request;
    const gl_tex_request *q = &c->q;
    int surface = q->kind == GL_TEX_SURFACE;
    gl_htex *o;
    ptx_texref t;
    CUresult r;
    (void)n;
    memset(&t, 0, sizeof t);
    if (q->res_flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    gl_harray *a = c->resource;
    if (a != NULL)
        r = from_array(q, a, &t);
    else
        r = from_memory(q, &t);
    /* A surface is an array's (a mipmap level's too). The SURFACE_LDST flag is
     * not asked for: NVIDIA documents it for surface references, and its own
     * bindlessTexture sample writes through a surface object on a level of a
     * mipmapped array made without it. */
    if (r == CUDA_SUCCESS && surface && (a == NULL || a->d.levels != 0 || q->has_view))
        r = CUDA_ERROR_INVALID_VALUE;
    t.elem = gl_array_elem_bytes(t.format, t.channels);
    if (r == CUDA_SUCCESS && !surface)
        r = sampling(q, &t);
    if (r != CUDA_SUCCESS)
        return r;
    if ((o = gl_hobj_new(surface ? GL_H_SURFOBJ : GL_H_TEXOBJ, sizeof *o)) == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    o->array = a;
    o->ref = t;
    c->object = o;
    *value = q->handle; /* kernels see the minted handle (gl_host_texture) */
    return CUDA_SUCCESS;
}

/* Nothing but its handle refers to an object, and the executor unbinds
 * that after this: no kernel can reach it again. */
CUresult hb_cuTexObjectDestroy(CUtexObject texObject)
{
    gl_hobj_free((void *)(uintptr_t)texObject);
    return CUDA_SUCCESS;
}

CUresult hb_cuSurfObjectDestroy(CUsurfObject surfObject)
{
    return hb_cuTexObjectDestroy(surfObject);
}

const ptx_texref *gl_host_texture(void *ctx, uint64_t value, int surface)
{
    void *obj;
    if (gl_exec_handle(ctx, surface ? GL_H_SURFOBJ : GL_H_TEXOBJ, value, &obj) != CUDA_SUCCESS)
        return NULL;
    gl_htex *o = obj;
    return o->array == NULL || gl_harray_live(o->array) ? &o->ref : NULL;
}
