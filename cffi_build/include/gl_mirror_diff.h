/*
 * gl_mirror_diff.h — the bytes one side of a mirrored range (mapped or
 * managed memory: the program's view in the client, the session's device
 * memory on the server) changed since the two sides last agreed, as a list of
 * entries that the other side applies. Both sides keep a *twin* of each
 * range: its contents when they last agreed. The sender compares its memory
 * with its twin, sends the bytes that differ and copies them into its twin;
 * the receiver writes exactly those bytes into its memory and its twin. Bytes
 * the receiver changed meanwhile and the sender did not are left alone, so
 * the two sides may write different bytes of one page between agreements
 * (docs/cuda-forwarding.md, "Mapped and managed memory").
 *
 * An entry never spans more than one block of GL_DIFF_BLOCK bytes:
 *
 *   u64 addr | u32 len (1 .. GL_DIFF_BLOCK) | u32 form
 *   form RUN:    len bytes, all changed
 *   form MASKED: (len + 7) / 8 mask bytes (bit i % 8 of byte i / 8: byte i
 *                changed), then len bytes of which only the masked ones count
 *   each part padded with zeros to a multiple of 8 bytes.
 *
 * Little-endian, as every record of the data plane. Entries come from the
 * wire: gl_diff_next checks each one fully before the caller sees it.
 */
#ifndef GLEAM_MIRROR_DIFF_H
#define GLEAM_MIRROR_DIFF_H

#include <stddef.h>
#include <stdint.h>

/* cdef: begin */
#define GL_DIFF_BLOCK 4096
#define GL_DIFF_HEADER 16
/* The most one block can take encoded (a masked entry over the whole block):
 * a buffer at least this large always makes progress. */
#define GL_DIFF_BLOCK_MAX 4624

enum { GL_DIFF_RUN = 0, GL_DIFF_MASKED = 1 };

typedef struct {
    uint64_t addr;
    uint32_t len;
    uint32_t form;
    const uint8_t *mask; /* MASKED only */
    const uint8_t *data;
} gl_diff_entry;

/* Encodes the bytes of cur[0 .. n) (at addresses addr ..) that differ from
 * twin[0 .. n) into out, and copies them into twin. Each block of cur is read
 * once into a private copy before it is compared, so a thread writing cur
 * meanwhile can only make the block's change wait for the next encoding, never
 * send bytes the twin does not hold. Stops before a block that would not fit;
 * *scanned is then where to resume (n when done). Returns the bytes written. */
size_t gl_diff_encode(uint64_t addr, const uint8_t *cur, uint8_t *twin, size_t n, uint8_t *out,
                      size_t cap, size_t *scanned);
/* The entry at *pos of buf[0 .. len): 1 and *e (pos moves past it), 0 at the
 * end, or -1 for bytes that are not a well-formed entry. */
int gl_diff_next(const uint8_t *buf, size_t len, size_t *pos, gl_diff_entry *e);
/* Writes e's changed bytes into mem and twin (both e->len bytes from the
 * entry's address). */
void gl_diff_apply(const gl_diff_entry *e, uint8_t *mem, uint8_t *twin);
/* How many of e's bytes the receiver also changed since the two sides last
 * agreed (mem differs from twin): bytes both sides wrote, of which applying e
 * keeps the sender's (even an equal value may be a lost update: two atomic
 * adds that each ended at the same sum). */
size_t gl_diff_conflicts(const gl_diff_entry *e, const uint8_t *mem, const uint8_t *twin);
/* cdef: end */

#endif /* GLEAM_MIRROR_DIFF_H */
