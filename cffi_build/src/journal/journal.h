/*
 * journal.h — what the client agent's session journal needs to know of a batch
 * (docs/consistency.md), read in one pass so that Python pays once per batch.
 *
 * Ownership: nothing is allocated; the batch and the deny bitmap are borrowed
 * for the duration of the call. No global state.
 */
#ifndef GLEAM_JOURNAL_H
#define GLEAM_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

/* cdef: begin */
typedef struct {
    uint32_t records;  /* records in the batch */
    int waits;         /* the last record is a waiting call (a reply will come) */
    int denied;        /* call id of the first record marked in deny, else -1 */
    uint32_t max_inline; /* the largest inline payload (a cache candidate at some size) */
    int refs;          /* records with a blob reference */
} gl_journal_seen;

/* Reads the batch (untrusted: every bound checked by the record reader). deny is
 * a bitmap of call ids (bit i of byte i / 8) of deny_len bytes. Returns GL_OK or
 * the reader's GL_E_* code (out is then partial). */
int gl_journal_scan(const uint8_t *batch, size_t len, const uint8_t *deny, size_t deny_len,
                    gl_journal_seen *out);

/* What a checkpoint must know of a batch's records, in order: a glMemAlloc
 * (dptr, size), a glMemFree (dptr), a module or library load (dptr: its minted
 * handle; its variables are kept too) and an unload (the same handle). */
enum { GL_JOURNAL_ALLOC = 0, GL_JOURNAL_FREE = 1, GL_JOURNAL_LOAD = 2, GL_JOURNAL_UNLOAD = 3 };

typedef struct {
    uint64_t dptr;
    uint64_t size;
    int kind; /* GL_JOURNAL_* */
} gl_journal_alloc;

/* A checkpoint's compaction of one journaled batch: copies into out (cap bytes,
 * a batch with the same seq) the records whose call id is marked in keep (same
 * bitmap layout as deny), and lists its allocations, frees, loads and unloads,
 * in order, in
 * allocs (max entries). *out_len is 0 when no record is kept; *waits says
 * whether the kept batch ends with a waiting call (a reply comes on replay).
 * Returns GL_OK, a reader or writer GL_E_* code, or GL_E_FULL when allocs is
 * too small (*n_allocs then says how many there are). */
int gl_journal_compact(const uint8_t *batch, size_t len, const uint8_t *keep, size_t keep_len,
                       uint8_t *out, size_t cap, size_t *out_len, int *waits,
                       gl_journal_alloc *allocs, uint32_t max, uint32_t *n_allocs);
/* cdef: end */

#endif
