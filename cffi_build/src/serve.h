/*
 * serve.h — the serving agent's native lane of one session: the session's
 * executor thread reads its data connection itself, runs each batch and seals
 * the reply back (docs/architecture.md, "Data path of one waiting call").
 *
 * gl_serve_next loops in C and returns to Python only for a batch Python must
 * see (a blob reference to resolve before it runs, or cacheable payloads to
 * store after it ran: the blob store lives in Python), at the end, or on an
 * error. A batch to store that has a reply returns before its reply is sent:
 * the next call sends it, once the store holds the payloads, so a program that
 * starts again on its reply finds them in the next session's summary. The executor is not thread-safe: only
 * the thread that calls gl_serve_next runs it. The counters are read by any
 * thread (plain 64-bit words, written by that one thread).
 */
#ifndef GLEAM_SERVE_H
#define GLEAM_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "dpstream.h"
#include "exec_api.h"

/* cdef: begin */
enum {
    GL_SERVE_SLOW = 1,          /* a batch for Python to run: *out, *len (the envelope) */
    GL_SERVE_STORE = 2,         /* a batch that ran, whose payloads the store may keep */
    GL_SERVE_END = 0,           /* the client closed the data connection */
    GL_SERVE_E_STREAM = -1,     /* the data connection failed: GL_STREAM_E_* in error */
    GL_SERVE_E_ENVELOPE = -2,   /* not a BATCH envelope of this session */
    GL_SERVE_E_BATCH = -3,      /* the executor refused the batch: its code in error */
    GL_SERVE_E_NOMEM = -4
};

typedef struct gl_serve {
    uint64_t batches, records, replies, bytes_in, bytes_out;
    int error;
    uint32_t cache_min; /* inline payloads this large go to Python (0: none) */
    /* cdef: partial */
    uint64_t session;
    gl_exec *x;
    gl_stream *s;
    uint8_t *reply;     /* envelope header + reply body */
    size_t reply_cap;
    size_t reply_owed;  /* a reply held back while Python stores its batch (bytes) */
} gl_serve;

gl_serve *gl_serve_new(gl_exec *x, gl_stream *s, uint64_t session, uint32_t cache_min,
                       size_t reply_body_cap);
void gl_serve_free(gl_serve *v);
int gl_serve_next(gl_serve *v, uint8_t **out, uint64_t *len);
/* cdef: end */

#endif
