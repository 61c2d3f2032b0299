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

typedef struct {
    uint32_t records;  /* records in the batch */
    int waits;         /* the last record is a waiting call (a reply will come) */
    int denied;        /* call id of the first record marked in deny, else -1 */
} gl_journal_seen;

/* Reads the batch (untrusted: every bound checked by the record reader). deny is
 * a bitmap of call ids (bit i of byte i / 8) of deny_len bytes. Returns GL_OK or
 * the reader's GL_E_* code (out is then partial). */
int gl_journal_scan(const uint8_t *batch, size_t len, const uint8_t *deny, size_t deny_len,
                    gl_journal_seen *out);

#endif
