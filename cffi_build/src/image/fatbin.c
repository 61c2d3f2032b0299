/*
 * fatbin.c — find and decompress the PTX entry of an nvcc fatbin.
 *
 * The image comes from the network: every offset and size is checked
 * against the bytes actually there, and decompression is capped at the size
 * the entry declares (itself capped at GL_FATBIN_MAX_OUT). Layout, flags and
 * how they were found: docs/fatbin.md.
 *
 * Global state: the libzstd handle and its two symbols, resolved once under
 * pthread_once and kept for the life of the process.
 */
#include "fatbin.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEADER_SIZE 16
#define ENTRY_MIN 64
#define KIND_PTX 1
#define KIND_ELF 2
#define FLAG_LZ4 0x2000u  /* nvcc <= 12.x default, nvcc 13 --compress-mode=speed */
#define FLAG_ZSTD 0x8000u /* nvcc 13 default, size and balance modes */
#define FLAG_ARCH_SPECIFIC 0x100000u /* sm_90a, compute_100a */
#define FLAG_FAMILY 0x200000u        /* sm_100f, compute_100f (CUDA 12.9+) */

static uint64_t rd(const uint8_t *p, int n)
{
    uint64_t v = 0;
    memcpy(&v, p, (size_t)n); /* little-endian, as the images are */
    return v;
}

/* One container's extent at p, or 0 when p[0, n) does not hold a whole one. */
static size_t container_size(const uint8_t *p, size_t n)
{
    if (n < HEADER_SIZE || rd(p, 4) != GL_FATBIN_MAGIC)
        return 0;
    uint64_t hsize = rd(p + 6, 2), fsize = rd(p + 8, 8);
    if (hsize < HEADER_SIZE || hsize > n || fsize > n - hsize)
        return 0;
    return (size_t)(hsize + fsize);
}

size_t gl_fatbin_size(const uint8_t *img, size_t n)
{
    return container_size(img, n);
}

/* Adds an LZ4 length's extension bytes at src[*ip] (a 255 says another
 * follows) to *len; -1 when the input ends first or *len passes CAP (which
 * also keeps it from wrapping). */
static int lz4_extend(const uint8_t *src, size_t n, size_t *ip, size_t *len, size_t cap)
{
    unsigned b;
    do {
        if (*ip >= n)
            return -1;
        b = src[(*ip)++];
        *len += b;
        if (*len > cap)
            return -1;
    } while (b == 255);
    return 0;
}

long gl_fatbin_lz4(const uint8_t *src, size_t n, uint8_t *dst, size_t cap)
{
    size_t ip = 0, op = 0;
    while (ip < n) {
        unsigned token = src[ip++];
        size_t lit = token >> 4;
        if (lit == 15 && lz4_extend(src, n, &ip, &lit, cap) != 0)
            return -1;
        if (lit > n - ip || lit > cap - op)
            return -1;
        memcpy(dst + op, src + ip, lit);
        ip += lit;
        op += lit;
        if (ip == n)
            break; /* the last sequence is literals only */
        if (n - ip < 2)
            return -1;
        size_t dist = src[ip] | (size_t)src[ip + 1] << 8;
        ip += 2;
        if (dist == 0 || dist > op)
            return -1;
        size_t match = token & 15;
        if (match == 15 && lz4_extend(src, n, &ip, &match, cap) != 0)
            return -1;
        match += 4;
        if (match > cap - op)
            return -1;
        for (size_t i = 0; i < match; i++, op++) /* overlapping copies repeat bytes */
            dst[op] = dst[op - dist];
    }
    return (long)op;
}

typedef size_t (*zstd_decompress_fn)(void *, size_t, const void *, size_t);
typedef unsigned (*zstd_is_error_fn)(size_t);
static pthread_once_t zstd_once = PTHREAD_ONCE_INIT;
static zstd_decompress_fn zstd_decompress;
static zstd_is_error_fn zstd_is_error;

/* Run time, not link time: a peer without libzstd still loads every other image. */
static void zstd_load(void)
{
    void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        h = dlopen("libzstd.so", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return;
    zstd_is_error = (zstd_is_error_fn)dlsym(h, "ZSTD_isError");
    zstd_decompress = (zstd_decompress_fn)dlsym(h, "ZSTD_decompress");
    if (zstd_is_error == NULL)
        zstd_decompress = NULL;
}

/* The chosen PTX entry's text, decompressed, NUL-terminated at its first NUL. */
static int entry_text(const uint8_t *e, uint8_t **ptx, size_t *ptx_len)
{
    uint64_t ehsize = rd(e + 4, 4), psize = rd(e + 8, 8), flags = rd(e + 0x28, 8);
    uint64_t csize = rd(e + 0x10, 4), dsize = rd(e + 0x38, 8);
    const uint8_t *payload = e + ehsize;
    int lz4 = (flags & FLAG_LZ4) != 0, zstd = (flags & FLAG_ZSTD) != 0;
    if (lz4 && zstd)
        return GL_FATBIN_MALFORMED;
    uint64_t out = psize;
    if (lz4 || zstd) {
        if (csize == 0 || csize > psize || dsize == 0)
            return GL_FATBIN_MALFORMED;
        out = dsize;
    }
    if (out > GL_FATBIN_MAX_OUT)
        return GL_FATBIN_TOO_LARGE;
    uint8_t *buf = malloc((size_t)out + 1);
    if (buf == NULL)
        return GL_FATBIN_NOMEM;
    size_t got = (size_t)out;
    if (lz4) {
        long r = gl_fatbin_lz4(payload, (size_t)csize, buf, (size_t)out);
        if (r < 0) {
            free(buf);
            return GL_FATBIN_MALFORMED;
        }
        got = (size_t)r;
    } else if (zstd) {
        pthread_once(&zstd_once, zstd_load);
        if (zstd_decompress == NULL) {
            free(buf);
            return GL_FATBIN_NO_ZSTD;
        }
        size_t r = zstd_decompress(buf, (size_t)out, payload, (size_t)csize);
        if (zstd_is_error(r)) {
            free(buf);
            return GL_FATBIN_MALFORMED;
        }
        got = r;
    } else
        memcpy(buf, payload, got);
    buf[got] = 0;
    *ptx_len = strlen((const char *)buf); /* uncompressed payloads are NUL-padded */
    *ptx = buf;
    return 1;
}

struct target_list {
    char *s;
    size_t cap, len;
    int full;
};

static void add_target(struct target_list *t, uint64_t kind, uint64_t arch, uint64_t flags)
{
    if (t->s == NULL || t->full)
        return;
    char name[48];
    const char *prefix = kind == KIND_PTX ? "compute" : kind == KIND_ELF ? "sm" : "kind";
    const char *suffix = flags & FLAG_ARCH_SPECIFIC ? "a" : flags & FLAG_FAMILY ? "f" : "";
    snprintf(name, sizeof name, "%s_%u%s", prefix, (unsigned)(arch & 0xffffffffu), suffix);
    size_t nl = strlen(name);
    for (const char *p = t->s; *p;) { /* once each, in image order */
        const char *c = strchr(p, ',');
        size_t l = c ? (size_t)(c - p) : strlen(p);
        if (l == nl && memcmp(p, name, nl) == 0)
            return;
        p += l + (c != NULL);
    }
    size_t need = nl + (t->len > 0);
    if (t->len + need + 1 > t->cap) {
        t->full = 1;
        return;
    }
    if (t->len > 0)
        t->s[t->len++] = ',';
    memcpy(t->s + t->len, name, nl + 1);
    t->len += nl;
}

/* Walk one container's entries: list targets, keep the newest PTX entry. */
static int scan_container(const uint8_t *p, size_t size, struct target_list *t,
                          const uint8_t **best, uint64_t *best_rank)
{
    size_t off = (size_t)rd(p + 6, 2), end = size;
    while (end - off >= ENTRY_MIN) { /* a shorter tail is padding */
        const uint8_t *e = p + off;
        uint64_t kind = rd(e, 2), ehsize = rd(e + 4, 4), psize = rd(e + 8, 8);
        if (ehsize < ENTRY_MIN || ehsize > end - off || psize > end - off - ehsize)
            return GL_FATBIN_MALFORMED;
        uint64_t arch = rd(e + 0x1c, 4), major = rd(e + 0x1a, 2), minor = rd(e + 0x18, 2);
        add_target(t, kind, arch, rd(e + 0x28, 8));
        uint64_t rank = arch << 32 | major << 16 | minor;
        if (kind == KIND_PTX && (*best == NULL || rank > *best_rank)) {
            *best = e;
            *best_rank = rank;
        }
        off += (size_t)(ehsize + psize);
    }
    return 0;
}

/* The container at img: its targets listed, its newest PTX entry in *best
 * (NULL when none). 0, or a negative GL_FATBIN_* code. */
static int scan_image(const uint8_t *img, size_t n, char *targets, size_t targets_len,
                      const uint8_t **best)
{
    struct target_list t = {targets_len > 0 ? targets : NULL, targets_len, 0, 0};
    if (t.s != NULL)
        t.s[0] = 0;
    *best = NULL;
    if (n >= 4 && rd(img, 4) == GL_FATBIN_WRAPPER_MAGIC)
        return GL_FATBIN_WRAPPER;
    size_t size = container_size(img, n);
    if (size == 0)
        return GL_FATBIN_MALFORMED;
    /* One container is one module; bytes after it (padding, the next translation unit's
     * container in a linked .nv_fatbin section) are not part of it. */
    uint64_t best_rank = 0;
    return scan_container(img, size, &t, best, &best_rank);
}

int gl_fatbin_ptx(const uint8_t *img, size_t n, uint8_t **ptx, size_t *ptx_len, char *targets,
                  size_t targets_len)
{
    const uint8_t *best;
    *ptx = NULL;
    *ptx_len = 0;
    int rc = scan_image(img, n, targets, targets_len, &best);
    if (rc < 0)
        return rc;
    if (best == NULL)
        return 0;
    return entry_text(best, ptx, ptx_len);
}

const char *gl_fatbin_strerror(int rc)
{
    switch (rc) {
    case 1: return "PTX found";
    case 0: return "the fatbin holds no PTX";
    case GL_FATBIN_MALFORMED: return "malformed fatbin (an entry's offset, size or compressed data is wrong)";
    case GL_FATBIN_NOMEM: return "out of memory decompressing the fatbin's PTX";
    case GL_FATBIN_NO_ZSTD:
        return "the fatbin's PTX is zstd-compressed and libzstd.so.1 is not installed "
               "(install libzstd1, or build with nvcc -Xfatbin -compress=false)";
    case GL_FATBIN_TOO_LARGE: return "the fatbin's PTX is larger than 64 MiB";
    case GL_FATBIN_WRAPPER:
        return "a host-side fatbin wrapper (0x466243B1): send the fatbin its data pointer points to";
    default: return "unknown fatbin error";
    }
}

void gl_fatbin_free(void *p)
{
    free(p);
}
