/*
 * rdcimage.c — a program built with relocatable device code (nvcc -rdc=true)
 * registers its device code as one fatbin, the build's own device link
 * (nvlink's output: SASS for the build's targets, empty for a PTX-only
 * build), and beside it the fatbins of every object that link took, each
 * with the object's PTX when the build kept any: cudart hands the driver its
 * registration wrapper in version 2, whose fourth field is that
 * NULL-terminated list (fatbinary_section.h, crt/link.stub). NVIDIA's driver
 * uses the linked SASS when it fits the device and otherwise links the
 * objects itself. The interposer cannot know which the serving device needs,
 * so such a registration becomes a link image (gl_linkimage.h, origin RDC:
 * the registered fatbin first, then the objects'); the host device links the
 * objects' PTX, the cuda backend gives the real driver the same registration
 * (docs/cuda-forwarding.md, "Linking").
 *
 * Ownership: the image is malloc'd for the caller, who frees it once sent.
 * The registration's memory is the program's and only read.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gl_linkimage.h"
#include "internal.h"

#define WRAPPER_MAGIC 0x466243b1u
#define FATBIN_MAGIC 0xBA55ED50u

/* __fatBinC_Wrapper_t */
typedef struct {
    int magic;
    int version;
    const unsigned long long *data;
    void *filename_or_fatbins; /* version 2: the objects' fatbins, NULL-terminated */
} wrapper;

/* The bytes of the fatbin container at P (header and entries). */
static size_t fatbin_size(const uint8_t *p)
{
    uint32_t magic;
    uint16_t hsize;
    uint64_t fsize;
    memcpy(&magic, p, 4);
    memcpy(&hsize, p + 6, 2);
    memcpy(&fsize, p + 8, 8);
    return magic == FATBIN_MAGIC && fsize < ((uint64_t)1 << 32) ? hsize + (size_t)fsize : 0;
}

CUresult gl_rdc_image(const void *registration, uint8_t **image, size_t *size)
{
    const wrapper *w = registration;
    if (w == NULL || (uint32_t)w->magic != WRAPPER_MAGIC || w->version != 2
        || w->filename_or_fatbins == NULL || w->data == NULL)
        return CUDA_ERROR_NOT_FOUND;
    void *const *objects = w->filename_or_fatbins;
    if (objects[0] == NULL)
        return CUDA_ERROR_NOT_FOUND; /* nothing beside the registered fatbin */
    const uint8_t *fbs[GL_LINK_MAX_INPUTS];
    uint32_t n = 0;
    fbs[n++] = (const uint8_t *)w->data;
    for (size_t k = 0; objects[k] != NULL; k++) {
        if (n == GL_LINK_MAX_INPUTS) {
            gl_log(GL_LOG_ERROR, "cuLibraryLoadData", "a registration of more than %d objects of "
                   "relocatable device code is not supported", GL_LINK_MAX_INPUTS - 1);
            return CUDA_ERROR_NOT_SUPPORTED;
        }
        fbs[n++] = objects[k];
    }
    gl_link_input in[GL_LINK_MAX_INPUTS];
    char names[GL_LINK_MAX_INPUTS][24];
    for (uint32_t k = 0; k < n; k++) {
        size_t len = fatbin_size(fbs[k]);
        if (len == 0)
            return CUDA_ERROR_INVALID_IMAGE;
        int nl = k == 0 ? snprintf(names[k], sizeof names[k], "the linked fatbin")
                        : snprintf(names[k], sizeof names[k], "object %u", k);
        in[k] = (gl_link_input){2 /* fatbin */, k == 0 ? GL_LINK_MAIN : 0, fbs[k], len, names[k],
                                (uint32_t)nl};
    }
    *size = gl_link_image_build(in, n, NULL, 0, GL_LINK_ORIGIN_RDC, image);
    return *size > 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
