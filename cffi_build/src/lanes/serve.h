/*
 * serve.h — the serving agent's native lane of one session: the session's
 * executor thread reads its data connection itself, runs each batch and seals
 * the reply back (docs/architecture.md, "Data path of one waiting call").
 *
 * gl_serve_next loops in C and returns to Python only for a batch with a blob
 * reference the agent's shelf (shelf.h) does not hold (Python's store looks on
 * disk, or asks the client), at the end, or on an error. The cache work of a
 * batch stays here: its references are resolved from the shelf (each posted
 * as a hit), and its cacheable inline payloads are hashed, copied and posted
 * to the shelf as offers, before its reply is sent, so a program that starts
 * again on its reply finds them in the next session's summary (the store
 * drains the shelf's queue before it summarises). The executor is not
 * thread-safe: only the thread that calls gl_serve_next runs it. The counters
 * are read by any thread (plain 64-bit words, written by that one thread).
 */
#ifndef GLEAM_SERVE_H
#define GLEAM_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "wire/dpstream.h"
#include "exec/exec_api.h"
#include "cache/shelf.h"

/* cdef: begin */
enum {
    GL_SERVE_SLOW = 1,          /* a batch for Python to run: *out, *len (the envelope) */
    GL_SERVE_END = 0,           /* the client closed the data connection */
    GL_SERVE_E_STREAM = -1,     /* the data connection failed: GL_STREAM_E_* in error */
    GL_SERVE_E_ENVELOPE = -2,   /* not a BATCH envelope of this session */
    GL_SERVE_E_BATCH = -3,      /* the executor refused the batch: its code in error */
    GL_SERVE_E_NOMEM = -4
};

typedef struct gl_serve {
    uint64_t batches, records, replies, bytes_in, bytes_out;
    uint64_t refs;      /* blob references resolved from the shelf */
    uint64_t offered;   /* inline payloads posted to the shelf */
    int error;
    /* cdef: partial */
    uint64_t session;
    gl_exec *x;
    gl_stream *s;
    gl_shelf *shelf;    /* NULL: this agent caches nothing */
    gl_cache_policy pol;
    uint64_t cache_min; /* the smaller of pol's two thresholds */
    uint8_t *reply;     /* envelope header + reply body */
    size_t reply_cap;
    gl_blob_seen seen[GL_BLOB_MAX_SEEN];
    gl_blob_slot slots[GL_BLOB_MAX_SEEN];
    gl_shelf_blob *held[GL_BLOB_MAX_SEEN];
} gl_serve;

/* shelf NULL: no cache work (pol is then ignored; it may be NULL). */
gl_serve *gl_serve_new(gl_exec *x, gl_stream *s, uint64_t session, gl_shelf *shelf,
                       const gl_cache_policy *pol, size_t reply_body_cap);
void gl_serve_free(gl_serve *v);
int gl_serve_next(gl_serve *v, uint8_t **out, uint64_t *len);
/* cdef: end */

#endif
