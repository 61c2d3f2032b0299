/*
 * shelf.h — the serving agent's blobs in RAM, where its serving lanes (serve.c)
 * reach them without Python (docs/cache.md, "The native shelf").
 *
 * Python's BlobStore (peer/cache/store.py) decides what is kept: admission,
 * the segmented LRU, ghosts, the disk tier. Its RAM tier's bytes live here, in
 * reference-counted gl_shelf_blob buffers, and the shelf's table maps each
 * digest the RAM tier holds to its buffer. A serving lane resolves a batch's
 * blob references from the table (a reference each while the batch runs, so an
 * eviction meanwhile frees nothing under it), and hands the store what it would
 * have told Python per batch as events on one queue: each reference it resolved
 * (a hit: the store promotes it) and each cacheable payload it received inline
 * (an offer: copied here, hashed by the lane or under the client's claim; the
 * store admits or drops it) and each claimed blob whose check failed (a
 * refusal: the store drops its unchecked copies). The store
 * drains the queue on its own thread, and before it answers anything (a
 * summary, a lookup), so an offer a lane made before its reply is known to
 * every session that opens after that reply.
 *
 * Threads: every function may run on any thread; one mutex guards the table
 * and another the queue; hashing and copying run outside both. A digest in
 * the table is the content digest (BLAKE3) of its bytes, computed or checked
 * here, or a client's claim for bytes it sent inline: such a blob is
 * unverified until gl_shelf_check hashes it, at its first use (docs/cache.md,
 * "Claims"). Buckets are keyed with a secret, since claims are chosen by peers.
 */
#ifndef GLEAM_SHELF_H
#define GLEAM_SHELF_H

#include <stddef.h>
#include <stdint.h>

/* cdef: begin */
typedef struct gl_shelf gl_shelf;
typedef struct gl_shelf_blob gl_shelf_blob;

enum {
    GL_SHELF_HIT = 1,    /* a lane resolved a reference to this blob */
    GL_SHELF_OFFER = 2,  /* a lane received these bytes inline (blob: a new buffer) */
    GL_SHELF_REFUSED = 3 /* a claimed blob failed its check: the store drops it */
};

/* One event, taken off the queue; an offer's blob reference passes to the taker. */
typedef struct {
    int kind;
    uint8_t digest[32];
    uint64_t len;
    uint16_t call_id;
    gl_shelf_blob *blob; /* GL_SHELF_OFFER only, else NULL */
} gl_shelf_event;

typedef struct {
    uint64_t entries, bytes;          /* in the table */
    uint64_t queued, queued_bytes;    /* events waiting, and the offers' bytes among them */
    uint64_t hits, offers, dropped;   /* posted; offers dropped because the queue was full */
    uint64_t verified, verified_bytes; /* claimed blobs hashed at their first use, and matched */
    uint64_t refused;                 /* claimed blobs whose bytes did not match */
} gl_shelf_counts;

/* A shelf whose queue holds at most queue_cap bytes of offers. NULL: no memory. */
gl_shelf *gl_shelf_new(uint64_t queue_cap);
/* Frees the shelf: the table's references and every queued event's are let go. */
void gl_shelf_free(gl_shelf *sh);

/* A new buffer holding a copy of data[0 .. len), under digest, with one
 * reference (the caller's). NULL: no memory. */
gl_shelf_blob *gl_shelf_blob_new(const uint8_t *digest, const uint8_t *data, uint64_t len);
/* The same, under a digest a client claimed: unverified until gl_shelf_check. */
gl_shelf_blob *gl_shelf_blob_claimed(const uint8_t *digest, const uint8_t *data, uint64_t len);
/* 1 when b's bytes are known to hash to its digest. */
int gl_shelf_blob_verified(const gl_shelf_blob *b);
gl_shelf_blob *gl_shelf_blob_ref(gl_shelf_blob *b);
void gl_shelf_blob_unref(gl_shelf_blob *b);
const uint8_t *gl_shelf_blob_data(const gl_shelf_blob *b);
uint64_t gl_shelf_blob_len(const gl_shelf_blob *b);
/* Writes b's bytes to the file at path (created 0600 if absent; an existing
 * file is overwritten in place and cut to b's length), on stable storage when
 * it returns (fsync). Large blobs go with O_DIRECT from their page-aligned
 * buffer where the file system takes it. 0, or -errno. */
int gl_shelf_blob_write_file(const gl_shelf_blob *b, const char *path);
/* Writes one record of a disk probation log at offset (a multiple of 4096)
 * into fd: head (at most 4096 bytes, the rest of its page zeros), then b's
 * bytes from offset + 4096, taking PAGE + len rounded up to pages in all.
 * fd's O_DIRECT is set for a large blob (where the file system takes it) and
 * cleared for any other, before its bytes are written; the header goes after
 * the bytes, never after a failed write of them. No fsync: every read checks
 * the digest. 0, or -errno. */
int gl_shelf_blob_write_record(const gl_shelf_blob *b, int fd, uint64_t offset,
                               const uint8_t *head, size_t head_len);

/* The table takes its own reference on b, under b's digest (replacing what
 * was there). 0, or -1 when memory is short (b is then not in the table). */
int gl_shelf_put(gl_shelf *sh, gl_shelf_blob *b);
/* The table lets go of digest's buffer, if it holds one. */
void gl_shelf_drop(gl_shelf *sh, const uint8_t *digest);
/* Drops every entry. */
void gl_shelf_clear(gl_shelf *sh);
/* digest's buffer with a new reference for the caller, or NULL when the table
 * has none of exactly len bytes. It may hold a client's unchecked claim: pass
 * it to gl_shelf_check before its bytes are used. */
gl_shelf_blob *gl_shelf_take(gl_shelf *sh, const uint8_t *digest, uint64_t len);

/* Before b's bytes are used: 1 when they hash to its digest (hashed once, at
 * the first check of a claimed blob). 0 when they do not: b leaves the table
 * and a GL_SHELF_REFUSED event tells the store; the caller treats it as a
 * miss (the client resends the true bytes). */
int gl_shelf_check(gl_shelf *sh, gl_shelf_blob *b);

/* Queues a hit. */
void gl_shelf_post_hit(gl_shelf *sh, const uint8_t *digest, uint64_t len, uint16_t call_id);
/* Queues an offer of b (its reference passes to the queue). 0, or -1 when the
 * queue is full: b is let go, and the offer counted as dropped. */
int gl_shelf_post_offer(gl_shelf *sh, gl_shelf_blob *b, uint16_t call_id);
/* Takes the oldest event into *out: 1, or 0 when there is none. */
int gl_shelf_next_event(gl_shelf *sh, gl_shelf_event *out);
/* Waits until an event is queued (it takes none): 1; 0 when none came within
 * timeout_s; -1 once gl_shelf_close_queue was called and none is left. The
 * store's drainer waits here and takes the events under its own lock, so that
 * a summary that drains too never sees a later event applied before an earlier. */
int gl_shelf_wait(gl_shelf *sh, double timeout_s);
/* Wakes every waiter in gl_shelf_wait; later calls wait no more. */
void gl_shelf_close_queue(gl_shelf *sh);
void gl_shelf_counts_get(gl_shelf *sh, gl_shelf_counts *out);
/* cdef: end */

#endif
