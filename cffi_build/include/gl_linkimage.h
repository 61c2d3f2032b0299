/*
 * gl_linkimage.h — a *link image*: the inputs of a device link, kept whole
 * so that the serving device links them when the image is loaded. The
 * interposer writes one where NVIDIA's driver would link (cuLinkComplete with
 * more than one input; a relocatable-device-code program's registration,
 * whose objects the driver links at load); the host device links the inputs'
 * PTX itself, the cuda backend hands the same inputs to the real driver's
 * linker. A program treats it as the driver's cubin: loads it, keeps it.
 *
 * Layout (little-endian), docs/cuda-forwarding.md "Linking":
 *   0   "GLEAMLNK", u64 size of the whole image
 *   16  the inputs' bytes, each 8-aligned (binary inputs first: a large
 *       library then lies at the same offset in every image, so the blob
 *       cache's chunks of it repeat, docs/cache.md)
 *   table_off: n entries of 32 bytes {u32 type, u32 flags, u64 offset,
 *       u64 size, u32 name_off, u32 name_len}, in link order
 *   then the names (not NUL-terminated), then nopts {u32 option, u32 value}
 *   size - 32: trailer {u64 table_off, u32 n, u32 names_size, u32 nopts,
 *       u32 origin, "GLEAMEND"}
 * An image is untrusted on the server: gl_link_image_parse checks every
 * count, offset and size against the image before anything reads it.
 *
 * Ownership: gl_link_image_build returns a malloc'd image the caller frees;
 * a parsed gl_link_image points into the image it was parsed from.
 */
#ifndef GLEAM_LINKIMAGE_H
#define GLEAM_LINKIMAGE_H

#include <stddef.h>
#include <stdint.h>

/* cdef: begin */
#define GL_LINK_MAX_INPUTS 256
#define GL_LINK_MAX_OPTIONS 16
#define GL_LINK_MAX_NAME 4096
#define GL_LINK_HEADER 16
#define GL_LINK_TRAILER 32

/* Where the inputs came from. */
#define GL_LINK_ORIGIN_LINKER 1  /* cuLinkAddData/AddFile: types are CUjitInputType */
#define GL_LINK_ORIGIN_RDC 2     /* a registration of relocatable device code */

/* Input flags. */
#define GL_LINK_MAIN 1u /* RDC: the fatbin the registration names (the build's own link) */

typedef struct {
    uint32_t type;  /* CUjitInputType: 0 cubin, 1 PTX, 2 fatbin, 3 object, 4 library */
    uint32_t flags; /* GL_LINK_* */
    const uint8_t *data;
    uint64_t size;
    const char *name; /* name_len bytes, not NUL-terminated */
    uint32_t name_len;
} gl_link_input;

typedef struct {
    uint32_t origin;
    uint32_t ninputs, nopts;
    gl_link_input inputs[GL_LINK_MAX_INPUTS];
    uint32_t opts[GL_LINK_MAX_OPTIONS][2]; /* CUjit_option, value */
} gl_link_image;

/* 1: IMG starts like a link image (its size then is *size); 0: it does not. */
int gl_link_image_sniff(const uint8_t *img, size_t avail, uint64_t *size);
/* Checks and parses the N bytes at IMG: 0, or -1 with a reason in err. */
int gl_link_image_parse(const uint8_t *img, size_t n, gl_link_image *out, char *err,
                        size_t err_len);
/* A new image of INPUTS in link order (their data copied) and NOPTS
 * (option, value) pairs from OPTS: its size and *out (free with
 * gl_link_image_free), or 0 when out of memory or the inputs break a limit. */
size_t gl_link_image_build(const gl_link_input *inputs, uint32_t n, const uint32_t *opts,
                           uint32_t nopts, uint32_t origin, uint8_t **out);
void gl_link_image_free(uint8_t *img);
/* cdef: end */

/* The JIT options an image carries (integer values the serving driver's
 * linker may take from anyone): max registers, optimisation level, debug and
 * line information. Others are the client's own (logs, wall time) or refer
 * to the client's context. */
static inline int gl_link_option_kept(uint32_t option)
{
    return option == 0 || option == 7 || option == 11 || option == 13;
}


#endif /* GLEAM_LINKIMAGE_H */
