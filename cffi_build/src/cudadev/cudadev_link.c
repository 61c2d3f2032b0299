/*
 * cudadev_link.c — the cuda backend loads a link image (gl_linkimage.h) with
 * the real driver, from the inputs the client kept: a linker's image goes
 * through the driver's own linker (cuLinkCreate with the options the image
 * carries, cuLinkAddData of each input in order, cuLinkComplete) and the
 * linked cubin is loaded as the program would have loaded it; an -rdc
 * registration is rebuilt as cudart's registration wrapper (version 2: the
 * registered fatbin and the NULL-terminated list of the objects' fatbins) and
 * loaded as cudart loads it, so the driver takes the linked SASS or links the
 * objects, as on the program's own machine. A link that fails leaves the
 * driver's error log as the session's note.
 *
 * Ownership: the linker's state is destroyed before returning; a
 * registration's copies are handed to the caller (*kept), who keeps them as
 * long as the session, since the driver may read them when it loads lazily.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudadev_link.h"
#include "exec/executor.h"
#include "gl_linkimage.h"

typedef CUresult (*fn_link_create)(unsigned, int *, void **, void **);
typedef CUresult (*fn_link_add)(void *, int, void *, size_t, const char *, unsigned, int *,
                                void **);
typedef CUresult (*fn_link_complete)(void *, void **, size_t *);
typedef CUresult (*fn_link_destroy)(void *);

#define LOG_BYTES 2048
#define CU_JIT_ERROR_LOG_BUFFER 5
#define CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6

void *gl_cuda_image_copy(const void *p, size_t n)
{
    uint8_t *c = aligned_alloc(64, (n + 1 + 63) / 64 * 64);
    if (c != NULL) {
        memcpy(c, p, n);
        c[n] = 0;
    }
    return c;
}

static CUresult run_linker(const gl_cuda_extra *fn, const gl_link_image *li, gl_cuda_load load,
                           void *load_arg, void **handle)
{
    if (fn->cuLinkCreate_v2 == NULL || fn->cuLinkAddData_v2 == NULL
        || fn->cuLinkComplete == NULL || fn->cuLinkDestroy == NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    char log[LOG_BYTES] = {0};
    int opts[GL_LINK_MAX_OPTIONS + 2];
    void *vals[GL_LINK_MAX_OPTIONS + 2];
    unsigned n = 0;
    for (; n < li->nopts; n++) {
        opts[n] = (int)li->opts[n][0];
        vals[n] = (void *)(uintptr_t)li->opts[n][1];
    }
    opts[n] = CU_JIT_ERROR_LOG_BUFFER;
    vals[n++] = log;
    opts[n] = CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
    vals[n++] = (void *)(uintptr_t)(sizeof log - 1);
    void *state = NULL;
    CUresult r = ((fn_link_create)fn->cuLinkCreate_v2)(n, opts, vals, &state);
    for (uint32_t k = 0; r == CUDA_SUCCESS && k < li->ninputs; k++) {
        const gl_link_input *in = &li->inputs[k];
        char name[GL_LINK_MAX_NAME + 1];
        snprintf(name, sizeof name, "%.*s", (int)in->name_len, in->name);
        void *copy = gl_cuda_image_copy(in->data, (size_t)in->size);
        if (copy == NULL) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        /* PTX with its NUL, as the driver reads text */
        size_t size = (size_t)in->size + (in->type == 1);
        r = ((fn_link_add)fn->cuLinkAddData_v2)(state, (int)in->type, copy, size, name, 0, NULL,
                                                NULL);
        free(copy);
    }
    void *cubin = NULL;
    size_t cubin_size = 0;
    if (r == CUDA_SUCCESS)
        r = ((fn_link_complete)fn->cuLinkComplete)(state, &cubin, &cubin_size);
    if (r == CUDA_SUCCESS)
        r = load(load_arg, handle, cubin); /* before destroy: the cubin is the state's */
    if (r != CUDA_SUCCESS && log[0])
        gl_exec_note(gl_exec_current(), "the driver's link failed: %.1000s", log);
    if (state != NULL)
        ((fn_link_destroy)fn->cuLinkDestroy)(state);
    return r;
}

/* cudart's __fatBinC_Wrapper_t, version 2 */
typedef struct {
    int magic;
    int version;
    const void *data;
    void **prelinked;
} registration;

static CUresult registered(const gl_link_image *li, gl_cuda_load load, void *load_arg,
                           void **handle, void ***kept, size_t *nkept)
{
    uint32_t n = li->ninputs;
    void **list = calloc((size_t)n + 2, sizeof *list); /* copies, then the wrapper */
    void **objects = calloc(n, sizeof *objects);         /* NULL-terminated */
    registration *w = calloc(1, sizeof *w);
    CUresult r = list && objects && w ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    for (uint32_t k = 0; r == CUDA_SUCCESS && k < n; k++) {
        const gl_link_input *in = &li->inputs[k];
        if ((list[k] = gl_cuda_image_copy(in->data, (size_t)in->size)) == NULL)
            r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS) {
        for (uint32_t k = 1; k < n; k++)
            objects[k - 1] = list[k];
        *w = (registration){(int)0x466243b1u, 2, list[0], objects};
        list[n] = objects;
        list[n + 1] = w;
        r = load(load_arg, handle, w);
    }
    if (r == CUDA_SUCCESS) {
        *kept = list;
        *nkept = (size_t)n + 2;
        return r;
    }
    for (uint32_t k = 0; list != NULL && k < n; k++)
        free(list[k]);
    free(list);
    free(objects);
    free(w);
    return r;
}

CUresult gl_cuda_load_linked(const gl_cuda_extra *fn, const void *image, size_t size,
                             gl_cuda_load load, void *load_arg, void **handle, void ***kept,
                             size_t *nkept)
{
    char err[200];
    gl_link_image *li = malloc(sizeof *li);
    CUresult r;
    *kept = NULL;
    *nkept = 0;
    if (li == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (gl_link_image_parse(image, size, li, err, sizeof err) != 0) {
        gl_exec_note(gl_exec_current(), "%s", err);
        r = CUDA_ERROR_INVALID_IMAGE;
    } else if (li->origin == GL_LINK_ORIGIN_RDC)
        r = registered(li, load, load_arg, handle, kept, nkept);
    else
        r = run_linker(fn, li, load, load_arg, handle);
    free(li);
    return r;
}
