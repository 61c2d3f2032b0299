/*
 * jlog.h — the memory of a client session's journal (docs/consistency.md): the
 * envelopes the program sent, in order, each in a reference-counted block.
 *
 * A block is what the client agent read the envelope into; forwarding it, keeping
 * it in the journal and handing it to Python (a replay, a checkpoint) share that
 * one copy. Each holder owns one reference; the last unref frees it.
 *
 * Threads: a jlog has its own mutex, so it may be called from any thread; the
 * session's route lock (pump.h) is what orders appends against a move.
 */
#ifndef GLEAM_JLOG_H
#define GLEAM_JLOG_H

#include <stddef.h>
#include <stdint.h>

/* cdef: begin */
typedef struct gl_jblock {
    uint32_t refs;  /* atomic */
    uint32_t waits; /* the batch ends with a waiting call */
    uint64_t len;   /* envelope bytes, header included */
    uint8_t *data;  /* the bytes, right behind this struct */
    size_t cap;     /* bytes allocated, this struct included (spares.h) */
} gl_jblock;

gl_jblock *gl_jblock_new(uint64_t len); /* one reference, bytes uninitialised; NULL: no memory */
void gl_jblock_ref(gl_jblock *b);
void gl_jblock_unref(gl_jblock *b);
/* gl_jblock_unref of the block whose bytes start at data (Python's views own one). */
void gl_jblock_unref_data(uint8_t *data);

/* Why a journal stopped keeping envelopes (Python has the words). */
enum {
    GL_JLOG_KEEPING = 0, GL_JLOG_OFF = 1, GL_JLOG_MALFORMED = 2, GL_JLOG_DENIED = 3,
    GL_JLOG_BOUND = 4, GL_JLOG_BROKEN = 5
};

typedef struct gl_jlog gl_jlog;

typedef struct {
    uint64_t bytes, entries, batches, limit, answered;
    int broken;  /* GL_JLOG_* */
    int denied;  /* with GL_JLOG_DENIED: the call id */
} gl_jlog_state;

/* deny: bitmap of call ids that cannot be replayed (copied). limit 0: off. */
gl_jlog *gl_jlog_new(uint64_t limit, const uint8_t *deny, size_t deny_len);
void gl_jlog_free(gl_jlog *j);
/* Journals one envelope whose batch starts at body_at; takes a reference when
 * kept. *waits: the batch ends with a waiting call; *max_inline, *refs: as
 * gl_journal_scan says (either may be NULL). Returns GL_JLOG_KEEPING when kept,
 * else the journal's state (it may have broken just now). */
int gl_jlog_add(gl_jlog *j, gl_jblock *b, size_t body_at, int *waits, uint32_t *max_inline,
                int *refs);
/* gl_jlog_add for a caller that has read the batch already (the client's
 * uplink, in its one pass): well_formed, whether it ends with a waiting call,
 * and the first call id gl_jlog_denies says cannot be replayed (-1: none). */
int gl_jlog_keep(gl_jlog *j, gl_jblock *b, int well_formed, int waits, int denied);
int gl_jlog_denies(const gl_jlog *j, uint16_t call_id);
/* Stops keeping (Python recorded why): everything goes at once. */
void gl_jlog_break(gl_jlog *j, int why);
/* A checkpoint: blocks[0 .. n) replace every entry (the journal takes references). */
void gl_jlog_replace(gl_jlog *j, gl_jblock *const *blocks, size_t n, uint64_t answered);
/* The i-th entry with a reference for the caller; NULL past the end. */
gl_jblock *gl_jlog_entry(gl_jlog *j, size_t i);
void gl_jlog_get(gl_jlog *j, gl_jlog_state *out);
void gl_jlog_set_answered(gl_jlog *j, uint64_t answered);
void gl_jlog_answered_add(gl_jlog *j, uint64_t n);
/* cdef: end */

#endif
