/*
 * linkimage.c — writing a link image (the interposer) and checking one
 * (both backends); the layout is in gl_linkimage.h. No global state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gl_linkimage.h"

static const char head_magic[8] = {'G', 'L', 'E', 'A', 'M', 'L', 'N', 'K'};
static const char tail_magic[8] = {'G', 'L', 'E', 'A', 'M', 'E', 'N', 'D'};

#define ENTRY_SIZE 32u

static uint64_t rd(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int k = n; k-- > 0;)
        v = v << 8 | p[k];
    return v;
}

static void wr(uint8_t *p, uint64_t v, int n)
{
    for (int k = 0; k < n; k++, v >>= 8)
        p[k] = (uint8_t)v;
}

static uint64_t align8(uint64_t v)
{
    return (v + 7) & ~(uint64_t)7;
}

int gl_link_image_sniff(const uint8_t *img, size_t avail, uint64_t *size)
{
    if (img == NULL || avail < GL_LINK_HEADER)
        return 0;
    /* byte by byte: a caller may hold only a pointer to a short image (PTX text) */
    for (int k = 0; k < 8; k++)
        if (img[k] != (uint8_t)head_magic[k])
            return 0;
    *size = rd(img + 8, 8);
    return 1;
}

static int bad(char *err, size_t err_len, const char *why)
{
    if (err != NULL && err_len > 0)
        snprintf(err, err_len, "malformed link image: %s", why);
    return -1;
}

int gl_link_image_parse(const uint8_t *img, size_t n, gl_link_image *out, char *err,
                        size_t err_len)
{
    uint64_t size;
    if (!gl_link_image_sniff(img, n, &size))
        return bad(err, err_len, "no header");
    if (size > n || size < GL_LINK_HEADER + GL_LINK_TRAILER)
        return bad(err, err_len, "its size is wrong");
    const uint8_t *t = img + size - GL_LINK_TRAILER;
    if (memcmp(t + 24, tail_magic, 8) != 0)
        return bad(err, err_len, "no trailer");
    uint64_t table_off = rd(t, 8);
    uint32_t count = (uint32_t)rd(t + 8, 4), names = (uint32_t)rd(t + 12, 4);
    uint32_t nopts = (uint32_t)rd(t + 16, 4), origin = (uint32_t)rd(t + 20, 4);
    if (count == 0 || count > GL_LINK_MAX_INPUTS || nopts > GL_LINK_MAX_OPTIONS)
        return bad(err, err_len, "too many or no inputs or options");
    if (origin != GL_LINK_ORIGIN_LINKER && origin != GL_LINK_ORIGIN_RDC)
        return bad(err, err_len, "unknown origin");
    /* the table, names and options fill exactly what lies before the trailer */
    if (table_off < GL_LINK_HEADER || table_off % 8 != 0 || table_off > size
        || size - GL_LINK_TRAILER - table_off
               != (uint64_t)count * ENTRY_SIZE + names + (uint64_t)nopts * 8)
        return bad(err, err_len, "its table does not fit");
    const uint8_t *tab = img + table_off, *nm = tab + (uint64_t)count * ENTRY_SIZE;
    const uint8_t *op = nm + names;
    memset(out, 0, sizeof *out);
    out->origin = origin;
    out->ninputs = count;
    out->nopts = nopts;
    for (uint32_t k = 0; k < count; k++) {
        const uint8_t *e = tab + (uint64_t)k * ENTRY_SIZE;
        gl_link_input *in = &out->inputs[k];
        uint64_t off = rd(e + 8, 8), len = rd(e + 16, 8);
        uint32_t name_off = (uint32_t)rd(e + 24, 4), name_len = (uint32_t)rd(e + 28, 4);
        in->type = (uint32_t)rd(e, 4);
        in->flags = (uint32_t)rd(e + 4, 4);
        if (in->type > 4 || (in->flags & ~GL_LINK_MAIN) != 0)
            return bad(err, err_len, "an input of an unknown kind");
        if (off < GL_LINK_HEADER || off > table_off || len == 0 || len > table_off - off)
            return bad(err, err_len, "an input outside the image");
        if (name_len > GL_LINK_MAX_NAME || name_off > names || name_len > names - name_off)
            return bad(err, err_len, "a name outside the image");
        if (origin == GL_LINK_ORIGIN_RDC
            && (in->type != 2 || ((in->flags & GL_LINK_MAIN) != 0) != (k == 0)))
            return bad(err, err_len, "a registration's inputs are its fatbin, then its objects'");
        in->data = img + off;
        in->size = len;
        in->name = (const char *)nm + name_off;
        in->name_len = name_len;
    }
    for (uint32_t k = 0; k < nopts; k++) {
        out->opts[k][0] = (uint32_t)rd(op + 8 * k, 4);
        out->opts[k][1] = (uint32_t)rd(op + 8 * k + 4, 4);
        if (!gl_link_option_kept(out->opts[k][0]))
            return bad(err, err_len, "an option a link image does not carry");
    }
    return 0;
}

/* Binary inputs go first so that a large library keeps its offset from one
 * image to the next; PTX text, which differs every time, goes last. */
static int placed_before(const gl_link_input *a)
{
    return a->type != 1;
}

void gl_link_image_free(uint8_t *img)
{
    free(img);
}

size_t gl_link_image_build(const gl_link_input *inputs, uint32_t n, const uint32_t *opts,
                           uint32_t nopts, uint32_t origin, uint8_t **out)
{
    uint64_t data = GL_LINK_HEADER, names = 0;
    *out = NULL;
    if (n == 0 || n > GL_LINK_MAX_INPUTS || nopts > GL_LINK_MAX_OPTIONS)
        return 0;
    for (uint32_t k = 0; k < n; k++) {
        if (inputs[k].size == 0 || inputs[k].size > ((uint64_t)1 << 40)
            || inputs[k].name_len > GL_LINK_MAX_NAME)
            return 0;
        data = align8(data) + inputs[k].size;
        names += inputs[k].name_len;
    }
    uint64_t table_off = align8(data);
    uint64_t size = table_off + (uint64_t)n * ENTRY_SIZE + names + (uint64_t)nopts * 8
                    + GL_LINK_TRAILER;
    if (names > UINT32_MAX || size > SIZE_MAX)
        return 0;
    uint8_t *img = calloc(1, (size_t)size);
    if (img == NULL)
        return 0;
    memcpy(img, head_magic, 8);
    wr(img + 8, size, 8);
    uint64_t at = GL_LINK_HEADER, name_at = 0;
    uint8_t *tab = img + table_off, *nm = tab + (uint64_t)n * ENTRY_SIZE;
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t k = 0; k < n; k++) {
            const gl_link_input *in = &inputs[k];
            if (placed_before(in) != (pass == 0))
                continue;
            at = align8(at);
            memcpy(img + at, in->data, (size_t)in->size);
            uint8_t *e = tab + (uint64_t)k * ENTRY_SIZE;
            wr(e, in->type, 4);
            wr(e + 4, in->flags, 4);
            wr(e + 8, at, 8);
            wr(e + 16, in->size, 8);
            at += in->size;
        }
    for (uint32_t k = 0; k < n; k++) {
        uint8_t *e = tab + (uint64_t)k * ENTRY_SIZE;
        if (inputs[k].name_len > 0)
            memcpy(nm + name_at, inputs[k].name, inputs[k].name_len);
        wr(e + 24, name_at, 4);
        wr(e + 28, inputs[k].name_len, 4);
        name_at += inputs[k].name_len;
    }
    uint8_t *op = nm + names;
    for (uint32_t k = 0; k < nopts; k++) {
        wr(op + 8 * k, opts[2 * k], 4);
        wr(op + 8 * k + 4, opts[2 * k + 1], 4);
    }
    uint8_t *t = img + size - GL_LINK_TRAILER;
    wr(t, table_off, 8);
    wr(t + 8, n, 4);
    wr(t + 12, names, 4);
    wr(t + 16, nopts, 4);
    wr(t + 20, origin, 4);
    memcpy(t + 24, tail_magic, 8);
    *out = img;
    return (size_t)size;
}
