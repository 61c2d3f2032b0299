/*
 * serve.c — the serving agent's native lane (serve.h).
 */
#include "serve.h"

#include <stdlib.h>
#include <string.h>

#include "cache/digest.h"
#include "gl_bytes.h"
#include "gl_session.h"
#include "wire/records.h"

/* What the steps below return to gl_serve_next's loop besides a GL_SERVE_*
 * answer for Python (GL_SERVE_END is 0, so 0 cannot mean "go on"). */
enum { SERVE_ON = 100, BATCH_READY = 101 };

/* A batch envelope's body the lane owns: the one that waits for blobs, or one
 * that came while it waited. claimed: a CLAIMED body (claims, then the batch). */
struct gl_kept_batch {
    struct gl_kept_batch *next;
    size_t len;
    int claimed;
    uint8_t body[];
};

/* The lane's own copy of a body. NULL: no memory. */
static struct gl_kept_batch *keep_copy(const uint8_t *body, size_t len, int claimed)
{
    struct gl_kept_batch *k = malloc(sizeof *k + len);
    if (k) {
        k->next = NULL;
        k->len = len;
        k->claimed = claimed;
        memcpy(k->body, body, len);
    }
    return k;
}

/* A batch envelope's body: the batch, and the sender's claims (none for a
 * BATCH). 0, or -1 when a CLAIMED body's claims are malformed. */
typedef struct {
    const uint8_t *batch, *claims;
    size_t blen;
    uint32_t nclaims;
} batch_body;

static int open_body(const uint8_t *body, size_t len, int claimed, batch_body *out)
{
    out->claims = NULL;
    out->nclaims = 0;
    out->batch = body;
    out->blen = len;
    return claimed ? gl_claims_open(body, len, &out->claims, &out->nclaims, &out->batch,
                                    &out->blen)
                   : 0;
}

gl_serve *gl_serve_new(gl_exec *x, gl_stream *s, uint64_t session, gl_shelf *shelf,
                       const gl_cache_policy *pol, size_t reply_body_cap,
                       const gl_serve_limits *lim)
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
    v->keep_cap = lim->keep_cap;
    v->blob_max = lim->blob_max;
    if (shelf && pol) {
        v->shelf = shelf;
        v->pol = *pol;
        v->cache_min = pol->h2d_min < pol->image_min ? pol->h2d_min : pol->image_min;
    }
    return v;
}

/* The waiting batch ran (or the lane ends): its wants and provided blobs go. */
static void forget_wants(gl_serve *v)
{
    for (uint32_t i = 0; i < v->nwants; i++) {
        if (v->provided[i])
            gl_shelf_blob_unref(v->provided[i]);
        v->provided[i] = NULL;
    }
    v->nwants = 0;
    free(v->waiting);
    v->waiting = NULL;
}

void gl_serve_free(gl_serve *v)
{
    if (!v)
        return;
    forget_wants(v);
    while (v->kept) {
        struct gl_kept_batch *k = v->kept;
        v->kept = k->next;
        free(k);
    }
    free(v->reply);
    free(v);
}

static int send_reply(gl_serve *v, size_t n)
{
    int sent = gl_stream_send(v->s, v->reply, n);
    if (sent != 0) {
        v->error = sent;
        return GL_SERVE_E_STREAM;
    }
    return SERVE_ON;
}

static int want_index(const gl_serve *v, const uint8_t *digest, uint64_t len)
{
    for (uint32_t i = 0; i < v->nwants; i++) {
        if (v->wants[i].len == len && memcmp(v->wants[i].digest, digest, GL_DIGEST_SIZE) == 0)
            return (int)i;
    }
    return -1;
}

/* The shelf's blob for a reference, checked (a claimed one is hashed at its
 * first use; one that fails is refused, so this is a miss). */
static gl_shelf_blob *checked_take(gl_serve *v, const gl_blob_seen *it)
{
    gl_shelf_blob *b = gl_shelf_take(v->shelf, it->digest, it->len);
    if (b && !gl_shelf_check(v->shelf, b)) {
        gl_shelf_blob_unref(b);
        return NULL;
    }
    return b;
}

/* One reference's bytes, with a reference for the caller: a provided blob,
 * else the shelf's (NULL: neither has it). *shelved says which. */
static gl_shelf_blob *find_blob(gl_serve *v, const gl_blob_seen *it, int *shelved)
{
    int w = want_index(v, it->digest, it->len);
    *shelved = 0;
    if (w >= 0 && v->provided[w])
        return gl_shelf_blob_ref(v->provided[w]);
    *shelved = 1;
    return checked_take(v, it);
}

/* Lists the batch's references that neither the shelf nor the provided blobs
 * hold as wants (distinct). 0, or -1 when one is longer than a resend can
 * carry (the batch is then refused: nothing could answer it). */
static int list_wants(gl_serve *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        const gl_blob_seen *it = &v->seen[i];
        if (!it->is_ref || want_index(v, it->digest, it->len) >= 0)
            continue;
        if (it->len > v->blob_max)
            return -1;
        gl_shelf_blob *b = checked_take(v, it);
        if (b) {
            gl_shelf_blob_unref(b);
            continue;
        }
        gl_serve_want *w = &v->wants[v->nwants++];
        memcpy(w->digest, it->digest, GL_DIGEST_SIZE);
        w->len = it->len;
        w->provided = 0;
    }
    return 0;
}

/* Runs a batch whose references the executor could not resolve alone, with
 * the shelf's and the provided blobs as its slots: the executor's result, or
 * GL_EXEC_E_REF with nothing run: wants then lists what is missing (none: the
 * batch is malformed). */
static int run_resolved(gl_serve *v, const uint8_t *batch, size_t blen, size_t *reply_len)
{
    uint32_t n = 0, nslots = 0;
    int waits = 0, missing = 0;
    uint64_t h2d = 0;
    uint8_t shelved[GL_BLOB_MAX_SEEN];
    if (gl_batch_blobs(batch, blen, &v->pol, 0, v->seen, GL_BLOB_MAX_SEEN, &n, &waits, &h2d) != 0)
        return GL_EXEC_E_REF;
    for (uint32_t i = 0; i < n && !missing; i++) {
        const gl_blob_seen *it = &v->seen[i];
        int from_shelf = 0;
        gl_shelf_blob *b = it->is_ref ? find_blob(v, it, &from_shelf) : NULL;
        shelved[i] = (uint8_t)from_shelf;
        if (!it->is_ref)
            continue;
        if (!b) {
            missing = 1;
            break;
        }
        v->held[nslots] = b;
        memcpy(v->slots[nslots].digest, it->digest, GL_DIGEST_SIZE);
        v->slots[nslots].data = gl_shelf_blob_data(b);
        v->slots[nslots].len = gl_shelf_blob_len(b);
        nslots++;
    }
    int rc = GL_EXEC_E_REF;
    if (!missing) {
        rc = gl_exec_run_blobs(v->x, batch, blen, v->reply + GL_ENV_HEADER_SIZE,
                               v->reply_cap - GL_ENV_HEADER_SIZE, reply_len, v->slots, nslots);
        if (rc >= 0) {
            /* A provided blob was counted by the store that found it. */
            for (uint32_t i = 0; i < n; i++) {
                if (v->seen[i].is_ref && shelved[i])
                    gl_shelf_post_hit(v->shelf, v->seen[i].digest, v->seen[i].len,
                                      v->seen[i].call_id);
            }
            v->refs += nslots;
        }
    }
    for (uint32_t i = 0; i < nslots; i++)
        gl_shelf_blob_unref(v->held[i]);
    if (missing && list_wants(v, n) != 0)
        forget_wants(v);
    return rc;
}

/* The batch ran: its cacheable inline payloads go to the shelf's queue. A
 * payload the client claimed a digest for goes under that digest, unverified
 * (hashed at its first use, gl_shelf_check): most first sightings are never
 * used again, and then they are never hashed here. The rest are hashed here. */
static void offer_inline(gl_serve *v, const batch_body *bb)
{
    uint32_t n = 0;
    int waits = 0;
    uint64_t h2d = 0;
    if (gl_batch_blobs(bb->batch, bb->blen, &v->pol, 0, v->seen, GL_BLOB_MAX_SEEN, &n, &waits,
                       &h2d) != 0)
        return;
    gl_claims_apply(bb->claims, bb->nclaims, v->seen, n);
    for (uint32_t i = 0; i < n; i++) {
        gl_blob_seen *it = &v->seen[i];
        if (it->is_ref)
            continue;
        const uint8_t *data = bb->batch + it->offset;
        gl_shelf_blob *b;
        if (it->claimed) {
            b = gl_shelf_blob_claimed(it->digest, data, it->len);
        } else {
            gl_content_digest(data, (size_t)it->len, it->digest);
            b = gl_shelf_blob_new(it->digest, data, it->len);
        }
        if (b && gl_shelf_post_offer(v->shelf, b, it->call_id) == 0)
            v->offered++;
    }
}

static int all_provided(const gl_serve *v)
{
    for (uint32_t i = 0; i < v->nwants; i++) {
        if (!v->wants[i].provided)
            return 0;
    }
    return 1;
}

/* Runs one batch envelope's body and sends its reply, if it has one: SERVE_ON,
 * GL_SERVE_MISS (the lane now owns the body as the one that waits: own, or a
 * copy), or an error. own: the lane's copy of the body (freed here when it
 * ran), or NULL. */
static int run_batch(gl_serve *v, const uint8_t *body, size_t len, int claimed,
                     struct gl_kept_batch *own)
{
    batch_body bb;
    if (open_body(body, len, claimed, &bb) != 0) {
        free(own);
        return GL_SERVE_E_CLAIMS;
    }
    const uint8_t *batch = bb.batch;
    size_t blen = bb.blen;
    size_t reply_len = 0;
    /* The executor reads the batch whole before it runs any of it: a blob
     * reference it cannot resolve stops it there, with nothing run. */
    int rc = gl_exec_run(v->x, batch, blen, v->reply + GL_ENV_HEADER_SIZE,
                         v->reply_cap - GL_ENV_HEADER_SIZE, &reply_len);
    if (rc == GL_EXEC_E_REF && v->shelf)
        rc = run_resolved(v, batch, blen, &reply_len);
    if (rc == GL_EXEC_E_REF && !all_provided(v)) {
        v->waiting = own ? own : keep_copy(body, len, claimed);
        if (!v->waiting) {
            forget_wants(v);
            return GL_SERVE_E_NOMEM;
        }
        return GL_SERVE_MISS;
    }
    if (rc < 0) {
        free(own);
        v->error = rc;
        return GL_SERVE_E_BATCH;
    }
    v->batches++;
    v->records += blen >= GL_BATCH_HEADER_SIZE ? gl_get_u32(batch + GL_BATCH_COUNT_AT) : 0;
    v->bytes_in += GL_ENV_HEADER_SIZE + len;
    if (v->shelf && gl_exec_last_max_inline(v->x) >= v->cache_min)
        offer_inline(v, &bb);
    free(own);
    if (rc != 1)
        return SERVE_ON;
    gl_env_header(v->reply, GL_ENV_REPLY, v->session, (uint32_t)reply_len);
    v->replies++;
    v->bytes_out += GL_ENV_HEADER_SIZE + reply_len;
    return send_reply(v, GL_ENV_HEADER_SIZE + reply_len);
}

int gl_serve_provide(gl_serve *v, const uint8_t *digest, const uint8_t *data, uint64_t len)
{
    int w = want_index(v, digest, len);
    if (w < 0 || v->wants[w].provided)
        return 1;
    gl_shelf_blob *b = gl_shelf_blob_new(digest, data, len);
    if (!b)
        return GL_SERVE_E_NOMEM;
    v->provided[w] = b;
    v->wants[w].provided = 1;
    return 0;
}

/* The next envelope off the connection: SERVE_ON with *env, *n (in the
 * stream's buffer), GL_SERVE_END or GL_SERVE_E_STREAM. */
static int read_envelope(gl_serve *v, uint8_t **env, uint64_t *n)
{
    int64_t got = gl_stream_recv(v->s, env);
    if (got == 0)
        return GL_SERVE_END;
    if (got < 0) {
        v->error = (int)got;
        return GL_SERVE_E_STREAM;
    }
    *n = (uint64_t)got;
    return SERVE_ON;
}

/* While blobs are wanted: one envelope read. A batch is kept, a resent blob
 * for a want is returned (GL_SERVE_RESENT), one for no want is dropped (an
 * answer to an earlier want). SERVE_ON, or what gl_serve_next returns. */
static int read_while_waiting(gl_serve *v)
{
    uint8_t *env;
    uint64_t n;
    int rc = read_envelope(v, &env, &n);
    if (rc != SERVE_ON)
        return rc;
    const uint8_t *body = env + GL_ENV_HEADER_SIZE;
    size_t blen = (size_t)n - GL_ENV_HEADER_SIZE; /* (used once gl_env_is checked n) */
    int claimed = gl_env_is(env, n, GL_ENV_CLAIMED, v->session);
    if (claimed || gl_env_is(env, n, GL_ENV_BATCH, v->session)) {
        struct gl_kept_batch *k = keep_copy(body, blen, claimed);
        if (!k)
            return GL_SERVE_E_NOMEM;
        if (v->kept_tail)
            v->kept_tail->next = k;
        else
            v->kept = k;
        v->kept_tail = k;
        v->kept_bytes += blen;
        return v->kept_bytes > v->keep_cap ? GL_SERVE_E_KEPT : SERVE_ON;
    }
    if (!gl_env_is(env, n, GL_ENV_BLOB, v->session) || blen < GL_DIGEST_SIZE)
        return GL_SERVE_E_ENVELOPE;
    for (uint32_t i = 0; i < v->nwants; i++) {
        if (!v->wants[i].provided && memcmp(v->wants[i].digest, body, GL_DIGEST_SIZE) == 0) {
            memcpy(v->resent_digest, body, GL_DIGEST_SIZE);
            v->resent = body + GL_DIGEST_SIZE;
            v->resent_len = blen - GL_DIGEST_SIZE;
            return GL_SERVE_RESENT;
        }
    }
    return SERVE_ON;
}

/* The next batch envelope's body to run: the oldest kept one (own set), else
 * one read off the connection. BATCH_READY with *body, *len, *claimed; or what
 * gl_serve_next returns. */
static int next_batch(gl_serve *v, const uint8_t **body, size_t *len, int *claimed,
                      struct gl_kept_batch **own)
{
    *own = v->kept;
    if (*own) {
        v->kept = (*own)->next;
        if (!v->kept)
            v->kept_tail = NULL;
        v->kept_bytes -= (*own)->len;
        *body = (*own)->body;
        *len = (*own)->len;
        *claimed = (*own)->claimed;
        return BATCH_READY;
    }
    uint8_t *env;
    uint64_t n;
    int rc = read_envelope(v, &env, &n);
    if (rc != SERVE_ON)
        return rc;
    *claimed = gl_env_is(env, n, GL_ENV_CLAIMED, v->session);
    if (!*claimed && !gl_env_is(env, n, GL_ENV_BATCH, v->session))
        return GL_SERVE_E_ENVELOPE;
    *body = env + GL_ENV_HEADER_SIZE;
    *len = (size_t)n - GL_ENV_HEADER_SIZE;
    return BATCH_READY;
}

int gl_serve_next(gl_serve *v)
{
    for (;;) {
        int rc;
        if (v->waiting && all_provided(v)) {
            struct gl_kept_batch *w = v->waiting;
            v->waiting = NULL;
            rc = run_batch(v, w->body, w->len, w->claimed, w);
            if (rc != GL_SERVE_MISS)
                forget_wants(v);
        } else if (v->waiting) {
            rc = read_while_waiting(v);
        } else {
            const uint8_t *body;
            size_t len;
            int claimed;
            struct gl_kept_batch *own;
            rc = next_batch(v, &body, &len, &claimed, &own);
            if (rc == BATCH_READY)
                rc = run_batch(v, body, len, claimed, own);
        }
        if (rc != SERVE_ON)
            return rc;
    }
}
