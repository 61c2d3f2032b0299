/*
 * linker.c — cuLinkCreate / AddData / AddFile / Complete / Destroy, answered
 * in the interposer: the device that will run the code is the serving one,
 * so the link happens there, when the result is loaded. A link of exactly
 * one PTX, cubin or fatbin image completes to that image, unchanged (loading
 * it then does on the serving device what the driver's link would have done,
 * the JIT of its PTX included). Any other link (several inputs, or an object
 * or library) completes to a *link image* (gl_linkimage.h) that keeps every
 * input and the options the serving linker may take: the host device links
 * their PTX itself, the cuda backend runs the real driver's linker on them
 * (docs/cuda-forwarding.md, "Linking"). Errors a link can have (an undefined
 * or twice-defined name, an input the device cannot run) are therefore
 * reported by the load of the image, with the server's line on stderr. LTO
 * IR (CU_JIT_INPUT_NVVM) is refused with a line. A link with a register
 * limit (CU_JIT_MAX_REGISTERS) always completes to a link image, which
 * carries the limit to the serving linker. The other JIT options are
 * accepted and ignored; the log buffers come back empty, the wall time 0.
 *
 * Ownership: a CUlinkState is a gl_link that this file mallocs; it owns its
 * inputs' copies and the completed image, which stays valid until
 * cuLinkDestroy (as the driver's does). No global state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gl_client_gen.h"
#include "gl_linkimage.h"
#include "internal.h"

typedef struct {
    uint32_t type; /* CUjitInputType */
    uint8_t *data;
    size_t size;
    char *name;
} gl_link_part;

typedef struct {
    gl_link_part parts[GL_LINK_MAX_INPUTS];
    unsigned nparts;
    uint32_t opts[GL_LINK_MAX_OPTIONS][2]; /* what the serving linker takes */
    unsigned nopts;
    uint8_t *image; /* the completed image: the one part's data, or a link image */
    size_t size;
    int image_owned;
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

/* Keeps the options of cuLinkCreate that change the code the serving linker
 * makes (gl_link_option_kept), with their integer values. */
static void keep_options(gl_link *l, unsigned int n, const CUjit_option *options, void **values)
{
    for (unsigned int i = 0; i < n && options != NULL && values != NULL; i++)
        if (gl_link_option_kept((uint32_t)options[i]) && l->nopts < GL_LINK_MAX_OPTIONS) {
            l->opts[l->nopts][0] = (uint32_t)options[i];
            l->opts[l->nopts++][1] = (uint32_t)(uintptr_t)values[i];
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
    keep_options(l, numOptions, options, optionValues);
    answer_options(numOptions, options, optionValues);
    *stateOut = (CUlinkState)l;
    return CUDA_SUCCESS;
}

/* PTX given as a cubin is linked as PTX, on either device. gleam's NVRTC
 * wrapper (libgleam_nvrtc.so, docs/cuda-forwarding.md "NVRTC") hands a program
 * PTX where it asked NVRTC for a cubin, and the program passes it on as the
 * cubin it believes it is. A cubin is an ELF file; bytes that are not, and
 * declare a PTX .version near their start, are PTX. */
static CUjitInputType given_kind(CUjitInputType type, const void *data, size_t size)
{
    const char *text = data;
    size_t head = size < 4096 ? size : 4096;

    if (type != GL_CU_JIT_INPUT_CUBIN || size < 4 || memcmp(text, "\x7f" "ELF", 4) == 0)
        return type;
    for (size_t i = 0; i + 8 <= head; i++)
        if (memcmp(text + i, ".version", 8) == 0)
            return GL_CU_JIT_INPUT_PTX;
    return type;
}

static CUresult add(gl_link *l, CUjitInputType type, const void *data, size_t size,
                    const char *name, const char *entry)
{
    type = given_kind(type, data, size);
    if ((unsigned)type > GL_CU_JIT_INPUT_LIBRARY) {
        gl_log(GL_LOG_ERROR, entry, "%s: input kind %d (%s) is not supported; gleam links "
               "PTX, cubin, fatbin, object and library inputs (not LTO IR)", entry, type, name);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (l->image != NULL)
        return CUDA_ERROR_INVALID_VALUE; /* completed already */
    if (l->nparts == GL_LINK_MAX_INPUTS) {
        gl_log(GL_LOG_ERROR, entry, "%s: more than %d inputs to one link", entry,
               GL_LINK_MAX_INPUTS);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (type == GL_CU_JIT_INPUT_PTX) /* the text, without what follows its NUL */
        size = strnlen((const char *)data, size);
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    gl_link_part *p = &l->parts[l->nparts];
    p->data = malloc(size + 1);
    p->name = strndup(name, GL_LINK_MAX_NAME);
    if (p->data == NULL || p->name == NULL) {
        free(p->data);
        free(p->name);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memcpy(p->data, data, size);
    p->data[size] = 0;
    p->size = size;
    p->type = (uint32_t)type;
    l->nparts++;
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
    return add((gl_link *)state, type, data, size, name != NULL ? name : "", "cuLinkAddData");
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
        r = add((gl_link *)state, type, buf, len, path, "cuLinkAddFile");
    }
    free(buf);
    return r;
}

/* CU_JIT_MAX_REGISTERS with a limit: the serving linker must see it, since
 * it changes the code (and what cuFuncGetAttribute(NUM_REGS) answers). */
static int limits_registers(const gl_link *l)
{
    for (unsigned k = 0; k < l->nopts; k++)
        if (l->opts[k][0] == GL_CU_JIT_MAX_REGISTERS && l->opts[k][1] != 0)
            return 1;
    return 0;
}

/* One PTX, cubin or fatbin image, without a register limit, is its own link;
 * anything else is kept whole, with its options, for the serving device's
 * linker. */
static int links_to_itself(const gl_link *l)
{
    return l->nparts == 1 && l->parts[0].type <= GL_CU_JIT_INPUT_FATBINARY
           && !limits_registers(l);
}

CUresult gli_cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut, int ptds)
{
    gl_link *l = (gl_link *)state;

    (void)ptds;
    if (l == NULL || cubinOut == NULL || sizeOut == NULL || l->nparts == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (l->image == NULL && links_to_itself(l)) {
        l->image = l->parts[0].data;
        /* PTX: the text and its NUL, as the driver's loaders read it */
        l->size = l->parts[0].size + (l->parts[0].type == GL_CU_JIT_INPUT_PTX);
    } else if (l->image == NULL) {
        gl_link_input in[GL_LINK_MAX_INPUTS];
        for (unsigned k = 0; k < l->nparts; k++)
            in[k] = (gl_link_input){l->parts[k].type, 0, l->parts[k].data, l->parts[k].size,
                                    l->parts[k].name, (uint32_t)strlen(l->parts[k].name)};
        l->size = gl_link_image_build(in, l->nparts, &l->opts[0][0], l->nopts,
                                      GL_LINK_ORIGIN_LINKER, &l->image);
        if (l->size == 0)
            return CUDA_ERROR_OUT_OF_MEMORY;
        l->image_owned = 1;
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
    if (l->image_owned)
        free(l->image);
    for (unsigned k = 0; k < l->nparts; k++) {
        free(l->parts[k].data);
        free(l->parts[k].name);
    }
    free(l);
    return CUDA_SUCCESS;
}
