/*
 * pump.c — the client agent's native lanes of one session (pump.h).
 */
#include "pump.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cache/blobcache.h"
#include "gl_bytes.h"
#include "gl_session.h"
#include "wire/records.h"

gl_pump *gl_pump_new(int program_fd, uint64_t session, uint32_t max_body, gl_jlog *journal)
{
    gl_pump *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->program_fd = program_fd;
    p->session = session;
    p->max_body = max_body;
    p->journal = journal;
    p->checkpoint_at = UINT64_MAX;
    pthread_mutex_init(&p->route_mu, NULL);
    pthread_mutex_init(&p->reply_mu, NULL);
    pthread_cond_init(&p->hash_cv, NULL);
    /* A snapshot read's deadline must not move with the wall clock. */
    pthread_condattr_t monotonic;
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    pthread_cond_init(&p->capture_cv, &monotonic);
    pthread_condattr_destroy(&monotonic);
    return p;
}

void gl_pump_free(gl_pump *p)
{
    if (!p)
        return;
    if (p->hasher_on) {
        pthread_mutex_lock(&p->route_mu);
        p->hasher_quit = 1;
        pthread_cond_broadcast(&p->hash_cv);
        pthread_mutex_unlock(&p->route_mu);
        pthread_join(p->hasher, NULL);
    }
    gl_jblock_unref(p->stash);
    gl_pump_backlog_clear(p);
    free(p->backlog);
    gl_pump_capture_stop(p);
    free(p->captured);
    free(p->pre);
    gl_handover_unmap(&p->ring);
    pthread_cond_destroy(&p->capture_cv);
    pthread_cond_destroy(&p->hash_cv);
    pthread_mutex_destroy(&p->route_mu);
    pthread_mutex_destroy(&p->reply_mu);
    free(p);
}

int gl_pump_prefill(gl_pump *p, const uint8_t *buf, size_t len)
{
    free(p->pre);
    p->pre = len ? malloc(len) : NULL;
    if (len && !p->pre)
        return GL_PUMP_E_NOMEM;
    if (len)
        memcpy(p->pre, buf, len);
    p->pre_len = len;
    p->pre_off = 0;
    return 0;
}

int gl_pump_ring(gl_pump *p, int fd) { return gl_handover_map(&p->ring, fd); }

void gl_pump_route_unlock(gl_pump *p) { pthread_mutex_unlock(&p->route_mu); }
void gl_pump_reply_lock(gl_pump *p) { pthread_mutex_lock(&p->reply_mu); }
void gl_pump_reply_unlock(gl_pump *p) { pthread_mutex_unlock(&p->reply_mu); }

/* Fills buf from the program's socket: 1 done, 0 clean end before the first byte. */
static int read_exact(gl_pump *p, uint8_t *buf, size_t len)
{
    size_t got = 0;
    if (p->pre_off < p->pre_len) {
        got = p->pre_len - p->pre_off < len ? p->pre_len - p->pre_off : len;
        memcpy(buf, p->pre + p->pre_off, got);
        p->pre_off += got;
    }
    while (got < len) {
        ssize_t n = read(p->program_fd, buf + got, len - got);
        if (n > 0) {
            got += (size_t)n;
        } else if (n == 0) {
            if (got == 0)
                return 0;
            return GL_PUMP_E_TRUNCATED;
        } else if (errno != EINTR) {
            p->err = errno;
            return GL_PUMP_E_IO;
        }
    }
    return 1;
}

/* The envelope a RING note of body bytes names, copied out of the hand-over
 * ring into a new block (*out): 1 or an error. The program may write the ring
 * at any time, so its bytes are read once, and only the copy is checked. */
static int read_from_ring(gl_pump *p, uint32_t body, gl_jblock **out)
{
    uint8_t note[GL_RING_NOTE_SIZE];
    const uint8_t *src;
    uint64_t at, len;
    if (body != GL_RING_NOTE_SIZE)
        return GL_PUMP_E_RING;
    int rc = read_exact(p, note, sizeof note);
    if (rc != 1)
        return rc == 0 ? GL_PUMP_E_TRUNCATED : rc;
    if (gl_handover_locate(&p->ring, note, &src, &at, &len) != 0)
        return GL_PUMP_E_RING;
    if (len - GL_ENV_HEADER_SIZE > p->max_body) {
        p->err = (int)(len > INT32_MAX ? INT32_MAX : len);
        return GL_PUMP_E_SIZE;
    }
    gl_jblock *b = gl_jblock_new(len);
    if (!b)
        return GL_PUMP_E_NOMEM;
    memcpy(b->data, src, (size_t)len);
    __asm__ __volatile__("" ::: "memory"); /* what follows reads the copy, never the ring */
    gl_handover_release(&p->ring, at + len);
    if (gl_get_u32(b->data) != len - GL_ENV_HEADER_SIZE || gl_env_bits(b->data) != 0
        || b->data[GL_ENV_TYPE_AT] != GL_ENV_BATCH) {
        gl_jblock_unref(b);
        return GL_PUMP_E_RING;
    }
    *out = b;
    return 1;
}

/* Reads one envelope into a new block (*out); 1, GL_PUMP_END or an error. */
static int read_envelope(gl_pump *p, gl_jblock **out)
{
    uint8_t h[GL_ENV_HEADER_SIZE];
    int rc = read_exact(p, h, sizeof h);
    if (rc <= 0)
        return rc == 0 ? GL_PUMP_END : rc;
    uint32_t body = gl_get_u32(h);
    uint8_t kind = h[GL_ENV_TYPE_AT];
    if (gl_env_bits(h) != 0 || kind == 0 || kind > GL_ENV_RING)
        return GL_PUMP_E_HEADER;
    if (kind == GL_ENV_RING)
        return read_from_ring(p, body, out);
    if (kind != GL_ENV_BATCH) {
        p->err = kind;
        return GL_PUMP_E_KIND;
    }
    if (body > p->max_body) {
        p->err = (int)(body > INT32_MAX ? INT32_MAX : body);
        return GL_PUMP_E_SIZE;
    }
    gl_jblock *b = gl_jblock_new(GL_ENV_HEADER_SIZE + (uint64_t)body);
    if (!b)
        return GL_PUMP_E_NOMEM;
    memcpy(b->data, h, sizeof h);
    if (body && (rc = read_exact(p, b->data + GL_ENV_HEADER_SIZE, body)) != 1) {
        gl_jblock_unref(b);
        return rc == 0 ? GL_PUMP_E_TRUNCATED : rc;
    }
    *out = b;
    return 1;
}

/* What the fast lane must know of a batch before it forwards it. */
typedef struct {
    uint32_t max_inline; /* the largest inline payload, copies aside */
    uint32_t max_h2d;    /* the largest host-to-device copy */
    int refs;            /* blob references (only Python's cache writes them) */
    uint64_t h2d_inline; /* host-to-device bytes inline */
    uint32_t records;
    int waits;           /* the last record is a waiting call */
    int denied;          /* the first call id the journal cannot replay, else -1 */
} scanned;

static int scan(const gl_pump *p, const gl_jblock *b, scanned *out)
{
    gl_batch_reader rd;
    gl_record rec;
    int rc;
    memset(out, 0, sizeof *out);
    out->denied = -1;
    if ((rc = gl_batch_reader_open(&rd, b->data + GL_ENV_HEADER_SIZE,
                                   (size_t)b->len - GL_ENV_HEADER_SIZE)) != GL_OK)
        return rc;
    while ((rc = gl_batch_reader_next(&rd, &rec)) == 1) {
        out->records++;
        out->waits = !(rec.flags & GL_REC_ONEWAY);
        if (out->denied < 0 && gl_jlog_denies(p->journal, rec.call_id))
            out->denied = rec.call_id;
        if (rec.flags & GL_REC_INLINE) {
            if (rec.call_id == p->h2d_call) {
                out->h2d_inline += rec.payload_len;
                if (rec.payload_len > out->max_h2d)
                    out->max_h2d = rec.payload_len;
            } else if (rec.payload_len > out->max_inline) {
                out->max_inline = rec.payload_len;
            }
        }
        if (rec.flags & GL_REC_REF)
            out->refs++;
    }
    return rc < 0 ? rc : GL_OK;
}

/* The batch's record count, for the counters (the executor validates the batch). */
static uint32_t record_count(const gl_jblock *b)
{
    const uint8_t *batch = b->data + GL_ENV_HEADER_SIZE;
    return b->len >= GL_ENV_HEADER_SIZE + GL_BATCH_HEADER_SIZE
               ? gl_get_u32(batch + GL_BATCH_COUNT_AT) : 0;
}

/* gl_pump_seal_send, as a CLAIMED envelope when claims_len > 0: its header, the
 * claims, then the batch, in one sealed frame with no copy of the batch. */
static int seal_send_claimed(gl_pump *p, gl_jblock *send, int waits, const uint8_t *claims,
                             size_t claims_len)
{
    gl_put_u64(send->data + GL_ENV_SESSION_AT, p->session);
    /* The claims must not take a body the program may send past the data
     * connection's frame limit (GL_ENV_HEADER_SIZE + max_body): such a batch
     * goes without them, and the server hashes its payloads. */
    size_t body = send->len >= GL_ENV_HEADER_SIZE ? (size_t)send->len - GL_ENV_HEADER_SIZE : 0;
    if (send->len < GL_ENV_HEADER_SIZE || body + claims_len > p->max_body)
        claims_len = 0;
    p->bytes_to_server += send->len + claims_len;
    if (waits)
        p->waits_out++;
    int sent;
    if (claims_len > 0) {
        uint8_t head[GL_ENV_HEADER_SIZE];
        gl_env_header(head, GL_ENV_CLAIMED, p->session, (uint32_t)(claims_len + body));
        const uint8_t *parts[3] = {head, claims, send->data + GL_ENV_HEADER_SIZE};
        size_t lens[3] = {sizeof head, claims_len, body};
        sent = gl_stream_sendv(p->out, parts, lens, 3);
    } else {
        sent = gl_stream_send(p->out, send->data, (size_t)send->len);
    }
    gl_jblock_unref(send);
    if (sent != 0) {
        p->held = 1;
        p->err = sent;
        return GL_PUMP_LOST_SEND;
    }
    return 0;
}

int gl_pump_seal_send(gl_pump *p, gl_jblock *send, int waits)
{
    return seal_send_claimed(p, send, waits, NULL, 0);
}

/* Journals b, counts it and seals send (b itself, or what the cache work made
 * of it) onto the server's stream; the route lock held. Takes the caller's
 * references on both. 0, or GL_PUMP_LOST_SEND with the session now held. */
static int forward(gl_pump *p, gl_jblock *b, gl_jblock *send, int well_formed, int waits,
                   int denied, const uint8_t *claims, size_t claims_len)
{
    /* The journal keeps what the program sent, whatever went instead. */
    gl_jlog_keep(p->journal, b, well_formed, waits, denied);
    p->batches++;
    p->records += record_count(b);
    gl_jblock_unref(b); /* the journal keeps its own reference */
    return seal_send_claimed(p, send, waits, claims, claims_len);
}

/* b (a new reference) goes behind the backlog: 0 or GL_PUMP_E_NOMEM. */
static int backlog_add(gl_pump *p, gl_jblock *b, int waits)
{
    if (p->nbacklog == p->backlog_cap) {
        size_t cap = p->backlog_cap ? 2 * p->backlog_cap : 64;
        gl_jblock **grown = realloc(p->backlog, cap * sizeof *grown);
        if (!grown)
            return GL_PUMP_E_NOMEM;
        p->backlog = grown;
        p->backlog_cap = cap;
    }
    b->waits = (uint32_t)(waits != 0);
    gl_jblock_ref(b);
    p->backlog[p->nbacklog++] = b;
    return 0;
}

void gl_pump_backlog_clear(gl_pump *p)
{
    for (size_t i = 0; i < p->nbacklog; i++)
        gl_jblock_unref(p->backlog[i]);
    p->nbacklog = 0;
}

/* A held session's envelope (route lock held): journaled and kept for a
 * refused move, not sent. Takes the caller's reference. 0 or GL_PUMP_E_NOMEM. */
static int hold_back(gl_pump *p, gl_jblock *b, int well_formed, int waits, int denied)
{
    gl_jlog_keep(p->journal, b, well_formed, waits, denied);
    p->batches++;
    p->records += record_count(b);
    int rc = backlog_add(p, b, waits);
    gl_jblock_unref(b);
    return rc;
}

/* Sends a journaled envelope (a new reference) again, as the uplink sends a fresh
 * one but without journaling it twice: the cache work (references for what
 * the server holds, their bytes kept), the session stamp, the seal. The route
 * lock held with the session held, so no hashing thread is busy: the hashing
 * runs here. 0, GL_PUMP_LOST_SEND (still held) or GL_PUMP_E_NOMEM. */
static int send_journaled(gl_pump *p, gl_jblock *b)
{
    int waits = b->waits != 0;
    gl_jblock *send = b;
    uint8_t claims[GL_CLAIMS_MAX_BYTES];
    size_t claims_len = 0;
    if (p->blobref) {
        int rc = gl_blobref_outgoing(p->blobref, b, &send, claims, &claims_len);
        gl_jblock_unref(b); /* send has its own reference (b itself, or a new block) */
        if (rc != GL_OK)
            return GL_PUMP_E_NOMEM;
    }
    return seal_send_claimed(p, send, waits, claims, claims_len);
}

int gl_pump_release(gl_pump *p)
{
    for (size_t i = 0; i < p->nbacklog; i++) {
        gl_jblock_ref(p->backlog[i]);
        int rc = send_journaled(p, p->backlog[i]);
        if (rc != 0)
            return rc; /* held: the failover replays the journal, backlog and all */
    }
    gl_pump_backlog_clear(p);
    p->held = 0;
    return 0;
}

int gl_pump_replay(gl_pump *p, uint64_t *at, uint64_t max_bytes)
{
    uint64_t sent = 0;
    do {
        gl_jlog_state js;
        gl_jlog_get(p->journal, &js);
        if (js.broken != GL_JLOG_KEEPING)
            return GL_PUMP_E_JOURNAL;
        gl_jblock *b = gl_jlog_entry(p->journal, (size_t)*at);
        if (!b) {
            /* Caught up: the uplink forwards again, and what it held back went
             * with the journal. */
            gl_pump_backlog_clear(p);
            p->held = 0;
            return GL_PUMP_END;
        }
        sent += b->len;
        int rc = send_journaled(p, b);
        if (rc != 0)
            return rc;
        (*at)++;
    } while (sent < max_bytes);
    return GL_PUMP_REPLAYING;
}

/* The cache work of one cacheable envelope, then its forwarding. Called with
 * the route mutex held and hash_busy set, so that the route stays this
 * envelope's while the mutex is let go for hashing; returns with the mutex
 * held (the caller clears hash_busy). 0, GL_PUMP_LOST_SEND or GL_PUMP_E_NOMEM. */
static int forward_cached(gl_pump *p, gl_jblock *b, int well_formed, int waits, int denied)
{
    gl_jblock *send = NULL;
    uint8_t claims[GL_CLAIMS_MAX_BYTES];
    size_t claims_len = 0;
    pthread_mutex_unlock(&p->route_mu);
    int rc = gl_blobref_outgoing(p->blobref, b, &send, claims, &claims_len);
    pthread_mutex_lock(&p->route_mu);
    if (rc != GL_OK) {
        gl_jblock_unref(b);
        return GL_PUMP_E_NOMEM;
    }
    return forward(p, b, send, well_formed, waits, denied, claims, claims_len);
}

static void hash_done(gl_pump *p, int rc)
{
    p->hash_rc = rc;
    p->hash_busy = 0;
    pthread_cond_broadcast(&p->hash_cv);
}

/* The hashing thread: it does the cache work of one envelope at a time while
 * the uplink reads the next. From the hand-over until hash_busy clears, it
 * owns the route: gl_pump_route_lock and the uplink wait for it. */
static void *hasher_main(void *arg)
{
    gl_pump *p = arg;
    pthread_mutex_lock(&p->route_mu);
    for (;;) {
        while (!p->hash_job && !p->hasher_quit)
            pthread_cond_wait(&p->hash_cv, &p->route_mu);
        gl_jblock *b = p->hash_job;
        if (!b)
            break;
        p->hash_job = NULL;
        hash_done(p, forward_cached(p, b, p->job_well_formed, p->job_waits, p->job_denied));
    }
    pthread_mutex_unlock(&p->route_mu);
    return NULL;
}

/* Takes the route mutex once the hashing thread is done with its envelope. */
static void route_lock_idle(gl_pump *p)
{
    pthread_mutex_lock(&p->route_mu);
    while (p->hash_busy)
        pthread_cond_wait(&p->hash_cv, &p->route_mu);
}

void gl_pump_route_lock(gl_pump *p) { route_lock_idle(p); }

/* Gives b to the hashing thread (started on first use; route lock held, and
 * let go here): 1, or 0 when no thread could start (the caller hashes). */
static int hand_over(gl_pump *p, gl_jblock *b, int well_formed, int waits, int denied)
{
    if (!p->hasher_on) {
        if (pthread_create(&p->hasher, NULL, hasher_main, p) != 0)
            return 0;
        p->hasher_on = 1;
    }
    p->hash_job = b;
    p->job_well_formed = well_formed;
    p->job_waits = waits;
    p->job_denied = denied;
    p->hash_busy = 1;
    pthread_cond_broadcast(&p->hash_cv);
    pthread_mutex_unlock(&p->route_mu);
    return 1;
}

/* The next envelope: one set aside by the last call, or one read. */
static int next_envelope(gl_pump *p, gl_jblock **b)
{
    if (p->stash) {
        *b = p->stash;
        p->stash = NULL;
        return 1;
    }
    return read_envelope(p, b);
}

int gl_pump_uplink(gl_pump *p)
{
    for (;;) {
        gl_jblock *b = NULL;
        int rc = next_envelope(p, &b);
        route_lock_idle(p); /* what the hashing thread had goes first */
        if (rc != 1) {
            pthread_mutex_unlock(&p->route_mu);
            return rc;
        }
        if (p->hash_rc) {
            /* The thread's envelope failed (or its send did): say so, then go on. */
            rc = p->hash_rc;
            p->hash_rc = 0;
            p->stash = b;
            pthread_mutex_unlock(&p->route_mu);
            return rc;
        }
        uint64_t in_flight = p->waits_out - __atomic_load_n(&p->replies_in, __ATOMIC_RELAXED);
        gl_jlog_state js;
        gl_jlog_get(p->journal, &js);
        int checkpoint_due = js.broken == GL_JLOG_KEEPING && js.bytes > p->checkpoint_at
                             && in_flight == 0 && p->out && !p->held;
        if (checkpoint_due) {
            /* A safe point: nothing in flight, nothing of Python's unsent. The
             * envelope waits here while Python takes the checkpoint (which moves
             * checkpoint_at on, taken or not). */
            p->stash = b;
            pthread_mutex_unlock(&p->route_mu);
            return GL_PUMP_CHECKPOINT;
        }
        /* One pass says all the fast lane and the journal need to know. */
        scanned seen;
        int well_formed = scan(p, b, &seen) == GL_OK; /* else the executor refuses it */
        int cacheable = (p->cache_min && seen.max_inline >= p->cache_min)
                        || (p->h2d_min && seen.max_h2d >= p->h2d_min);
        int waits = well_formed && seen.waits;
        if (!p->out || p->held) {
            /* A move holds the session (or no server is attached yet): the
             * replay sends the journal, a refused move the backlog. */
            rc = hold_back(p, b, well_formed, waits, seen.denied);
            pthread_mutex_unlock(&p->route_mu);
            if (rc != 0)
                return rc;
            continue;
        }
        if (p->blobref && (cacheable || seen.refs)) {
            /* The cache work (blobref.c): hashing, references for what the
             * server holds, their bytes kept until a reply confirms them (and
             * those of references the program wrote itself). Without a cache
             * an envelope goes as it is (the server refuses what it cannot
             * resolve). */
            if (hand_over(p, b, well_formed, waits, seen.denied))
                continue;
            p->hash_busy = 1; /* no thread: the uplink hashes */
            rc = forward_cached(p, b, well_formed, waits, seen.denied);
            hash_done(p, 0);
        } else {
            p->h2d_inline += seen.h2d_inline; /* (the cache work counts its own) */
            if (p->blobref)
                gl_blobref_sent(p->blobref, waits);
            gl_jblock_ref(b);
            rc = forward(p, b, b, well_formed, waits, seen.denied, NULL, 0);
        }
        pthread_mutex_unlock(&p->route_mu);
        if (rc != 0)
            return rc;
    }
}

int gl_pump_write_program(gl_pump *p, const uint8_t *buf, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = send(p->program_fd, buf + done, len - done, MSG_NOSIGNAL);
        if (n > 0)
            done += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else
            return -1;
    }
    return 0;
}

void gl_pump_new_server(gl_pump *p)
{
    gl_jlog_state js;
    gl_jlog_get(p->journal, &js);
    p->waits_out = 0;
    pthread_mutex_lock(&p->reply_mu);
    p->drop = js.answered;
    p->swallow = 0;
    __atomic_store_n(&p->replies_in, 0, __ATOMIC_RELAXED);
    gl_pump_capture_stop(p);
    pthread_mutex_unlock(&p->reply_mu);
}

/* ------------------------------------------------------- the downlink */

int gl_pump_downlink(gl_pump *p, gl_stream *s)
{
    for (;;) {
        uint8_t *env;
        int64_t n = gl_stream_recv(s, &env);
        if (n == 0)
            return GL_PUMP_END;
        if (n < 0) {
            p->err = (int)n;
            return GL_PUMP_E_STREAM;
        }
        if (!gl_env_is(env, (uint64_t)n, GL_ENV_REPLY, p->session))
            return GL_PUMP_E_REPLY;
        pthread_mutex_lock(&p->reply_mu);
        /* In the order the server answers: an abandoned checkpoint's reads were
         * sent before the current one's, and both before the program's next call. */
        if (p->swallow > 0) {
            p->swallow--; /* an abandoned checkpoint's read: nothing of the program's */
        } else if (p->capture_due > 0) {
            p->capture_due--; /* the current checkpoint's read */
            gl_pump_capture_keep(p, env, (uint64_t)n);
        } else if (!p->closed) {
            __atomic_add_fetch(&p->replies_in, 1, __ATOMIC_RELAXED);
            if (p->blobref) /* the batches up to this reply's ran: their references hold */
                gl_blobref_replied(p->blobref);
            if (p->drop > 0) { /* a replayed call the program has the answer to */
                p->drop--;
                pthread_mutex_unlock(&p->reply_mu);
                continue;
            }
            p->replies++;
            gl_jlog_answered_add(p->journal, 1);
            p->bytes_from_server += (uint64_t)n;
            /* When the program is gone its reader notices and ends the session. */
            (void)gl_pump_write_program(p, env, (size_t)n);
        }
        pthread_mutex_unlock(&p->reply_mu);
    }
}
