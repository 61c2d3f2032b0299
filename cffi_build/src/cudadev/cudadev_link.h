/*
 * cudadev_link.h — the cuda backend's loading of link images (cudadev_link.c).
 */
#ifndef GLEAM_CUDADEV_LINK_H
#define GLEAM_CUDADEV_LINK_H

#include <stddef.h>

#include "exec/exec_api.h"
#include "gl_cuda.h"

/* The record's payload is only 8-byte aligned and a PTX image may lack its
 * NUL: the driver gets an aligned, terminated copy (free() it). */
void *gl_cuda_image_copy(const void *image, size_t size);

/* Loads IMAGE (a module's or a library's, the caller's choice) into *handle:
 * CUresult of the real driver's load. */
typedef CUresult (*gl_cuda_load)(void *arg, void **handle, const void *image);

/* Loads a link image through the real driver (its linker, or cudart's
 * registration of relocatable code): the load's result; *kept (nkept
 * pointers, each to free) is what the session must keep alive, or NULL. */
CUresult gl_cuda_load_linked(const gl_cuda_extra *fn, const void *image, size_t size,
                             gl_cuda_load load, void *load_arg, void **handle, void ***kept,
                             size_t *nkept);

#endif
