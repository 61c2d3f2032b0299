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
 * refused move the backlog (gl_pump_release); both send natively. The
 * downlink never returns a reply to Python: it writes the program's to the
 * program, drops those of replayed calls the program already had (drop) and
 * of an abandoned checkpoint (swallow), and puts those of a checkpoint's
 * snapshot reads on the pump's capture queue, from which Python's checkpoint
 * takes them (gl_pump_capture_*). Nothing runs in Python per call, and the
 * counters Python shows are these. With the blob cache on,
 * the uplink does the session's cache work (blobref.h) itself: a cacheable
 * payload the server holds goes as a reference, and the downlink confirms
 * references on each reply.
 *
 * Locks: the route lock orders the uplink's forwarding against a move (Python's
 * hold / replay / checkpoint take it too); the reply lock orders writes to the
 * program (Python's fail takes it too) and guards the capture queue, whose
 * taker waits on capture_cv. Order: route before reply.
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
#include "handover.h"

/* cdef: begin */
enum {
    GL_PUMP_MOVED = 4,        /* a move took over: a checkpoint reading gives up */
    GL_PUMP_REPLAYING = 3,    /* gl_pump_replay sent its share: call it again */
    GL_PUMP_CHECKPOINT = 2,   /* a checkpoint is due at this safe point: Python takes it,
                                 then calls the uplink again (the envelope waits in it) */
    GL_PUMP_TAKEN = 1,        /* gl_pump_capture_take: a snapshot read's reply */
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
    GL_PUMP_E_JOURNAL = -10,  /* the journal stopped keeping (Python has the words) */
    GL_PUMP_E_TIMEOUT = -11,  /* no snapshot read's reply came in time */
    GL_PUMP_E_RING = -12      /* a RING note the hand-over ring does not hold (gl_ring.h) */
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
    uint64_t swallow;        /* replies of an abandoned checkpoint still to come: not the program's */
    uint64_t drop;           /* replies of replayed calls the program already had */
    int capturing;           /* a checkpoint is reading memory back (a move ends it) */
    uint64_t capture_due;    /* replies of its reads still to come: they go on the capture queue */
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
    gl_handover ring;        /* the program's hand-over ring (the uplink's; none: head NULL) */
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
    /* The capture queue: snapshot reads' replies not taken yet, captured[taken ..
     * ncaptured), one reference each; under reply_mu. */
    gl_jblock **captured;
    size_t taken, ncaptured, captured_cap;
    int capture_nomem;       /* a reply could not be kept: the checkpoint fails */
    pthread_cond_t capture_cv;
} gl_pump;

gl_pump *gl_pump_new(int program_fd, uint64_t session, uint32_t max_body, gl_jlog *journal);
void gl_pump_free(gl_pump *p);
/* Bytes of the program's stream read before the pump took over (copied); they
 * come first. 0, or GL_PUMP_E_NOMEM. */
int gl_pump_prefill(gl_pump *p, const uint8_t *buf, size_t len);
/* Maps the hand-over ring passed to the program (gl_handover_create; the
 * caller closes fd), before the uplink starts: 0 or -errno. */
int gl_pump_ring(gl_pump *p, int fd);
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

/* A move (the route lock held, the session held): the replies to come are the
 * new server's. Those of calls the program already had (the journal's
 * answered count) are dropped, nothing of the old server's is swallowed, a
 * checkpoint still reading gives up (GL_PUMP_MOVED), and the in-flight
 * counts start again. */
void gl_pump_new_server(gl_pump *p);

/* A checkpoint's snapshot reads (the uplink's thread, out of the pump).
 * begin: replies of the reads capture_send sends from now on are the
 * checkpoint's. capture_send (the route lock held): stamps and seals one read
 * (a BATCH envelope of one quiet waiting call) to the server and counts its
 * reply as one to capture: 0, GL_PUMP_MOVED when a move took over (the session
 * held, no server, or the capture ended), GL_PUMP_LOST_SEND (now held) or
 * GL_PUMP_E_NOMEM. capture_take: the next captured reply, in order (a block
 * holding the envelope, the caller's reference), waiting at most timeout_ms:
 * GL_PUMP_TAKEN, GL_PUMP_MOVED, GL_PUMP_E_TIMEOUT or
 * GL_PUMP_E_NOMEM (a reply could not be kept). capture_end: the checkpoint is
 * over, taken or given up: the replies of its reads still to come are
 * swallowed, those not taken let go. */
void gl_pump_capture_begin(gl_pump *p);
int gl_pump_capture_send(gl_pump *p, const uint8_t *env, size_t len);
int gl_pump_capture_take(gl_pump *p, uint32_t timeout_ms, gl_jblock **out);
void gl_pump_capture_end(gl_pump *p);

/* The downlink (one thread) of stream s: writes the program's replies to it,
 * drops or captures the others (above), never returns one. GL_PUMP_END when
 * the stream ends, or an error. */
int gl_pump_downlink(gl_pump *p, gl_stream *s);

/* Writes a whole buffer to the program (the reply lock held by the caller):
 * 0, or -1 when the program's socket failed. */
int gl_pump_write_program(gl_pump *p, const uint8_t *buf, size_t len);
/* cdef: end */

/* Inside the lanes (pump.c, capture.c), not for Python. */
/* Stamps the session on send, counts it and seals it onto the server's stream;
 * the route lock held. Takes the caller's reference. 0, or GL_PUMP_LOST_SEND
 * with the session now held (what went is journaled: the link's loss starts
 * the failover that replays it). */
int gl_pump_seal_send(gl_pump *p, gl_jblock *send, int waits);
/* The reply lock held: the checkpoint stops capturing, the replies not taken
 * go and a taker waiting wakes (stop); a copy of one snapshot read's reply
 * goes on the queue (keep: counted as come from the server). */
void gl_pump_capture_stop(gl_pump *p);
void gl_pump_capture_keep(gl_pump *p, const uint8_t *env, uint64_t n);

#endif
