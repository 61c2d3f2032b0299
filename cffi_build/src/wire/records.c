/*
 * records.c — encoder and decoder of gleam's data-plane call batches.
 *
 * Ownership rules (the same as in records.h):
 *   - Nothing here allocates, and there is no static mutable state.
 *   - The writer writes only inside the caller's buf[0 .. cap); it copies
 *     args, payloads and digests in and keeps no pointer to them.
 *   - The reader only reads buf[0 .. len) and hands out pointers into it;
 *     they live as long as the caller's buffer.
 *
 * Every multi-byte field goes through get_uNN/put_uNN, which move single
 * bytes, so the code neither depends on host byte order nor on the
 * alignment of the caller's buffer (a batch may start at any address).
 *
 * Size arithmetic on untrusted lengths is done in uint64_t on values that
 * are each below 2^33, so no sum can wrap; every offset is compared with
 * the bytes that remain before it is used.
 */
#include "records.h"

#include <string.h>

#include "gl_bytes.h"

_Static_assert(SIZE_MAX >= UINT32_MAX, "size_t must hold any u32 batch length");

/* Batch header offsets. */
enum {
    HDR_MAGIC = 0,
    HDR_VERSION = 4,
    HDR_FLAGS = 6,
    HDR_SEQ = 8,
    HDR_COUNT = GL_BATCH_COUNT_AT,
    HDR_LENGTH = 20
};

/* Record header offsets. */
enum {
    REC_LENGTH = 0,
    REC_CALL_ID = 4,
    REC_FLAGS = 6,
    REC_NARGS = 7,
    REC_PAYLOAD_LEN = 8,
    REC_RESERVED = 12
};

#define GL_REC_KNOWN_FLAGS (GL_REC_ONEWAY | GL_REC_INLINE | GL_REC_REF | GL_REC_QUIET)

/* Unpadded size of a record: header, arguments, payload. Fits easily in
 * 64 bits: at most 16 + 8 * 255 + (2^32 - 1). */
static uint64_t record_body_size(uint8_t nargs, uint32_t payload_len)
{
    return (uint64_t)GL_RECORD_HEADER_SIZE + 8u * (uint64_t)nargs + (uint64_t)payload_len;
}

static uint64_t pad8(uint64_t n)
{
    return (n + 7u) & ~(uint64_t)7u;
}

size_t gl_batch_record_size(uint8_t nargs, uint32_t payload_len)
{
    uint64_t size;

    if (nargs > GL_MAX_ARGS)
        return 0;
    size = pad8(record_body_size(nargs, payload_len));
    if (size > UINT32_MAX)
        return 0;
    return (size_t)size;
}

/* ---------------------------------------------------------------- writer */

int gl_batch_writer_init(gl_batch_writer *w, uint8_t *buf, size_t cap, uint64_t seq)
{
    if (w == NULL || buf == NULL)
        return GL_E_INVALID;
    if (cap < GL_BATCH_HEADER_SIZE)
        return GL_E_FULL;
    w->buf = buf;
    w->cap = cap;
    w->len = GL_BATCH_HEADER_SIZE;
    w->count = 0;
    w->seq = seq;
    gl_put_u32(buf + HDR_MAGIC, GL_BATCH_MAGIC);
    gl_put_u16(buf + HDR_VERSION, GL_BATCH_VERSION);
    gl_put_u16(buf + HDR_FLAGS, 0);
    gl_put_u64(buf + HDR_SEQ, seq);
    gl_put_u32(buf + HDR_COUNT, 0);
    gl_put_u32(buf + HDR_LENGTH, GL_BATCH_HEADER_SIZE);
    return GL_OK;
}

/* A writer whose fields were damaged by its user must not make us write
 * outside buf; refuse it instead. */
static int writer_ok(const gl_batch_writer *w)
{
    return w != NULL && w->buf != NULL && w->len >= GL_BATCH_HEADER_SIZE &&
           w->len <= w->cap && w->len <= UINT32_MAX && (w->len & 7u) == 0;
}

/* One writer for the three record kinds. payload_flag is GL_REC_INLINE,
 * GL_REC_REF or 0; for REF, payload is the 32-byte digest. */
static int put_record(gl_batch_writer *w, uint16_t call_id, uint8_t flags,
                      const uint64_t *args, uint8_t nargs, uint8_t payload_flag,
                      const uint8_t *payload, uint32_t payload_len, uint64_t ref_size)
{
    uint32_t wire_len = payload_flag == GL_REC_REF ? GL_REF_PAYLOAD_SIZE : payload_len;
    size_t size, body;
    uint8_t *p;
    uint8_t i;

    if (!writer_ok(w))
        return GL_E_INVALID;
    if ((flags & ~(GL_REC_ONEWAY | GL_REC_QUIET | payload_flag)) != 0
        || (flags & (GL_REC_ONEWAY | GL_REC_QUIET)) == (GL_REC_ONEWAY | GL_REC_QUIET))
        return GL_E_INVALID;
    if (nargs > GL_MAX_ARGS || (nargs > 0 && args == NULL))
        return GL_E_INVALID;
    if (payload == NULL && (payload_flag == GL_REC_REF || payload_len > 0))
        return GL_E_INVALID;

    size = gl_batch_record_size(nargs, wire_len);
    if (size == 0)
        return GL_E_FULL;
    if (size > w->cap - w->len || size > UINT32_MAX - w->len || w->count == UINT32_MAX)
        return GL_E_FULL;

    p = w->buf + w->len;
    gl_put_u32(p + REC_LENGTH, (uint32_t)size);
    gl_put_u16(p + REC_CALL_ID, call_id);
    p[REC_FLAGS] = (uint8_t)(flags | payload_flag);
    p[REC_NARGS] = nargs;
    gl_put_u32(p + REC_PAYLOAD_LEN, wire_len);
    gl_put_u32(p + REC_RESERVED, 0);
    p += GL_RECORD_HEADER_SIZE;
    for (i = 0; i < nargs; i++, p += 8)
        gl_put_u64(p, args[i]);
    if (payload_flag == GL_REC_REF) {
        memmove(p, payload, GL_REF_DIGEST_SIZE);
        gl_put_u64(p + GL_REF_DIGEST_SIZE, ref_size);
    } else if (payload_len > 0) {
        /* memmove: a caller may re-append bytes taken from this very batch. */
        memmove(p, payload, payload_len);
    }
    body = (size_t)record_body_size(nargs, wire_len);
    memset(w->buf + w->len + body, 0, size - body);

    w->len += size;
    w->count++;
    return GL_OK;
}

int gl_batch_append(gl_batch_writer *w, uint16_t call_id, uint8_t flags,
                    const uint64_t *args, uint8_t nargs)
{
    return put_record(w, call_id, flags, args, nargs, 0, NULL, 0, 0);
}

int gl_batch_append_inline(gl_batch_writer *w, uint16_t call_id, uint8_t flags,
                           const uint64_t *args, uint8_t nargs,
                           const uint8_t *payload, uint32_t payload_len)
{
    return put_record(w, call_id, flags, args, nargs, GL_REC_INLINE, payload, payload_len, 0);
}

int gl_batch_append_ref(gl_batch_writer *w, uint16_t call_id, uint8_t flags,
                        const uint64_t *args, uint8_t nargs,
                        const uint8_t digest[GL_REF_DIGEST_SIZE], uint64_t size)
{
    return put_record(w, call_id, flags, args, nargs, GL_REC_REF, digest, 0, size);
}

int gl_batch_append_record(gl_batch_writer *w, const gl_record *rec)
{
    uint8_t fl = rec->flags & (GL_REC_ONEWAY | GL_REC_QUIET);

    if (rec->flags & GL_REC_REF)
        return gl_batch_append_ref(w, rec->call_id, fl, rec->args, rec->nargs, rec->ref_digest,
                                   rec->ref_size);
    if (rec->flags & GL_REC_INLINE)
        return gl_batch_append_inline(w, rec->call_id, fl, rec->args, rec->nargs, rec->payload,
                                      rec->payload_len);
    return gl_batch_append(w, rec->call_id, fl, rec->args, rec->nargs);
}

int gl_batch_writer_finish(gl_batch_writer *w)
{
    if (!writer_ok(w))
        return GL_E_INVALID;
    gl_put_u32(w->buf + HDR_COUNT, w->count);
    gl_put_u32(w->buf + HDR_LENGTH, (uint32_t)w->len);
    return GL_OK;
}

int gl_batch_external_prefix(uint8_t *out, size_t cap, uint64_t seq, uint16_t call_id,
                             uint8_t flags, const uint64_t *args, uint8_t nargs,
                             uint32_t payload_len, size_t *prefix_len, size_t *pad_len)
{
    gl_batch_writer w;
    size_t size, head;
    uint8_t *p;
    uint8_t i;

    if (out == NULL || prefix_len == NULL || pad_len == NULL)
        return GL_E_INVALID;
    if ((flags & ~(GL_REC_ONEWAY | GL_REC_INLINE)) != 0)
        return GL_E_INVALID;
    if (nargs > GL_MAX_ARGS || (nargs > 0 && args == NULL))
        return GL_E_INVALID;
    size = gl_batch_record_size(nargs, payload_len);
    if (size == 0 || size > UINT32_MAX - GL_BATCH_HEADER_SIZE)
        return GL_E_FULL;
    head = GL_RECORD_HEADER_SIZE + 8u * (size_t)nargs;
    if (cap < GL_BATCH_HEADER_SIZE + head)
        return GL_E_FULL;

    /* The same header bytes as the writer's, then the same record header as
     * put_record's; only the payload and its padding are left to the caller. */
    gl_batch_writer_init(&w, out, cap, seq);
    gl_put_u32(out + HDR_COUNT, 1);
    gl_put_u32(out + HDR_LENGTH, (uint32_t)(GL_BATCH_HEADER_SIZE + size));
    p = out + GL_BATCH_HEADER_SIZE;
    gl_put_u32(p + REC_LENGTH, (uint32_t)size);
    gl_put_u16(p + REC_CALL_ID, call_id);
    p[REC_FLAGS] = (uint8_t)(flags | GL_REC_INLINE);
    p[REC_NARGS] = nargs;
    gl_put_u32(p + REC_PAYLOAD_LEN, payload_len);
    gl_put_u32(p + REC_RESERVED, 0);
    p += GL_RECORD_HEADER_SIZE;
    for (i = 0; i < nargs; i++, p += 8)
        gl_put_u64(p, args[i]);
    *prefix_len = GL_BATCH_HEADER_SIZE + head;
    *pad_len = size - head - payload_len;
    return GL_OK;
}

/* ---------------------------------------------------------------- reader */

int gl_batch_reader_open(gl_batch_reader *r, const uint8_t *buf, size_t len)
{
    uint32_t length;
    int rc = GL_OK;

    if (r == NULL)
        return GL_E_INVALID;
    memset(r, 0, sizeof *r);
    if (buf == NULL && len > 0)
        rc = GL_E_INVALID;
    else if (len < GL_BATCH_HEADER_SIZE)
        rc = GL_E_TRUNCATED;
    else if (gl_get_u32(buf + HDR_MAGIC) != GL_BATCH_MAGIC)
        rc = GL_E_MAGIC;
    else if (gl_get_u16(buf + HDR_VERSION) != GL_BATCH_VERSION)
        rc = GL_E_VERSION;
    else if (gl_get_u16(buf + HDR_FLAGS) != 0)
        rc = GL_E_BATCH_FLAGS;
    if (rc != GL_OK) {
        r->error = rc;
        return rc;
    }

    length = gl_get_u32(buf + HDR_LENGTH);
    if (length > len)
        rc = GL_E_TRUNCATED;
    else if (length != len)
        rc = GL_E_LENGTH; /* covers length < header size too, as len >= header */
    if (rc != GL_OK) {
        r->error = rc;
        return rc;
    }

    r->buf = buf;
    r->len = len;
    r->off = GL_BATCH_HEADER_SIZE;
    r->index = 0;
    r->count = gl_get_u32(buf + HDR_COUNT);
    r->seq = gl_get_u64(buf + HDR_SEQ);
    return GL_OK;
}

/* Checks the record header at p (rem bytes remain in the batch) and returns
 * its length through *length, or an error. */
static int check_record(const uint8_t *p, size_t rem, uint32_t *length)
{
    uint32_t len, payload_len;
    uint8_t flags, nargs;
    uint64_t body;
    size_t i;

    if (rem < GL_RECORD_HEADER_SIZE)
        return GL_E_REC_OVERRUN;
    len = gl_get_u32(p + REC_LENGTH);
    if (len < GL_RECORD_HEADER_SIZE)
        return GL_E_REC_SHORT;
    if ((len & 7u) != 0)
        return GL_E_REC_ALIGN;
    if (len > rem)
        return GL_E_REC_OVERRUN;

    flags = p[REC_FLAGS];
    nargs = p[REC_NARGS];
    payload_len = gl_get_u32(p + REC_PAYLOAD_LEN);
    if ((flags & ~GL_REC_KNOWN_FLAGS) != 0
        || (flags & (GL_REC_ONEWAY | GL_REC_QUIET)) == (GL_REC_ONEWAY | GL_REC_QUIET))
        return GL_E_REC_FLAGS;
    if ((flags & GL_REC_INLINE) && (flags & GL_REC_REF))
        return GL_E_REC_BOTH;
    if (nargs > GL_MAX_ARGS)
        return GL_E_NARGS;
    if (gl_get_u32(p + REC_RESERVED) != 0)
        return GL_E_RESERVED;
    if ((flags & GL_REC_REF) && payload_len != GL_REF_PAYLOAD_SIZE)
        return GL_E_REF_LEN;
    if (!(flags & (GL_REC_INLINE | GL_REC_REF)) && payload_len != 0)
        return GL_E_PAYLOAD_LEN;

    body = record_body_size(nargs, payload_len);
    if (body > len)
        return GL_E_PAYLOAD_OVERRUN;
    /* Only the shortest padding is accepted, so that one batch has exactly
     * one encoding and cannot smuggle bytes between records. */
    if (pad8(body) != len)
        return GL_E_REC_PADDING;
    for (i = (size_t)body; i < len; i++)
        if (p[i] != 0)
            return GL_E_PAD_NONZERO;

    *length = len;
    return GL_OK;
}

static void fill_record(const uint8_t *p, gl_record *out)
{
    const uint8_t *q = p + GL_RECORD_HEADER_SIZE;
    uint8_t i;

    out->call_id = gl_get_u16(p + REC_CALL_ID);
    out->flags = p[REC_FLAGS];
    out->nargs = p[REC_NARGS];
    out->payload = NULL;
    out->payload_len = 0;
    out->ref_digest = NULL;
    out->ref_size = 0;
    for (i = 0; i < out->nargs; i++, q += 8)
        out->args[i] = gl_get_u64(q);
    /* Arguments past nargs read as 0 (the whole record used to be cleared). */
    memset(out->args + out->nargs, 0, (GL_MAX_ARGS - out->nargs) * sizeof out->args[0]);
    if (out->flags & GL_REC_INLINE) {
        out->payload = q;
        out->payload_len = gl_get_u32(p + REC_PAYLOAD_LEN);
    } else if (out->flags & GL_REC_REF) {
        out->ref_digest = q;
        out->ref_size = gl_get_u64(q + GL_REF_DIGEST_SIZE);
    }
}

static int next_record(gl_batch_reader *r, gl_record *out)
{
    size_t rem;
    uint32_t length = 0;
    int rc;

    if (r->buf == NULL || r->off > r->len)
        return GL_E_INVALID; /* never opened, or fields damaged by the caller */
    rem = r->len - r->off;
    if (r->index == r->count)
        return rem == 0 ? 0 : GL_E_TRAILING;
    if (rem == 0)
        return GL_E_COUNT;
    rc = check_record(r->buf + r->off, rem, &length);
    if (rc != GL_OK)
        return rc;
    fill_record(r->buf + r->off, out);
    r->off += length;
    r->index++;
    return 1;
}

int gl_batch_reader_next(gl_batch_reader *r, gl_record *out)
{
    int rc;

    if (r == NULL || out == NULL)
        return GL_E_INVALID;
    if (r->error != GL_OK)
        return r->error;
    rc = next_record(r, out);
    if (rc < 0)
        r->error = rc;
    return rc;
}

int gl_batch_validate(const uint8_t *buf, size_t len)
{
    gl_batch_reader r;
    gl_record rec;
    int rc;

    rc = gl_batch_reader_open(&r, buf, len);
    if (rc != GL_OK)
        return rc;
    while ((rc = gl_batch_reader_next(&r, &rec)) == 1)
        ;
    return rc; /* 0 == GL_OK at the clean end */
}

const char *gl_strerror(int code)
{
    switch (code) {
    case GL_OK: return "ok";
    case GL_E_FULL: return "record does not fit in the batch buffer";
    case GL_E_INVALID: return "invalid argument";
    case GL_E_TRUNCATED: return "batch truncated";
    case GL_E_MAGIC: return "not a gleam batch (bad magic)";
    case GL_E_VERSION: return "unsupported batch version";
    case GL_E_BATCH_FLAGS: return "batch flags not zero";
    case GL_E_LENGTH: return "batch length does not match buffer size";
    case GL_E_COUNT: return "batch holds fewer records than its count";
    case GL_E_TRAILING: return "trailing bytes after the last record";
    case GL_E_REC_SHORT: return "record length smaller than record header";
    case GL_E_REC_ALIGN: return "record length not a multiple of 8";
    case GL_E_REC_OVERRUN: return "record overruns batch";
    case GL_E_REC_FLAGS: return "unknown record flag bits";
    case GL_E_REC_BOTH: return "record flags both inline and ref payload";
    case GL_E_NARGS: return "record has too many arguments";
    case GL_E_RESERVED: return "record reserved field not zero";
    case GL_E_REF_LEN: return "blob reference payload length is not 40";
    case GL_E_PAYLOAD_LEN: return "payload length set on a record without payload";
    case GL_E_PAYLOAD_OVERRUN: return "payload overruns record";
    case GL_E_REC_PADDING: return "record length exceeds its padded contents";
    case GL_E_PAD_NONZERO: return "record padding not zero";
    default: return "unknown error";
    }
}
