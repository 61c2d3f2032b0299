/*
 * executor.c — one forwarded session on the server: its handle table, its
 * device-memory allocations, the deferred error, and gl_exec_run, which
 * validates a whole batch before running any of it (a malformed batch changes
 * nothing) and then dispatches record by record.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec_graphs.h"
#include "executor.h"
#include "gl_error_names.h"
#include "gl_session.h"
#include "ptx/ptx_devrt.h"

#define GL_MINT_TAG 0x67u

static __thread gl_exec *gl_cur;

gl_exec *gl_exec_current(void)
{
    return gl_cur;
}

void gl_set_err(char *err, size_t err_len, const char *fmt, ...)
{
    if (err == NULL || err_len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

void gl_exec_note(gl_exec *x, const char *fmt, ...)
{
    char text[GL_NOTES_LINE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    int host = x == NULL || x->be->kind == GL_BACKEND_HOST;
    fprintf(stderr, "gleam %s: %s\n", host ? "host device" : "cuda backend", text);
    if (x != NULL)
        gl_notes_add(&x->notes, text);
}

void gl_exec_note_text(gl_exec *x, const char *text)
{
    gl_exec_note(x, "%s", text);
}

/* ------------------------------------------------------------- handles */

static int minted_kind(uint64_t key)
{
    return (key >> 56) == GL_MINT_TAG ? (int)((key >> 48) & 0xff) : -1;
}

/* A primary context keeps its minted handle for the whole session (the
 * interposer mints one per device), so retaining it again after its count
 * dropped to zero binds the same handle anew; every other handle is fresh. */
static int rebindable(int kind)
{
    return kind == GL_H_CTX;
}

CUresult gl_exec_check_mint(gl_exec *x, int kind, uint64_t minted)
{
    if (minted_kind(minted) != kind ||
        (gl_htable_find(&x->handles, minted) != NULL && !rebindable(kind)))
        return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS;
}

CUresult gl_exec_bind(gl_exec *x, int kind, uint64_t minted, void *real)
{
    CUresult r = gl_exec_check_mint(x, kind, minted);
    if (r != CUDA_SUCCESS)
        return r;
    return gl_htable_put(&x->handles, minted, real) == 0 ? CUDA_SUCCESS
                                                          : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult gl_exec_handle(gl_exec *x, int kind, uint64_t minted, void **real)
{
    if (kind == GL_H_STREAM && minted <= GL_CU_STREAM_PER_THREAD) {
        *real = (void *)(uintptr_t)minted; /* default, legacy, per-thread */
        return CUDA_SUCCESS;
    }
    if (minted_kind(minted) != kind)
        return CUDA_ERROR_INVALID_HANDLE;
    gl_hslot *s = gl_htable_find(&x->handles, minted);
    if (s == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    *real = s->val;
    return CUDA_SUCCESS;
}

void gl_exec_unbind(gl_exec *x, int kind, uint64_t minted)
{
    if (minted_kind(minted) == kind)
        gl_htable_take(&x->handles, minted);
}

typedef struct {
    gl_exec *x;
    void (*fn)(gl_exec *x, uint64_t key, void *val);
} each_arg;

static void each_one(uint64_t key, void *val, void *arg)
{
    each_arg *a = arg;
    a->fn(a->x, key, val);
}

void gl_exec_each_handle(gl_exec *x, void (*fn)(gl_exec *x, uint64_t key, void *val))
{
    each_arg a = {x, fn};
    gl_htable_each(&x->handles, each_one, &a);
}

/* --------------------------------------------------------- allocations */

/* Session memory: one of its allocations, or a module global it was given. */
static int in_session(const gl_exec *x, uint64_t ptr, uint64_t size)
{
    if (gl_ranges_find(&x->allocs, ptr, size) != NULL)
        return 1;
    for (size_t g = 0; g < x->globals.n; g++)
        if (gl_range_holds(&x->globals.r[g], ptr, size))
            return 1;
    return 0;
}

CUresult gl_exec_check_dptr(gl_exec *x, uint64_t ptr, uint64_t size)
{
    if (in_session(x, ptr, size))
        return CUDA_SUCCESS;
    gl_exec_note(x, "%s: device memory 0x%llx (%llu bytes) is not inside the session's "
                 "allocations", gl_call_name(x->call), (unsigned long long)ptr,
                 (unsigned long long)size);
    return CUDA_ERROR_INVALID_VALUE;
}

void *gl_exec_host_ptr(gl_exec *x, uint64_t dptr, uint64_t size)
{
    /* Host backend only: device addresses are the host mapping's addresses,
     * and a module global's address is its storage's (memsets of globals that
     * cuModuleGetGlobal/cuLibraryGetGlobal handed out land there). */
    if (x == NULL || x->be->kind != GL_BACKEND_HOST || dptr == 0)
        return NULL;
    return in_session(x, dptr, size) ? (void *)(uintptr_t)dptr : NULL;
}

CUresult gx_glMemAlloc(gl_exec *x, CUdeviceptr dptr, size_t bytesize)
{
    uint64_t p = dptr, n = bytesize;
    if (n == 0 || p % 256 != 0 || p < x->va_base || n > x->va_size
        || p - x->va_base > x->va_size - n)
        return CUDA_ERROR_INVALID_VALUE;
    gl_ranges *t = &x->allocs;
    size_t i = gl_ranges_upper(t, p);
    if (i > 0 && t->r[i - 1].base + t->r[i - 1].size > p)
        return CUDA_ERROR_INVALID_VALUE;
    if (i < t->n && t->r[i].base < p + n)
        return CUDA_ERROR_INVALID_VALUE;
    if (x->be->kind == GL_BACKEND_HOST && n > x->be->memory_limit - x->live_bytes)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* Room first: once the backend has mapped the range, recording it must not fail. */
    if (gl_ranges_reserve(t) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = ((gl_fn_glMemAlloc)gl_exec_slot(x, GL_CALL_glMemAlloc))(dptr, bytesize);
    if (r != CUDA_SUCCESS)
        return r;
    gl_ranges_insert(t, i, (gl_range){p, n, 0});
    x->live_bytes += n;
    return CUDA_SUCCESS;
}

CUresult gx_glMemFree(gl_exec *x, CUdeviceptr dptr)
{
    long i = gl_ranges_index_of_base(&x->allocs, dptr);
    if (i < 0 || x->allocs.r[i].tag == GL_EXEC_VMM_TAG)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t size = x->allocs.r[i].size;
    CUresult r = ((gl_fn_glMemFree)gl_exec_slot(x, GL_CALL_glMemFree))(dptr);
    if (r != CUDA_SUCCESS)
        return r;
    gl_ranges_remove(&x->allocs, (size_t)i);
    x->live_bytes -= size;
    return CUDA_SUCCESS;
}

/* The backend's free hook needs the allocation's size, which only the table has. */
uint64_t gl_exec_alloc_size(gl_exec *x, uint64_t base)
{
    long i = gl_ranges_index_of_base(&x->allocs, base);
    return i >= 0 ? x->allocs.r[i].size : 0;
}

CUresult gl_exec_add_global(gl_exec *x, uint64_t base, uint64_t size, void *owner)
{
    /* Globals may overlap nothing in particular: an unsorted list, appended. */
    if (gl_ranges_insert(&x->globals, x->globals.n, (gl_range){base, size, (uintptr_t)owner})
        != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return CUDA_SUCCESS;
}

void gl_exec_drop_globals(gl_exec *x, void *owner)
{
    size_t k = 0;
    for (size_t g = 0; g < x->globals.n; g++)
        if (x->globals.r[g].tag != (uintptr_t)owner)
            x->globals.r[k++] = x->globals.r[g];
    x->globals.n = k;
    /* a managed variable's mirror goes with its module's storage */
    for (size_t v = x->managed_vars.n; v-- > 0;) {
        const gl_range *r = &x->managed_vars.r[v];
        int held = 0;
        for (size_t g = 0; g < x->globals.n && !held; g++)
            held = gl_range_holds(&x->globals.r[g], r->base, r->size);
        if (!held)
            gl_ranges_remove(&x->managed_vars, v);
    }
}

CUresult gx_cuModuleGetGlobal(gl_exec *x, CUdeviceptr *dptr, size_t *bytes, CUmodule hmod,
                              const char *name)
{
    CUresult r = ((gl_fn_cuModuleGetGlobal)gl_exec_slot(x, GL_CALL_cuModuleGetGlobal))(
        dptr, bytes, hmod, name);
    if (r != CUDA_SUCCESS)
        return r;
    return gl_exec_add_global(x, *dptr, *bytes, hmod);
}

/* A checkpoint names a module or a library by its minted handle (the read and
 * write of its variables take either); the backend gets the object as an integer. */
static CUresult code_handle(gl_exec *x, cuuint64_t minted, cuuint64_t *real)
{
    void *h = NULL;
    CUresult r = gl_exec_handle(x, GL_H_MOD, minted, &h);
    if (r != CUDA_SUCCESS)
        r = gl_exec_handle(x, GL_H_LIB, minted, &h);
    *real = (cuuint64_t)(uintptr_t)h;
    return r;
}

CUresult gx_glModuleVarsRead(gl_exec *x, cuuint64_t handle, size_t offset, void *dst, size_t n,
                             size_t *size)
{
    cuuint64_t real;
    CUresult r = code_handle(x, handle, &real);
    if (r != CUDA_SUCCESS)
        return r;
    return ((gl_fn_glModuleVarsRead)gl_exec_slot(x, GL_CALL_glModuleVarsRead))(real, offset, dst,
                                                                               n, size);
}

CUresult gx_glModuleVarsWrite(gl_exec *x, cuuint64_t handle, size_t offset, const void *src,
                              size_t n)
{
    cuuint64_t real;
    CUresult r = code_handle(x, handle, &real);
    if (r != CUDA_SUCCESS)
        return r;
    return ((gl_fn_glModuleVarsWrite)gl_exec_slot(x, GL_CALL_glModuleVarsWrite))(real, offset,
                                                                                 src, n);
}

/* ------------------------------------------------------------ sessions */

void *gl_exec_slot(gl_exec *x, int call)
{
    return x->be->fns[call];
}

gl_exec *gl_exec_new(gl_backend *be, uint64_t va_size, char *err, size_t err_len)
{
    return gl_exec_new_at(be, 0, va_size, err, err_len);
}

/* va_base 0: the backend picks the range. Otherwise the backend reserves exactly
 * [va_base, va_base + va_size) or refuses (err says why): a session rebuilt on
 * another server keeps its device pointers (docs/consistency.md). */
gl_exec *gl_exec_new_at(gl_backend *be, uint64_t va_base, uint64_t va_size, char *err,
                        size_t err_len)
{
    if (be == NULL) {
        gl_set_err(err, err_len, "no backend");
        return NULL;
    }
    gl_exec *x = calloc(1, sizeof *x);
    if (x == NULL) {
        gl_set_err(err, err_len, "out of memory");
        return NULL;
    }
    x->be = be;
    x->devrt = ptx_devrt_new();
    x->va_base = va_base;
    x->va_size = va_size;
    /* A peer's request, so bounded: user space ends at 2^47 on x86-64 and arm64
     * (48-bit), and no session range is above 1 TiB. */
    if (va_base != 0 && (va_size == 0 || va_size > (1ull << 40) || va_base % 65536 != 0
                         || va_size % 65536 != 0 || va_base > (1ull << 47) - va_size)) {
        gl_set_err(err, err_len, "bad address range request: base 0x%llx size 0x%llx (both "
                   "64 KiB multiples, size 1 TiB at most, all below 2^47)",
                   (unsigned long long)va_base, (unsigned long long)va_size);
        ptx_devrt_delete(x->devrt);
        free(x);
        return NULL;
    }
    if (x->devrt == NULL || be->ops->open(x, err, err_len) != 0) {
        if (x->devrt == NULL)
            gl_set_err(err, err_len, "out of memory");
        ptx_devrt_delete(x->devrt);
        free(x);
        return NULL;
    }
    return x;
}

uint64_t gl_exec_va_base(gl_exec *x)
{
    return x->va_base;
}

uint64_t gl_exec_va_size(gl_exec *x)
{
    return x->va_size;
}

void gl_exec_free(gl_exec *x)
{
    if (x == NULL)
        return;
    gl_exec *prev = gl_cur;
    gl_cur = x;
    gl_exec_graphs_free(x); /* (the cuda backend's graphs need its context) */
    gl_exec_vmm_free(x); /* (a GPU's mappings before the range they lie in) */
    x->be->ops->close(x);
    gl_cur = prev;
    gl_htable_free(&x->handles);
    gl_ranges_free(&x->allocs);
    gl_ranges_free(&x->globals);
    gl_ranges_free(&x->managed_vars);
    gl_staged_free(&x->staged);
    ptx_devrt_delete(x->devrt);
    free(x);
}

void gl_exec_stats(gl_exec *x, gl_exec_stats_t *out)
{
    *out = x->stats;
}

static const gl_blob_slot *find_slot(const gl_blob_slot *slots, uint32_t n, const gl_record *rec)
{
    for (uint32_t i = 0; i < n; i++)
        if (slots[i].len == rec->ref_size && memcmp(slots[i].digest, rec->ref_digest, 32) == 0)
            return &slots[i];
    return NULL;
}

/* Checks everything about a batch that does not depend on running it. A REF
 * record must name one of the blobs the caller resolved for this batch. */
static int validate(const uint8_t *batch, size_t len, const gl_blob_slot *slots, uint32_t nslots,
                    uint32_t *max_inline)
{
    gl_batch_reader rd;
    gl_record rec;
    *max_inline = 0;
    int rc = gl_batch_reader_open(&rd, batch, len);
    if (rc != GL_OK)
        return rc;
    while ((rc = gl_batch_reader_next(&rd, &rec)) == 1) {
        if ((rec.flags & GL_REC_INLINE) && rec.payload_len > *max_inline)
            *max_inline = rec.payload_len;
        if ((rec.flags & GL_REC_REF) &&
            (rec.ref_size > UINT32_MAX || find_slot(slots, nslots, &rec) == NULL))
            return GL_EXEC_E_REF;
        if (rec.call_id >= GL_CALL_COUNT)
            return GL_EXEC_E_CALL;
        int waiting = gl_call_waiting[rec.call_id];
        if (!(rec.flags & GL_REC_ONEWAY) != !!waiting)
            return GL_EXEC_E_ONEWAY;
        if (waiting && rd.index != rd.count)
            return GL_EXEC_E_ORDER;
    }
    return rc;
}

static void note_failed_call(gl_exec *x, int call, CUresult r)
{
    const char *name = gl_cuda_error_name((int)r);
    if (name != NULL)
        gl_exec_note(x, "%s failed with %s; a later call reports it", gl_call_name(call), name);
    else
        gl_exec_note(x, "%s failed with CUresult %d; a later call reports it", gl_call_name(call),
                     (int)r);
}

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4); /* both ends are little-endian (gl_session.h) */
}

uint32_t gl_exec_last_max_inline(const gl_exec *x)
{
    return x->last_max_inline;
}

int gl_exec_run(gl_exec *x, const uint8_t *batch, size_t len, uint8_t *reply, size_t reply_cap,
                size_t *reply_len)
{
    return gl_exec_run_blobs(x, batch, len, reply, reply_cap, reply_len, NULL, 0);
}

int gl_exec_run_blobs(gl_exec *x, const uint8_t *batch, size_t len, uint8_t *reply,
                      size_t reply_cap, size_t *reply_len, const gl_blob_slot *slots,
                      uint32_t nslots)
{
    if (reply_len != NULL)
        *reply_len = 0;
    if (reply == NULL || reply_cap < GL_REPLY_HEADER_SIZE || reply_len == NULL)
        return GL_EXEC_E_REPLY;
    int rc = validate(batch, len, slots, nslots, &x->last_max_inline);
    if (rc != GL_OK)
        return rc;
    gl_exec *prev = gl_cur;
    gl_cur = x;
    if (x->be->ops->run_begin != NULL)
        x->be->ops->run_begin(x);
    gl_batch_reader rd;
    gl_record rec;
    gl_batch_reader_open(&rd, batch, len);
    int replied = 0;
    while (gl_batch_reader_next(&rd, &rec) == 1) {
        if (rec.flags & GL_REC_REF) {
            /* The blob stands in for the payload; validate() found it. */
            const gl_blob_slot *b = find_slot(slots, nslots, &rec);
            rec.flags = (uint8_t)((rec.flags & ~GL_REC_REF) | GL_REC_INLINE);
            rec.payload = b->data;
            rec.payload_len = (uint32_t)b->len;
            rec.ref_digest = NULL;
            rec.ref_size = 0;
            x->stats.refs++;
            x->stats.bytes_ref += b->len;
        }
        gl_reply_out o = {.bytes = reply + GL_REPLY_HEADER_SIZE,
                          .cap = reply_cap - GL_REPLY_HEADER_SIZE};
        x->call = rec.call_id;
        size_t noted = x->notes.len + x->notes.dropped;
        size_t notes_len = x->notes.len;
        uint32_t notes_dropped = x->notes.dropped;
        if (gl_call_flushes_output(rec.call_id))
            ptx_devrt_flush(x->devrt);
        CUresult r = gl_dispatch(x, &rec, &o);
        x->stats.records++;
        x->stats.per_call[rec.call_id]++;
        if (r != CUDA_SUCCESS)
            x->stats.errors++;
        else if (rec.call_id == GL_CALL_glLaunch || rec.call_id == GL_CALL_glLaunchCluster)
            x->stats.launches++;
        else if (rec.call_id == GL_CALL_glMemcpyHtoD)
            x->stats.bytes_h2d += rec.payload_len;
        if (!gl_call_waiting[rec.call_id]) {
            x->stats.oneway++;
            if (r != CUDA_SUCCESS && x->deferred == CUDA_SUCCESS) {
                x->deferred = r;
                /* The program sees this error at a later call; say which call
                 * it was, unless the call said why itself. */
                if (x->notes.len + x->notes.dropped == noted)
                    note_failed_call(x, rec.call_id, r);
            }
            continue;
        }
        x->stats.waiting++;
        if (r != CUDA_SUCCESS)
            o.nvalues = 0, o.len = 0;
        x->stats.bytes_d2h += o.len;
        int quiet = (rec.flags & GL_REC_QUIET) != 0;
        put32(reply + offsetof(gl_reply_head, result), (uint32_t)r);
        put32(reply + offsetof(gl_reply_head, deferred), quiet ? 0u : (uint32_t)x->deferred);
        put32(reply + offsetof(gl_reply_head, n_values), o.nvalues);
        put32(reply + offsetof(gl_reply_head, n_bytes), (uint32_t)o.len);
        for (int k = 0; k < GL_REPLY_MAX_VALUES; k++) {
            uint64_t v = k < (int)o.nvalues ? o.values[k] : 0;
            memcpy(reply + offsetof(gl_reply_head, values) + 8 * k, &v, 8);
        }
        *reply_len = GL_REPLY_HEADER_SIZE + o.len;
        replied = 1;
        if (quiet) {
            /* A checkpoint's read: the deferred error, the notes (its own too: the
             * program never sees this call) and the output stay for the
             * program's next reply. */
            x->notes.len = notes_len;
            x->notes.dropped = notes_dropped;
            continue;
        }
        *reply_len += gl_reply_trailer(x, reply + *reply_len, reply_cap - *reply_len,
                                       r != CUDA_SUCCESS || x->deferred != CUDA_SUCCESS);
        x->deferred = CUDA_SUCCESS;
    }
    gl_cur = prev;
    return replied;
}

const char *gl_exec_strerror(int code)
{
    switch (code) {
    case GL_EXEC_E_REF:
        return "blob reference to a blob the server does not hold";
    case GL_EXEC_E_CALL:
        return "unknown call id";
    case GL_EXEC_E_ONEWAY:
        return "ONEWAY flag disagrees with the call's class";
    case GL_EXEC_E_ORDER:
        return "a waiting record must be the last of its batch";
    case GL_EXEC_E_REPLY:
        return "reply buffer smaller than a reply header";
    default:
        return gl_strerror(code);
    }
}

/* ------------------------------------------------------- call metadata */

const char *gl_call_name(int id)
{
    return id >= 0 && id < GL_CALL_COUNT ? gl_call_names[id] : NULL;
}

int gl_call_count(void)
{
    return GL_CALL_COUNT;
}

int gl_call_is_waiting(int id)
{
    return id >= 0 && id < GL_CALL_COUNT ? gl_call_waiting[id] : 0;
}

int gl_call_is_data(int id)
{
    return id >= 0 && id < GL_CALL_COUNT ? gl_call_data[id] : 0;
}

const char *gl_driver_cdef_text(void)
{
    return gl_driver_cdef;
}

const char *gl_cuda_driver_symbol(int id)
{
    return id >= 0 && id < GL_CALL_COUNT ? gl_cuda_driver_symbols[id] : NULL;
}

void gl_backend_set_user(gl_backend *be, void *user)
{
    be->user = user;
}

void gl_backend_free(gl_backend *be)
{
    if (be != NULL)
        free(be->priv);
    free(be);
}

_Static_assert(GL_CALL_COUNT <= GL_CALL_COUNT_MAX, "raise GL_CALL_COUNT_MAX");
