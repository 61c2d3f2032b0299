/*
 * arrays.c — CUDA arrays and mipmapped arrays in the interposer.
 *
 * Creating one checks the descriptor as cuArray3DCreate documents (the
 * shapes its extents and flags make, formats, 1, 2 or 4 channels, the
 * device's size limits from its attributes), mints the handle and sends one
 * one-way glArrayCreate or glMipmapCreate; the server makes the array. When
 * the serving device is gleam's host device, the array's bytes are an
 * ordinary allocation of the session made here first (include/gl_array.h has
 * the layout), so a checkpoint's memory snapshot holds them; a GPU makes a
 * real array and gets no storage. Descriptor queries are answered from what
 * is kept here, without a round trip. A mipmapped array's level is an array
 * of its own, minted once per level and asked of the server once.
 *
 * State: one table of the process's arrays (minted handle -> facts) under
 * one mutex; callers get copies, so a concurrent destroy never leaves them
 * a dangling pointer. A level's entry goes with its mipmapped array.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gl_array.h"
#include "gl_calls.h"
#include "gl_client_gen.h"
#include "gl_htable.h"
#include "internal.h"

typedef struct {
    gl_array_info info;
    uint64_t level[GL_ARRAY_LEVELS_MAX]; /* a mipmapped array's level arrays (0: not yet) */
} entry;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static gl_htable g_arrays; /* minted handle -> entry * */

int gl_array_find(uint64_t h, int mipmap, gl_array_info *out)
{
    pthread_mutex_lock(&g_lock);
    gl_hslot *s = h != 0 ? gl_htable_find(&g_arrays, h) : NULL;
    int found = s != NULL && ((entry *)s->val)->info.mipmap == mipmap;
    if (found)
        *out = ((entry *)s->val)->info;
    pthread_mutex_unlock(&g_lock);
    return found;
}

int gl_array_serves_host(void)
{
    const gl_session_hello *h = gl_session();
    return h != NULL && strncmp(h->backend, "host", sizeof h->backend) == 0;
}

static CUresult remember(uint64_t h, const gl_array_info *info)
{
    entry *e = calloc(1, sizeof *e);
    if (e == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->info = *info;
    pthread_mutex_lock(&g_lock);
    int rc = gl_htable_put(&g_arrays, h, e);
    pthread_mutex_unlock(&g_lock);
    if (rc != 0) {
        free(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------- the rules */

/* A limit from the device's attributes (0: the device does not say). */
static int within(const gl_device_info *dev, uint64_t v, int attr)
{
    return attr == 0 || dev->attrs[attr] <= 0 || v <= (uint64_t)dev->attrs[attr];
}

/* The device's limits for a shape (cuArray3DCreate's table; the surface
 * column when the array may be a surface, the mipmapped limits of 1D and 2D
 * mipmapped arrays). Attribute numbers are CUDA's. */
static int fits(const gl_device_info *dev, const gl_array_desc *d, int shape)
{
    int surf = (d->flags & GL_ARRAY_SURFACE_LDST) != 0, mip = d->levels != 0;
    int w = 0, h = 0, dd = 0;
    switch (shape) {
    case GL_SHAPE_1D:
        w = mip ? 77 : surf ? 55 : 21;
        break;
    case GL_SHAPE_2D:
        w = mip ? 73 : surf ? 56 : (d->flags & GL_ARRAY_TEXTURE_GATHER) ? 45 : 22;
        h = mip ? 74 : surf ? 57 : (d->flags & GL_ARRAY_TEXTURE_GATHER) ? 46 : 23;
        break;
    case GL_SHAPE_3D:
        if (!surf && within(dev, d->width, 47) && within(dev, d->height, 48) &&
            within(dev, d->depth, 49))
            return 1; /* the alternate 3D limits */
        w = surf ? 58 : 24, h = surf ? 59 : 25, dd = surf ? 60 : 26;
        break;
    case GL_SHAPE_1D_LAYERED:
        w = surf ? 61 : 42, dd = surf ? 62 : 43;
        break;
    case GL_SHAPE_2D_LAYERED:
        w = surf ? 63 : 27, h = surf ? 64 : 28, dd = surf ? 65 : 29;
        break;
    case GL_SHAPE_CUBE:
        w = h = surf ? 66 : 52;
        break;
    default: /* cube layered */
        w = h = surf ? 67 : 53, dd = surf ? 68 : 54;
    }
    return within(dev, d->width, w) && within(dev, d->height, h) && within(dev, d->depth, dd);
}

/* CUDA_SUCCESS for a descriptor the device takes; a line for what gleam
 * does not store. */
static CUresult check(const gl_array_desc *d, const char *entry_name, int ptds)
{
    CUdevice devno;
    CUresult r;
    const gl_device_info *dev;
    int shape = gl_array_shape(d);

    if (d->format != 0 && gl_array_format_bytes(d->format) == 0 &&
        (d->channels == 1 || d->channels == 2 || d->channels == 4)) {
        gl_log(GL_LOG_ERROR, entry_name, "array format 0x%x is not supported (only 8-, 16- "
               "and 32-bit integers, half and float); returning CUDA_ERROR_NOT_SUPPORTED",
               (unsigned)d->format);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if ((d->flags & ~GL_ARRAY_KNOWN_FLAGS) != 0) {
        gl_log(GL_LOG_ERROR, entry_name, "array flags 0x%x are not supported (depth, sparse, "
               "deferred-mapping, colour-attachment and video arrays); returning "
               "CUDA_ERROR_NOT_SUPPORTED", (unsigned)d->flags);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (shape == GL_SHAPE_BAD || gl_array_elem_bytes(d->format, d->channels) == 0 ||
        ((d->flags & GL_ARRAY_TEXTURE_GATHER) && shape != GL_SHAPE_2D))
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = gli_cuCtxGetDevice(&devno, ptds)) != CUDA_SUCCESS ||
        (dev = gl_device(devno, &r)) == NULL)
        return r;
    if (!fits(dev, d, shape) || !gl_array_valid(d))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* Mints and makes an array or mipmapped array of a checked descriptor. */
static CUresult make(uint64_t *out, const gl_array_desc *d, int mipmap, int ptds)
{
    gl_array_info info = {.d = *d, .mipmap = mipmap};
    CUresult r = CUDA_SUCCESS;

    if (gl_array_serves_host()) {
        CUdeviceptr storage;
        if ((r = gls_cuMemAlloc(&storage, (size_t)gl_array_bytes(d), ptds)) != CUDA_SUCCESS)
            return r;
        info.storage = storage;
    }
    uint64_t h = 0;
    if (mipmap)
        r = glw_glMipmapCreate((CUmipmappedArray *)&h, d, sizeof *d, info.storage, ptds);
    else
        r = glw_glArrayCreate((CUarray *)&h, d, sizeof *d, info.storage, ptds);
    if (r == CUDA_SUCCESS && (r = remember(h, &info)) != CUDA_SUCCESS) {
        if (mipmap) /* nothing here would know it */
            glw_cuMipmappedArrayDestroy((CUmipmappedArray)(uintptr_t)h, ptds);
        else
            glw_cuArrayDestroy((CUarray)(uintptr_t)h, ptds);
    }
    if (r != CUDA_SUCCESS && info.storage != 0)
        gls_cuMemFree(info.storage, ptds);
    if (r == CUDA_SUCCESS)
        *out = h;
    return r;
}

static gl_array_desc from3d(const CUDA_ARRAY3D_DESCRIPTOR *a)
{
    gl_array_desc d = {.width = a->Width, .height = a->Height, .depth = a->Depth,
                       .format = (uint32_t)a->Format, .channels = a->NumChannels,
                       .flags = a->Flags};
    return d;
}

CUresult gls_cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray,
                           int ptds)
{
    if (pHandle == NULL || pAllocateArray == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    gl_array_desc d = {.width = pAllocateArray->Width, .height = pAllocateArray->Height,
                       .format = (uint32_t)pAllocateArray->Format,
                       .channels = pAllocateArray->NumChannels};
    CUresult r = check(&d, "cuArrayCreate", ptds);
    return r == CUDA_SUCCESS ? make((uint64_t *)pHandle, &d, 0, ptds) : r;
}

CUresult gls_cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray,
                             int ptds)
{
    if (pHandle == NULL || pAllocateArray == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    gl_array_desc d = from3d(pAllocateArray);
    CUresult r = check(&d, "cuArray3DCreate", ptds);
    return r == CUDA_SUCCESS ? make((uint64_t *)pHandle, &d, 0, ptds) : r;
}

CUresult gls_cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                    const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                    unsigned int numMipmapLevels, int ptds)
{
    if (pHandle == NULL || pMipmappedArrayDesc == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    gl_array_desc d = from3d(pMipmappedArrayDesc);
    /* "clamped to the range [1, 1 + floor(log2(max(width, height, depth)))]" */
    uint32_t most = gl_array_full_levels(&d);
    d.levels = numMipmapLevels < 1 ? 1 : numMipmapLevels > most ? most : numMipmapLevels;
    CUresult r = check(&d, "cuMipmappedArrayCreate", ptds);
    return r == CUDA_SUCCESS ? make((uint64_t *)pHandle, &d, 1, ptds) : r;
}

/* --------------------------------------------------------------- queries */

CUresult gls_cuArray3DGetDescriptor(CUDA_ARRAY3D_DESCRIPTOR *pArrayDescriptor, CUarray hArray,
                                    int ptds)
{
    gl_array_info a;
    (void)ptds;
    if (pArrayDescriptor == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!gl_array_find((uint64_t)(uintptr_t)hArray, 0, &a))
        return CUDA_ERROR_INVALID_HANDLE;
    *pArrayDescriptor = (CUDA_ARRAY3D_DESCRIPTOR){
        .Width = a.d.width, .Height = a.d.height, .Depth = a.d.depth,
        .Format = (CUarray_format)a.d.format, .NumChannels = a.d.channels, .Flags = a.d.flags};
    return CUDA_SUCCESS;
}

CUresult gls_cuArrayGetDescriptor(CUDA_ARRAY_DESCRIPTOR *pArrayDescriptor, CUarray hArray,
                                  int ptds)
{
    CUDA_ARRAY3D_DESCRIPTOR d;
    CUresult r = pArrayDescriptor == NULL ? CUDA_ERROR_INVALID_VALUE
                                          : gls_cuArray3DGetDescriptor(&d, hArray, ptds);
    if (r == CUDA_SUCCESS)
        *pArrayDescriptor = (CUDA_ARRAY_DESCRIPTOR){.Width = d.Width, .Height = d.Height,
                                                    .Format = d.Format,
                                                    .NumChannels = d.NumChannels};
    return r;
}

/* ----------------------------------------------------- levels and destroy */

CUresult gls_cuMipmappedArrayGetLevel(CUarray *pLevelArray, CUmipmappedArray hMipmappedArray,
                                      unsigned int level, int ptds)
{
    uint64_t m = (uint64_t)(uintptr_t)hMipmappedArray, known = 0;
    gl_array_info mip;
    CUresult r;

    if (pLevelArray == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!gl_array_find(m, 1, &mip))
        return CUDA_ERROR_INVALID_HANDLE;
    if (level >= mip.d.levels)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    gl_hslot *s = gl_htable_find(&g_arrays, m);
    if (s != NULL)
        known = ((entry *)s->val)->level[level];
    pthread_mutex_unlock(&g_lock);
    if (known != 0) {
        *pLevelArray = (CUarray)(uintptr_t)known;
        return CUDA_SUCCESS;
    }
    uint64_t h = 0;
    if ((r = glw_cuMipmappedArrayGetLevel((CUarray *)&h, hMipmappedArray, level, ptds)) !=
        CUDA_SUCCESS)
        return r;
    gl_array_info info = {.d = mip.d, .parent = m, .level = level};
    uint64_t w, hh, d;
    gl_array_level_dims(&mip.d, level, &w, &hh, &d);
    info.d.levels = 0;
    info.d.width = w;
    info.d.height = mip.d.height ? hh : 0;
    info.d.depth = mip.d.depth ? d : 0;
    if (mip.storage != 0)
        info.storage = mip.storage + gl_array_level_offset(&mip.d, level);
    if ((r = remember(h, &info)) != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_lock);
    s = gl_htable_find(&g_arrays, m);
    if (s != NULL)
        ((entry *)s->val)->level[level] = h;
    pthread_mutex_unlock(&g_lock);
    *pLevelArray = (CUarray)(uintptr_t)h;
    return CUDA_SUCCESS;
}

/* Forgets an array (and a mipmapped array's levels); 0 when it was not one
 * of the kind, or is a level (which goes with its mipmapped array). */
static int forget(uint64_t h, int mipmap, gl_array_info *out)
{
    pthread_mutex_lock(&g_lock);
    gl_hslot *s = gl_htable_find(&g_arrays, h);
    entry *e = s != NULL ? s->val : NULL;
    int ok = e != NULL && e->info.mipmap == mipmap && e->info.parent == 0;
    if (ok) {
        gl_htable_take(&g_arrays, h);
        for (uint32_t l = 0; l < GL_ARRAY_LEVELS_MAX; l++)
            if (e->level[l] != 0)
                free(gl_htable_take(&g_arrays, e->level[l]));
        *out = e->info;
        free(e);
    }
    pthread_mutex_unlock(&g_lock);
    return ok;
}

static CUresult destroy(uint64_t h, int mipmap, int ptds)
{
    gl_array_info a;
    if (!gl_array_find(h, mipmap, &a))
        return CUDA_ERROR_INVALID_HANDLE;
    if (a.parent != 0)
        return CUDA_ERROR_INVALID_VALUE; /* a level goes with its mipmapped array */
    CUresult r = mipmap ? glw_cuMipmappedArrayDestroy((CUmipmappedArray)(uintptr_t)h, ptds)
                        : glw_cuArrayDestroy((CUarray)(uintptr_t)h, ptds);
    if (r != CUDA_SUCCESS || !forget(h, mipmap, &a))
        return r;
    /* The free record follows the destroy in the stream: the server never
     * holds an array over memory it could hand out again. */
    return a.storage != 0 ? gls_cuMemFree(a.storage, ptds) : CUDA_SUCCESS;
}

CUresult gls_cuArrayDestroy(CUarray hArray, int ptds)
{
    return destroy((uint64_t)(uintptr_t)hArray, 0, ptds);
}

CUresult gls_cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray, int ptds)
{
    return destroy((uint64_t)(uintptr_t)hMipmappedArray, 1, ptds);
}
