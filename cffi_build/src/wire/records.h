/*
 * records.h — gleam's data-plane call batch: encoder (gl_batch_writer) and
 * decoder (gl_batch_reader). The byte layout is in docs/wire-format-data-plane.md.
 *
 * Ownership rules
 *   - The writer never allocates. gl_batch_writer_init() borrows the caller's
 *     buffer; the caller keeps ownership and must keep it alive (and not move
 *     it) until it is done with the writer. The writer only ever writes inside
 *     buf[0 .. cap).
 *   - The reader never allocates and never writes to the batch. It borrows the
 *     caller's bytes; every pointer it hands out in gl_record (payload,
 *     ref_digest) points into those bytes and is valid exactly as long as
 *     they are.
 *   - Inputs given to the writer (args, payload, digest) are copied into the
 *     batch before the call returns; the writer keeps no pointer to them.
 *   - There is no global or static mutable state; the functions are
 *     re-entrant, and distinct writers/readers may be used from distinct
 *     threads at once. One writer or reader must not be used by two threads
 *     at the same time.
 *   - Every function that can fail returns an int: GL_OK (0) or a negative
 *     GL_E_* code (gl_batch_reader_next() also returns 1 and 0, see there).
 *     gl_strerror() turns a code into a static, human-readable message.
 *
 * Decoding is meant for untrusted bytes: it reads nothing outside buf[0 .. len),
 * does all size arithmetic in 64 bits with the bound checked before each
 * addition, and accepts only the one canonical encoding of a batch, so any
 * batch it accepts re-encodes to exactly the same bytes.
 */
#ifndef GLEAM_RECORDS_H
#define GLEAM_RECORDS_H

#include <stddef.h>
#include <stdint.h>

/* cdef: begin */
#define GL_MAX_ARGS 16
#define GL_BATCH_HEADER_SIZE 24
/* The batch header's u32 count of the records that follow. */
#define GL_BATCH_COUNT_AT 16
#define GL_RECORD_HEADER_SIZE 16
#define GL_REF_DIGEST_SIZE 32
#define GL_REF_PAYLOAD_SIZE 40 /* digest + u64 blob size */
#define GL_BATCH_VERSION 1
/* The bytes "GLB1" read as a little-endian u32. */
#define GL_BATCH_MAGIC 0x31424C47u

/* Record flags (one byte). QUIET, on a waiting record only: its reply carries no
 * deferred error, notes or kernel output, which wait for the program's next
 * reply (a checkpoint's snapshot read, which the program never sees). */
enum { GL_REC_ONEWAY = 1, GL_REC_INLINE = 2, GL_REC_REF = 4, GL_REC_QUIET = 8 };

/* Result codes. Negative values are errors; see gl_strerror(). */
enum {
    GL_OK = 0,
    GL_E_FULL = -1,            /* writer: the record does not fit */
    GL_E_INVALID = -2,         /* writer: bad argument (NULL, nargs, flags) */
    GL_E_TRUNCATED = -3,       /* batch shorter than its header or its length field */
    GL_E_MAGIC = -4,           /* not a gleam batch */
    GL_E_VERSION = -5,         /* unsupported version */
    GL_E_BATCH_FLAGS = -6,     /* batch flags not zero */
    GL_E_LENGTH = -7,          /* length field disagrees with the buffer */
    GL_E_COUNT = -8,           /* fewer records present than the count says */
    GL_E_TRAILING = -9,        /* bytes after the last counted record */
    GL_E_REC_SHORT = -10,      /* record length below the record header size */
    GL_E_REC_ALIGN = -11,      /* record length not a multiple of 8 */
    GL_E_REC_OVERRUN = -12,    /* record runs past the end of the batch */
    GL_E_REC_FLAGS = -13,      /* unknown record flag bits */
    GL_E_REC_BOTH = -14,       /* both INLINE and REF set */
    GL_E_NARGS = -15,          /* nargs > GL_MAX_ARGS */
    GL_E_RESERVED = -16,       /* reserved field not zero */
    GL_E_REF_LEN = -17,        /* REF payload_len is not 40 */
    GL_E_PAYLOAD_LEN = -18,    /* payload_len set on a record without payload */
    GL_E_PAYLOAD_OVERRUN = -19,/* arguments + payload run past the record */
    GL_E_REC_PADDING = -20,    /* record longer than its padded contents */
    GL_E_PAD_NONZERO = -21     /* padding bytes not zero */
};

typedef struct {
    uint8_t *buf;   /* borrowed from the caller */
    size_t cap;     /* usable bytes of buf */
    size_t len;     /* bytes written so far, header included; the batch size after finish */
    uint32_t count; /* records appended */
    uint64_t seq;
} gl_batch_writer;

/* A decoded record. payload/ref_digest borrow from the reader's buffer.
 * INLINE: payload/payload_len set, ref_digest NULL, ref_size 0.
 * REF:    ref_digest/ref_size set, payload NULL, payload_len 0.
 * neither: all four are NULL / 0. args[nargs ..] are zero. */
typedef struct {
    uint16_t call_id;
    uint8_t flags;
    uint8_t nargs;
    uint64_t args[GL_MAX_ARGS];
    const uint8_t *payload;
    uint32_t payload_len;
    const uint8_t *ref_digest;
    uint64_t ref_size;
} gl_record;

typedef struct {
    const uint8_t *buf; /* borrowed from the caller */
    size_t len;         /* batch size (equal to the header's length field) */
    size_t off;         /* offset of the next record */
    uint32_t index;     /* records returned so far */
    uint32_t count;     /* records the header announces */
    uint64_t seq;
    int error;          /* first error met; sticky */
} gl_batch_reader;

/* Bytes one record with nargs arguments and payload_len payload bytes takes
 * in a batch (header, arguments, payload, padding). For a blob reference pass
 * GL_REF_PAYLOAD_SIZE. Returns 0 when nargs > GL_MAX_ARGS or when the record
 * cannot be represented (its length does not fit the u32 length field). */
size_t gl_batch_record_size(uint8_t nargs, uint32_t payload_len);

/* Starts an empty batch in buf. GL_E_INVALID if w or buf is NULL,
 * GL_E_FULL if cap < GL_BATCH_HEADER_SIZE. On success the buffer already holds
 * a valid empty batch. */
int gl_batch_writer_init(gl_batch_writer *w, uint8_t *buf, size_t cap, uint64_t seq);

/* Appends one record. flags may hold GL_REC_ONEWAY; the payload flag is set by
 * the function itself (passing it as well is allowed). args may be NULL when
 * nargs is 0. Returns GL_OK, GL_E_INVALID (bad flags, nargs, NULL pointer) or
 * GL_E_FULL (no room in buf, or the batch would exceed the u32 length field
 * or count). On any error the writer and the bytes it has written so far are
 * unchanged. */
int gl_batch_append(gl_batch_writer *w, uint16_t call_id, uint8_t flags,
                    const uint64_t *args, uint8_t nargs); /* no payload */
int gl_batch_append_inline(gl_batch_writer *w, uint16_t call_id, uint8_t flags,
                           const uint64_t *args, uint8_t nargs,
                           const uint8_t *payload, uint32_t payload_len);
int gl_batch_append_ref(gl_batch_writer *w, uint16_t call_id, uint8_t flags,
                        const uint64_t *args, uint8_t nargs,
                        const uint8_t digest[GL_REF_DIGEST_SIZE], uint64_t size);

/* Appends a copy of a record a reader returned: its ONEWAY flag, arguments, and
 * inline payload or blob reference (to rewrite a batch without some records). */
int gl_batch_append_record(gl_batch_writer *w, const gl_record *rec);

/* Patches count and length into the header. Afterwards buf[0 .. w->len) is
 * the batch. Appending more and finishing again is allowed. */
int gl_batch_writer_finish(gl_batch_writer *w);

/* Checks the batch header of buf[0 .. len) and prepares to walk the records.
 * The header's length field must equal len exactly. */
int gl_batch_reader_open(gl_batch_reader *r, const uint8_t *buf, size_t len);

/* Decodes the next record into *out. Returns 1 with a record, 0 at the clean
 * end (all counted records read and no bytes left), or a negative GL_E_*
 * code. After an error the reader keeps returning that error. */
int gl_batch_reader_next(gl_batch_reader *r, gl_record *out);

/* Opens buf and walks every record: GL_OK when the whole batch is valid. */
int gl_batch_validate(const uint8_t *buf, size_t len);

/* The batch around one INLINE record whose payload the caller sends itself
 * (writev straight from its own buffer, no copy): writes into out the batch
 * header, the record header and the arguments (*prefix_len bytes), and tells
 * how many zero bytes of padding must follow the payload_len payload bytes
 * (*pad_len). prefix + payload + zeros is byte-for-byte the batch that
 * gl_batch_writer_init + gl_batch_append_inline + gl_batch_writer_finish
 * produce. Returns GL_OK, GL_E_INVALID (NULL pointers, bad flags or nargs) or
 * GL_E_FULL (out shorter than the prefix, or the batch over the u32 limit). */
int gl_batch_external_prefix(uint8_t *out, size_t cap, uint64_t seq, uint16_t call_id,
                             uint8_t flags, const uint64_t *args, uint8_t nargs,
                             uint32_t payload_len, size_t *prefix_len, size_t *pad_len);

/* Static message for a result code; never NULL. */
const char *gl_strerror(int code);
/* cdef: end */

#endif /* GLEAM_RECORDS_H */
