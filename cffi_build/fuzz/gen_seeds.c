/*
 * gen_seeds.c — writes a small seed corpus of valid batches for fuzz_records.
 * Usage: gen_seeds DIR. Uses the real writer, so the seeds follow the format
 * by construction. Owns its buffers (stack); no global mutable state.
 */
#include <stdio.h>
#include <string.h>

#include "wire/records.h"

static int save(const char *dir, const char *name, const gl_batch_writer *w)
{
    char path[4096];
    FILE *f;
    size_t n;

    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return -1;
    f = fopen(path, "wb");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    n = fwrite(w->buf, 1, w->len, f);
    if (fclose(f) != 0 || n != w->len) {
        perror(path);
        return -1;
    }
    return 0;
}

#define TRY(expr)                                                   \
    do {                                                            \
        if ((expr) != GL_OK) {                                      \
            fprintf(stderr, "gen_seeds: %s failed\n", #expr);       \
            return 1;                                               \
        }                                                           \
    } while (0)

int main(int argc, char **argv)
{
    static const uint64_t args[GL_MAX_ARGS] = {
        0, 1, 7, 8, 0xFF, 0x100, 0xFFFF, 0x10000, 0xFFFFFFFFu, 0x100000000u,
        0x7FFFFFFFFFFFFFFFu, 0xFFFFFFFFFFFFFFFFu, 42, 4096, 1u << 20, 3};
    uint8_t digest[GL_REF_DIGEST_SIZE];
    uint8_t payload[300];
    uint8_t buf[4096];
    gl_batch_writer w;
    size_t i;

    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    for (i = 0; i < sizeof digest; i++)
        digest[i] = (uint8_t)(0xA0 + i);
    for (i = 0; i < sizeof payload; i++)
        payload[i] = (uint8_t)i;

    TRY(gl_batch_writer_init(&w, buf, sizeof buf, 0));
    TRY(gl_batch_writer_finish(&w));
    if (save(argv[1], "empty", &w)) return 1;

    TRY(gl_batch_writer_init(&w, buf, sizeof buf, 1));
    TRY(gl_batch_append_inline(&w, 10, GL_REC_ONEWAY, args, 2, payload, 5));
    TRY(gl_batch_writer_finish(&w));
    if (save(argv[1], "inline", &w)) return 1;

    TRY(gl_batch_writer_init(&w, buf, sizeof buf, 2));
    TRY(gl_batch_append_ref(&w, 11, 0, args, 1, digest, 1u << 30));
    TRY(gl_batch_writer_finish(&w));
    if (save(argv[1], "ref", &w)) return 1;

    TRY(gl_batch_writer_init(&w, buf, sizeof buf, 3));
    TRY(gl_batch_append(&w, 12, GL_REC_ONEWAY, args, GL_MAX_ARGS));
    TRY(gl_batch_writer_finish(&w));
    if (save(argv[1], "max-args", &w)) return 1;

    TRY(gl_batch_writer_init(&w, buf, sizeof buf, 0xFFFFFFFFFFFFFFFFu));
    for (i = 0; i < 9; i++) {
        TRY(gl_batch_append(&w, (uint16_t)i, 0, args, (uint8_t)i));
        TRY(gl_batch_append_inline(&w, (uint16_t)(100 + i), GL_REC_ONEWAY, args + i, 1,
                                   payload, (uint32_t)i));
        TRY(gl_batch_append_ref(&w, (uint16_t)(200 + i), 0, NULL, 0, digest, i));
    }
    TRY(gl_batch_append_inline(&w, 300, 0, NULL, 0, payload, sizeof payload));
    TRY(gl_batch_writer_finish(&w));
    if (save(argv[1], "mixed", &w)) return 1;
    return 0;
}
