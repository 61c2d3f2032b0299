/*
 * linker.c — cuLinkCreate / AddData / AddFile / Complete / Destroy, answered
 * in the interposer. A link of exactly one image (PTX, cubin or fatbin)
 * completes to that image, unchanged: loading it (cuModuleLoadData,
 * cuLibraryLoadData) then does on the serving device what the driver's link
 * would have done, the JIT of its PTX included, on either backend. numba-cuda
 * links this way when nvJitLink is absent (cuda.core falls back to cuLink*):
 * one PTX module per kernel. Linking two or more images needs a real linker
 * and is CUDA_ERROR_NOT_SUPPORTED with one stderr line that says so. JIT
 * options are accepted and ignored, except the outputs they ask for: the
 * log buffers come back empty and the wall time as 0.
 *
 * Ownership: a CUlinkState is a gl_link that this file mallocs; it owns its
 * input copy and the completed image, which stays valid until cuLinkDestroy
 * (as the driver's does). No global state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gl_client_gen.h"
#include "internal.h"

typedef struct {
    unsigned inputs;  /* images added so far */
    CUjitInputType type;
    uint8_t *image;   /* the first input; NUL-terminated when PTX */
    size_t size;
} gl_link;

/* Writes what the driver would write into its output options. */
static void answer_options(unsigned int n, const CUjit_option *options, void **values)
{
    if (n == 0 || options == NULL || values == NULL)
        return;
    for (unsigned int i = 0; i < n; i++) {
        switch (options[i]) {
        case GL_CU_JIT_WALL_TIME: {
            float zero = 0.0f;
            memcpy(&values[i], &zero, sizeof zero);
            break;
        }
        case GL_CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
        case GL_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: {
            /* IN: the buffer's size; OUT: how much of it was filled */
            uintptr_t cap = (uintptr_t)values[i];
            char *buf = NULL;
            CUjit_option want = options[i] == GL_CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES
                                    ? GL_CU_JIT_INFO_LOG_BUFFER
                                    : GL_CU_JIT_ERROR_LOG_BUFFER;
            for (unsigned int j = 0; j < n; j++)
                if (options[j] == want)
                    buf = values[j];
            if (buf != NULL && cap > 0)
                buf[0] = 0;
            values[i] = (void *)(uintptr_t)0;
            break;
        }
        default:
            break;
        }
    }
}

CUresult gli_cuLinkCreate(unsigned int numOptions, CUjit_option *options, void **optionValues,
                          CUlinkState *stateOut, int ptds)
{
    (void)ptds;
    if (stateOut == NULL || (numOptions > 0 && (options == NULL || optionValues == NULL)))
        return CUDA_ERROR_INVALID_VALUE;
    gl_link *l = calloc(1, sizeof *l);
    if (l == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    answer_options(numOptions, options, optionValues);
    *stateOut = (CUlinkState)l;
    return CUDA_SUCCESS;
}

static CUresult add(gl_link *l, CUjitInputType type, const void *data, size_t size,
                    const char *name)
{
    if (type != GL_CU_JIT_INPUT_PTX && type != GL_CU_JIT_INPUT_CUBIN
        && type != GL_CU_JIT_INPUT_FATBINARY) {
        gl_log(GL_LOG_ERROR, "cuLinkAddData", "cuLinkAdd%s: input kind %d (%s) is not "
               "supported; gleam links one PTX, cubin or fatbin image", name ? "Data" : "File",
               type, name ? name : "?");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (l->inputs > 0) {
        l->inputs++; /* refused at cuLinkComplete, which can say why */
        return CUDA_SUCCESS;
    }
    l->image = malloc(size + 1);
    if (l->image == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(l->image, data, size);
    l->image[size] = 0;
    l->inputs = 1;
    l->type = type;
    l->size = size;
    if (type == GL_CU_JIT_INPUT_PTX)
        l->size = strlen((const char *)l->image) + 1; /* the text and its NUL */
    return CUDA_SUCCESS;
}

CUresult gli_cuLinkAddData(CUlinkState state, CUjitInputType type, void *data, size_t size,
                           const char *name, unsigned int numOptions, CUjit_option *options,
                           void **optionValues, int ptds)
{
    (void)ptds;
    if (state == NULL || data == NULL || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    answer_options(numOptions, options, optionValues);
    return add((gl_link *)state, type, data, size, name != NULL ? name : "");
}

CUresult gli_cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path,
                           unsigned int numOptions, CUjit_option *options, void **optionValues,
                           int ptds)
{
    (void)ptds;
    if (state == NULL || path == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return CUDA_ERROR_FILE_NOT_FOUND;
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            uint8_t *grown = realloc(buf, cap = cap ? cap * 2 : 1 << 16);
            if (grown == NULL) {
                free(buf);
                fclose(f);
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
            buf = grown;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    int failed = ferror(f);
    fclose(f);
    CUresult r = CUDA_ERROR_FILE_NOT_FOUND;
    if (!failed && len > 0) {
        answer_options(numOptions, options, optionValues);
        r = add((gl_link *)state, type, buf, len, NULL);
    }
    free(buf);
    return r;
}

CUresult gli_cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut, int ptds)
{
    gl_link *l = (gl_link *)state;

    (void)ptds;
    if (l == NULL || cubinOut == NULL || sizeOut == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (l->inputs == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (l->inputs > 1) {
        gl_log(GL_LOG_ERROR, "cuLinkComplete", "cuLinkComplete: linking %u images is not "
               "supported; gleam links one PTX, cubin or fatbin image", l->inputs);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    *cubinOut = l->image;
    *sizeOut = l->size;
    return CUDA_SUCCESS;
}

CUresult gli_cuLinkDestroy(CUlinkState state, int ptds)
{
    gl_link *l = (gl_link *)state;

    (void)ptds;
    if (l == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    free(l->image);
    free(l);
    return CUDA_SUCCESS;
}
