/*
 * pump.h — the client agent's native lanes of one forwarded session
 * (docs/architecture.md, "Data path of one waiting call").
 *
 * The uplink reads the program's envelopes from its Unix socket; the downlink
 * reads the server's replies from the session's data connection (dpstream.h)
 * and writes them to the program. Each runs on its own thread and loops in C.
 * The uplink never hands Python an envelope: it returns with a request (a
 * checkpoint due at a safe point: it keeps the envelope it read and forwards
 * it when called again), at the end, or on an error. While a move holds the
 * session (or before a server is attached) it journals each envelope and keeps
 * it in its backlog, sending none: the move's replay sends the journal, a
 * refused move the backlog (gl_pump_release). The downlink drops the replies
 * Python counts in swallow and drop itself, and returns a reply to Python only
 * while it is diverted (a checkpoint's reads, an error or output owed). Nothing runs in Python per call, and the
 * counters Python shows are these. With the blob cache on,
 * the uplink does the session's cache work (blobref.h) itself: a cacheable
 * payload the server holds goes as a reference, and the downlink confirms
 * references on each reply.
 *
 * Locks: the route lock orders the uplink's forwarding against a move (Python's
 * hold / replay / checkpoint take it too); the reply lock orders writes to the
 * program (Python's deliver and fail take it too). Order: route before reply.
 * A cacheable envelope's cache work runs on the pump's own hashing thread, so
 * that hashing one envelope overlaps reading the next; from the hand-over
 * until it is sent that thread owns the route (gl_pump_route_lock waits for
 * it), which keeps the envelopes in order whoever forwards them.
 * The pump borrows program_fd, the journal and the streams; Python owns them.
 */
#ifndef GLEAM_PUMP_H
#define GLEAM_PUMP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/dpstream.h"
#include "cache/blobref.h"
#include "journal/jlog.h"

/* cdef: begin */
enum {
    GL_PUMP_REPLAYING = 3,    /* gl_pump_replay sent its share: call it again */
    GL_PUMP_CHECKPOINT = 2,   /* a checkpoint is due at this safe point: Python takes it,
                                 then calls the uplink again (the envelope waits in it) */
    GL_PUMP_DIVERTED = 1,     /* a reply for Python (the downlink's divert) */
    GL_PUMP_END = 0,          /* a clean end of stream */
    GL_PUMP_E_IO = -1,        /* the socket failed: errno in err */
    GL_PUMP_E_TRUNCATED = -2, /* the program closed its connection mid-envelope */
    GL_PUMP_E_HEADER = -3,    /* flags or reserved bits set, or an unknown type */
    GL_PUMP_E_KIND = -4,      /* not a BATCH (the type in err) */
    GL_PUMP_E_SIZE = -5,      /* larger than max_body (the size in err) */
    GL_PUMP_E_NOMEM = -6,
    GL_PUMP_E_STREAM = -7,    /* the data connection failed: GL_STREAM_E_* in err */
    GL_PUMP_E_REPLY = -8,     /* the server sent something not a REPLY of this session */
    GL_PUMP_LOST_SEND = -9,   /* a fast-lane send failed: the session is now held */
    GL_PUMP_E_JOURNAL = -10   /* the journal stopped keeping (Python has the words) */
};

typedef struct gl_pump {
    /* Route side: under the route lock. */
    gl_stream *out;          /* the session's server; NULL: none yet (held, in effect) */
    int held;                /* a move is under way (or a send failed): journal, don't send */
    uint32_t cache_min;      /* an inline payload this large is cacheable (0: none) */
    uint32_t h2d_min;        /* the same for host-to-device copies (0: none) */
    gl_blobref *blobref;     /* the session's cache work (NULL: none); set with both locks */
    uint64_t checkpoint_at;  /* journal bytes past which the next safe point checkpoints */
    uint64_t batches, records, waits_out, bytes_to_server;
    uint64_t h2d_inline;     /* host-to-device payload bytes the fast lane sent */
    uint16_t h2d_call;       /* the call id of glMemcpyHtoD */
    /* Reply side: under the reply lock. */
    int divert;              /* every reply goes to Python (a checkpoint's reads, owed output) */
    uint64_t swallow;        /* replies of an abandoned checkpoint still to come: not the program's */
    uint64_t drop;           /* replies of replayed calls the program already had */
    int closed;              /* nothing more is written to the program */
    uint64_t replies_in, replies, bytes_from_server;
    /* Set at creation. */
    int program_fd;
    uint64_t session;
    uint32_t max_body;
    int err;                 /* detail of the last error a lane returned */
    /* cdef: partial */
    gl_jlog *journal;
    uint8_t *pre;            /* bytes read before the pump took the socket */
    size_t pre_len, pre_off;
    pthread_mutex_t route_mu, reply_mu;
    /* The hashing thread (pump.c): it owns the route from a hand-over until
     * hash_busy clears; these are under route_mu. */
    pthread_cond_t hash_cv;
    pthread_t hasher;
    int hasher_on, hasher_quit, hash_busy;
    int hash_rc;             /* what its last envelope came to, for the uplink to return */
    gl_jblock *hash_job;     /* handed over, not taken yet */
    int job_well_formed, job_waits, job_denied;
    gl_jblock *stash;        /* read, set aside while the uplink returned hash_rc or
                                GL_PUMP_CHECKPOINT */
    /* Journaled while held, in order, one reference each: what a refused move
     * sends after all (gl_pump_release); under route_mu. */
    gl_jblock **backlog;
    size_t nbacklog, backlog_cap;
} gl_pump;

gl_pump *gl_pump_new(int program_fd, uint64_t session, uint32_t max_body, gl_jlog *journal);
void gl_pump_free(gl_pump *p);
/* Bytes of the program's stream read before the pump took over (copied); they
 * come first. 0, or GL_PUMP_E_NOMEM. */
int gl_pump_prefill(gl_pump *p, const uint8_t *buf, size_t len);
void gl_pump_route_lock(gl_pump *p); /* (once the hashing thread has sent its envelope) */
void gl_pump_route_unlock(gl_pump *p);
void gl_pump_reply_lock(gl_pump *p);
void gl_pump_reply_unlock(gl_pump *p);

/* The uplink (one thread): forwards (or, held, journals) every envelope of
 * the program; Python never sees one. Returns GL_PUMP_CHECKPOINT (the
 * envelope read waits in the pump until the next call), GL_PUMP_END,
 * GL_PUMP_LOST_SEND, or an error. */
int gl_pump_uplink(gl_pump *p);

/* While held (the caller holds the route lock). Both send journaled envelopes
 * as the uplink sends a fresh one (the cache work, the session stamp, the
 * seal), counting them as sent but not as the program's batches.
 * release: a refused move; the backlog goes to the server in order and the
 * session forwards again: 0, or GL_PUMP_LOST_SEND / GL_PUMP_E_NOMEM (held,
 * the backlog kept). backlog_clear: a replay sent the journal; the backlog goes.
 * replay: a move; the journal's entries from *at on go to the (new) server,
 * about max_bytes of them (one at least), *at moved past them. GL_PUMP_END:
 * caught up, the session forwards again (the backlog cleared); GL_PUMP_REPLAYING:
 * more to send (the caller lets go of the route lock, for backpressure and for
 * the uplink to journal, and calls again); GL_PUMP_E_JOURNAL, GL_PUMP_LOST_SEND,
 * GL_PUMP_E_NOMEM. */
int gl_pump_release(gl_pump *p);
void gl_pump_backlog_clear(gl_pump *p);
int gl_pump_replay(gl_pump *p, uint64_t *at, uint64_t max_bytes);

/* The downlink (one thread) of stream s: writes replies to the program unless
 * diverted. Returns GL_PUMP_DIVERTED with *out (*len bytes: the envelope inside the
 * stream's buffer, valid until the next call), GL_PUMP_END or an error. */
int gl_pump_downlink(gl_pump *p, gl_stream *s, uint8_t **out, uint64_t *len);

/* Writes a whole buffer to the program (the reply lock held by the caller):
 * 0, or -1 when the program's socket failed. */
int gl_pump_write_program(gl_pump *p, const uint8_t *buf, size_t len);
/* cdef: end */

#endif
