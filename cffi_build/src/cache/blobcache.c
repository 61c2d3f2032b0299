/*
 * blobcache.c — see blobcache.h. The content digest is BLAKE3 (digest.c).
 */
#include "blobcache.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "digest.h"
#include "gl_bytes.h"
#include "gl_calls.h"
#include "wire/records.h"

static int cacheable(const gl_record *rec, const gl_cache_policy *pol)
{
    uint64_t n = (rec->flags & GL_REC_REF) ? rec->ref_size : rec->payload_len;

    if (!(rec->flags & (GL_REC_INLINE | GL_REC_REF)))
        return 0;
    if (rec->call_id == GL_CALL_glMemcpyHtoD)
        return n >= pol->h2d_min;
    /* An image of more than one chunk travels in parts (exec_images.c): each
     * part is cached like a whole image. */
    if (rec->call_id == GL_CALL_glModuleLoad || rec->call_id == GL_CALL_glLibraryLoad
        || rec->call_id == GL_CALL_glImagePart)
        return n >= pol->image_min;
    /* A graph's description, like an image: a program instantiates the same
     * graph in every run (and a captured step again after each capture). */
    if (rec->call_id == GL_CALL_glGraphInstantiate)
        return n >= pol->image_min;
    return 0;
}

int gl_batch_blobs(const uint8_t *batch, size_t len, const gl_cache_policy *pol, int hash_inline,
                   gl_blob_seen *seen, uint32_t max, uint32_t *n, int *waits,
                   uint64_t *h2d_inline)
{
    gl_batch_reader rd;
    gl_record rec;
    int rc;

    *n = 0;
    *waits = 0;
    *h2d_inline = 0;
    if ((rc = gl_batch_reader_open(&rd, batch, len)) != GL_OK)
        return rc;
    for (uint32_t record = 0; (rc = gl_batch_reader_next(&rd, &rec)) == 1; record++) {
        *waits = !(rec.flags & GL_REC_ONEWAY);
        if (rec.call_id == GL_CALL_glMemcpyHtoD && (rec.flags & GL_REC_INLINE))
            *h2d_inline += rec.payload_len;
        if (*n >= max || !cacheable(&rec, pol))
            continue;
        gl_blob_seen *s = &seen[(*n)++];
        memset(s, 0, sizeof *s);
        s->call_id = rec.call_id;
        s->record = record;
        if (rec.flags & GL_REC_REF) {
            s->is_ref = 1;
            memcpy(s->digest, rec.ref_digest, GL_DIGEST_SIZE);
            s->len = rec.ref_size;
            continue;
        }
        s->offset = (uint64_t)(rec.payload - batch);
        s->len = rec.payload_len;
        if (hash_inline)
            gl_content_digest(rec.payload, rec.payload_len, s->digest);
    }
    return rc;
}

int gl_batch_rewrite_refs(const uint8_t *batch, size_t len, const gl_blob_seen *seen, uint32_t n,
                          uint8_t *out, size_t cap, size_t *out_len)
{
    gl_batch_reader rd;
    gl_batch_writer w;
    gl_record rec;
    uint32_t k = 0;
    int rc;

    *out_len = 0;
    if ((rc = gl_batch_reader_open(&rd, batch, len)) != GL_OK)
        return rc;
    if ((rc = gl_batch_writer_init(&w, out, cap, rd.seq)) != GL_OK)
        return rc;
    while ((rc = gl_batch_reader_next(&rd, &rec)) == 1) {
        uint64_t off = rec.payload ? (uint64_t)(rec.payload - batch) : 0;
        while (k < n && (seen[k].is_ref || seen[k].offset < off))
            k++;
        uint8_t fl = rec.flags & (GL_REC_ONEWAY | GL_REC_QUIET);
        if (k < n && rec.payload && seen[k].offset == off && seen[k].substitute)
            rc = gl_batch_append_ref(&w, rec.call_id, fl, rec.args, rec.nargs, seen[k].digest,
                                     rec.payload_len);
        else
            rc = gl_batch_append_record(&w, &rec);
        if (rc != GL_OK)
            return rc;
    }
    if (rc != 0)
        return rc;
    gl_batch_writer_finish(&w);
    *out_len = w.len;
    return GL_OK;
}

size_t gl_batch_claims(const gl_blob_seen *seen, uint32_t n, uint8_t *out)
{
    uint32_t count = 0;
    uint8_t *c = out + GL_CLAIMS_HEAD_SIZE;
    for (uint32_t i = 0; i < n && i < GL_BLOB_MAX_SEEN; i++) {
        if (seen[i].is_ref || seen[i].substitute)
            continue;
        gl_put_u32(c + offsetof(gl_claim, record), seen[i].record);
        gl_put_u32(c + offsetof(gl_claim, zero), 0);
        gl_put_u64(c + offsetof(gl_claim, len), seen[i].len);
        memcpy(c + offsetof(gl_claim, digest), seen[i].digest, GL_DIGEST_SIZE);
        c += GL_CLAIM_SIZE;
        count++;
    }
    if (count == 0)
        return 0;
    gl_put_u32(out + offsetof(gl_claims_head, count), count);
    gl_put_u32(out + offsetof(gl_claims_head, zero), 0);
    return (size_t)(c - out);
}

int gl_claims_open(const uint8_t *body, size_t len, const uint8_t **claims, uint32_t *count,
                   const uint8_t **batch, size_t *batch_len)
{
    if (len < GL_CLAIMS_HEAD_SIZE)
        return -1;
    uint32_t n = gl_get_u32(body + offsetof(gl_claims_head, count));
    if (n > GL_BLOB_MAX_SEEN || gl_get_u32(body + offsetof(gl_claims_head, zero)) != 0)
        return -1;
    size_t head = GL_CLAIMS_HEAD_SIZE + (size_t)n * GL_CLAIM_SIZE;
    if (head > len)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        if (gl_get_u32(body + GL_CLAIMS_HEAD_SIZE + (size_t)i * GL_CLAIM_SIZE
                       + offsetof(gl_claim, zero)) != 0)
            return -1;
    }
    *claims = body + GL_CLAIMS_HEAD_SIZE;
    *count = n;
    *batch = body + head;
    *batch_len = len - head;
    return 0;
}

void gl_claims_apply(const uint8_t *claims, uint32_t count, gl_blob_seen *seen, uint32_t n)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        gl_blob_seen *s = &seen[i];
        if (s->is_ref)
            continue;
        /* Claims come in record order, as the sender listed them: one pass. */
        while (k < count && gl_get_u32(claims + (size_t)k * GL_CLAIM_SIZE) < s->record)
            k++;
        if (k == count)
            return;
        const uint8_t *c = claims + (size_t)k * GL_CLAIM_SIZE;
        if (gl_get_u32(c + offsetof(gl_claim, record)) == s->record
            && gl_get_u64(c + offsetof(gl_claim, len)) == s->len) {
            memcpy(s->digest, c + offsetof(gl_claim, digest), GL_DIGEST_SIZE);
            s->claimed = 1;
        }
    }
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void gl_hash_speed(size_t n, int reps, double *digest_gbps, double *memcpy_gbps)
{
    uint8_t *a = malloc(n), *b = malloc(n), d[GL_DIGEST_SIZE];
    double best_digest = 0, best_cpy = 0;

    *digest_gbps = *memcpy_gbps = 0;
    if (a == NULL || b == NULL) {
        free(a);
        free(b);
        return;
    }
    for (size_t i = 0; i < n; i++)
        a[i] = (uint8_t)(i * 2654435761u >> 13);
    memset(b, 0, n);
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        memcpy(b, a, n);
        double t1 = now_s();
        gl_content_digest(a, n, d);
        double t2 = now_s();
        __asm__ volatile("" : : "r"(b), "r"(d) : "memory");
        if (t1 > t0 && n / (t1 - t0) > best_cpy)
            best_cpy = n / (t1 - t0);
        if (t2 > t1 && n / (t2 - t1) > best_digest)
            best_digest = n / (t2 - t1);
    }
    *digest_gbps = best_digest / 1e9;
    *memcpy_gbps = best_cpy / 1e9;
    free(a);
    free(b);
}
