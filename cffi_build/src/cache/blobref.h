/*
 * blobref.h — the client agent's per-batch blob-cache work (docs/cache.md),
 * native so that the session's uplink (pump.c) does it without Python.
 *
 * gl_blobknow: the digest prefixes (GL_BLOB_PREFIX bytes) one serving node is
 * believed to hold. One per server, shared by every session to it, so it has
 * its own mutex and a reference count (Python's ServerKnowledge holds one,
 * each session's gl_blobref another).
 *
 * gl_blobref: one session's references the server has not confirmed yet. For
 * each envelope on its way to the server, gl_blobref_outgoing hashes the
 * cacheable payloads (blobcache.c), sends those the server is known to hold as
 * references, and keeps their bytes alive by a reference on the envelope's
 * block (the one the journal keeps: no copy) until a reply proves that the
 * server ran the batch that carried them. The server may still miss one (it
 * evicted it): gl_blobref_resend_of hands its bytes back for a BLOB envelope.
 *
 * Threads: every function may run on any thread (the uplink, the downlink and
 * Python's control plane share one gl_blobref); each takes the object's
 * mutex, and hashing runs outside it. Digests from a peer are untrusted: they
 * are only looked up, never trusted to be in a table.
 */
#ifndef GLEAM_BLOBREF_H
#define GLEAM_BLOBREF_H

#include <stddef.h>
#include <stdint.h>

#include "journal/jlog.h"

/* cdef: begin */
#define GL_BLOB_PREFIX 8
#define GL_BLOBREF_E_NOMEM -100 /* beside records.h's GL_E_* codes */

typedef struct gl_blobknow gl_blobknow;
typedef struct gl_blobref gl_blobref;

/* What one session's cache work has counted (a snapshot). */
typedef struct {
    uint64_t sent;            /* envelopes that went through the session's cache work */
    uint64_t h2d_sent;        /* host-to-device payload bytes of them sent as bytes */
    uint64_t candidate_bytes; /* cacheable payload bytes seen */
    uint64_t saved;           /* payload bytes replaced by references */
    uint64_t refs;            /* references sent */
    uint64_t misses;          /* references the server asked the bytes of */
    uint64_t resent;          /* bytes sent again for them */
    uint64_t pending;         /* references held, not confirmed yet */
    uint64_t pending_bytes;
    uint64_t waiting;         /* waiting batches sent, not answered yet */
} gl_blobref_counts;

gl_blobknow *gl_blobknow_new(void); /* one reference; NULL: no memory */
void gl_blobknow_unref(gl_blobknow *k);
/* Replaces the set with a server's summary: len / GL_BLOB_PREFIX prefixes
 * (a trailing partial one is ignored). 0, or -1 when memory is short (the set
 * is then empty: nothing is wrongly believed held). */
int gl_blobknow_reset(gl_blobknow *k, const uint8_t *summary, size_t len);
/* digest: at least GL_BLOB_PREFIX bytes; only the prefix counts. */
int gl_blobknow_add(gl_blobknow *k, const uint8_t *digest);
void gl_blobknow_forget(gl_blobknow *k, const uint8_t *digest);
int gl_blobknow_knows(gl_blobknow *k, const uint8_t *digest);
uint64_t gl_blobknow_count(gl_blobknow *k);

/* A session's state over knowledge k (it takes a reference); payloads as
 * gl_cache_policy says; at most pending_cap bytes held. NULL: no memory. */
gl_blobref *gl_blobref_new(gl_blobknow *k, uint64_t h2d_min, uint64_t image_min,
                           uint64_t pending_cap);
void gl_blobref_free(gl_blobref *r); /* releases every held block */

/* One envelope (b: its header, the batch behind) on its way to the server.
 * *out is what to send instead: b itself, or a new block with the references
 * in (the caller owns a reference on *out either way; the header is b's with
 * the new length). A malformed batch goes as it is (the executor refuses it).
 * claims (GL_CLAIMS_MAX_BYTES of room, or NULL): the claims of the payloads
 * that still travel as bytes (gl_batch_claims), *claims_len their size (0:
 * none), for a CLAIMED envelope (gl_session.h). GL_OK, or GL_BLOBREF_E_NOMEM
 * with *out NULL. */
int gl_blobref_outgoing(gl_blobref *r, gl_jblock *b, gl_jblock **out, uint8_t *claims,
                        size_t *claims_len);
/* An envelope with no cacheable payload went (the uplink's scan says so):
 * counted, so that replies confirm the right batches. */
void gl_blobref_sent(gl_blobref *r, int waits);
/* A reply came: the server ran every batch up to the oldest waiting one, so
 * the references they carried are confirmed and their bytes let go. */
void gl_blobref_replied(gl_blobref *r);
/* The held bytes of digest (GL_DIGEST_SIZE bytes, untrusted): a reference on
 * their block (the caller's) with the bytes at data[*off .. *off + *len), or
 * NULL when not held. Counts a miss and the bytes resent. */
gl_jblock *gl_blobref_resend_of(gl_blobref *r, const uint8_t *digest, uint64_t *off,
                                uint64_t *len);
void gl_blobref_get(gl_blobref *r, gl_blobref_counts *out);
/* cdef: end */

#endif /* GLEAM_BLOBREF_H */
