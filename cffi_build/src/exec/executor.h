/*
 * executor.h — the server side of a forwarded session: a gl_exec holds one
 * session's handle table, its device-memory allocations and its backend, and
 * runs batches of records against them (one executor thread per session; the
 * functions are not thread-safe for one gl_exec, distinct gl_exec are
 * independent).
 */
#ifndef GLEAM_EXECUTOR_H
#define GLEAM_EXECUTOR_H

#include <stddef.h>
#include <stdint.h>

#include "gl_cuda.h"
#include "gl_htable.h"
#include "mem/ranges.h"
#include "wire/records.h"
#include "exec_api.h"
#include "gl_calls.h"
#include "notes.h"


/* A waiting call's output while it is being produced. */
typedef struct {
    uint64_t values[8];
    uint32_t nvalues;
    uint8_t *bytes; /* the reply's byte area, cap bytes */
    size_t cap;
    size_t len;
} gl_reply_out;

/* Generated (gl_dispatch.c): decode, check, translate, call, encode. */
CUresult gl_dispatch(gl_exec *x, const gl_record *rec, gl_reply_out *o);

/* Used by the generated dispatch. */
CUresult gl_exec_handle(gl_exec *x, int kind, uint64_t minted, void **real);
CUresult gl_exec_check_mint(gl_exec *x, int kind, uint64_t minted);
CUresult gl_exec_bind(gl_exec *x, int kind, uint64_t minted, void *real);
void gl_exec_unbind(gl_exec *x, int kind, uint64_t minted);
CUresult gl_exec_check_dptr(gl_exec *x, uint64_t ptr, uint64_t size);
void *gl_exec_slot(gl_exec *x, int call);

/* ---- internals shared by executor.c and the backends ---- */

enum { GL_BACKEND_HOST = 1, GL_BACKEND_CUDA = 2 };

typedef struct gl_graph_backend gl_graph_backend; /* exec_graphs.h */

/* What a backend does besides the per-call slots. */
typedef struct {
    int (*open)(gl_exec *x, char *err, size_t err_len);  /* reserve the range */
    void (*close)(gl_exec *x);                            /* release everything */
    CUresult (*unmap)(gl_exec *x, uint64_t p, uint64_t size); /* after a free */
    void (*run_begin)(gl_exec *x);                        /* before a batch */
    const gl_graph_backend *graphs; /* NULL: graphs run node by node (exec_graphs.c) */
} gl_backend_ops;

struct gl_backend {
    int kind;
    const gl_backend_ops *ops;
    void *fns[GL_CALL_COUNT]; /* the slot per call id */
    uint64_t memory_limit;    /* host: what cuMemGetInfo reports as total */
    void *user;               /* handed to the kernel callbacks */
    void *priv;               /* backend's own state */
};

/* An image that arrives in parts (glImagePart) before its staged load. */
typedef struct {
    uint8_t *bytes;
    size_t len, cap;
} gl_staged_image;
/* Frees the staged bytes (the session closes). */
void gl_staged_free(gl_staged_image *s);

struct gl_exec {
    gl_backend *be;
    uint32_t last_max_inline; /* the largest inline payload of the last batch run */
    uint64_t va_base, va_size;
    gl_htable handles;  /* minted handle -> the backend's object */
    gl_ranges allocs;   /* sorted by base, non-overlapping */
    uint64_t live_bytes;
    gl_ranges globals;  /* module globals (cuda backend); tag: the module */
    gl_ranges managed_vars; /* mirrored managed module variables, sorted; tag: the twin
                             * (exec_mirror.c); gone with their module's globals */
    CUresult deferred;
    gl_exec_stats_t stats;
    void *priv; /* backend's per-session state */
    struct gl_vmm *vmm; /* the program's VMM allocations and mappings (exec_vmm.c) */
    gl_staged_image staged; /* parts of an image being sent (exec_images.c) */
    int call;               /* the call id of the record being dispatched */
    gl_notes notes;         /* reasons waiting for the program (notes.h) */
    struct ptx_devrt *devrt; /* printf FIFO, output queue, device heap (ptx_devrt.h) */
};

/* The session whose batch runs on this thread (the slots find it here). */
gl_exec *gl_exec_current(void);
/* Calls fn for every bound handle (used when a session closes). */
void gl_exec_each_handle(gl_exec *x, void (*fn)(gl_exec *x, uint64_t key, void *val));
uint64_t gl_exec_alloc_size(gl_exec *x, uint64_t base); /* 0: not an allocation */
/* A VMM mapping's range in x->allocs carries this tag: cuMemFree and the
 * mirrors refuse it; cuMemUnmap takes it out (exec_vmm.c). */
#define GL_EXEC_VMM_TAG 1u
/* Unmaps and frees the session's VMM allocations, before the backend closes. */
void gl_exec_vmm_free(gl_exec *x);
CUresult gl_exec_add_global(gl_exec *x, uint64_t base, uint64_t size, void *owner);
void gl_exec_drop_globals(gl_exec *x, void *owner);
void gl_set_err(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Why the server faulted or refused, in one line: logged at once, and kept
 * for the program's next error reply (notes.h). x NULL: log only. */
void gl_exec_note(gl_exec *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Output of the session's kernels (exec_output.c): whether CALL is one of
 * CUDA's printf flush points, and a reply's trailer (gl_session.h) written
 * into out (at most cap bytes): notes when ERROR, then queued output. */
int gl_call_flushes_output(int call);
size_t gl_reply_trailer(gl_exec *x, uint8_t *out, size_t cap, int error);

extern const gl_backend_ops gl_host_ops;
extern const gl_backend_ops gl_cuda_ops;

#endif /* GLEAM_EXECUTOR_H */
