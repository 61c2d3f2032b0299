/*
 * blobcache.h — the native half of gleam's content-addressed blob cache
 * (docs/cache.md): the content digest of payloads, finding the cacheable payloads of a
 * call batch, and rewriting a batch so that chosen payloads travel as blob
 * references.
 *
 * Ownership rules
 *   - Nothing here allocates or keeps a pointer past the call; every buffer
 *     is the caller's. There is no mutable global state: the functions are
 *     re-entrant and may run on any number of threads at once.
 *   - Batches are untrusted: they go through gl_batch_reader, which never
 *     reads outside the buffer.
 */
#ifndef GLEAM_BLOBCACHE_H
#define GLEAM_BLOBCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "gl_session.h"

/* cdef: begin */
#define GL_DIGEST_SIZE 32
/* Cacheable payloads looked at per batch (client and server alike); the rest
 * travel as they are. */
#define GL_BLOB_MAX_SEEN 64

/* One cacheable payload of a batch. INLINE payloads: offset/len locate the
 * bytes in the batch and digest is their content digest (BLAKE3, digest.h; computed here). REF
 * records: is_ref is 1, digest/len are the reference's, offset is 0.
 * Set substitute to 1 (caller) to have gl_batch_rewrite_refs send it as a
 * reference. */
typedef struct {
    uint8_t digest[GL_DIGEST_SIZE];
    uint64_t offset;
    uint64_t len;
    uint32_t record; /* the record's place in the batch, from 0 */
    uint16_t call_id;
    uint8_t is_ref;
    uint8_t substitute;
    uint8_t claimed; /* server: digest is the sender's claim (gl_claims_apply), not computed */
} gl_blob_seen;

/* What is worth addressing: host-to-device copies of at least h2d_min bytes,
 * module and library images of at least image_min bytes. */
typedef struct {
    uint64_t h2d_min;
    uint64_t image_min;
} gl_cache_policy;

/* A blob the executor may use for a REF record of the batch it runs. */
typedef struct {
    uint8_t digest[GL_DIGEST_SIZE];
    const uint8_t *data;
    uint64_t len;
} gl_blob_slot;

/* Walks a batch and lists its cacheable payloads (at most max; the rest are
 * ignored) in *n, hashing INLINE ones when hash_inline is set (else their
 * digest is zero). *waits is 1 when the batch ends with a waiting record;
 * *h2d_inline is the bytes of every INLINE host-to-device payload (any size).
 * Returns GL_OK or the batch's GL_E_* code. */
int gl_batch_blobs(const uint8_t *batch, size_t len, const gl_cache_policy *pol, int hash_inline,
                   gl_blob_seen *seen, uint32_t max, uint32_t *n, int *waits,
                   uint64_t *h2d_inline);

/* Writes into out the batch with every seen[i].substitute INLINE payload
 * replaced by a reference to seen[i].digest (seen is gl_batch_blobs' list
 * for this batch). *out_len is the new batch's size. GL_OK, GL_E_FULL (cap
 * too small), or the batch's GL_E_* code. */
int gl_batch_rewrite_refs(const uint8_t *batch, size_t len, const gl_blob_seen *seen, uint32_t n,
                          uint8_t *out, size_t cap, size_t *out_len);

/* Room for one batch's claims (gl_session.h): the header and one claim per
 * payload gl_batch_blobs can list. */
#define GL_CLAIMS_MAX_BYTES (GL_CLAIMS_HEAD_SIZE + GL_BLOB_MAX_SEEN * GL_CLAIM_SIZE)

/* Client: writes into out (GL_CLAIMS_MAX_BYTES of room) the claims of every
 * INLINE payload of seen that is not substituted: the digests
 * gl_batch_blobs computed. Returns the bytes written, or 0 when there is none
 * to claim. */
size_t gl_batch_claims(const gl_blob_seen *seen, uint32_t n, uint8_t *out);

/* Server: checks a CLAIMED envelope's body (untrusted) and finds the batch
 * behind its claims: 0 with *claims (the header's first claim), *count,
 * *batch and *batch_len set, or -1 when the claims are malformed (a count
 * over GL_BLOB_MAX_SEEN, a nonzero field, more claims than bytes). */
int gl_claims_open(const uint8_t *body, size_t len, const uint8_t **claims, uint32_t *count,
                   const uint8_t **batch, size_t *batch_len);

/* Server: gives each INLINE entry of seen whose record and length a claim
 * names the claimed digest (claimed set to 1). Claims that name no such
 * payload are ignored; the unclaimed keep claimed 0 (their digest is zero
 * until hashed). */
void gl_claims_apply(const uint8_t *claims, uint32_t count, gl_blob_seen *seen, uint32_t n);

/* The benchmark's reference: memcpy throughput and the content digest's over
 * one buffer of n bytes, in GB/s (best of reps). */
void gl_hash_speed(size_t n, int reps, double *digest_gbps, double *memcpy_gbps);
/* cdef: end */

#endif /* GLEAM_BLOBCACHE_H */
