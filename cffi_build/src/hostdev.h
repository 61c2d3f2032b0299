/*
 * hostdev.h — gleam's host backend (a software device): the objects behind a
 * session's handles. Every object of a session is on its list, so closing the
 * session frees them all whatever the client destroyed or not.
 */
#ifndef GLEAM_HOSTDEV_H
#define GLEAM_HOSTDEV_H

#include <time.h>

#include "executor.h"

typedef struct gl_hobj {
    int kind; /* GL_H_* */
    struct gl_hobj *prev, *next;
} gl_hobj;

typedef struct {
    gl_hobj h;
    int primary;
} gl_hctx;

/* A module or library: the image and the entry names found in it. */
typedef struct {
    gl_hobj h;
    uint8_t *image;
    size_t size;
    char **names;
    size_t nnames;
    int search_bytes; /* parts of the image could not be parsed: search their bytes */
} gl_hmod;

/* A function or kernel: a resolved host implementation. */
typedef struct {
    gl_hobj h;
    gl_kernel_impl impl;
    char name[];
} gl_hfunc;

typedef struct {
    gl_hobj h;
    int recorded;
    struct timespec t;
} gl_hevent;

typedef struct {
    gl_hobj objs; /* list head */
    gl_hctx primary;
    int primary_retains;
    gl_hctx *current;
} gl_hsess;

gl_hsess *gl_hsess_of(void);
void *gl_hobj_new(int kind, size_t size);
void gl_hobj_free(void *obj);
void gl_hobj_free_all(gl_hsess *s);

/* Image parsing (hostdev_image.c). */
int gl_himage_scan(gl_hmod *m);
int gl_himage_has(const gl_hmod *m, const char *name);
void gl_himage_free(gl_hmod *m);

#endif /* GLEAM_HOSTDEV_H */
