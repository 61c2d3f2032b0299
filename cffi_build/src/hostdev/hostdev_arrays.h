/*
 * hostdev_arrays.h — the host device's CUDA arrays and texture and surface
 * objects (hostdev_arrays.c, hostdev_textures.c). An array's bytes lie in
 * the session's memory at the storage the interposer allocated, in the
 * layout of include/gl_array.h; the objects themselves are on the session's
 * object list (hostdev.h) until the session ends, so a texture holding an
 * array, or a level holding its mipmapped array, never points at freed
 * memory: a destroyed one is marked, and every use checks the mark.
 */
#ifndef GLEAM_HOSTDEV_ARRAYS_H
#define GLEAM_HOSTDEV_ARRAYS_H

#include "gl_array.h"
#include "hostdev.h"
#include "ptx/ptx_tex.h"

typedef struct gl_harray {
    gl_hobj h;                 /* GL_H_ARRAY, or GL_H_MIPMAP for a mipmapped array */
    gl_array_desc d;           /* a level's array: that level's extents, levels 0 */
    uint64_t storage, bytes;   /* where its bytes lie in the session's memory */
    struct gl_harray *parent;  /* a level's array: its mipmapped array */
    struct gl_harray *level[GL_ARRAY_LEVELS_MAX]; /* a mipmapped array's level arrays */
    int destroyed;
} gl_harray;

typedef struct {
    gl_hobj h;        /* GL_H_TEXOBJ or GL_H_SURFOBJ */
    gl_harray *array; /* the array or mipmapped array it reads; NULL: plain memory */
    ptx_texref ref;   /* what the interpreter samples */
} gl_htex;

/* Neither it nor (for a level) its mipmapped array was destroyed. */
int gl_harray_live(const gl_harray *a);

/* The launch's resolver (ptx_tex.h): ctx is the session's gl_exec. */
const ptx_texref *gl_host_texture(void *ctx, uint64_t value, int surface);

#endif /* GLEAM_HOSTDEV_ARRAYS_H */
