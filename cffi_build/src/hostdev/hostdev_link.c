/*
 * hostdev_link.c — the host device links a link image (gl_linkimage.h): the
 * PTX of every input, in link order, into one module (ptx_module_link: PTX
 * ISA linking rules). PTX inputs are taken as they are, a fatbin's newest
 * PTX is taken (fatbin.c), an object's (a host ELF .o) and a library's
 * members' from their embedded fatbin sections. A registration of
 * relocatable device code (origin RDC) links its objects; the registered
 * fatbin is the build's own link (SASS), which the objects' PTX replaces.
 *
 * Inputs the interpreter cannot run refuse the load, naming the input:
 * a cubin, a fatbin or object without PTX (CUDA_ERROR_NO_BINARY_FOR_GPU).
 * A library's members without PTX are skipped (a library is searched, not
 * linked whole), and if the link then misses a name, its message lists them.
 * The CUDA device runtime (libcudadevrt: the archive numba-cuda adds for
 * grid sync, and the object nvcc links into every -rdc program) is SASS and
 * PTX that calls the driver's private syscalls: the host device links its
 * own stand-in instead (ptx_devrt.c).
 *
 * Everything here reads untrusted bytes: every offset and size is checked
 * against the input before it is used. Ownership: the PTX texts this file
 * decompresses live until the link is done; the module goes to m->ptx.
 */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/fatbin.h"
#include "gl_linkimage.h"
#include "hostdev.h"

enum { IN_CUBIN, IN_PTX, IN_FATBIN, IN_OBJECT, IN_LIBRARY };

/* The PTX gathered for one link. */
typedef struct {
    ptx_source src[PTX_MAX_SOURCES];
    char *owned[PTX_MAX_SOURCES]; /* texts and names to free */
    size_t n, nowned;
    int devrt;         /* the device runtime was linked: add the stand-in */
    char skipped[256]; /* library members without PTX, for a missing name's message */
    char *err;
    size_t err_len;
    CUresult fail;
} gather;

static uint64_t rd(const uint8_t *p, int n)
{
    uint64_t v = 0;
    memcpy(&v, p, (size_t)n); /* little-endian images */
    return v;
}

static char *own(gather *g, char *p)
{
    if (p != NULL && g->nowned < PTX_MAX_SOURCES * 2)
        g->owned[g->nowned++] = p;
    else if (p != NULL) {
        free(p);
        p = NULL;
    }
    return p;
}

static int refuse(gather *g, CUresult r, const char *fmt, const char *name, const char *what)
{
    if (g->fail == CUDA_SUCCESS) {
        g->fail = r;
        snprintf(g->err, g->err_len, fmt, name, what);
    }
    return -1;
}

static int add_source(gather *g, const char *text, size_t len, const char *name)
{
    if (g->n >= PTX_MAX_SOURCES - 1) /* one place is kept for the stand-in */
        return refuse(g, CUDA_ERROR_INVALID_PTX, "too many inputs to link (%s%s)", name, "");
    while (len > 0 && text[len - 1] == 0)
        len--;
    g->src[g->n++] = (ptx_source){text, len, name};
    return 0;
}

/* PTX the device runtime's own source compiled to (its static names carry
 * the file's name). */
static int is_devrt_ptx(const uint8_t *ptx, size_t len)
{
    static const char mark[] = "_cuda_device_runtime_cu_";
    return memmem(ptx, len, mark, sizeof mark - 1) != NULL;
}

/* The PTX of the fatbin containers in [p, p + n): 1 and the newest PTX of
 * each added, 0 when none carries PTX (targets then says what they carry),
 * -1 when refused. */
static int fatbin_sources(gather *g, const uint8_t *p, size_t n, const char *name, char *targets,
                          size_t targets_len)
{
    int found = 0;
    targets[0] = 0;
    while (n >= 16 && rd(p, 4) == GL_FATBIN_MAGIC) {
        size_t len = gl_fatbin_size(p, n);
        if (len == 0)
            return refuse(g, CUDA_ERROR_INVALID_IMAGE, "input '%s': a malformed fatbin%s", name,
                          "");
        uint8_t *ptx = NULL;
        size_t ptx_len = 0;
        int rc = gl_fatbin_ptx(p, len, &ptx, &ptx_len, targets, targets_len);
        if (rc < 0)
            return refuse(g, rc == GL_FATBIN_NOMEM ? CUDA_ERROR_OUT_OF_MEMORY
                                                   : CUDA_ERROR_INVALID_IMAGE,
                          "input '%s': the fatbin's PTX cannot be read: %s", name,
                          gl_fatbin_strerror(rc));
        if (rc == 1 && own(g, (char *)ptx) == NULL)
            return refuse(g, CUDA_ERROR_OUT_OF_MEMORY, "input '%s': out of memory%s", name, "");
        if (rc == 1 && is_devrt_ptx(ptx, ptx_len))
            g->devrt = 1;
        else if (rc == 1 && add_source(g, (const char *)ptx, ptx_len, name) != 0)
            return -1;
        found |= rc == 1;
        size_t step = (len + 7) & ~(size_t)7; /* containers of a section lie 8-aligned */
        if (step >= n)
            break;
        p += step;
        n -= step;
    }
    return found;
}

/* The device code section of a host object: 1 and its bytes, 0 without. */
static int elf_device_code(const uint8_t *p, size_t n, const uint8_t **code, size_t *len)
{
    if (n < 64 || memcmp(p, "\177ELF", 4) != 0 || p[4] != 2 || p[5] != 1)
        return 0;
    uint64_t shoff = rd(p + 0x28, 8), shentsize = rd(p + 0x3A, 2), shnum = rd(p + 0x3C, 2);
    uint64_t shstrndx = rd(p + 0x3E, 2);
    if (shentsize < 64 || shoff > n || shnum > (n - shoff) / shentsize || shstrndx >= shnum)
        return 0;
    const uint8_t *strh = p + shoff + shstrndx * shentsize;
    uint64_t stroff = rd(strh + 0x18, 8), strsize = rd(strh + 0x20, 8);
    if (stroff > n || strsize > n - stroff)
        return 0;
    for (uint64_t s = 0; s < shnum; s++) {
        const uint8_t *sh = p + shoff + s * shentsize;
        uint64_t name = rd(sh, 4), off = rd(sh + 0x18, 8), size = rd(sh + 0x20, 8);
        if (name >= strsize || rd(sh + 4, 4) != 1 /* SHT_PROGBITS */ || off > n
            || size > n - off)
            continue;
        const char *nm = (const char *)p + stroff + name;
        size_t room = strsize - name;
        /* nvcc -rdc puts an object's fatbin in __nv_relfatbin, a whole-program
         * build in .nv_fatbin */
        if (strnlen(nm, room) < room
            && (strcmp(nm, "__nv_relfatbin") == 0 || strcmp(nm, ".nv_fatbin") == 0)) {
            *code = p + off;
            *len = size;
            return 1;
        }
    }
    return 0;
}

/* An object given to the link: its PTX, or a refusal naming it. */
static int object_sources(gather *g, const uint8_t *p, size_t n, const char *name)
{
    const uint8_t *code;
    size_t len;
    char targets[96];
    if (!elf_device_code(p, n, &code, &len))
        return refuse(g, CUDA_ERROR_NO_BINARY_FOR_GPU,
                      "input '%s' is not an object with device code%s", name, "");
    int rc = fatbin_sources(g, code, len, name, targets, sizeof targets);
    if (rc == 0)
        return refuse(g, CUDA_ERROR_NO_BINARY_FOR_GPU,
                      "input '%s' carries no PTX (only %s); the host device runs PTX: rebuild it "
                      "with -gencode arch=compute_XX,code=compute_XX", name, targets);
    return rc < 0 ? -1 : 0;
}

static void note_skipped(gather *g, const char *member)
{
    size_t have = strlen(g->skipped);
    if (have + strlen(member) + 3 < sizeof g->skipped)
        snprintf(g->skipped + have, sizeof g->skipped - have, "%s%s", have ? ", " : "", member);
}

/* A library (an ar archive of host objects): the device runtime is replaced
 * by the stand-in; other members' PTX is linked. */
static int library_sources(gather *g, const uint8_t *p, size_t n, const char *name)
{
    if (n < 8 || memcmp(p, "!<arch>\n", 8) != 0)
        return refuse(g, CUDA_ERROR_INVALID_IMAGE, "input '%s' is not a library (an ar archive)%s",
                      name, "");
    const uint8_t *longnames = NULL;
    size_t longlen = 0, off = 8;
    while (off + 60 <= n) {
        const uint8_t *h = p + off;
        char sz[11];
        memcpy(sz, h + 48, 10);
        sz[10] = 0;
        char *end;
        unsigned long long size = strtoull(sz, &end, 10);
        if (h[58] != '`' || h[59] != '\n' || size > n - off - 60)
            return refuse(g, CUDA_ERROR_INVALID_IMAGE, "input '%s': a malformed archive%s", name,
                          "");
        const uint8_t *data = h + 60;
        char member[64];
        size_t ml = 0;
        if (h[0] == '/' && h[1] == '/') { /* GNU long names */
            longnames = data;
            longlen = size;
        } else if (h[0] == '/' && h[1] >= '0' && h[1] <= '9' && longnames != NULL) {
            unsigned long at = strtoul((const char *)h + 1, NULL, 10);
            while (at + ml < longlen && ml < sizeof member - 1 && longnames[at + ml] != '/'
                   && longnames[at + ml] != '\n')
                member[ml] = (char)longnames[at + ml], ml++;
        } else if (h[0] != '/') {
            while (ml < 16 && h[ml] != '/' && h[ml] != ' ')
                member[ml] = (char)h[ml], ml++;
        }
        member[ml] = 0;
        if (ml > 0) {
            const uint8_t *code;
            size_t len;
            char targets[96], label[176];
            snprintf(label, sizeof label, "%.100s(%s)", name, member);
            if (strstr(member, "cuda_device_runtime") != NULL)
                g->devrt = 1;
            else if (elf_device_code(data, size, &code, &len)) {
                char *kept = own(g, strdup(label));
                int rc = kept ? fatbin_sources(g, code, len, kept, targets, sizeof targets) : -1;
                if (rc < 0 && kept == NULL)
                    return refuse(g, CUDA_ERROR_OUT_OF_MEMORY, "%s%s", "out of memory", "");
                if (rc < 0)
                    return -1;
                if (rc == 0)
                    note_skipped(g, label);
            }
        }
        off += 60 + size + (size & 1);
    }
    return 0;
}

static int gather_input(gather *g, const gl_link_image *li, uint32_t k)
{
    const gl_link_input *in = &li->inputs[k];
    char buf[GL_LINK_MAX_NAME + 1], targets[96];
    snprintf(buf, sizeof buf, "%.*s", (int)in->name_len, in->name);
    char *name = own(g, strdup(buf[0] ? buf : "(unnamed)"));
    if (name == NULL)
        return refuse(g, CUDA_ERROR_OUT_OF_MEMORY, "%s%s", "out of memory", "");
    switch (in->type) {
    case IN_PTX:
        return add_source(g, (const char *)in->data, (size_t)in->size, name);
    case IN_FATBIN: {
        if (li->origin == GL_LINK_ORIGIN_RDC && (in->flags & GL_LINK_MAIN))
            return 0; /* the build's own link: its objects are linked instead */
        int rc = fatbin_sources(g, in->data, (size_t)in->size, name, targets, sizeof targets);
        if (rc == 0)
            return refuse(g, CUDA_ERROR_NO_BINARY_FOR_GPU,
                          "input '%s' carries no PTX (only %s); the host device runs PTX: rebuild "
                          "it with -gencode arch=compute_XX,code=compute_XX", name, targets);
        return rc < 0 ? -1 : 0;
    }
    case IN_OBJECT:
        return object_sources(g, in->data, (size_t)in->size, name);
    case IN_LIBRARY:
        return library_sources(g, in->data, (size_t)in->size, name);
    default: {
        uint32_t flags = in->size >= 0x34 ? (uint32_t)rd(in->data + 0x30, 4) : 0;
        snprintf(targets, sizeof targets, "sm_%u", flags & 0xff);
        return refuse(g, CUDA_ERROR_NO_BINARY_FOR_GPU,
                      "input '%s' is a cubin (%s SASS only); the host device runs PTX: link PTX, "
                      "or a fatbin that carries it", name, targets);
    }
    }
}

CUresult gl_hlink_load(gl_hmod *m, char *err, size_t err_len)
{
    gl_link_image *li = malloc(sizeof *li);
    gather *g = calloc(1, sizeof *g);
    CUresult r = CUDA_SUCCESS;
    if (li == NULL || g == NULL) {
        free(li);
        free(g);
        snprintf(err, err_len, "out of memory");
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    g->err = err;
    g->err_len = err_len;
    if (gl_link_image_parse(m->image, m->size, li, err, err_len) != 0)
        r = CUDA_ERROR_INVALID_IMAGE;
    for (uint32_t k = 0; r == CUDA_SUCCESS && k < li->ninputs; k++)
        if (gather_input(g, li, k) != 0)
            r = g->fail;
    for (uint32_t k = 0; r == CUDA_SUCCESS && k < li->nopts; k++)
        if (li->opts[k][0] == 0) /* CU_JIT_MAX_REGISTERS: what NUM_REGS may report */
            m->max_registers = li->opts[k][1];
    /* nvcc links the device runtime into every -rdc program */
    if (r == CUDA_SUCCESS && (g->devrt || li->origin == GL_LINK_ORIGIN_RDC))
        g->src[g->n++] = ptx_cudadevrt_source();
    if (r == CUDA_SUCCESS && g->n == 0) {
        snprintf(err, err_len, "the link has no PTX to run");
        r = CUDA_ERROR_NO_BINARY_FOR_GPU;
    }
    if (r == CUDA_SUCCESS && ptx_module_link(g->src, g->n, &m->ptx, err, err_len) != 0) {
        m->ptx = NULL;
        r = CUDA_ERROR_INVALID_PTX;
        size_t have = strlen(err);
        if (g->skipped[0] && strstr(err, "without a body") != NULL && have < err_len)
            snprintf(err + have, err_len - have, " (library members without PTX were not "
                     "linked: %s)", g->skipped);
    }
    for (size_t k = 0; k < g->nowned; k++)
        free(g->owned[k]);
    free(g);
    free(li);
    return r;
}
