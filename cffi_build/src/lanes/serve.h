/*
 * serve.h — the serving agent's native lane of one session: the session's
 * executor thread reads its data connection itself, runs each batch and seals
 * the reply back (docs/architecture.md, "Data path of one waiting call").
 *
 * gl_serve_next loops in C and returns to Python only with a request, at the
 * end, or on an error; Python never sees an envelope. The cache work of a
 * batch stays here: its references are resolved from the shelf (each posted
 * as a hit; a claimed blob is hashed at its first use), and its cacheable
 * inline payloads are copied and posted to the shelf as offers (under the
 * client's claimed digest when a CLAIMED envelope carries one, else hashed
 * here), before its reply is sent, so a program that starts
 * again on its reply finds them in the next session's summary (the store
 * drains the shelf's queue before it summarises).
 *
 * A reference the shelf (shelf.h) misses is a request: the lane keeps the
 * batch (nothing of it ran), lists the digests it lacks in wants and returns
 * GL_SERVE_MISS. Python's store answers with gl_serve_provide from its disk
 * tier, or asks the client to resend the rest (docs/cache.md, "Misses are
 * resent"), and calls gl_serve_next again. While blobs are wanted the lane
 * reads on: the batches that come are kept, in order (at most keep_cap bytes:
 * GL_SERVE_E_KEPT past it), and each BLOB the client resent for a want is
 * returned as GL_SERVE_RESENT for the store to verify and provide. Once every
 * want is provided the kept batch runs, then the batches kept behind it (each
 * may miss in turn).
 *
 * Ownership: the lane owns the waiting batch, the kept batches and the
 * provided blobs' references, and lets go of them when they ran or at
 * gl_serve_free. The executor is not thread-safe: only the thread that calls
 * gl_serve_next (and gl_serve_provide) runs it. The counters are read by any
 * thread (plain 64-bit words, written by that one thread).
 */
#ifndef GLEAM_SERVE_H
#define GLEAM_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "wire/dpstream.h"
#include "exec/exec_api.h"
#include "cache/blobcache.h"
#include "cache/shelf.h"

/* cdef: begin */
enum {
    GL_SERVE_RESENT = 2,        /* a resent blob for a want: resent_digest, resent, resent_len */
    GL_SERVE_MISS = 1,          /* a batch waits for the blobs in wants[0 .. nwants) */
    GL_SERVE_END = 0,           /* the client closed the data connection */
    GL_SERVE_E_STREAM = -1,     /* the data connection failed: GL_STREAM_E_* in error */
    GL_SERVE_E_ENVELOPE = -2,   /* not a BATCH or CLAIMED (or, while blobs are wanted, BLOB)
                                 * of this session */
    GL_SERVE_E_BATCH = -3,      /* the executor refused the batch: its code in error */
    GL_SERVE_E_NOMEM = -4,
    GL_SERVE_E_KEPT = -5,       /* more than keep_cap bytes of batches came while one waited */
    GL_SERVE_E_CLAIMS = -6      /* a CLAIMED envelope whose claims are malformed */
};

/* What the lane holds for a batch that waits: the bytes of batches kept
 * behind it, and the longest blob a want may name (what one resend carries;
 * a batch that references a longer one the shelf lacks is refused). */
typedef struct {
    uint64_t keep_cap;
    uint64_t blob_max;
} gl_serve_limits;

/* A blob a waiting batch references and the shelf does not hold. */
typedef struct {
    uint8_t digest[GL_DIGEST_SIZE];
    uint64_t len;
    uint8_t provided;   /* gl_serve_provide gave it */
} gl_serve_want;

typedef struct gl_serve {
    uint64_t batches, records, replies, bytes_in, bytes_out;
    uint64_t refs;      /* blob references resolved (from the shelf, or provided) */
    uint64_t offered;   /* inline payloads posted to the shelf */
    uint64_t kept_bytes; /* batch bytes kept behind the one that waits */
    int error;
    /* GL_SERVE_MISS: the distinct blobs the waiting batch lacks (until it runs). */
    uint32_t nwants;
    gl_serve_want wants[GL_BLOB_MAX_SEEN];
    /* GL_SERVE_RESENT: the blob's bytes, in the stream's buffer until the next
     * gl_serve_next. */
    uint8_t resent_digest[GL_DIGEST_SIZE];
    const uint8_t *resent;
    uint64_t resent_len;
    /* cdef: partial */
    uint64_t session;
    gl_exec *x;
    gl_stream *s;
    gl_shelf *shelf;    /* NULL: this agent caches nothing */
    gl_cache_policy pol;
    uint64_t cache_min; /* the smaller of pol's two thresholds */
    uint64_t keep_cap, blob_max;
    uint8_t *reply;     /* envelope header + reply body */
    size_t reply_cap;
    struct gl_kept_batch *waiting;  /* the batch that waits for its wants */
    struct gl_kept_batch *kept, *kept_tail;  /* came while it waited, oldest first */
    gl_shelf_blob *provided[GL_BLOB_MAX_SEEN];  /* by want */
    gl_blob_seen seen[GL_BLOB_MAX_SEEN];
    gl_blob_slot slots[GL_BLOB_MAX_SEEN];
    gl_shelf_blob *held[GL_BLOB_MAX_SEEN];
} gl_serve;

/* shelf NULL: no cache work (pol is then ignored; it may be NULL). */
gl_serve *gl_serve_new(gl_exec *x, gl_stream *s, uint64_t session, gl_shelf *shelf,
                       const gl_cache_policy *pol, size_t reply_body_cap,
                       const gl_serve_limits *lim);
void gl_serve_free(gl_serve *v);
/* Serves until a request, the end or an error: GL_SERVE_*. */
int gl_serve_next(gl_serve *v);
/* Gives the waiting batch the bytes of one of its wants (copied): 0; 1 when no
 * want not yet provided names digest with len bytes; GL_SERVE_E_NOMEM. */
int gl_serve_provide(gl_serve *v, const uint8_t *digest, const uint8_t *data, uint64_t len);
/* cdef: end */

#endif
