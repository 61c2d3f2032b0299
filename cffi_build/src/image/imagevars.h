/*
 * imagevars.h — whether a module image declares variables (`__device__`
 * globals), for the cuda backend, whose checkpoints cannot keep them yet
 * (docs/consistency.md). Borrowed bytes, no allocation kept, no global state.
 */
#ifndef GLEAM_IMAGEVARS_H
#define GLEAM_IMAGEVARS_H

#include <stddef.h>
#include <stdint.h>

/* 1 when the image (PTX text, an ELF cubin or a fatbin; untrusted) declares a
 * module-scope .global variable or may do so (bytes it cannot read count as
 * "may": the answer is used to refuse, never to trust); 0 when it has none. */
int gl_image_may_have_vars(const uint8_t *img, size_t n);

#endif
