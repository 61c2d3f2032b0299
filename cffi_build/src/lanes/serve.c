/*
 * serve.c — the serving agent's native lane (serve.h).
 */
#include "serve.h"

#include <stdlib.h>
#include <string.h>

#include "gl_bytes.h"
#include "gl_session.h"
#include "wire/records.h"

gl_serve *gl_serve_new(gl_exec *x, gl_stream *s, uint64_t session, gl_shelf *shelf,
                       const gl_cache_policy *pol, size_t reply_body_cap)
{
    gl_serve *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    v->reply_cap = GL_ENV_HEADER_SIZE + reply_body_cap;
    v->reply = malloc(v->reply_cap);
    if (!v->reply) {
        free(v);
        return NULL;
    }
    v->x = x;
    v->s = s;
    v->session = session;
    if (shelf && pol) {
        v->shelf = shelf;
        v->pol = *pol;
        v->cache_min = pol->h2d_min < pol->image_min ? pol->h2d_min : pol->image_min;
    }
    return v;
}

void gl_serve_free(gl_serve *v)
{
    if (v) {
        free(v->reply);
        free(v);
    }
}

static int send_reply(gl_serve *v, size_t n)
{
    int sent = gl_stream_send(v->s, v->reply, n);
    if (sent != 0) {
        v->error = sent;
        return GL_SERVE_E_STREAM;
    }
    return 0;
}

/* Runs a batch whose references the executor could not resolve alone, with
 * the shelf's blobs as its slots: the executor's result, or GL_EXEC_E_REF when
 * the shelf misses one (nothing ran: Python's store takes it from there). */
static int run_from_shelf(gl_serve *v, const uint8_t *batch, size_t blen, size_t *reply_len)
{
    uint32_t n = 0, nslots = 0;
    int waits = 0;
    uint64_t h2d = 0;
    if (gl_batch_blobs(batch, blen, &v->pol, 0, v->seen, GL_BLOB_MAX_SEEN, &n, &waits, &h2d) != 0)
        return GL_EXEC_E_REF; /* malformed: Python's path reports it */
    int rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        const gl_blob_seen *it = &v->seen[i];
        if (!it->is_ref)
            continue;
        gl_shelf_blob *b = gl_shelf_take(v->shelf, it->digest, it->len);
        if (!b) {
            rc = GL_EXEC_E_REF;
            break;
        }
        v->held[nslots] = b;
        memcpy(v->slots[nslots].digest, it->digest, GL_DIGEST_SIZE);
        v->slots[nslots].data = gl_shelf_blob_data(b);
        v->slots[nslots].len = gl_shelf_blob_len(b);
        nslots++;
    }
    if (rc == 0) {
        rc = gl_exec_run_blobs(v->x, batch, blen, v->reply + GL_ENV_HEADER_SIZE,
                               v->reply_cap - GL_ENV_HEADER_SIZE, reply_len, v->slots, nslots);
        if (rc >= 0) {
            for (uint32_t i = 0; i < n; i++) {
                if (v->seen[i].is_ref)
                    gl_shelf_post_hit(v->shelf, v->seen[i].digest, v->seen[i].len,
                                      v->seen[i].call_id);
            }
            v->refs += nslots;
        }
    }
    for (uint32_t i = 0; i < nslots; i++)
        gl_shelf_blob_unref(v->held[i]);
    return rc;
}

/* The batch ran: its cacheable inline payloads go to the shelf's queue, hashed
 * here so that what the store admits matches its digest by construction. */
static void offer_inline(gl_serve *v, const uint8_t *batch, size_t blen)
{
    uint32_t n = 0;
    int waits = 0;
    uint64_t h2d = 0;
    if (gl_batch_blobs(batch, blen, &v->pol, 1, v->seen, GL_BLOB_MAX_SEEN, &n, &waits, &h2d) != 0)
        return;
    for (uint32_t i = 0; i < n; i++) {
        const gl_blob_seen *it = &v->seen[i];
        if (it->is_ref)
            continue;
        gl_shelf_blob *b = gl_shelf_blob_new(it->digest, batch + it->offset, it->len);
        if (b && gl_shelf_post_offer(v->shelf, b, it->call_id) == 0)
            v->offered++;
    }
}

int gl_serve_next(gl_serve *v, uint8_t **out, uint64_t *len)
{
    for (;;) {
        uint8_t *env;
        int64_t n = gl_stream_recv(v->s, &env);
        if (n == 0)
            return GL_SERVE_END;
        if (n < 0) {
            v->error = (int)n;
            return GL_SERVE_E_STREAM;
        }
        if (!gl_env_is(env, (uint64_t)n, GL_ENV_BATCH, v->session))
            return GL_SERVE_E_ENVELOPE;
        const uint8_t *batch = env + GL_ENV_HEADER_SIZE;
        size_t blen = (size_t)n - GL_ENV_HEADER_SIZE;
        size_t reply_len = 0;
        /* The executor reads the batch whole before it runs any of it: a blob
         * reference it cannot resolve stops it there, with nothing run. */
        int rc = gl_exec_run(v->x, batch, blen, v->reply + GL_ENV_HEADER_SIZE,
                             v->reply_cap - GL_ENV_HEADER_SIZE, &reply_len);
        if (rc == GL_EXEC_E_REF && v->shelf)
            rc = run_from_shelf(v, batch, blen, &reply_len);
        if (rc == GL_EXEC_E_REF) {
            *out = env;
            *len = (uint64_t)n;
            return GL_SERVE_SLOW;
        }
        if (rc < 0) {
            v->error = rc;
            return GL_SERVE_E_BATCH;
        }
        v->batches++;
        v->records += blen >= GL_BATCH_HEADER_SIZE ? gl_get_u32(batch + GL_BATCH_COUNT_AT) : 0;
        v->bytes_in += (uint64_t)n;
        if (v->shelf && gl_exec_last_max_inline(v->x) >= v->cache_min)
            offer_inline(v, batch, blen);
        if (rc != 1)
            continue;
        gl_env_header(v->reply, GL_ENV_REPLY, v->session, (uint32_t)reply_len);
        v->replies++;
        v->bytes_out += GL_ENV_HEADER_SIZE + reply_len;
        if (send_reply(v, GL_ENV_HEADER_SIZE + reply_len) != 0)
            return GL_SERVE_E_STREAM;
    }
}
