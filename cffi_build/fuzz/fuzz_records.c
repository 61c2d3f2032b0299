/*
 * fuzz_records.c — libFuzzer harness of the data-plane batch decoder.
 *
 * Ownership: libFuzzer owns `data` (an exact-size heap copy, so AddressSanitizer
 * flags any read past it); the harness owns one heap buffer per input for the
 * re-encoding and frees it before returning. No global state.
 *
 * Checked per input:
 *   - open + walk every record, reading every payload and digest byte, never
 *     touching memory outside the input (ASan/UBSan abort otherwise);
 *   - GL_E_INVALID (API misuse) is never the verdict on input bytes;
 *   - the streaming walk and gl_batch_validate() agree;
 *   - a valid input re-encodes through the writer to exactly the same bytes.
 * Build and run with scripts/fuzz-native.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/records.h"

#define FUZZ_CHECK(cond)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_records.c:%d: check failed: %s\n", __LINE__, \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* Reads every byte the record points at; the caller keeps the sum alive so
 * the compiler cannot drop the reads. */
static unsigned touch_record(const gl_record *rec)
{
    unsigned acc = rec->call_id;
    uint32_t i;

    for (i = 0; i < rec->payload_len; i++)
        acc += rec->payload[i];
    if (rec->ref_digest != NULL)
        for (i = 0; i < GL_REF_DIGEST_SIZE; i++)
            acc += rec->ref_digest[i];
    return acc;
}

static int reencode(gl_batch_writer *w, const gl_record *rec)
{
    uint8_t oneway = rec->flags & GL_REC_ONEWAY;

    if (rec->flags & GL_REC_INLINE)
        return gl_batch_append_inline(w, rec->call_id, oneway, rec->args, rec->nargs,
                                      rec->payload, rec->payload_len);
    if (rec->flags & GL_REC_REF)
        return gl_batch_append_ref(w, rec->call_id, oneway, rec->args, rec->nargs,
                                   rec->ref_digest, rec->ref_size);
    return gl_batch_append(w, rec->call_id, oneway, rec->args, rec->nargs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned sum = 0;
    gl_batch_reader r;
    gl_batch_writer w;
    gl_record rec;
    uint8_t *copy;
    int rc;

    rc = gl_batch_reader_open(&r, data, size);
    if (rc != GL_OK) {
        FUZZ_CHECK(rc < 0 && rc != GL_E_INVALID);
        FUZZ_CHECK(strcmp(gl_strerror(rc), "unknown error") != 0);
        FUZZ_CHECK(gl_batch_validate(data, size) == rc);
        return 0;
    }
    /* An accepted prefix never takes more room than it took in the input,
     * so an input-sized buffer can always hold the re-encoding. */
    copy = malloc(size);
    FUZZ_CHECK(copy != NULL);
    FUZZ_CHECK(gl_batch_writer_init(&w, copy, size, r.seq) == GL_OK);

    while ((rc = gl_batch_reader_next(&r, &rec)) == 1) {
        FUZZ_CHECK(rec.nargs <= GL_MAX_ARGS);
        sum += touch_record(&rec);
        FUZZ_CHECK(reencode(&w, &rec) == GL_OK);
    }
    /* An empty asm that takes the sum as input keeps the reads alive. */
    __asm__ volatile("" : : "r"(sum) : "memory");
    FUZZ_CHECK(rc <= 0 && rc != GL_E_INVALID);
    FUZZ_CHECK(strcmp(gl_strerror(rc), "unknown error") != 0);
    FUZZ_CHECK(gl_batch_validate(data, size) == rc);
    if (rc == 0) {
        FUZZ_CHECK(gl_batch_writer_finish(&w) == GL_OK);
        FUZZ_CHECK(w.len == size);
        FUZZ_CHECK(memcmp(copy, data, size) == 0);
    }
    free(copy);
    return 0;
}
