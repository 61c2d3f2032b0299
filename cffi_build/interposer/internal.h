/*
 * internal.h — what the interposer's own files share beyond client.h. Each
 * block names the file that owns it. Nothing here is exported from the
 * library (it is built with -fvisibility=hidden).
 */
#ifndef GLEAM_INTERPOSER_INTERNAL_H
#define GLEAM_INTERPOSER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "client.h"

/* ---- session.c: attaching, the socket, the session's fate */

/* Attaches once (cuInit); prints the one stderr line on failure. */
CUresult gl_attach(void);
/* The hello of the attached session; NULL before a successful attach. */
const gl_session_hello *gl_session(void);
/* Marks the session lost (first caller prints the one stderr line). */
void gl_lost(const char *why);
/* Socket I/O on the session; 0 on success, -1 (session lost) otherwise. */
int gl_io_sendv(struct iovec *iov, int n);
int gl_io_recv(void *buf, size_t n);
/* Writes an envelope header (the session field is 0: the agent stamps it). */
void gl_env_header(uint8_t out[GL_ENV_HEADER_SIZE], uint32_t body_len, uint8_t type);

/* ---- batch.c: the batch being filled and the flusher thread */

/* Starts the flusher thread (after a successful attach). */
void gl_batch_start(void);
/* A one-way record that also changes the executor's current context:
 * set_ctx != 0 makes it the context last sent; forget_ctx drops the memory
 * of it (the server's current context is unknown afterwards). Both happen
 * under the emit lock, in stream order. */
CUresult gl_emit_ctx(uint16_t call, int flags, const uint64_t *args, uint8_t nargs,
                     const void *payload, size_t len, uint64_t set_ctx, uint64_t forget_ctx);

/* ---- synccalls.c: GLEAM_CUDA_SYNC_CALLS (a benchmark knob) */

/* Whether every one-way call waits for the server. */
int gl_sync_calls(void);
/* With the knob on: waits until the calls sent so far have run. */
CUresult gl_sync_after_oneway(void);

/* ---- alloc.c: the session's device address space */

/* Resets the sub-allocator to [base, base + size). */
void gl_va_init(uint64_t base, uint64_t size);
/* 256-byte aligned first fit: INVALID_VALUE for size 0, OUT_OF_MEMORY. */
CUresult gl_va_alloc(uint64_t size, uint64_t *out);
/* Drops the freeable allocation that starts at ptr (INVALID_VALUE if none). */
CUresult gl_va_free(uint64_t ptr);
/* Whether ptr starts a freeable allocation. */
int gl_va_is_base(uint64_t ptr);
/* Bytes of the freeable allocations (what the server counts as used). */
uint64_t gl_va_live(void);
/* The allocation at ptr is the interposer's own: the program cannot free it
 * (gl_va_is_base says no), gl_va_free still can. */
void gl_va_hold(uint64_t ptr);
/* Adds a range the server owns (a module global); it cannot be freed. */
void gl_va_register(uint64_t base, uint64_t size);
/* The live allocation holding ptr: 1 and its range, or 0. */
int gl_va_find(uint64_t ptr, uint64_t *base, uint64_t *size);

/* ---- devheap.c: the device runtime's limits and the host device's heap */

/* Before a launch of a kernel that may call malloc or free: the session's
 * device heap exists (host device). */
CUresult gl_devheap_before_launch(int ptds);
/* cuCtxSetLimit of a limit the serving device holds (0 stack, 1 printf FIFO,
 * 2 malloc heap): the server's answer; runtime.c keeps the value on success. */
CUresult gl_limit_send(CUlimit limit, size_t value, int ptds);
/* The value cuCtxGetLimit answers for limit (runtime.c). */
size_t gl_limit_value(CUlimit limit);

/* ---- pinned.c: page-locked host memory (local) */

/* The pinned allocation holding p: 1 and its range, or 0. */
int gl_pinned_find(const void *p, uintptr_t *base, size_t *size);

/* ---- copies.c: host <-> device copies in chunks of GL_COPY_CHUNK */

CUresult gl_copy_htod(CUdeviceptr dst, const void *src, size_t n, CUstream s, int ptds);
/* Waits for the bytes (also for an asynchronous copy: see copies.c). */
CUresult gl_copy_dtoh(void *dst, CUdeviceptr src, size_t n, CUstream s, int ptds);
/* Either direction, told by address (unified addressing), as cuMemcpy. */
CUresult gl_copy_routed(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, int async,
                        int ptds);

/* ---- context.c: per-thread context stack */

/* The calling thread's current context (0 when none). */
uint64_t gl_ctx_current(void);

/* ---- hmap.c: a map from minted handles to pointers (thread-safe) */

typedef struct gl_hmap gl_hmap;
gl_hmap *gl_hmap_new(void);
void *gl_hmap_get(gl_hmap *m, uint64_t key);
/* Replaces any previous value; returns 0, or -1 when out of memory (or key is 0). */
int gl_hmap_put(gl_hmap *m, uint64_t key, void *value);
/* Removes key and returns its value (NULL if absent). */
void *gl_hmap_take(gl_hmap *m, uint64_t key);

/* ---- ptx.c: images and kernel parameter layouts */

typedef struct {
    uint32_t count;  /* parameters */
    uint32_t total;  /* bytes of the packed parameter buffer */
    uint32_t *offset;
    uint32_t *size;
    int heap;        /* it may call malloc or free (a device heap must exist) */
} gl_layout;

typedef struct {
    char *name;
    gl_layout layout;
} gl_entry;

typedef struct {
    uint32_t count;
    gl_entry *entries;
} gl_entries;

/* The size of a module image: ELF64, fatbin or NUL-terminated PTX text;
 * CUDA_ERROR_INVALID_IMAGE for anything else. *is_ptx tells which. */
CUresult gl_image_size(const void *image, size_t *size, int *is_ptx);
/* The fatbin inside cudart's registration wrapper, or image itself. */
const void *gl_image_unwrap(const void *image);
/* Parses every .entry's parameter list of PTX text, and whether the module
 * names malloc or free (each layout's heap). Returns 0, or -1 when out of
 * memory or the text is malformed (out is then empty). */
int gl_ptx_entries(const char *ptx, gl_entries *out);
void gl_entries_free(gl_entries *e);
/* The layout of entry name, or NULL. */
const gl_layout *gl_entries_find(const gl_entries *e, const char *name);
/* Deep copy; 0 or -1 when out of memory. */
int gl_layout_copy(gl_layout *dst, const gl_layout *src);
void gl_layout_free(gl_layout *l);

/* ---- module.c: function layouts, used by launch.c */

/* The parameter layout of function f (fetched from the server once when
 * the image did not tell). */
CUresult gl_func_layout(uint64_t f, const gl_layout **out);
/* The function a launch of h runs: h itself, or for a CUkernel its function
 * (made once). */
CUresult gl_launchable(uint64_t h, uint64_t *func);

/* ---- export_tables.c: cudart's private tables */

/* A context is destroyed or reset: drops its context-local storage and calls
 * the destructors cudart gave (outside any lock; they may call back in). */
void gl_cls_context_gone(uint64_t ctx);

/* ---- caller.c: cudart's calls told from the program's */

/* The object that made the current exported call (gl_caller) is cudart. */
void gl_caller_mark_cudart(void);
/* Whether the current exported call came from an object marked cudart's. */
int gl_caller_is_cudart(void);
/* The undocumented CUresult cudart turns into cudaErrorInvalidConfiguration. */
#define GL_CUDA_ERROR_CUDART_INVALID_CONFIGURATION 9

/* ---- integrity.c: cudart's start-up check of the driver */

/* The 16 bytes cudart expects from the integrity table's slot 1. */
CUresult gl_integrity_answer(uint32_t version, uint64_t seconds, const void *cudart_table,
                             const void *integrity_table, const void *fn, uint64_t out[2]);
/* RFC 1319 MD2 (exported for the tests' check against the RFC's vectors). */
void gl_md2(const void *msg, size_t len, uint8_t out[16]);

#endif /* GLEAM_INTERPOSER_INTERNAL_H */
