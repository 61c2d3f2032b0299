/*
 * fatbin.h — the PTX inside an nvcc fatbin, for the host backend's PTX
 * interpreter. Layout and compression notes: docs/fatbin.md.
 *
 * Ownership: the caller owns the image; gl_fatbin_ptx hands back a malloc'd
 * PTX text that the caller frees (free() or gl_fatbin_free). Nothing else is
 * kept, except the libzstd handle, opened once on first need and never closed.
 */
#ifndef GL_FATBIN_H
#define GL_FATBIN_H

#include <stddef.h>
#include <stdint.h>

/* cdef: begin */
#define GL_FATBIN_MAGIC 0xBA55ED50u
/* The host-side __fatBinC_Wrapper_t that __cudaRegisterFatBinary receives. */
#define GL_FATBIN_WRAPPER_MAGIC 0x466243B1u
/* A decompressed entry is never allowed to grow past this. */
#define GL_FATBIN_MAX_OUT ((size_t)64 << 20)

enum {
    GL_FATBIN_MALFORMED = -1,  /* an offset, size or compressed stream is wrong */
    GL_FATBIN_NOMEM = -2,
    GL_FATBIN_NO_ZSTD = -3,    /* the entry is zstd-compressed and libzstd.so.1 is missing */
    GL_FATBIN_TOO_LARGE = -4,  /* the PTX would exceed GL_FATBIN_MAX_OUT */
    GL_FATBIN_WRAPPER = -5,    /* a host-side wrapper: send the fatbin it points to */
};

/*
 * The PTX of the newest PTX entry (highest compute_XX, then PTX version) of
 * the fatbin container at img (n bytes available; bytes after the container
 * are ignored: a linked .nv_fatbin section holds one container per
 * translation unit, each registered as its own module). Returns 1 and sets *ptx (NUL-terminated) and *ptx_len; 0 when
 * the image holds no PTX; a negative GL_FATBIN_* code otherwise. targets,
 * when not NULL, receives the comma-separated targets the image carries
 * ("sm_75,compute_75"), cut at a whole name when targets_len is too small.
 */
int gl_fatbin_ptx(const uint8_t *img, size_t n, uint8_t **ptx, size_t *ptx_len, char *targets,
                  size_t targets_len);

/* The bytes the fatbin container at img spans (0 when img[0, n) holds no whole one). */
size_t gl_fatbin_size(const uint8_t *img, size_t n);

/* An LZ4 block (no frame) into dst: bytes written, or -1 if malformed or too big. */
long gl_fatbin_lz4(const uint8_t *src, size_t n, uint8_t *dst, size_t cap);

const char *gl_fatbin_strerror(int rc);
void gl_fatbin_free(void *p);
/* cdef: end */

#endif
