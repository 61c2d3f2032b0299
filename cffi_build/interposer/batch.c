/*
 * batch.c — the one ordered stream of records: one-way calls are appended to
 * a batch buffer (with room for the envelope header in front, so a batch goes
 * out with one send and no copy); waiting calls flush it and read the reply.
 * A flusher thread sends a batch that has been idle for GLEAM_CUDA_FLUSH_US
 * microseconds (at most twice that), so one-way work never sits in the buffer
 * while the program computes on the host.
 *
 * A reply's trailer (gl_session.h) carries the server's notes, which go to
 * stderr and the driver's log, and what the session's kernels printed (device
 * printf, a failed assertion's message), which goes to this process's stdout
 * and stderr file descriptors as NVIDIA's driver writes it: straight to the
 * descriptor, past the program's own stdio buffers, before the waiting call
 * returns. When the server says more output waits, the waiter takes it
 * (glOutputTake) before returning; a program that launched kernels since its
 * last reply takes what CUDA's flush points released when it exits.
 *
 * Locks: g_emit guards the buffer and the record of the context last sent;
 * g_wait (taken before g_emit) keeps one waiting call outstanding, which is
 * what lets the waiter read the next REPLY as its own.
 *
 * The hold (host functions, hostfn.c): while a host job is pending, the
 * one-way records of the program's threads are held back here, copied and in
 * order, and a waiting call waits until they have gone; the host-function
 * thread emits past the hold (its job's records belong where the job is) and
 * moves the held records to the batch up to the next job. Stream capture
 * sees each record first (capture.c).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gl_bytes.h"
#include "gl_calls.h"
#include "graph.h"
#include "internal.h"
#include "wire/records.h"

static pthread_mutex_t g_emit = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_wait = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond;
static uint8_t g_buf[GL_ENV_HEADER_SIZE + GL_BATCH_CAPACITY];
static gl_batch_writer g_w;
static int g_open;          /* g_w holds a batch */
static uint64_t g_seq;
static uint64_t g_sent_ctx; /* the executor's current context as we left it */
/* Records appended so far: the flusher's sign that the program is still busy
 * (a counter, not a clock read per record: one-way calls are the hot path). */
static uint64_t g_appended;
static long g_flush_us = 200;
/* A kernel was launched since the last reply (under g_emit; read at exit). */
static int g_launched;

/* The hold (under g_emit): one-way records and host jobs after a host job,
 * in the program's order. */
typedef struct held {
    struct held *next;
    int is_job;
    gl_held_job job;
    uint16_t call;
    uint8_t nargs;
    uint64_t args[GL_MAX_ARGS];
    uint8_t *payload; /* owned copy (NULL with has_payload: an empty one) */
    size_t len;
    int has_payload;
    uint64_t ctx, set_ctx, forget_ctx;
} held;
static held *g_held_head, *g_held_tail;
static int g_holding;            /* a host job is pending or running */
static size_t g_held_bytes;      /* payload bytes held (bounded) */
static pthread_cond_t g_drained; /* the hold ended, or room came free */
static pthread_cond_t g_jobs;    /* the host-function thread has something to move */
static __thread int t_host;      /* this is the host-function thread */
static __thread CUresult t_deferred; /* ... and the deferred error its last wait saw */
static __thread int t_not_behind_hold; /* its waiting calls answer NOT_READY behind a hold */
static CUresult g_owed;          /* an asynchronous error for the next waiting reply (g_wait) */
/* Held payloads beyond this make the program wait (a host function that never
 * returns must not grow the process without bound). */
#define GL_HELD_MAX ((size_t)256 << 20)

/* ---------------------------------------------------------- under g_emit */

static void writer_reset(void)
{
    gl_batch_writer_init(&g_w, g_buf + GL_ENV_HEADER_SIZE, GL_BATCH_CAPACITY, g_seq++);
    g_open = 1;
}

static CUresult flush_locked(void)
{
    struct iovec iov;

    if (!g_open || g_w.count == 0)
        return gl_ready();
    gl_batch_writer_finish(&g_w);
    gl_env_header(g_buf, GL_ENV_BATCH, 0, (uint32_t)g_w.len);
    iov.iov_base = g_buf;
    iov.iov_len = GL_ENV_HEADER_SIZE + g_w.len;
    int rc = gl_io_sendv(&iov, 1);
    writer_reset(); /* only now: the batch lives in the same buffer */
    return rc == 0 ? CUDA_SUCCESS : CUDA_ERROR_DEVICE_UNAVAILABLE;
}

/* A record whose payload is too big for the buffer: its own envelope, sent
 * with writev straight from the caller's bytes. */
static CUresult send_external(uint16_t call, uint8_t flags, const uint64_t *args, uint8_t nargs,
                              const void *payload, size_t len)
{
    static const uint8_t zeros[8];
    uint8_t head[GL_ENV_HEADER_SIZE + GL_BATCH_HEADER_SIZE + GL_RECORD_HEADER_SIZE +
                 8 * GL_MAX_ARGS];
    size_t prefix, pad;
    struct iovec iov[3];
    CUresult r = flush_locked();

    if (r != CUDA_SUCCESS)
        return r;
    if (len > UINT32_MAX ||
        gl_batch_external_prefix(head + GL_ENV_HEADER_SIZE, sizeof head - GL_ENV_HEADER_SIZE,
                                 g_seq++, call, flags, args, nargs, (uint32_t)len, &prefix,
                                 &pad) != GL_OK)
        return CUDA_ERROR_INVALID_VALUE;
    gl_env_header(head, GL_ENV_BATCH, 0, (uint32_t)(prefix + len + pad));
    iov[0].iov_base = head;
    iov[0].iov_len = GL_ENV_HEADER_SIZE + prefix;
    iov[1].iov_base = (void *)payload;
    iov[1].iov_len = len;
    iov[2].iov_base = (void *)zeros;
    iov[2].iov_len = pad;
    return gl_io_sendv(iov, pad ? 3 : 2) == 0 ? CUDA_SUCCESS : CUDA_ERROR_DEVICE_UNAVAILABLE;
}

static CUresult append_locked(uint16_t call, uint8_t flags, const uint64_t *args, uint8_t nargs,
                              const void *payload, size_t len)
{
    int rc;

    if (len > GL_INLINE_MAX)
        return send_external(call, flags, args, nargs, payload, len);
    if (!g_open)
        writer_reset();
    for (int attempt = 0; attempt < 2; attempt++) {
        /* No payload pointer means the call has no payload parameter: such a
         * record must not carry the INLINE flag (the decoder checks). */
        if (payload == NULL)
            rc = gl_batch_append(&g_w, call, flags, args, nargs);
        else
            rc = gl_batch_append_inline(&g_w, call, flags, args, nargs, payload,
                                        (uint32_t)len);
        if (rc == GL_OK) {
            if (g_w.count == 1)
                pthread_cond_signal(&g_cond);
            g_appended++;
            return CUDA_SUCCESS;
        }
        if (rc != GL_E_FULL)
            return CUDA_ERROR_INVALID_VALUE;
        CUresult r = flush_locked();
        if (r != CUDA_SUCCESS)
            return r;
    }
    return CUDA_ERROR_INVALID_VALUE;
}

/* Sends glCtxSetCurrent first when the calling thread's context is not the
 * one the executor has. */
static CUresult sync_ctx_locked(uint64_t ctx)
{
    CUresult r;

    if (ctx == 0 || ctx == g_sent_ctx)
        return CUDA_SUCCESS;
    r = append_locked(GL_CALL_glCtxSetCurrent, GL_REC_ONEWAY, &ctx, 1, NULL, 0);
    if (r == CUDA_SUCCESS)
        g_sent_ctx = ctx;
    return r;
}

/* The calling thread's context, when the call needs one. */
static CUresult needed_ctx(int flags, uint64_t *ctx)
{
    *ctx = 0;
    if (!(flags & GL_EMIT_CTX))
        return CUDA_SUCCESS;
    *ctx = gl_ctx_current();
    return *ctx != 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

/* ------------------------------------------------------------------ API */

/* A copy of a one-way record behind the hold (waits while too much is held):
 * CUDA_SUCCESS, GL_CAPTURE_PASS when the hold ended meanwhile, or an error. */
static int hold_record(uint16_t call, const uint64_t *args, uint8_t nargs, const void *payload,
                       size_t len, uint64_t ctx, uint64_t set_ctx, uint64_t forget_ctx)
{
    while (g_holding && g_held_bytes > GL_HELD_MAX)
        pthread_cond_wait(&g_drained, &g_emit);
    if (!g_holding)
        return GL_CAPTURE_PASS;
    held *h = calloc(1, sizeof *h);
    if (h == NULL || nargs > GL_MAX_ARGS || (len > 0 && (h->payload = malloc(len)) == NULL)) {
        free(h);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    h->call = call, h->nargs = nargs, h->len = len, h->has_payload = payload != NULL;
    memcpy(h->args, args, nargs * sizeof *args);
    if (len > 0)
        memcpy(h->payload, payload, len);
    h->ctx = ctx, h->set_ctx = set_ctx, h->forget_ctx = forget_ctx;
    if (g_held_tail != NULL)
        g_held_tail->next = h;
    else
        g_held_head = h;
    g_held_tail = h;
    g_held_bytes += len;
    return CUDA_SUCCESS;
}

CUresult gl_emit_ctx(uint16_t call, int flags, const uint64_t *args, uint8_t nargs,
                     const void *payload, size_t len, uint64_t set_ctx, uint64_t forget_ctx)
{
    uint64_t ctx;
    CUresult r = gl_ready();

    if (r == CUDA_SUCCESS)
        r = needed_ctx(flags, &ctx);
    if (r != CUDA_SUCCESS)
        return r;
    /* Capture sees stream-ordered records first, and stream creations always
     * (it keeps which streams are non-blocking). */
    if (!t_host && (__builtin_expect(gl_captures_live, 0) || call == GL_CALL_cuStreamCreate
                    || call == GL_CALL_cuStreamCreateWithPriority)) {
        int c = gl_capture_record(call, args, nargs, payload, len);
        if (c != GL_CAPTURE_PASS)
            return (CUresult)c;
    }
    gl_mirror_before(call, args, nargs); /* mapped and managed memory (mirror.c) */
    pthread_mutex_lock(&g_emit);
    if (g_holding && !t_host) {
        int c = hold_record(call, args, nargs, payload, len, ctx, set_ctx, forget_ctx);
        if (c != GL_CAPTURE_PASS) {
            pthread_mutex_unlock(&g_emit);
            return (CUresult)c;
        }
    }
    r = sync_ctx_locked(ctx);
    if (r == CUDA_SUCCESS)
        r = append_locked(call, GL_REC_ONEWAY, args, nargs, payload, len);
    if (r == CUDA_SUCCESS && (call == GL_CALL_glLaunch || call == GL_CALL_glLaunchCluster))
        g_launched = 1;
    if (r == CUDA_SUCCESS && set_ctx != 0)
        g_sent_ctx = set_ctx;
    if (r == CUDA_SUCCESS && forget_ctx != 0 && forget_ctx == g_sent_ctx)
        g_sent_ctx = 0;
    pthread_mutex_unlock(&g_emit);
    if (r == CUDA_SUCCESS)
        r = gl_sync_after_oneway(); /* a no-op unless GLEAM_CUDA_SYNC_CALLS=1 */
    if (r == CUDA_SUCCESS)
        r = gl_mirror_after_emit(call, args, nargs);
    return r;
}

CUresult gl_emit(uint16_t call, int flags, const uint64_t *args, uint8_t nargs,
                 const void *payload, size_t len)
{
    /* Calls that change the executor's current context keep g_sent_ctx true. */
    if (call == GL_CALL_cuCtxCreate && nargs > 0)
        return gl_emit_ctx(call, flags, args, nargs, payload, len, args[0], 0);
    if (call == GL_CALL_cuCtxDestroy && nargs > 0)
        return gl_emit_ctx(call, flags, args, nargs, payload, len, 0, args[0]);
    return gl_emit_ctx(call, flags, args, nargs, payload, len, 0, 0);
}

static CUresult lose(const char *why)
{
    gl_lost(why);
    return CUDA_ERROR_DEVICE_UNAVAILABLE;
}

/* A notes section: each line to stderr and the driver's log, named after the
 * server (its reasons are its own, not this process's). */
static CUresult read_notes(uint32_t len)
{
    char notes[GL_REPLY_NOTES_MAX + 1];
    if (gl_io_recv(notes, len) != 0)
        return CUDA_ERROR_DEVICE_UNAVAILABLE;
    notes[len] = '\0';
    const gl_session_hello *h = gl_session();
    const char *server = h != NULL && h->server[0] != '\0' ? h->server : "the server";
    for (char *line = notes, *nl; *line != '\0'; line = nl + 1) {
        nl = strchr(line, '\n');
        if (nl == NULL)
            nl = line + strlen(line) - 1; /* (a last line without its newline) */
        else
            *nl = '\0';
        if (line[0] != '\0')
            gl_log(GL_LOG_ERROR, "server", "%s: %s", server, line);
    }
    return CUDA_SUCCESS;
}

/* Writes all of buf to fd; a descriptor that fails (closed, full disk) loses
 * the rest, as the driver's write would. */
static void write_all(int fd, const uint8_t *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        buf += w;
        n -= (size_t)w;
    }
}

/* An output section: its bytes to the program's stdout or stderr, through one
 * static buffer (its reader holds g_wait: one at a time). */
static CUresult read_output(int fd, uint32_t len)
{
    static uint8_t chunk[64 * 1024];
    while (len > 0) {
        uint32_t n = len < sizeof chunk ? len : (uint32_t)sizeof chunk;
        if (gl_io_recv(chunk, n) != 0)
            return CUDA_ERROR_DEVICE_UNAVAILABLE;
        write_all(fd, chunk, n);
        len -= n;
    }
    return CUDA_SUCCESS;
}

/* The trailer's sections (gl_session.h), len bytes in all; *more when the
 * server holds more output. A section that breaks the format loses the
 * session (the stream can no longer be trusted). */
static CUresult read_trailer(uint64_t len, int error, int *more)
{
    uint64_t output = 0;
    int first = 1;
    *more = 0;
    while (len > 0) {
        uint8_t sh[GL_SECTION_HEADER_SIZE];
        if (len < sizeof sh || gl_io_recv(sh, sizeof sh) != 0)
            return len < sizeof sh ? lose("malformed reply (a section cut short)")
                                   : CUDA_ERROR_DEVICE_UNAVAILABLE;
        uint32_t n = gl_get_u32(sh + offsetof(gl_section_head, len));
        int kind = sh[offsetof(gl_section_head, kind)];
        uint8_t flags = sh[offsetof(gl_section_head, flags)];
        len -= sizeof sh;
        if (n > len || gl_get_u16(sh + offsetof(gl_section_head, zero)) != 0
            || (kind == GL_SECTION_NOTES && (!error || !first || n > GL_REPLY_NOTES_MAX))
            || (kind != GL_SECTION_NOTES && kind != GL_SECTION_STDOUT
                && kind != GL_SECTION_STDERR)
            || (kind != GL_SECTION_NOTES && (output += sizeof sh + n) > GL_REPLY_OUTPUT_MAX))
            return lose("malformed reply (a section of its trailer)");
        CUresult r = kind == GL_SECTION_NOTES ? read_notes(n)
                     : read_output(kind == GL_SECTION_STDOUT ? 1 : 2, n);
        if (r != CUDA_SUCCESS)
            return r;
        if (kind != GL_SECTION_NOTES && (flags & GL_SECTION_MORE))
            *more = 1;
        len -= n;
        first = 0;
    }
    return CUDA_SUCCESS;
}

/* Reads envelopes until the REPLY; its bytes land straight in out. *deferred:
 * an error of earlier one-way calls; *more: the server holds more output for
 * the program. */
static CUresult read_reply(uint64_t *values, uint32_t nvalues, void *out, size_t out_len,
                           CUresult *deferred_out, int *more)
{
    uint8_t h[GL_ENV_HEADER_SIZE], rh[GL_REPLY_HEADER_SIZE];
    char why[GL_FAIL_REASON_MAX + 64];

    *more = 0;
    if (gl_io_recv(h, sizeof h) != 0)
        return CUDA_ERROR_DEVICE_UNAVAILABLE;
    uint32_t len = gl_get_u32(h);
    if (h[GL_ENV_TYPE_AT] == GL_ENV_FAIL) {
        char reason[GL_FAIL_REASON_MAX + 1];
        size_t keep = len < sizeof reason - 1 ? len : sizeof reason - 1;
        if (gl_io_recv(reason, keep) != 0)
            return CUDA_ERROR_DEVICE_UNAVAILABLE;
        reason[keep] = '\0';
        snprintf(why, sizeof why, "%s", keep ? reason : "the server ended the session");
        return lose(why);
    }
    if (h[GL_ENV_TYPE_AT] != GL_ENV_REPLY || len < GL_REPLY_HEADER_SIZE) {
        snprintf(why, sizeof why, "unexpected envelope (type %u, %u bytes)", h[GL_ENV_TYPE_AT],
                 len);
        return lose(why);
    }
    if (gl_io_recv(rh, sizeof rh) != 0)
        return CUDA_ERROR_DEVICE_UNAVAILABLE;
    int32_t result = (int32_t)gl_get_u32(rh + offsetof(gl_reply_head, result));
    int32_t deferred = (int32_t)gl_get_u32(rh + offsetof(gl_reply_head, deferred));
    uint32_t n_bytes = gl_get_u32(rh + offsetof(gl_reply_head, n_bytes));
    uint64_t rest = (uint64_t)len - GL_REPLY_HEADER_SIZE - n_bytes; /* (wraps when short) */
    if (n_bytes > out_len || GL_REPLY_HEADER_SIZE + (uint64_t)n_bytes > len
        || rest > GL_REPLY_TRAILER_MAX) {
        snprintf(why, sizeof why, "malformed reply (%u bytes for a %zu-byte buffer, %u in all)",
                 n_bytes, out_len, len);
        return lose(why);
    }
    if (n_bytes > 0 && gl_io_recv(out, n_bytes) != 0)
        return CUDA_ERROR_DEVICE_UNAVAILABLE;
    CUresult r = read_trailer(rest, result != 0 || deferred != 0, more);
    if (r != CUDA_SUCCESS)
        return r;
    for (uint32_t i = 0; i < nvalues && i < GL_REPLY_MAX_VALUES; i++)
        values[i] = gl_get_u64(rh + offsetof(gl_reply_head, values) + 8 * i);
    *deferred_out = deferred;
    return result;
}

/* A waiting record and the batch before it, sent (g_wait and g_emit held). */
static CUresult send_waiting_locked(uint16_t call, const uint64_t *args, uint8_t nargs,
                                    const void *payload, size_t len, uint64_t ctx)
{
    CUresult r = sync_ctx_locked(ctx);
    if (r == CUDA_SUCCESS)
        r = append_locked(call, 0, args, nargs, payload, len);
    if (r == CUDA_SUCCESS)
        r = flush_locked();
    g_launched = 0; /* the reply carries what the flush points so far released */
    return r;
}

/* Output the server still holds for the program (g_wait held). An error a
 * one-way call of another thread left meanwhile comes with it: it becomes the
 * result of the call that waited, if that succeeded. */
static CUresult take_output(CUresult r, int more)
{
    while (more && gl_ready() == CUDA_SUCCESS) {
        CUresult deferred = CUDA_SUCCESS;
        pthread_mutex_lock(&g_emit);
        CUresult t = send_waiting_locked(GL_CALL_glOutputTake, NULL, 0, NULL, 0, 0);
        pthread_mutex_unlock(&g_emit);
        more = 0;
        if (t == CUDA_SUCCESS)
            t = read_reply(NULL, 0, NULL, 0, &deferred, &more);
        if (t == CUDA_SUCCESS)
            t = deferred;
        if (r == CUDA_SUCCESS)
            r = t;
        if (t == CUDA_ERROR_DEVICE_UNAVAILABLE)
            break;
    }
    return r;
}

CUresult gl_wait(uint16_t call, int flags, const uint64_t *args, uint8_t nargs,
                 const void *payload, size_t len, uint64_t *values, uint32_t nvalues,
                 void *out, size_t out_len)
{
    uint64_t ctx;
    CUresult r = gl_ready();

    if (r == CUDA_SUCCESS)
        r = needed_ctx(flags, &ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!t_host && __builtin_expect(gl_captures_live, 0)) {
        int c = gl_capture_record(call, args, nargs, payload, len);
        if (c != GL_CAPTURE_PASS)
            return (CUresult)c;
    }
    gl_mirror_before(call, args, nargs);
    for (;;) {
        pthread_mutex_lock(&g_wait);
        pthread_mutex_lock(&g_emit);
        if (!g_holding || t_host)
            break;
        /* Behind a host function: a query answers at once that work is
         * pending; any other waiting call waits until the hold has gone. */
        pthread_mutex_unlock(&g_wait);
        if (call == GL_CALL_cuStreamQuery || call == GL_CALL_cuEventQuery || t_not_behind_hold) {
            pthread_mutex_unlock(&g_emit);
            return CUDA_ERROR_NOT_READY;
        }
        while (g_holding)
            pthread_cond_wait(&g_drained, &g_emit);
        pthread_mutex_unlock(&g_emit);
    }
    r = send_waiting_locked(call, args, nargs, payload, len, ctx);
    pthread_mutex_unlock(&g_emit);
    CUresult deferred = CUDA_SUCCESS;
    int more = 0;
    if (r == CUDA_SUCCESS)
        r = read_reply(values, nvalues, out, out_len, &deferred, &more);
    if (t_host) {
        /* The host-function thread's calls are the program's asynchronous
         * work: an error of earlier calls stays owed to the program. */
        t_deferred = deferred;
        if (deferred != CUDA_SUCCESS && g_owed == CUDA_SUCCESS)
            g_owed = deferred;
    } else if (g_owed != CUDA_SUCCESS) {
        r = g_owed;
        g_owed = deferred; /* (a newer deferred error waits its turn) */
    } else if (deferred != CUDA_SUCCESS) {
        r = deferred;
    }
    r = take_output(r, more);
    pthread_mutex_unlock(&g_wait);
    /* What the device wrote to mapped and managed memory, before the program
     * reads it (mirror.c). */
    return gl_mirror_after_wait(call, args, nargs, r);
}

void gl_batch_not_behind_hold(void)
{
    t_not_behind_hold = 1;
}

uint64_t gl_batch_appended(void)
{
    pthread_mutex_lock(&g_emit);
    uint64_t n = g_appended;
    pthread_mutex_unlock(&g_emit);
    return n;
}

void gl_owe(CUresult r)
{
    pthread_mutex_lock(&g_wait);
    if (r != CUDA_SUCCESS && g_owed == CUDA_SUCCESS)
        g_owed = r;
    pthread_mutex_unlock(&g_wait);
}

/* ------------------------------------------------------------ the hold */

void gl_hold_become_host_thread(void)
{
    t_host = 1;
}

int gl_on_host_thread(void)
{
    return t_host;
}

CUresult gl_hold_last_deferred(void)
{
    return t_deferred;
}

CUresult gl_hold_job(const gl_held_job *job)
{
    held *h = calloc(1, sizeof *h);

    if (h == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    h->is_job = 1;
    h->job = *job;
    pthread_mutex_lock(&g_emit);
    if (g_held_tail != NULL)
        g_held_tail->next = h;
    else
        g_held_head = h;
    g_held_tail = h;
    g_holding = 1;
    pthread_cond_signal(&g_jobs);
    pthread_mutex_unlock(&g_emit);
    return CUDA_SUCCESS;
}

void gl_hold_wait(void)
{
    pthread_mutex_lock(&g_emit);
    while (g_holding)
        pthread_cond_wait(&g_drained, &g_emit);
    pthread_mutex_unlock(&g_emit);
}

int gl_hold_active(void)
{
    pthread_mutex_lock(&g_emit);
    int h = g_holding;
    pthread_mutex_unlock(&g_emit);
    return h;
}

/* Moves a held record to the batch, as gl_emit_ctx would have. */
static void release_record(held *h)
{
    if (sync_ctx_locked(h->ctx) == CUDA_SUCCESS
        && append_locked(h->call, GL_REC_ONEWAY, h->args, h->nargs,
                         h->has_payload ? (h->payload != NULL ? h->payload : (void *)h)
                                        : NULL,
                         h->len) == CUDA_SUCCESS) {
        if (h->set_ctx != 0)
            g_sent_ctx = h->set_ctx;
        if (h->forget_ctx != 0 && h->forget_ctx == g_sent_ctx)
            g_sent_ctx = 0;
    }
    g_held_bytes -= h->len;
    free(h->payload);
}

void gl_hold_next_job(gl_held_job *out)
{
    pthread_mutex_lock(&g_emit);
    for (;;) {
        held *h = g_held_head;
        if (h == NULL) {
            if (g_holding) {
                g_holding = 0;
                pthread_cond_broadcast(&g_drained);
            }
            pthread_cond_wait(&g_jobs, &g_emit);
            continue;
        }
        g_held_head = h->next;
        if (g_held_head == NULL)
            g_held_tail = NULL;
        if (h->is_job) {
            *out = h->job;
            free(h);
            break;
        }
        release_record(h);
        free(h);
        pthread_cond_broadcast(&g_drained); /* (room for a waiting program thread) */
    }
    pthread_mutex_unlock(&g_emit);
}

/* ------------------------------------------------------------ flushing */

static long us_until(const struct timespec *deadline)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (deadline->tv_sec - now.tv_sec) * 1000000L + (deadline->tv_nsec - now.tv_nsec) / 1000;
}

static void *flusher(void *unused)
{
    (void)unused;
    struct timespec deadline = {0, 0};
    uint64_t seen = 0;
    int armed = 0; /* deadline is a quiet period's end, begun when seen was read */

    pthread_mutex_lock(&g_emit);
    while (gl_ready() == CUDA_SUCCESS) {
        if (!g_open || g_w.count == 0) {
            armed = 0;
            pthread_cond_wait(&g_cond, &g_emit);
            continue;
        }
        if (!armed || g_appended != seen) {
            /* Records came since the last look: the quiet period starts now. A
             * batch therefore goes out between one and two periods after its
             * last record (a lone record: exactly one, as the first record of
             * a batch wakes this thread). */
            seen = g_appended;
            clock_gettime(CLOCK_MONOTONIC, &deadline);
            deadline.tv_nsec += g_flush_us * 1000L;
            deadline.tv_sec += deadline.tv_nsec / 1000000000L;
            deadline.tv_nsec %= 1000000000L;
            armed = 1;
        } else if (us_until(&deadline) <= 0) {
            flush_locked();
            armed = 0;
            continue;
        }
        pthread_cond_timedwait(&g_cond, &g_emit, &deadline);
    }
    pthread_mutex_unlock(&g_emit);
    return NULL;
}

void gl_batch_start(void)
{
    pthread_condattr_t attr;
    pthread_t t;
    sigset_t all, old;
    const char *env = getenv("GLEAM_CUDA_FLUSH_US");

    if (env != NULL && env[0] != '\0') {
        long v = strtol(env, NULL, 10);
        g_flush_us = v > 0 ? v : 0;
    }
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&g_cond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_cond_init(&g_drained, NULL);
    pthread_cond_init(&g_jobs, NULL);
    /* The flusher takes no signals: the program's handlers run on its own
     * threads, as they would without gleam. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pthread_create(&t, NULL, flusher, NULL) == 0)
        pthread_detach(t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* One-way work still in the buffer at exit must reach the server; after
 * launches, the output CUDA's flush points released must reach the program
 * (NVIDIA's driver prints it at each flush point, one-way ones too: a launch,
 * cudaDeviceReset). Output still in the FIFO stays there, as on a GPU, where
 * exiting does not flush it. A thread still waiting for a reply keeps the
 * session: then only the flush. */
__attribute__((destructor)) static void flush_at_exit(void)
{
    if (gl_ready() != CUDA_SUCCESS)
        return;
    pthread_mutex_lock(&g_emit);
    int owed = g_launched;
    flush_locked();
    pthread_mutex_unlock(&g_emit);
    if (owed && pthread_mutex_trylock(&g_wait) == 0) {
        take_output(CUDA_SUCCESS, 1);
        pthread_mutex_unlock(&g_wait);
    }
}
