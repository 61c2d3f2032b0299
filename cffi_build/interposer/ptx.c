/*
 * ptx.c — what the interposer must know about a module image: how long it is
 * (the API passes only a pointer) and, for PTX text, each kernel's parameter
 * layout, so that cuLaunchKernel can pack kernelParams without asking the
 * server. cubin/fatbin layouts come from the server (module.c).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "gl_launch_bounds.h"
#include "gl_linkimage.h"
#include "internal.h"

#define FATBIN_MAGIC 0xBA55ED50u

static uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)le16(p) | (uint32_t)le16(p + 2) << 16;
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* libcudart hands the driver its registration wrapper (what nvcc emits in
 * .nvFatBinSegment: magic 0x466243b1, version, the fatbin's address, ...)
 * where an image is expected; the driver reads the fatbin it points to. */
#define FATBIN_WRAPPER_MAGIC 0x466243b1u

const void *gl_image_unwrap(const void *image)
{
    if (image != NULL && le32(image) == FATBIN_WRAPPER_MAGIC) {
        const void *inner;
        memcpy(&inner, (const uint8_t *)image + 8, sizeof inner);
        return inner;
    }
    return image;
}

CUresult gl_image_size(const void *image, size_t *size, int *is_ptx)
{
    const uint8_t *p = image;
    const char *text = image;

    *is_ptx = 0;
    if (image == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (memcmp(p, "\x7f" "ELF", 4) == 0) {
        if (p[4] != 2) /* ELFCLASS64: CUDA images are never 32-bit */
            return CUDA_ERROR_INVALID_IMAGE;
        uint64_t sh = le64(p + 0x28) + (uint64_t)le16(p + 0x3C) * le16(p + 0x3A);
        uint64_t ph = le64(p + 0x20) + (uint64_t)le16(p + 0x38) * le16(p + 0x36);
        *size = (size_t)(sh > ph ? sh : ph);
        return *size >= 64 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_IMAGE;
    }
    if (le32(p) == FATBIN_MAGIC) {
        *size = (size_t)(le16(p + 6) + le64(p + 8));
        return CUDA_SUCCESS;
    }
    uint64_t linked; /* cuLinkComplete's image of several inputs (linker.c) */
    if (gl_link_image_sniff(p, GL_LINK_HEADER, &linked)) {
        *size = (size_t)linked;
        return linked >= GL_LINK_HEADER + GL_LINK_TRAILER && linked <= SIZE_MAX / 2
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_IMAGE;
    }
    if (strstr(text, ".entry") == NULL && strstr(text, ".version") == NULL)
        return CUDA_ERROR_INVALID_IMAGE;
    *size = strlen(text) + 1;
    *is_ptx = 1;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ PTX lexing */

typedef struct {
    const char *p;
} lexer;

/* Skips blanks and comments. */
static void skip(lexer *l)
{
    for (;;) {
        while (isspace((unsigned char)*l->p))
            l->p++;
        if (l->p[0] == '/' && l->p[1] == '/') {
            while (*l->p && *l->p != '\n')
                l->p++;
        } else if (l->p[0] == '/' && l->p[1] == '*') {
            const char *end = strstr(l->p + 2, "*/");
            l->p = end ? end + 2 : l->p + strlen(l->p);
        } else {
            return;
        }
    }
}

static int ident_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '$' || c == '.' || c == '%';
}

/* The next token: an identifier/directive, or one punctuation character. */
static size_t token(lexer *l, const char **start)
{
    skip(l);
    *start = l->p;
    if (*l->p == '\0')
        return 0;
    if (!ident_char(*l->p)) {
        l->p++;
        return 1;
    }
    while (ident_char(*l->p))
        l->p++;
    return (size_t)(l->p - *start);
}

static int is(const char *t, size_t n, const char *word)
{
    return n == strlen(word) && memcmp(t, word, n) == 0;
}

/* Bytes of a scalar .param type (.u8 … .f64), or 0. */
static uint32_t type_size(const char *t, size_t n)
{
    static const char *const bits[] = {"8", "16", "32", "64"};

    if (n < 3 || t[0] != '.' || strchr("usbf", t[1]) == NULL)
        return 0;
    for (uint32_t i = 0; i < 4; i++)
        if (is(t + 2, n - 2, bits[i]))
            return 1u << i;
    return 0;
}

static int push(gl_layout *l, uint32_t align, uint32_t size)
{
    uint32_t off = (l->total + align - 1) / align * align;
    uint32_t *o = realloc(l->offset, (l->count + 1) * sizeof *o);
    if (o == NULL)
        return -1;
    l->offset = o;
    uint32_t *s = realloc(l->size, (l->count + 1) * sizeof *s);
    if (s == NULL)
        return -1;
    l->size = s;
    l->offset[l->count] = off;
    l->size[l->count] = size;
    l->count++;
    l->total = off + size;
    return 0;
}

/* One `.param [.align A] .TYPE [.ptr .SPACE .align N] NAME[[N]]`. The
 * `.align` after the type belongs to .ptr (the pointee's alignment), not to
 * the parameter. */
static int param(lexer *l, gl_layout *out)
{
    const char *t;
    size_t n;
    uint32_t align = 0, elem = 0, count = 1;

    while ((n = token(l, &t)) > 0 && !is(t, n, ",") && !is(t, n, ")")) {
        if (is(t, n, ".align") && elem == 0) {
            n = token(l, &t);
            align = (uint32_t)strtoul(t, NULL, 10);
        } else if (elem == 0 && type_size(t, n) != 0) {
            elem = type_size(t, n);
        } else if (is(t, n, "[")) {
            n = token(l, &t);
            count = (uint32_t)strtoul(t, NULL, 10);
        }
    }
    l->p = t; /* leave the separator for the caller */
    if (elem == 0 || count == 0)
        return -1;
    if (align == 0 || (align & (align - 1)) != 0)
        align = elem;
    return push(out, align, elem * count);
}

/* Parses `( .param …, … )` after an entry name; an absent list is empty. */
static int params(lexer *l, gl_layout *out)
{
    const char *t;
    size_t n;
    lexer save = *l;

    memset(out, 0, sizeof *out);
    if ((n = token(l, &t)) != 1 || *t != '(') {
        *l = save;
        return 0;
    }
    for (;;) {
        n = token(l, &t);
        if (is(t, n, ")"))
            return 0;
        if (is(t, n, ","))
            continue;
        if (!is(t, n, ".param"))
            return -1;
        if (param(l, out) != 0)
            return -1;
    }
}

/* The launch bounds after an entry's parameters (.maxntid, .reqntid,
 * .maxnreg: their numbers) give its threads per block; other performance
 * directives are skipped. */
static uint32_t bounds(lexer *l)
{
    const char *t;
    size_t n;
    uint32_t bound = 0, maxnreg = 0;

    for (;;) {
        lexer save = *l;
        n = token(l, &t);
        int threads = is(t, n, ".maxntid") || is(t, n, ".reqntid"), regs = is(t, n, ".maxnreg");
        if (!threads && !regs && !is(t, n, ".minnctapersm") && !is(t, n, ".maxclusterrank")
            && !is(t, n, ".reqnctapercluster") && !is(t, n, ".explicitcluster")
            && !is(t, n, ".noreturn")) {
            *l = save;
            return gl_kernel_max_threads(bound, maxnreg);
        }
        uint64_t product = 1;
        int extents = 0;
        for (;;) {
            save = *l;
            n = token(l, &t);
            if (n == 0 || !isdigit((unsigned char)*t)) {
                *l = save;
                break;
            }
            uint64_t v = strtoull(t, NULL, 0);
            if (extents++ < 3)
                product = v > GL_BLOCK_THREADS_MAX || product * v > GL_BLOCK_THREADS_MAX
                              ? GL_BLOCK_THREADS_MAX + 1 : product * v;
            save = *l;
            if ((n = token(l, &t)) == 0 || !is(t, n, ",")) {
                *l = save;
                break;
            }
        }
        if (threads && extents > 0 && (bound == 0 || product < bound))
            bound = (uint32_t)product;
        if (regs && extents > 0)
            maxnreg = (uint32_t)product;
    }
}

/* The device runtime's heap built-ins as PTX names them (src/ptx/ptx_builtin.c):
 * a module that names one needs the device heap. */
static int heap_name(const char *t, size_t n)
{
    static const char *const names[] = {"malloc", "free", "_Znwm", "_Znam", "_ZdlPv",
                                        "_ZdaPv", "_ZdlPvm", "_ZdaPvm"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (is(t, n, names[i]))
            return 1;
    return 0;
}

int gl_ptx_entries(const char *ptx, gl_entries *out)
{
    lexer l = {ptx};
    const char *t;
    size_t n;
    int heap = 0;

    memset(out, 0, sizeof *out);
    while ((n = token(&l, &t)) > 0) {
        heap |= heap_name(t, n);
        if (!is(t, n, ".entry"))
            continue;
        if ((n = token(&l, &t)) == 0 || !ident_char(*t))
            goto fail;
        gl_entry *e = realloc(out->entries, (out->count + 1) * sizeof *e);
        if (e == NULL)
            goto fail;
        out->entries = e;
        e = &out->entries[out->count];
        e->name = strndup(t, n);
        memset(&e->layout, 0, sizeof e->layout);
        out->count++;
        if (e->name == NULL || params(&l, &e->layout) != 0)
            goto fail;
        e->layout.max_threads = bounds(&l);
    }
    for (uint32_t i = 0; i < out->count; i++)
        out->entries[i].layout.heap = heap;
    return 0;
fail:
    gl_entries_free(out);
    return -1;
}

void gl_layout_free(gl_layout *l)
{
    free(l->offset);
    free(l->size);
    memset(l, 0, sizeof *l);
}

void gl_entries_free(gl_entries *e)
{
    for (uint32_t i = 0; i < e->count; i++) {
        free(e->entries[i].name);
        gl_layout_free(&e->entries[i].layout);
    }
    free(e->entries);
    memset(e, 0, sizeof *e);
}

const gl_layout *gl_entries_find(const gl_entries *e, const char *name)
{
    for (uint32_t i = 0; e != NULL && i < e->count; i++)
        if (strcmp(e->entries[i].name, name) == 0)
            return &e->entries[i].layout;
    return NULL;
}

int gl_layout_copy(gl_layout *dst, const gl_layout *src)
{
    memset(dst, 0, sizeof *dst);
    for (uint32_t i = 0; i < src->count; i++) {
        if (push(dst, 1, 0) != 0) {
            gl_layout_free(dst);
            return -1;
        }
        dst->offset[i] = src->offset[i];
        dst->size[i] = src->size[i];
    }
    dst->total = src->total;
    dst->max_threads = src->max_threads;
    dst->heap = src->heap;
    return 0;
}
