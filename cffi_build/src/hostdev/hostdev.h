/*
 * hostdev.h — gleam's host backend (a software device): the objects behind a
 * session's handles. Every object of a session is on its list, so closing the
 * session frees them all whatever the client destroyed or not.
 */
#ifndef GLEAM_HOSTDEV_H
#define GLEAM_HOSTDEV_H

#include <time.h>

#include "exec/executor.h"
#include "ptx/ptx.h"

typedef struct gl_hobj {
    int kind; /* GL_H_* */
    struct gl_hobj *prev, *next;
} gl_hobj;

typedef struct {
    gl_hobj h;
    int primary;
} gl_hctx;

/* A module or library: the image, the entry names found in it, and its PTX
 * translated for the interpreter (ptx.h) when the image carries PTX. */
typedef struct {
    gl_hobj h;
    uint8_t *image;
    size_t size;
    char **names;
    size_t nnames;
    int search_bytes; /* parts of the image could not be parsed: search their bytes */
    ptx_module *ptx;  /* NULL: no PTX (a cubin, a SASS-only fatbin, an opaque image) */
    char targets[96]; /* what the image carries when it has no PTX ("sm_80,sm_90") */
    int funcs;        /* functions made from ptx: it outlives an unload until the session ends */
    int unloaded;
    int loaded;          /* its PTX was looked for (and translated when found) */
    CUresult load_error; /* what that gave, answered again to every later use */
    uint32_t max_registers; /* its link's CU_JIT_MAX_REGISTERS; 0: no limit */
} gl_hmod;

/* A function or kernel: a resolved host implementation, or a PTX kernel. */
typedef struct {
    gl_hobj h;
    gl_kernel_impl impl;
    const ptx_kernel *ptx; /* non-NULL: run by the interpreter */
    gl_hmod *mod;
    int dynamic_shared_set; /* cuFuncSetAttribute gave MAX_DYNAMIC_SHARED_SIZE_BYTES */
    int dynamic_shared;     /* ... this value (hostdev_attrs.c) */
    char name[];
} gl_hfunc;

typedef struct {
    gl_hobj h;
    int recorded;
    unsigned int flags; /* CU_EVENT_* as created */
    struct timespec t;
} gl_hevent;

typedef struct {
    gl_hobj objs; /* list head */
    gl_hctx primary;
    int primary_retains;
    gl_hctx *current;
    CUresult sticky; /* a kernel fault (700, 716, 719, 702): the context is lost */
} gl_hsess;

gl_hsess *gl_hsess_of(void);
void *gl_hobj_new(int kind, size_t size);
void gl_hobj_free(void *obj);
void gl_hobj_free_all(gl_hsess *s);

/* Image parsing (hostdev_image.c). */
int gl_himage_scan(gl_hmod *m);
/* Finds the image's PTX (text, or inside a fatbin) and translates it:
 * CUDA_SUCCESS (m->ptx may stay NULL), CUDA_ERROR_INVALID_PTX with a message
 * in err, or CUDA_ERROR_OUT_OF_MEMORY. */
CUresult gl_himage_load_ptx(gl_hmod *m, char *err, size_t err_len);
int gl_himage_has(const gl_hmod *m, const char *name);
/* A link image's inputs linked for the interpreter into m->ptx (hostdev_link.c):
 * CUDA_SUCCESS, or an error with the reason (naming the input) in err. */
CUresult gl_hlink_load(gl_hmod *m, char *err, size_t err_len);
void gl_himage_free(gl_hmod *m);

#endif /* GLEAM_HOSTDEV_H */
