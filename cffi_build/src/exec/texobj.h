/*
 * texobj.h — a texture or surface object request on the server: the
 * client's gl_tex_request (include/gl_array.h), which the executor
 * (exec_arrays.c) has read into its own copy and checked (the kind, the
 * minted handle, the resource's handle or memory), with the resource's
 * backend object resolved. The backend's glTexObjectCreate slot gets it as
 * its request, checks the rest against its device's rules, and returns its
 * object in `object`, which the executor binds to the minted handle.
 */
#ifndef GLEAM_TEXOBJ_H
#define GLEAM_TEXOBJ_H

#include "gl_array.h"

typedef struct {
    gl_tex_request q;
    void *resource; /* GL_RES_ARRAY, GL_RES_MIPMAP: the backend's array or mipmapped array */
    void *object;   /* out: the backend's texture or surface object */
} gl_tex_create;

#endif /* GLEAM_TEXOBJ_H */
