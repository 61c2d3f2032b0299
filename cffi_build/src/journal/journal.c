/*
 * journal.c — one pass over a batch for the session journal (journal.h).
 */
#include "journal.h"

#include "gl_calls.h"
#include "wire/records.h"

static int marked(const uint8_t *bits, size_t n, uint16_t id)
{
    size_t byte = id / 8u;
    return byte < n && (bits[byte] >> (id % 8u)) & 1u;
}

int gl_journal_scan(const uint8_t *batch, size_t len, const uint8_t *deny, size_t deny_len,
                    gl_journal_seen *out)
{
    gl_batch_reader rd;
    gl_record rec;
    int rc;

    out->records = 0;
    out->waits = 0;
    out->denied = -1;
    out->max_inline = 0;
    out->refs = 0;
    if ((rc = gl_batch_reader_open(&rd, batch, len)) != GL_OK)
        return rc;
    while ((rc = gl_batch_reader_next(&rd, &rec)) == 1) {
        out->records++;
        out->waits = !(rec.flags & GL_REC_ONEWAY);
        if ((rec.flags & GL_REC_INLINE) && rec.payload_len > out->max_inline)
            out->max_inline = rec.payload_len;
        if (rec.flags & GL_REC_REF)
            out->refs++;
        if (out->denied < 0 && marked(deny, deny_len, rec.call_id))
            out->denied = rec.call_id;
    }
    return rc < 0 ? rc : GL_OK;
}

/* GL_JOURNAL_* of a record a checkpoint lists, else -1. Every load's first
 * argument is the handle it minted, every unload's the handle it ends. */
static int listed(uint16_t call_id)
{
    switch (call_id) {
    case GL_CALL_glMemAlloc:
        return GL_JOURNAL_ALLOC;
    case GL_CALL_glMemFree:
        return GL_JOURNAL_FREE;
    case GL_CALL_glModuleLoad:
    case GL_CALL_glLibraryLoad:
    case GL_CALL_glModuleLoadStaged:
    case GL_CALL_glLibraryLoadStaged:
        return GL_JOURNAL_LOAD;
    case GL_CALL_cuModuleUnload:
    case GL_CALL_cuLibraryUnload:
        return GL_JOURNAL_UNLOAD;
    default:
        return -1;
    }
}

int gl_journal_compact(const uint8_t *batch, size_t len, const uint8_t *keep, size_t keep_len,
                       uint8_t *out, size_t cap, size_t *out_len, int *waits,
                       gl_journal_alloc *allocs, uint32_t max, uint32_t *n_allocs)
{
    gl_batch_reader rd;
    gl_batch_writer w;
    gl_record rec;
    int rc, full = 0;

    *out_len = 0;
    *waits = 0;
    *n_allocs = 0;
    if ((rc = gl_batch_reader_open(&rd, batch, len)) != GL_OK)
        return rc;
    if ((rc = gl_batch_writer_init(&w, out, cap, rd.seq)) != GL_OK)
        return rc;
    while ((rc = gl_batch_reader_next(&rd, &rec)) == 1) {
        int kind = listed(rec.call_id);
        if (kind >= 0) {
            if (*n_allocs < max) {
                gl_journal_alloc *a = &allocs[*n_allocs];
                a->dptr = rec.nargs > 0 ? rec.args[0] : 0;
                a->kind = kind;
                a->size = kind == GL_JOURNAL_ALLOC && rec.nargs > 1 ? rec.args[1] : 0;
            } else {
                full = 1;
            }
            (*n_allocs)++;
        }
        if (!marked(keep, keep_len, rec.call_id))
            continue;
        if ((rc = gl_batch_append_record(&w, &rec)) != GL_OK)
            return rc;
        *waits = !(rec.flags & GL_REC_ONEWAY);
    }
    if (rc < 0)
        return rc;
    if (full)
        return GL_E_FULL;
    if (w.count == 0)
        return GL_OK;
    if ((rc = gl_batch_writer_finish(&w)) != GL_OK)
        return rc;
    *out_len = w.len;
    return GL_OK;
}
