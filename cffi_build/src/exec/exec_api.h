/*
 * exec_api.h — the public face of gleam's session executor: backends (host
 * software device, real CUDA driver), sessions (gl_exec) and the callbacks
 * through which the host backend runs kernels written in Python.
 * docs/cuda-forwarding.md describes the session; executor.h the internals.
 */
#ifndef GLEAM_EXEC_API_H
#define GLEAM_EXEC_API_H

#include <stddef.h>
#include <stdint.h>

#include "cache/blobcache.h"
#include "gl_session.h"
/* gl_cuda_extra: the driver entry points outside the forwarded table that the
 * cuda backend needs (generated from cffi_build/cuda_extra.py). */
#include "gl_cuda_extra.h"

/* cdef: begin */
struct gl_exec;
typedef struct gl_exec gl_exec;
typedef struct gl_backend gl_backend;

/* Upper bound of GL_CALL_COUNT, so that the stats layout is fixed for Python. */
#define GL_CALL_COUNT_MAX 256
#define GL_KERNEL_MAX_PARAMS 64

/* What the host device keeps resident per multiprocessor (a core): an 8.0
 * device's limits, which its occupancy answers and cooperative grids (every
 * block resident at once) follow (hostdev_attrs.c); host_identity.py reports
 * them as the device's attributes. */
#define GL_HOST_THREADS_PER_SM 2048
#define GL_HOST_BLOCKS_PER_SM 32
#define GL_HOST_SHARED_PER_SM 167936

/* Malformed batches: gl_exec_run returns a gl_batch_reader code or one of these. */
enum {
    GL_EXEC_E_REF = -100,     /* a blob reference that was not resolved */
    GL_EXEC_E_CALL = -101,    /* unknown call id */
    GL_EXEC_E_ONEWAY = -102,  /* ONEWAY flag disagrees with the call's class */
    GL_EXEC_E_ORDER = -103,   /* a waiting record that is not the last */
    GL_EXEC_E_REPLY = -104    /* reply buffer smaller than a reply header */
};

/* A host kernel as the host backend sees it: a C builtin (native >= 0) or a
 * Python handle, and its parameter layout. */
typedef struct {
    int native;
    void *handle;
    uint32_t nparams;
    uint32_t offsets[GL_KERNEL_MAX_PARAMS];
    uint32_t sizes[GL_KERNEL_MAX_PARAMS];
} gl_kernel_impl;

/* What a host kernel receives. params holds params_len bytes in the layout. */
typedef struct {
    gl_exec *x;
    unsigned grid[3];
    unsigned block[3];
    unsigned shared;
    const uint8_t *params;
    size_t params_len;
} gl_launch;

typedef struct {
    uint64_t records, oneway, waiting, launches, bytes_h2d, bytes_d2h, errors;
    uint64_t refs, bytes_ref; /* REF records resolved, and the bytes they stood for */
    uint64_t per_call[GL_CALL_COUNT_MAX];
} gl_exec_stats_t;

gl_backend *gl_backend_host_new(uint64_t memory_limit);
gl_backend *gl_backend_cuda_new(void *const *driver_fns, const gl_cuda_extra *extra, int device);
/* An opaque pointer handed back to the kernel callbacks (the Python registry). */
void gl_backend_set_user(gl_backend *be, void *user);
void gl_backend_free(gl_backend *be);

gl_exec *gl_exec_new(gl_backend *be, uint64_t va_size, char *err, size_t err_len);
/* Why a kernel written in Python failed, for the log and the program
 * (executor.h, gl_exec_note). */
#define GL_NOTES_LINE 600
void gl_exec_note_text(gl_exec *x, const char *text);
gl_exec *gl_exec_new_at(gl_backend *be, uint64_t va_base, uint64_t va_size, char *err,
                        size_t err_len);
uint64_t gl_exec_va_base(gl_exec *x);
uint64_t gl_exec_va_size(gl_exec *x);
int gl_exec_run(gl_exec *x, const uint8_t *batch, size_t len, uint8_t *reply, size_t reply_cap,
                size_t *reply_len);
/* gl_exec_run where REF records may name one of slots[0 .. nslots) (the
 * caller resolved them through its blob store; they must stay valid for the
 * call). A REF naming no slot is GL_EXEC_E_REF, checked before anything runs. */
int gl_exec_run_blobs(gl_exec *x, const uint8_t *batch, size_t len, uint8_t *reply,
                      size_t reply_cap, size_t *reply_len, const gl_blob_slot *slots,
                      uint32_t nslots);
void gl_exec_free(gl_exec *x);
/* The largest inline payload of the batch gl_exec_run* last read (0 when it
 * was refused before anything ran); serve.c hands such a batch's payloads to
 * the blob store after it ran. */
uint32_t gl_exec_last_max_inline(const gl_exec *x);
void gl_exec_stats(gl_exec *x, gl_exec_stats_t *out);
/* Device bytes the session's live allocations hold (exec_usage.c; any thread). */
uint64_t gl_exec_live_bytes(const gl_exec *x);
void *gl_exec_host_ptr(gl_exec *x, uint64_t dptr, uint64_t size);
const char *gl_exec_strerror(int code);

const char *gl_call_name(int id);
int gl_call_count(void);
int gl_call_is_waiting(int id);
/* 1: a checkpoint drops the call (its effect is only on memory, or none). */
int gl_call_is_data(int id);
const char *gl_driver_cdef_text(void);
const char *gl_cuda_driver_symbol(int id);

/* Host kernels: C builtins by name (-1: none). */
int gl_host_builtin(const char *name);
/* cdef: end */

/* Implemented in Python (native.py, cffi extern "Python+C"). resolve returns 1
 * and fills *out when `user`'s registry has NAME, else 0; run returns 0 or a
 * CUresult. */
int gl_py_kernel_resolve(void *user, const char *name, gl_kernel_impl *out);
int gl_py_kernel_run(void *handle, const gl_launch *l);

#endif /* GLEAM_EXEC_API_H */
