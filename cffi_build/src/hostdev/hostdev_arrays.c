/*
 * hostdev_arrays.c — the host device's CUDA arrays: creation over the
 * storage the client allocated (the executor checked that it is session
 * memory of the layout's size), mipmap levels as arrays of their own over a
 * part of that storage, and the copies of the glMemcpy*A* rows: HEIGHT rows
 * of WIDTH bytes of one slice. Each copy checks its rows against the array's
 * extents here; the device side's span was checked by the dispatch.
 */
#include <string.h>

#include "hostdev_arrays.h"

int gl_harray_live(const gl_harray *a)
{
    return !a->destroyed && (a->parent == NULL || !a->parent->destroyed);
}

static CUresult make(void **out, int kind, const void *desc, CUdeviceptr storage)
{
    if (storage == 0)
        return CUDA_ERROR_INVALID_VALUE; /* the host device keeps arrays in session memory */
    gl_harray *a = gl_hobj_new(kind, sizeof *a);
    if (a == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(&a->d, desc, sizeof a->d);
    a->storage = storage;
    a->bytes = gl_array_bytes(&a->d);
    *out = a;
    return CUDA_SUCCESS;
}

CUresult hb_glArrayCreate(CUarray *array, const void *desc, size_t n, CUdeviceptr storage)
{
    (void)n;
    return make((void **)array, GL_H_ARRAY, desc, storage);
}

CUresult hb_glMipmapCreate(CUmipmappedArray *mipmap, const void *desc, size_t n,
                           CUdeviceptr storage)
{
    (void)n;
    return make((void **)mipmap, GL_H_MIPMAP, desc, storage);
}

/* A level's array is one of the mipmapped array's: destroying it alone is
 * refused (it goes with its mipmapped array). */
CUresult hb_cuArrayDestroy(CUarray hArray)
{
    gl_harray *a = (gl_harray *)hArray;
    if (a->parent != NULL || a->destroyed)
        return CUDA_ERROR_INVALID_VALUE;
    a->destroyed = 1;
    return CUDA_SUCCESS;
}

CUresult hb_cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    ((gl_harray *)hMipmappedArray)->destroyed = 1;
    return CUDA_SUCCESS;
}

CUresult hb_cuMipmappedArrayGetLevel(CUarray *pLevelArray, CUmipmappedArray hMipmappedArray,
                                     unsigned int level)
{
    gl_harray *m = (gl_harray *)hMipmappedArray;
    if (!gl_harray_live(m))
        return CUDA_ERROR_INVALID_HANDLE;
    if (level >= m->d.levels)
        return CUDA_ERROR_INVALID_VALUE;
    if (m->level[level] == NULL) {
        gl_harray *a = gl_hobj_new(GL_H_ARRAY, sizeof *a);
        if (a == NULL)
            return CUDA_ERROR_OUT_OF_MEMORY;
        uint64_t w, h, d;
        gl_array_level_dims(&m->d, level, &w, &h, &d);
        a->d = m->d;
        a->d.levels = 0;
        a->d.width = w;
        a->d.height = m->d.height ? h : 0;
        a->d.depth = m->d.depth ? d : 0;
        a->storage = m->storage + gl_array_level_offset(&m->d, level);
        a->bytes = gl_array_bytes(&a->d);
        a->parent = m;
        m->level[level] = a;
    }
    *pLevelArray = (CUarray)m->level[level];
    return CUDA_SUCCESS;
}

/* The first of HEIGHT rows of WIDTH bytes from byte X of row Y of slice (or
 * layer) Z, and the bytes between rows; INVALID_VALUE when they leave it. */
static CUresult rows_of(CUarray array, size_t x, size_t y, size_t z, size_t width,
                        size_t height, uint8_t **first, uint64_t *pitch)
{
    gl_harray *a = (gl_harray *)array;
    uint64_t w, h, d;
    if (!gl_harray_live(a))
        return CUDA_ERROR_INVALID_HANDLE;
    gl_array_level_dims(&a->d, 0, &w, &h, &d);
    uint64_t row = w * gl_array_elem_bytes(a->d.format, a->d.channels);
    if (x > row || width > row - x || y > h || height > h - y || z >= d)
        return CUDA_ERROR_INVALID_VALUE;
    *first = (uint8_t *)(uintptr_t)(a->storage + z * row * h + y * row + x);
    *pitch = row;
    return CUDA_SUCCESS;
}

/* One side of a slice copy: an array's rows from (x, y, z), or memory rows
 * (mem, pitch) the dispatch checked. */
typedef struct {
    CUarray array;
    size_t x, y, z;
    uint8_t *mem;
    uint64_t pitch;
} rows;

/* HEIGHT rows of WIDTH bytes, each side's rows its pitch apart. */
static CUresult copy(rows d, rows s, size_t width, size_t height)
{
    CUresult r = CUDA_SUCCESS;
    if (d.array != NULL)
        r = rows_of(d.array, d.x, d.y, d.z, width, height, &d.mem, &d.pitch);
    if (r == CUDA_SUCCESS && s.array != NULL)
        r = rows_of(s.array, s.x, s.y, s.z, width, height, &s.mem, &s.pitch);
    for (size_t k = 0; r == CUDA_SUCCESS && k < height; k++)
        memmove(d.mem + k * d.pitch, s.mem + k * s.pitch, width);
    return r;
}

#define ARRAY_ROWS(a, x_, y_, z_) ((rows){.array = (a), .x = (x_), .y = (y_), .z = (z_)})
#define MEMORY_ROWS(p, pitch_) ((rows){.mem = (uint8_t *)(uintptr_t)(p), .pitch = (pitch_)})

CUresult hb_glMemcpyHtoA(CUarray dst, size_t xbytes, size_t y, size_t z, const void *src,
                         size_t width, size_t height, CUstream stream)
{
    (void)stream;
    return copy(ARRAY_ROWS(dst, xbytes, y, z), MEMORY_ROWS(src, width), width, height);
}

CUresult hb_glMemcpyAtoH(void *dst, CUarray src, size_t xbytes, size_t y, size_t z, size_t width,
                         size_t height, CUstream stream)
{
    (void)stream;
    return copy(MEMORY_ROWS(dst, width), ARRAY_ROWS(src, xbytes, y, z), width, height);
}

CUresult hb_glMemcpyDtoA(CUarray dst, size_t xbytes, size_t y, size_t z, CUdeviceptr src,
                         size_t spitch, size_t width, size_t height, CUstream stream)
{
    (void)stream;
    return copy(ARRAY_ROWS(dst, xbytes, y, z), MEMORY_ROWS(src, spitch), width, height);
}

CUresult hb_glMemcpyAtoD(CUdeviceptr dst, size_t dpitch, CUarray src, size_t xbytes, size_t y,
                         size_t z, size_t width, size_t height, CUstream stream)
{
    (void)stream;
    return copy(MEMORY_ROWS(dst, dpitch), ARRAY_ROWS(src, xbytes, y, z), width, height);
}

CUresult hb_glMemcpyAtoA(CUarray dst, size_t dx, size_t dy, size_t dz, CUarray src, size_t sx,
                         size_t sy, size_t sz, size_t width, size_t height, CUstream stream)
{
    (void)stream;
    return copy(ARRAY_ROWS(dst, dx, dy, dz), ARRAY_ROWS(src, sx, sy, sz), width, height);
}
