/*
 * ptx_printf.h — CUDA's device printf formatted on the host: a kernel's call
 * vprintf(fmt, args) names a format string and an argument buffer in device
 * memory; this turns them into the text a GPU's driver would print.
 *
 * The argument buffer is what nvcc and numba lay out for vprintf: each
 * argument at the next offset aligned to its size (ints, chars and shorts as
 * 4 bytes, `l`/`ll`/`z`/`j`/`t` integers, doubles, pointers and strings as 8;
 * floats arrive promoted to double). Every byte read (the format, the
 * arguments, a `%s` string) goes through the caller's device-memory check, so
 * a bad pointer is a fault, never a read of the server's memory.
 *
 * No state; thread-safe. The text is the caller's (ptx_text).
 */
#ifndef GLEAM_PTX_PRINTF_H
#define GLEAM_PTX_PRINTF_H

#include <stddef.h>
#include <stdint.h>

/* Device memory as one thread sees it: the host address of [addr, addr +
 * size), or NULL when that range is not memory the thread may read. */
typedef struct {
    const uint8_t *(*at)(void *ctx, uint64_t addr, uint64_t size);
    void *ctx;
} ptx_devmem;

/* Text that grows up to max bytes (the room left in the printf FIFO). */
typedef struct {
    char *p;
    size_t len, cap, max;
} ptx_text;

#define PTX_PRINTF_MAX_ARGS 32          /* CUDA's limit; later conversions print as written */
#define PTX_PRINTF_MAX_FORMAT 65536u    /* bytes of a format string, its NUL included */
#define PTX_PRINTF_MAX_FIELD (1u << 20) /* widths and precisions are clamped to this */

enum {
    PTX_PRINTF_NULL = -1,        /* CUDA's result for a NULL format: nothing printed */
    PTX_PRINTF_INTERNAL = -2,    /* CUDA's "internal error": a format too long, no memory */
    PTX_PRINTF_FAULT = -100,     /* a read left device memory: *fault is the address */
    PTX_PRINTF_TOO_LONG = -101   /* the text would pass out->max: the record is dropped */
};

/* Appends the text of vprintf(fmt, args) to out. Returns the number of
 * arguments it read (CUDA's printf result, >= 0) or one of PTX_PRINTF_*; on
 * any negative result out->len is as it was. */
int ptx_printf_format(const ptx_devmem *m, uint64_t fmt, uint64_t args, ptx_text *out,
                      uint64_t *fault);

/* Reads the NUL-terminated string at addr (at most max bytes, no NUL needed
 * at the limit) into a new buffer: its length in *len, NULL with *fault on a
 * fault (*fault 0: out of memory). Used for %s and the assertion's strings. */
char *ptx_devstr(const ptx_devmem *m, uint64_t addr, size_t max, size_t *len, uint64_t *fault);

/* Appends n bytes; 0, or -1 when out->max would be passed (nothing appended). */
int ptx_text_put(ptx_text *out, const char *s, size_t n);
void ptx_text_free(ptx_text *t);

#endif /* GLEAM_PTX_PRINTF_H */
