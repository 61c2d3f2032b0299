/*
 * hostdev_image.c — which kernel entries a module image holds, without
 * running any of it: PTX text (`.entry NAME`), an ELF cubin (STT_FUNC symbols
 * of .symtab) or a fatbin (its ELF members parsed; PTX or compressed members
 * make lookups fall back to a search for the NUL-terminated name). The image
 * is untrusted: every offset is checked against its size.
 * gl_himage_load_ptx then translates the image's PTX (the text itself, or the
 * newest PTX entry of a fatbin, decompressed by fatbin.c) for the interpreter,
 * once per load; the module owns the result and its variables' storage.
 */
#define _GNU_SOURCE /* memmem */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <stdio.h>

#include "image/fatbin.h"
#include "gl_linkimage.h"
#include "hostdev.h"

#define FATBIN_MAGIC 0xBA55ED50u
#define FATBIN_KIND_PTX 1
#define FATBIN_KIND_ELF 2
#define FATBIN_COMPRESSED 0x2000u
#define MAX_NAMES 65536

static uint64_t rd(const uint8_t *p, int n)
{
    uint64_t v = 0;
    memcpy(&v, p, (size_t)n); /* little-endian, as the images are */
    return v;
}

static int add_name(gl_hmod *m, const char *s, size_t n)
{
    if (n == 0 || m->nnames >= MAX_NAMES)
        return 0;
    char **nn = realloc(m->names, (m->nnames + 1) * sizeof *nn);
    if (nn == NULL)
        return -1;
    m->names = nn;
    char *c = malloc(n + 1);
    if (c == NULL)
        return -1;
    memcpy(c, s, n);
    c[n] = 0;
    m->names[m->nnames++] = c;
    return 0;
}

static int ident(int c)
{
    return isalnum(c) || c == '_' || c == '$' || c == '.';
}

static int scan_ptx(gl_hmod *m, const uint8_t *p, size_t n)
{
    static const char kw[] = ".entry";
    for (size_t i = 0; i + sizeof kw - 1 < n; i++) {
        if (memcmp(p + i, kw, sizeof kw - 1) != 0 || (i > 0 && ident(p[i - 1])))
            continue;
        size_t j = i + sizeof kw - 1;
        if (j >= n || !isspace(p[j]))
            continue;
        while (j < n && isspace(p[j]))
            j++;
        size_t k = j;
        while (k < n && ident(p[k]))
            k++;
        if (add_name(m, (const char *)p + j, k - j) != 0)
            return -1;
        i = k;
    }
    return 0;
}

/* ELF64 little-endian: section headers, then .symtab with its linked strtab. */
static int scan_elf(gl_hmod *m, const uint8_t *p, size_t n)
{
    if (n < 64 || p[4] != 2 || p[5] != 1)
        return 1; /* not ELF64 LE: let the caller search the bytes */
    uint64_t shoff = rd(p + 0x28, 8);
    uint64_t shentsize = rd(p + 0x3A, 2), shnum = rd(p + 0x3C, 2);
    if (shentsize < 64 || shoff > n || shnum > (n - shoff) / shentsize)
        return 1;
    for (uint64_t s = 0; s < shnum; s++) {
        const uint8_t *sh = p + shoff + s * shentsize;
        if (rd(sh + 4, 4) != 2) /* SHT_SYMTAB */
            continue;
        uint64_t off = rd(sh + 0x18, 8), size = rd(sh + 0x20, 8), link = rd(sh + 0x28, 4);
        uint64_t entsize = rd(sh + 0x38, 8);
        if (link >= shnum || entsize < 24 || off > n || size > n - off)
            return 1;
        const uint8_t *str = p + shoff + link * shentsize;
        uint64_t stroff = rd(str + 0x18, 8), strsize = rd(str + 0x20, 8);
        if (stroff > n || strsize > n - stroff)
            return 1;
        for (uint64_t e = 0; e + entsize <= size; e += entsize) {
            const uint8_t *sym = p + off + e;
            uint64_t name = rd(sym, 4);
            if ((sym[4] & 0xf) != 2 || name >= strsize) /* STT_FUNC */
                continue;
            const char *s0 = (const char *)p + stroff + name;
            size_t len = strnlen(s0, strsize - name);
            if (len < strsize - name && add_name(m, s0, len) != 0)
                return -1;
        }
    }
    return 0;
}

static int scan_fatbin(gl_hmod *m, const uint8_t *p, size_t n)
{
    if (n < 16)
        return 1;
    uint64_t hsize = rd(p + 6, 2), fsize = rd(p + 8, 8);
    if (hsize < 16 || hsize > n || fsize > n - hsize)
        return 1;
    size_t off = hsize, end = hsize + fsize;
    while (off + 64 <= end) {
        const uint8_t *e = p + off;
        uint64_t kind = rd(e, 2), ehsize = rd(e + 4, 4), psize = rd(e + 8, 8);
        uint64_t flags = rd(e + 0x28, 8);
        if (ehsize < 64 || ehsize > end - off || psize > end - off - ehsize)
            return 1;
        const uint8_t *payload = e + ehsize;
        if (flags & FATBIN_COMPRESSED)
            m->search_bytes = 1;
        else if (kind == FATBIN_KIND_ELF) {
            int rc = scan_elf(m, payload, psize);
            if (rc < 0)
                return rc;
            m->search_bytes |= rc;
        } else if (kind == FATBIN_KIND_PTX) {
            if (scan_ptx(m, payload, psize) != 0)
                return -1;
        } else
            m->search_bytes = 1;
        off += ehsize + psize;
    }
    return 0;
}

int gl_himage_scan(gl_hmod *m)
{
    const uint8_t *p = m->image;
    size_t n = m->size;
    uint64_t linked;
    int rc;
    if (gl_link_image_sniff(p, n, &linked))
        return 0; /* its entries are the linked module's (gl_hlink_load) */
    if (n >= 4 && memcmp(p, "\177ELF", 4) == 0)
        rc = scan_elf(m, p, n);
    else if (n >= 4 && rd(p, 4) == FATBIN_MAGIC)
        rc = scan_fatbin(m, p, n);
    else
        rc = scan_ptx(m, p, n);
    if (rc > 0)
        m->search_bytes = 1;
    return rc < 0 ? -1 : 0;
}

int gl_himage_has(const gl_hmod *m, const char *name)
{
    if (m->ptx != NULL && ptx_module_kernel(m->ptx, name) != NULL)
        return 1;
    for (size_t i = 0; i < m->nnames; i++)
        if (strcmp(m->names[i], name) == 0)
            return 1;
    if (!m->search_bytes)
        return 0;
    /* The name as a whole NUL-terminated string somewhere in the bytes. */
    size_t len = strlen(name) + 1;
    const uint8_t *p = m->image, *end = m->image + m->size;
    while (len > 1 && (size_t)(end - p) >= len) {
        const uint8_t *hit = memmem(p, (size_t)(end - p), name, len);
        if (hit == NULL)
            return 0;
        if (hit == m->image || hit[-1] == 0 || !ident(hit[-1]))
            return 1;
        p = hit + 1;
    }
    return 0;
}

/* Text that claims to be PTX: anything else (a stand-in image) stays opaque. */
static int looks_like_ptx(const uint8_t *p, size_t n)
{
    return memmem(p, n, ".entry", 6) != NULL || memmem(p, n, ".version", 8) != NULL
           || memmem(p, n, ".func", 5) != NULL;
}

CUresult gl_himage_load_ptx(gl_hmod *m, char *err, size_t err_len)
{
    const uint8_t *p = m->image;
    size_t n = m->size;
    uint8_t *text = NULL;
    size_t len = 0;
    uint64_t linked;
    err[0] = 0;
    if (gl_link_image_sniff(p, n, &linked))
        return gl_hlink_load(m, err, err_len);
    if (n >= 4 && memcmp(p, "\177ELF", 4) == 0) {
        uint32_t flags = n >= 0x34 ? (uint32_t)rd(p + 0x30, 4) : 0;
        if ((flags & 0xff) >= 10)
            snprintf(m->targets, sizeof m->targets, "sm_%u (a cubin)", flags & 0xff);
        else
            snprintf(m->targets, sizeof m->targets, "a cubin");
        return CUDA_SUCCESS;
    }
    if (n >= 4 && rd(p, 4) == FATBIN_MAGIC) {
        int rc = gl_fatbin_ptx(p, n, &text, &len, m->targets, sizeof m->targets);
        if (rc == 0)
            return CUDA_SUCCESS; /* SASS only: entries need a host implementation */
        if (rc < 0) {
            snprintf(err, err_len, "the fatbin's PTX cannot be read: %s", gl_fatbin_strerror(rc));
            if (rc == GL_FATBIN_NOMEM)
                return CUDA_ERROR_OUT_OF_MEMORY;
            /* host implementations may still serve it: warn, do not refuse */
            gl_exec_note(NULL, "%s", err);
            err[0] = 0;
            return CUDA_SUCCESS;
        }
    } else if (!looks_like_ptx(p, n)) {
        return CUDA_SUCCESS;
    }
    const char *src = text != NULL ? (const char *)text : (const char *)p;
    size_t srclen = text != NULL ? len : n;
    int rc = ptx_module_load(src, srclen, &m->ptx, err, err_len);
    free(text);
    if (rc != 0) {
        m->ptx = NULL;
        return CUDA_ERROR_INVALID_PTX;
    }
    return CUDA_SUCCESS;
}

void gl_himage_free(gl_hmod *m)
{
    for (size_t i = 0; i < m->nnames; i++)
        free(m->names[i]);
    free(m->names);
    free(m->image);
    m->names = NULL;
    m->nnames = 0;
    m->image = NULL;
    if (m->ptx != NULL) {
        gl_exec *x = gl_exec_current();
        if (x != NULL && !m->unloaded)
            gl_exec_drop_globals(x, m);
        ptx_module_free(m->ptx);
        m->ptx = NULL;
    }
}
