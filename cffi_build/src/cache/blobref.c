/*
 * blobref.c — the client agent's per-batch blob-cache work (blobref.h).
 * Scanning, hashing and rewriting are blobcache.c's; this file decides which
 * payloads go as references and keeps their bytes until a reply confirms them.
 */
#include "blobref.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "blobcache.h"
#include "gl_bytes.h"
#include "gl_calls.h"
#include "gl_htable.h"
#include "gl_session.h"
#include "seeded.h"
#include "wire/records.h"

#define REF_GROWTH 48 /* a reference record is at most this much longer than its
                       * payload's record without the payload (40 bytes, padding) */

/* ------------------------------------------------------------ knowledge */

struct gl_blobknow {
    pthread_mutex_t mu;
    uint32_t refs;  /* atomic */
    gl_htable set;  /* mixed prefix -> a non-NULL marker */
    int has_zero;   /* the one prefix whose mixed key is 0 (the table refuses 0) */
    uint64_t count;
    uint64_t seed;
};

static char present;

gl_blobknow *gl_blobknow_new(void)
{
    gl_blobknow *k = calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->refs = 1;
    k->seed = gl_new_seed(k);
    pthread_mutex_init(&k->mu, NULL);
    return k;
}

static void blobknow_ref(gl_blobknow *k)
{
    __atomic_add_fetch(&k->refs, 1, __ATOMIC_RELAXED);
}

void gl_blobknow_unref(gl_blobknow *k)
{
    if (!k || __atomic_sub_fetch(&k->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    gl_htable_free(&k->set);
    pthread_mutex_destroy(&k->mu);
    free(k);
}

/* With the mutex held: 0, or -1 when memory is short. */
static int know_add(gl_blobknow *k, const uint8_t *digest)
{
    uint64_t key = gl_seeded_mix(gl_get_u64(digest), k->seed);
    if (key == 0) {
        k->count += !k->has_zero;
        k->has_zero = 1;
        return 0;
    }
    if (gl_htable_find(&k->set, key))
        return 0;
    if (gl_htable_put(&k->set, key, &present) != 0)
        return -1;
    k->count++;
    return 0;
}

int gl_blobknow_reset(gl_blobknow *k, const uint8_t *summary, size_t len)
{
    int rc = 0;
    pthread_mutex_lock(&k->mu);
    gl_htable_free(&k->set);
    k->has_zero = 0;
    k->count = 0;
    for (size_t i = 0; i + GL_BLOB_PREFIX <= len; i += GL_BLOB_PREFIX) {
        if (know_add(k, summary + i) != 0) {
            gl_htable_free(&k->set);
            k->has_zero = 0;
            k->count = 0;
            rc = -1;
            break;
        }
    }
    pthread_mutex_unlock(&k->mu);
    return rc;
}

int gl_blobknow_add(gl_blobknow *k, const uint8_t *digest)
{
    pthread_mutex_lock(&k->mu);
    int rc = know_add(k, digest);
    pthread_mutex_unlock(&k->mu);
    return rc;
}

void gl_blobknow_forget(gl_blobknow *k, const uint8_t *digest)
{
    uint64_t key = gl_seeded_mix(gl_get_u64(digest), k->seed);
    pthread_mutex_lock(&k->mu);
    if (key == 0) {
        k->count -= k->has_zero;
        k->has_zero = 0;
    } else if (gl_htable_take(&k->set, key)) {
        k->count--;
    }
    pthread_mutex_unlock(&k->mu);
}

int gl_blobknow_knows(gl_blobknow *k, const uint8_t *digest)
{
    uint64_t key = gl_seeded_mix(gl_get_u64(digest), k->seed);
    pthread_mutex_lock(&k->mu);
    int known = key == 0 ? k->has_zero : gl_htable_find(&k->set, key) != NULL;
    pthread_mutex_unlock(&k->mu);
    return known;
}

uint64_t gl_blobknow_count(gl_blobknow *k)
{
    pthread_mutex_lock(&k->mu);
    uint64_t n = k->count;
    pthread_mutex_unlock(&k->mu);
    return n;
}

/* ------------------------------------------------------------ one session */

/* The bytes of one reference the server has not confirmed. */
typedef struct held {
    uint8_t digest[GL_DIGEST_SIZE];
    gl_jblock *block;      /* a reference of ours: the bytes stay alive */
    uint64_t off, len;     /* the payload in block->data */
    uint64_t index;        /* the last batch that carried it */
    struct held *same_key; /* another digest with the same table key */
    struct held *prev, *next; /* in index order: confirmation releases from the front */
} held;

struct gl_blobref {
    pthread_mutex_t mu;
    gl_blobknow *know;
    gl_cache_policy pol;
    uint64_t cap;
    uint64_t seed;
    gl_htable pending;     /* mixed key of a digest -> its chain of held */
    held *first, *last;
    uint64_t *waiting;     /* ring of the indexes of waiting batches sent */
    size_t wait_head, wait_cap;
    gl_blobref_counts c;
};

gl_blobref *gl_blobref_new(gl_blobknow *k, uint64_t h2d_min, uint64_t image_min,
                           uint64_t pending_cap)
{
    gl_blobref *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    blobknow_ref(k);
    r->know = k;
    r->pol.h2d_min = h2d_min;
    r->pol.image_min = image_min;
    r->cap = pending_cap;
    r->seed = gl_new_seed(r);
    pthread_mutex_init(&r->mu, NULL);
    return r;
}

static uint64_t key_of(const gl_blobref *r, const uint8_t *digest)
{
    uint64_t key = gl_seeded_mix(gl_get_u64(digest), r->seed);
    return key ? key : 1; /* the chain tells digests apart */
}

/* With the mutex held, as are the helpers below. */
static held *find(gl_blobref *r, const uint8_t *digest)
{
    gl_hslot *s = gl_htable_find(&r->pending, key_of(r, digest));
    for (held *h = s ? s->val : NULL; h; h = h->same_key)
        if (memcmp(h->digest, digest, GL_DIGEST_SIZE) == 0)
            return h;
    return NULL;
}

static void order_unlink(gl_blobref *r, held *h)
{
    if (h->prev)
        h->prev->next = h->next;
    else
        r->first = h->next;
    if (h->next)
        h->next->prev = h->prev;
    else
        r->last = h->prev;
    h->prev = h->next = NULL;
}

static void order_append(gl_blobref *r, held *h)
{
    h->prev = r->last;
    h->next = NULL;
    if (r->last)
        r->last->next = h;
    else
        r->first = h;
    r->last = h;
}

static void release(gl_blobref *r, held *h)
{
    uint64_t key = key_of(r, h->digest);
    gl_hslot *s = gl_htable_find(&r->pending, key);
    held **at = s ? (held **)&s->val : NULL;
    while (at && *at && *at != h)
        at = &(*at)->same_key;
    if (at && *at) {
        *at = h->same_key;
        if (s->val == NULL)
            gl_htable_take(&r->pending, key);
    }
    order_unlink(r, h);
    r->c.pending--;
    r->c.pending_bytes -= h->len;
    gl_jblock_unref(h->block);
    free(h);
}

/* Keeps the payload's bytes for a resend: 1, or 0 when the cap (or memory)
 * says no, and the payload goes as bytes. */
static int hold(gl_blobref *r, const uint8_t *digest, gl_jblock *b, uint64_t off, uint64_t len,
                uint64_t index)
{
    held *h = find(r, digest);
    if (!h) {
        if (r->c.pending_bytes + len > r->cap || !(h = calloc(1, sizeof *h)))
            return 0;
        memcpy(h->digest, digest, GL_DIGEST_SIZE);
        uint64_t key = key_of(r, digest);
        gl_hslot *s = gl_htable_find(&r->pending, key);
        if (s) {
            h->same_key = s->val;
            s->val = h;
        } else if (gl_htable_put(&r->pending, key, h) != 0) {
            free(h);
            return 0;
        }
        r->c.pending++;
    } else {
        /* Carried again: the later batch's reply confirms it. */
        order_unlink(r, h);
        r->c.pending_bytes -= h->len;
        gl_jblock_unref(h->block);
    }
    gl_jblock_ref(b);
    h->block = b;
    h->off = off;
    h->len = len;
    h->index = index;
    r->c.pending_bytes += len;
    order_append(r, h);
    return 1;
}

static int wait_push(gl_blobref *r, uint64_t index)
{
    if (r->c.waiting == r->wait_cap) {
        size_t cap = r->wait_cap ? 2 * r->wait_cap : 16;
        uint64_t *v = malloc(cap * sizeof *v);
        if (!v)
            return -1;
        for (size_t i = 0; i < r->c.waiting; i++)
            v[i] = r->waiting[(r->wait_head + i) % r->wait_cap];
        free(r->waiting);
        r->waiting = v;
        r->wait_cap = cap;
        r->wait_head = 0;
    }
    r->waiting[(r->wait_head + r->c.waiting) % r->wait_cap] = index;
    r->c.waiting++;
    return 0;
}

/* Counts one envelope sent: its index, and in the waiting ring when it waits. */
static int note_sent(gl_blobref *r, int waits, uint64_t *index)
{
    *index = ++r->c.sent;
    return waits ? wait_push(r, *index) : 0;
}

void gl_blobref_sent(gl_blobref *r, int waits)
{
    uint64_t index;
    pthread_mutex_lock(&r->mu);
    /* Without memory for the ring a reply confirms a batch early: the server
     * then asks for a blob that is gone and the session fails, as it says. */
    (void)note_sent(r, waits, &index);
    pthread_mutex_unlock(&r->mu);
}

/* Decides which payloads go as references (marks them) and counts; with the
 * mutex held. Returns how many were substituted; *removed is their bytes. */
static uint32_t substitute(gl_blobref *r, gl_jblock *b, gl_blob_seen *seen, uint32_t n,
                           uint64_t index, uint64_t *removed)
{
    uint32_t subs = 0;
    *removed = 0;
    for (uint32_t i = 0; i < n; i++) {
        gl_blob_seen *s = &seen[i];
        if (s->is_ref)
            continue;
        r->c.candidate_bytes += s->len;
        if (gl_blobknow_knows(r->know, s->digest)
            && hold(r, s->digest, b, GL_ENV_HEADER_SIZE + s->offset, s->len, index)) {
            s->substitute = 1;
            subs++;
            *removed += s->len;
            r->c.refs++;
            r->c.saved += s->len;
            if (s->call_id == GL_CALL_glMemcpyHtoD)
                r->c.h2d_sent -= s->len;
        } else {
            (void)gl_blobknow_add(r->know, s->digest); /* the server keeps what it receives */
        }
    }
    return subs;
}

int gl_blobref_outgoing(gl_blobref *r, gl_jblock *b, gl_jblock **out, uint8_t *claims,
                        size_t *claims_len)
{
    gl_blob_seen seen[GL_BLOB_MAX_SEEN];
    uint32_t n = 0;
    int waits = 0;
    uint64_t h2d = 0, index, removed;
    *out = NULL;
    if (claims_len)
        *claims_len = 0;
    /* Hashing (the costly part) runs before the mutex: replies confirm meanwhile. */
    int rc = b->len >= GL_ENV_HEADER_SIZE
                 ? gl_batch_blobs(b->data + GL_ENV_HEADER_SIZE, (size_t)b->len - GL_ENV_HEADER_SIZE,
                                  &r->pol, 1, seen, GL_BLOB_MAX_SEEN, &n, &waits, &h2d)
                 : GL_E_TRUNCATED;
    if (rc != GL_OK) /* malformed (or no libcrypto): it goes as it is */
        n = 0, waits = 0, h2d = 0;
    pthread_mutex_lock(&r->mu);
    if (note_sent(r, waits, &index) != 0) {
        pthread_mutex_unlock(&r->mu);
        return GL_BLOBREF_E_NOMEM;
    }
    r->c.h2d_sent += h2d;
    uint32_t subs = substitute(r, b, seen, n, index, &removed);
    pthread_mutex_unlock(&r->mu);
    if (claims && claims_len)
        *claims_len = gl_batch_claims(seen, n, claims);
    if (subs == 0) {
        gl_jblock_ref(b);
        *out = b;
        return GL_OK;
    }
    uint64_t cap = b->len - removed + (uint64_t)REF_GROWTH * subs;
    gl_jblock *nb = gl_jblock_new(cap);
    if (!nb)
        return GL_BLOBREF_E_NOMEM;
    size_t body = 0;
    rc = gl_batch_rewrite_refs(b->data + GL_ENV_HEADER_SIZE, (size_t)b->len - GL_ENV_HEADER_SIZE,
                               seen, n, nb->data + GL_ENV_HEADER_SIZE,
                               (size_t)cap - GL_ENV_HEADER_SIZE, &body);
    if (rc != GL_OK) { /* it scanned well a moment ago: no memory is the one way here */
        gl_jblock_unref(nb);
        return GL_BLOBREF_E_NOMEM;
    }
    memcpy(nb->data, b->data, GL_ENV_HEADER_SIZE);
    gl_put_u32(nb->data, (uint32_t)body);
    nb->len = GL_ENV_HEADER_SIZE + body;
    *out = nb;
    return GL_OK;
}

void gl_blobref_replied(gl_blobref *r)
{
    pthread_mutex_lock(&r->mu);
    if (r->c.waiting) {
        uint64_t done = r->waiting[r->wait_head];
        r->wait_head = (r->wait_head + 1) % r->wait_cap;
        r->c.waiting--;
        while (r->first && r->first->index <= done)
            release(r, r->first);
    }
    pthread_mutex_unlock(&r->mu);
}

gl_jblock *gl_blobref_resend_of(gl_blobref *r, const uint8_t *digest, uint64_t *off,
                                uint64_t *len)
{
    gl_jblock *b = NULL;
    pthread_mutex_lock(&r->mu);
    held *h = find(r, digest);
    if (h) {
        gl_jblock_ref(h->block);
        b = h->block;
        *off = h->off;
        *len = h->len;
        r->c.misses++;
        r->c.resent += h->len;
    }
    pthread_mutex_unlock(&r->mu);
    return b;
}

void gl_blobref_get(gl_blobref *r, gl_blobref_counts *out)
{
    pthread_mutex_lock(&r->mu);
    *out = r->c;
    pthread_mutex_unlock(&r->mu);
}

void gl_blobref_free(gl_blobref *r)
{
    if (!r)
        return;
    while (r->first)
        release(r, r->first);
    gl_htable_free(&r->pending);
    free(r->waiting);
    gl_blobknow_unref(r->know);
    pthread_mutex_destroy(&r->mu);
    free(r);
}
