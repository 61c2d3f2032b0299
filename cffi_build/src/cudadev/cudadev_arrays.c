/*
 * cudadev_arrays.c — the cuda backend's arrays, mipmapped arrays, texture and
 * surface objects: real ones, made by the real driver. A minted handle is
 * bound to a small wrapper (the driver's handle, what it was made from, and
 * whether it was destroyed), never to the driver's handle itself: a level's
 * array dies with its mipmapped array, and a client that still names it
 * must get an error here, not hand the driver a dead handle. Wrappers stay
 * on the session's list until the session closes, which destroys whatever
 * the program left and frees them all. Copies go through the driver's 3D
 * copy, one slice of rows per record; a copy to the host waits for its
 * stream (the reply carries the bytes).
 */
#include <stdlib.h>
#include <string.h>

#include "cudadev_arrays.h"
#include "gl_array.h"
#include "exec/texobj.h"

typedef struct gl_cobj {
    int kind;              /* GL_H_ARRAY, GL_H_MIPMAP, GL_H_TEXOBJ, GL_H_SURFOBJ */
    void *real;            /* the driver's CUarray / CUmipmappedArray */
    uint64_t value;        /* the driver's texture or surface object */
    struct gl_cobj *parent; /* a level's array: its mipmapped array */
    struct gl_cobj *level[GL_ARRAY_LEVELS_MAX];
    uint32_t levels;
    int destroyed;
    struct gl_cobj *next;
} gl_cobj;

typedef CUresult (*fn_array3d)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
typedef CUresult (*fn_mipmap)(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned);
typedef CUresult (*fn_level)(CUarray *, CUmipmappedArray, unsigned);
typedef CUresult (*fn_destroy)(void *);
typedef CUresult (*fn_copy3d)(const CUDA_MEMCPY3D *, CUstream);
typedef CUresult (*fn_sync)(CUstream);
typedef CUresult (*fn_texobj)(CUtexObject *, const CUDA_RESOURCE_DESC *,
                              const CUDA_TEXTURE_DESC *, const CUDA_RESOURCE_VIEW_DESC *);
typedef CUresult (*fn_surfobj)(CUsurfObject *, const CUDA_RESOURCE_DESC *);
typedef CUresult (*fn_objdestroy)(unsigned long long);

static const gl_cuda_extra *fns(void)
{
    return gl_cuda_fns(gl_exec_current());
}

static gl_cobj *track(int kind)
{
    gl_exec *x = gl_exec_current();
    gl_cobj *o = calloc(1, sizeof *o);
    if (o == NULL)
        return NULL;
    o->kind = kind;
    o->next = *gl_cuda_arrays(x);
    *gl_cuda_arrays(x) = o;
    return o;
}

static int live(const gl_cobj *o)
{
    return !o->destroyed && (o->parent == NULL || !o->parent->destroyed);
}

static CUDA_ARRAY3D_DESCRIPTOR driver_desc(const gl_array_desc *d)
{
    CUDA_ARRAY3D_DESCRIPTOR a = {.Width = d->width, .Height = d->height, .Depth = d->depth,
                                 .Format = (CUarray_format)d->format,
                                 .NumChannels = d->channels, .Flags = d->flags};
    return a;
}

static CUresult create(void **out, int kind, const void *desc)
{
    const gl_cuda_extra *f = fns();
    gl_array_desc d;
    CUDA_ARRAY3D_DESCRIPTOR a;
    void *fp = kind == GL_H_ARRAY ? f->cuArray3DCreate_v2 : f->cuMipmappedArrayCreate;
    void *real = NULL;
    CUresult r;
    if (fp == NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    memcpy(&d, desc, sizeof d);
    a = driver_desc(&d);
    r = kind == GL_H_ARRAY ? ((fn_array3d)fp)((CUarray *)&real, &a)
                           : ((fn_mipmap)fp)((CUmipmappedArray *)&real, &a, d.levels);
    if (r != CUDA_SUCCESS)
        return r;
    gl_cobj *o = track(kind);
    if (o == NULL) {
        ((fn_destroy)(kind == GL_H_ARRAY ? f->cuArrayDestroy : f->cuMipmappedArrayDestroy))(real);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    o->real = real;
    o->levels = d.levels;
    *out = o;
    return CUDA_SUCCESS;
}

/* A request from a session that moved here from gleam's host device: its
 * program holds values only the host device gives. */
static CUresult made_for_host(const char *what)
{
    gl_exec_note(gl_exec_current(), "%s was made for gleam's host device (a session moved to "
                 "a GPU cannot keep it)", what);
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cb_glArrayCreate(CUarray *array, const void *desc, size_t n, CUdeviceptr storage)
{
    (void)n; /* a real array has the driver's storage */
    return storage != 0 ? made_for_host("a CUDA array") : create((void **)array, GL_H_ARRAY, desc);
}

CUresult cb_glMipmapCreate(CUmipmappedArray *mipmap, const void *desc, size_t n,
                           CUdeviceptr storage)
{
    (void)n;
    return storage != 0 ? made_for_host("a mipmapped array")
                        : create((void **)mipmap, GL_H_MIPMAP, desc);
}

static int is_object(const gl_cobj *o)
{
    return o->kind == GL_H_TEXOBJ || o->kind == GL_H_SURFOBJ;
}

/* The driver's destroy for what o holds (fp: that kind's entry point). */
static CUresult release(const gl_cobj *o, void *fp)
{
    return is_object(o) ? ((fn_objdestroy)fp)(o->value) : ((fn_destroy)fp)(o->real);
}

static CUresult destroy(gl_cobj *o, void *fp)
{
    if (o->parent != NULL || o->destroyed)
        return CUDA_ERROR_INVALID_VALUE; /* a level goes with its mipmapped array */
    if (fp == NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult r = release(o, fp);
    if (r == CUDA_SUCCESS)
        o->destroyed = 1;
    return r;
}

CUresult cb_cuArrayDestroy(CUarray hArray)
{
    return destroy((gl_cobj *)hArray, fns()->cuArrayDestroy);
}

CUresult cb_cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    return destroy((gl_cobj *)hMipmappedArray, fns()->cuMipmappedArrayDestroy);
}

CUresult cb_cuMipmappedArrayGetLevel(CUarray *pLevelArray, CUmipmappedArray hMipmappedArray,
                                     unsigned int level)
{
    gl_cobj *m = (gl_cobj *)hMipmappedArray;
    void *fp = fns()->cuMipmappedArrayGetLevel;
    if (!live(m))
        return CUDA_ERROR_INVALID_HANDLE;
    if (level >= m->levels || level >= GL_ARRAY_LEVELS_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (fp == NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (m->level[level] == NULL) {
        CUarray real;
        CUresult r = ((fn_level)fp)(&real, (CUmipmappedArray)m->real, level);
        if (r != CUDA_SUCCESS)
            return r;
        gl_cobj *o = track(GL_H_ARRAY);
        if (o == NULL)
            return CUDA_ERROR_OUT_OF_MEMORY;
        o->real = real;
        o->parent = m;
        m->level[level] = o;
    }
    *pLevelArray = (CUarray)m->level[level];
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- copies */

typedef struct {
    int type;        /* GL_CU_MEMORYTYPE_* */
    const void *host;
    CUdeviceptr device;
    gl_cobj *array;
    size_t x, y, z, pitch;
} copy_side;

static CUresult copy(const copy_side *s, const copy_side *d, size_t width, size_t height,
                     CUstream stream, int wait)
{
    const gl_cuda_extra *f = fns();
    if ((s->array != NULL && !live(s->array)) || (d->array != NULL && !live(d->array)))
        return CUDA_ERROR_INVALID_HANDLE;
    if (f->cuMemcpy3DAsync_v2 == NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUDA_MEMCPY3D p = {
        .srcXInBytes = s->x, .srcY = s->y, .srcZ = s->z, .srcMemoryType = s->type,
        .srcHost = s->host, .srcDevice = s->device,
        .srcArray = s->array ? (CUarray)s->array->real : NULL, .srcPitch = s->pitch,
        .srcHeight = height, .dstXInBytes = d->x, .dstY = d->y, .dstZ = d->z,
        .dstMemoryType = d->type, .dstHost = (void *)(uintptr_t)d->host,
        .dstDevice = d->device, .dstArray = d->array ? (CUarray)d->array->real : NULL,
        .dstPitch = d->pitch, .dstHeight = height, .WidthInBytes = width, .Height = height,
        .Depth = 1};
    CUresult r = ((fn_copy3d)f->cuMemcpy3DAsync_v2)(&p, stream);
    if (r != CUDA_SUCCESS || !wait)
        return r;
    return ((fn_sync)f->cuStreamSynchronize)(stream);
}

static copy_side array_side(CUarray a, size_t x, size_t y, size_t z)
{
    copy_side s = {.type = GL_CU_MEMORYTYPE_ARRAY, .array = (gl_cobj *)a, .x = x, .y = y,
                   .z = z};
    return s;
}

CUresult cb_glMemcpyHtoA(CUarray dst, size_t xbytes, size_t y, size_t z, const void *src,
                         size_t width, size_t height, CUstream stream)
{
    copy_side s = {.type = GL_CU_MEMORYTYPE_HOST, .host = src, .pitch = width};
    copy_side d = array_side(dst, xbytes, y, z);
    return copy(&s, &d, width, height, stream, 0);
}

CUresult cb_glMemcpyAtoH(void *dst, CUarray src, size_t xbytes, size_t y, size_t z, size_t width,
                         size_t height, CUstream stream)
{
    copy_side s = array_side(src, xbytes, y, z);
    copy_side d = {.type = GL_CU_MEMORYTYPE_HOST, .host = dst, .pitch = width};
    return copy(&s, &d, width, height, stream, 1);
}

CUresult cb_glMemcpyDtoA(CUarray dst, size_t xbytes, size_t y, size_t z, CUdeviceptr src,
                         size_t spitch, size_t width, size_t height, CUstream stream)
{
    copy_side s = {.type = GL_CU_MEMORYTYPE_DEVICE, .device = src, .pitch = spitch};
    copy_side d = array_side(dst, xbytes, y, z);
    return copy(&s, &d, width, height, stream, 0);
}

CUresult cb_glMemcpyAtoD(CUdeviceptr dst, size_t dpitch, CUarray src, size_t xbytes, size_t y,
                         size_t z, size_t width, size_t height, CUstream stream)
{
    copy_side s = array_side(src, xbytes, y, z);
    copy_side d = {.type = GL_CU_MEMORYTYPE_DEVICE, .device = dst, .pitch = dpitch};
    return copy(&s, &d, width, height, stream, 0);
}

CUresult cb_glMemcpyAtoA(CUarray dst, size_t dx, size_t dy, size_t dz, CUarray src, size_t sx,
                         size_t sy, size_t sz, size_t width, size_t height, CUstream stream)
{
    copy_side s = array_side(src, sx, sy, sz);
    copy_side d = array_side(dst, dx, dy, dz);
    return copy(&s, &d, width, height, stream, 0);
}

/* ------------------------------------------------ texture and surface objects */

static void driver_resource(const gl_tex_create *c, CUDA_RESOURCE_DESC *r)
{
    const gl_tex_request *q = &c->q;
    memset(r, 0, sizeof *r);
    r->resType = (int)q->res_type;
    r->flags = q->res_flags;
    switch (q->res_type) {
    case GL_RES_ARRAY:
        r->res.array.hArray = (CUarray)((gl_cobj *)c->resource)->real;
        break;
    case GL_RES_MIPMAP:
        r->res.mipmap.hMipmappedArray = (CUmipmappedArray)((gl_cobj *)c->resource)->real;
        break;
    case GL_RES_LINEAR:
        r->res.linear.devPtr = q->resource;
        r->res.linear.format = (CUarray_format)q->format;
        r->res.linear.numChannels = q->channels;
        r->res.linear.sizeInBytes = q->width;
        break;
    default:
        r->res.pitch2D.devPtr = q->resource;
        r->res.pitch2D.format = (CUarray_format)q->format;
        r->res.pitch2D.numChannels = q->channels;
        r->res.pitch2D.width = q->width;
        r->res.pitch2D.height = q->height;
        r->res.pitch2D.pitchInBytes = q->pitch;
    }
}


CUresult cb_glTexObjectCreate(cuuint64_t *value, const void *request, size_t n)
{
    const gl_cuda_extra *f = fns();
    gl_tex_create *c = (gl_tex_create *)request;
    int surface = c->q.kind == GL_TEX_SURFACE;
    void *fp = surface ? f->cuSurfObjectCreate : f->cuTexObjectCreate;
    void *destroy_fp = surface ? f->cuSurfObjectDestroy : f->cuTexObjectDestroy;
    CUDA_RESOURCE_DESC res;
    CUDA_TEXTURE_DESC tex;
    CUDA_RESOURCE_VIEW_DESC view;
    unsigned long long real = 0;
    CUresult r;
    (void)n;
    if (c->q.value_is_handle)
        return made_for_host(surface ? "a surface object" : "a texture object");
    if (fp == NULL || destroy_fp == NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (c->resource != NULL && !live(c->resource))
        return CUDA_ERROR_INVALID_HANDLE;
    driver_resource(c, &res);
    memcpy(&tex, &c->q.tex, sizeof tex); /* the program's own, as they came */
    memcpy(&view, &c->q.view, sizeof view);
    r = surface ? ((fn_surfobj)fp)(&real, &res)
                : ((fn_texobj)fp)(&real, &res, &tex, c->q.has_view ? &view : NULL);
    if (r != CUDA_SUCCESS)
        return r;
    gl_cobj *o = track(surface ? GL_H_SURFOBJ : GL_H_TEXOBJ);
    if (o == NULL) {
        ((fn_objdestroy)destroy_fp)(real);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    o->value = real;
    c->object = o;
    *value = real; /* what the program passes its kernels */
    return CUDA_SUCCESS;
}

CUresult cb_cuTexObjectDestroy(CUtexObject texObject)
{
    return destroy((gl_cobj *)(uintptr_t)texObject, fns()->cuTexObjectDestroy);
}

CUresult cb_cuSurfObjectDestroy(CUsurfObject surfObject)
{
    return destroy((gl_cobj *)(uintptr_t)surfObject, fns()->cuSurfObjectDestroy);
}

/* The entry point that destroys what o holds. */
static void *destroyer(const gl_exec *x, const gl_cobj *o)
{
    const gl_cuda_extra *f = gl_cuda_fns((gl_exec *)x);
    switch (o->kind) {
    case GL_H_TEXOBJ:
        return f->cuTexObjectDestroy;
    case GL_H_SURFOBJ:
        return f->cuSurfObjectDestroy;
    case GL_H_ARRAY:
        return f->cuArrayDestroy;
    default:
        return f->cuMipmappedArrayDestroy;
    }
}

/* Objects before the arrays they read, arrays before mipmapped arrays (a
 * level goes with its mipmapped array). */
void gl_cuda_arrays_close(gl_exec *x)
{
    static const int order[] = {GL_H_TEXOBJ, GL_H_SURFOBJ, GL_H_ARRAY, GL_H_MIPMAP};
    void **head = gl_cuda_arrays(x);
    for (size_t pass = 0; pass < sizeof order / sizeof order[0]; pass++)
        for (gl_cobj *o = *head; o != NULL; o = o->next) {
            void *fp = destroyer(x, o);
            if (o->kind == order[pass] && !o->destroyed && o->parent == NULL && fp != NULL)
                release(o, fp);
        }
    while (*head != NULL) {
        gl_cobj *o = *head;
        *head = o->next;
        free(o);
    }
}
