/*
 * journal.c — one pass over a batch for the session journal (journal.h).
 */
#include "journal.h"

#include "records.h"

int gl_journal_scan(const uint8_t *batch, size_t len, const uint8_t *deny, size_t deny_len,
                    gl_journal_seen *out)
{
    gl_batch_reader rd;
    gl_record rec;
    int rc;

    out->records = 0;
    out->waits = 0;
    out->denied = -1;
    if ((rc = gl_batch_reader_open(&rd, batch, len)) != GL_OK)
        return rc;
    while ((rc = gl_batch_reader_next(&rd, &rec)) == 1) {
        out->records++;
        out->waits = !(rec.flags & GL_REC_ONEWAY);
        size_t byte = rec.call_id / 8u;
        if (out->denied < 0 && byte < deny_len && (deny[byte] >> (rec.call_id % 8u)) & 1u)
            out->denied = rec.call_id;
    }
    return rc < 0 ? rc : GL_OK;
}
