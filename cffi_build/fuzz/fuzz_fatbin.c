/*
 * libFuzzer harness for the fatbin PTX extractor (cffi_build/src/image/fatbin.c).
 * Seeds: the .fatbin files of tests/fatbin_samples and tests/ptx_corpus.
 * The input is tried as a fatbin, and as an LZ4 block into a small buffer.
 */
#include <stdlib.h>

#include "image/fatbin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *ptx = NULL;
    size_t len = 0;
    char targets[64];
    if (gl_fatbin_ptx(data, size, &ptx, &len, targets, sizeof targets) == 1)
        free(ptx);
    (void)gl_fatbin_size(data, size);
    uint8_t out[512];
    (void)gl_fatbin_lz4(data, size, out, sizeof out);
    return 0;
}
