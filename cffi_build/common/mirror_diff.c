/*
 * mirror_diff.c — the entries of gl_mirror_diff.h: what one side of a mirrored
 * range changed, encoded against its twin, and applied on the other side.
 * Linked into both the interposer and the native core, so the two sides share
 * one encoding. No state; the caller owns every buffer.
 *
 * A changed block is sent as exact runs of changed bytes or, when that would
 * take more room (a kernel that rewrote every float of a page changes bytes in
 * scattered pairs), as one masked entry from its first to its last changed
 * byte. Never as a run that includes unchanged bytes: the receiver would write
 * the old agreed value over a byte it changed itself.
 *
 * Speed: a block is compared with memcmp first (most blocks are unchanged),
 * and a changed one is turned into a bit mask eight bytes at a time; runs are
 * read from the mask, so no step walks a block byte by byte.
 */
#include <string.h>

#include "gl_mirror_diff.h"

#define WORDS (GL_DIFF_BLOCK / 64)

static size_t pad8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

static size_t masked_bytes(size_t len)
{
    return GL_DIFF_HEADER + pad8((len + 7) / 8) + pad8(len);
}

static void put_header(uint8_t *p, uint64_t addr, uint32_t len, uint32_t form)
{
    memcpy(p, &addr, 8); /* both ends are little-endian (gl_session.h) */
    memcpy(p + 8, &len, 4);
    memcpy(p + 12, &form, 4);
}

/* Bit i of mask: byte i of snap differs from twin (b bytes, b <= GL_DIFF_BLOCK). */
static void change_mask(const uint8_t *snap, const uint8_t *twin, size_t b, uint64_t *mask)
{
    size_t i = 0;
    memset(mask, 0, WORDS * 8);
    for (; i + 8 <= b; i += 8) {
        uint64_t s, t;
        memcpy(&s, snap + i, 8);
        memcpy(&t, twin + i, 8);
        uint64_t x = s ^ t;
        if (x == 0)
            continue;
        /* Each byte to its lowest bit (1: the byte changed), then the eight bits
         * gathered into one byte by a multiply whose partial sums never carry. */
        x |= x >> 4;
        x |= x >> 2;
        x |= x >> 1;
        x &= 0x0101010101010101ull;
        mask[i / 64] |= ((x * 0x0102040810204080ull) >> 56) << (i % 64);
    }
    for (; i < b; i++)
        if (snap[i] != twin[i])
            mask[i / 64] |= 1ull << (i % 64);
}

/* The next run of set bits at or after *at (< b): 1 with [*start, *at), or 0. */
static int next_run(const uint64_t *mask, size_t b, size_t *at, size_t *start)
{
    size_t i = *at;
    while (i < b) {
        uint64_t w = mask[i / 64] >> (i % 64);
        if (w != 0) {
            i += (size_t)__builtin_ctzll(w);
            break;
        }
        i = (i / 64 + 1) * 64;
    }
    if (i >= b)
        return 0;
    *start = i;
    while (i < b) {
        uint64_t w = ~mask[i / 64] >> (i % 64);
        if (w != 0 && (i % 64) + (size_t)__builtin_ctzll(w) < 64) {
            i += (size_t)__builtin_ctzll(w);
            break;
        }
        i = (i / 64 + 1) * 64;
    }
    *at = i < b ? i : b;
    return 1;
}

/* The block's changed bytes: how many runs, their size encoded as runs, and
 * the first and last changed byte. Counting stops once runs cost more than
 * the masked entry can (runs_bytes is then only known to be larger). */
typedef struct {
    size_t runs, run_bytes, first, last;
} block_shape;

static block_shape shape_of(const uint64_t *mask, size_t b)
{
    block_shape s = {0, 0, b, 0};
    size_t at = 0, start;
    for (size_t w = 0; w < WORDS; w++) {
        if (mask[w] != 0) {
            s.first = w * 64 + (size_t)__builtin_ctzll(mask[w]);
            break;
        }
    }
    for (size_t w = WORDS; w > 0; w--) {
        if (mask[w - 1] != 0) {
            s.last = (w - 1) * 64 + 63 - (size_t)__builtin_clzll(mask[w - 1]);
            break;
        }
    }
    if (s.first == b)
        return s;
    size_t limit = masked_bytes(s.last - s.first + 1);
    at = s.first;
    while (s.run_bytes <= limit && next_run(mask, b, &at, &start)) {
        s.runs++;
        s.run_bytes += GL_DIFF_HEADER + pad8(at - start);
    }
    return s;
}

/* The mask's bits [first, first + len) as bytes, into out. */
static void mask_bytes(const uint64_t *mask, size_t first, size_t len, uint8_t *out)
{
    for (size_t q = 0; q < (len + 7) / 8; q++) {
        size_t bit = first + 8 * q, w = bit / 64, sh = bit % 64;
        uint64_t v = mask[w] >> sh;
        if (sh > 56 && w + 1 < WORDS)
            v |= mask[w + 1] << (64 - sh);
        size_t left = len - 8 * q;
        out[q] = (uint8_t)(left >= 8 ? v : v & ((1u << left) - 1));
    }
}

/* Writes the block's entries (the room was checked); returns their size. */
static size_t emit_block(uint64_t addr, const uint8_t *snap, const uint64_t *mask, size_t b,
                         const block_shape *s, uint8_t *out)
{
    size_t len = s->last - s->first + 1, w = 0;
    if (masked_bytes(len) < s->run_bytes) {
        size_t mlen = pad8((len + 7) / 8);
        put_header(out, addr + s->first, (uint32_t)len, GL_DIFF_MASKED);
        memset(out + GL_DIFF_HEADER, 0, mlen);
        mask_bytes(mask, s->first, len, out + GL_DIFF_HEADER);
        uint8_t *data = out + GL_DIFF_HEADER + mlen;
        memcpy(data, snap + s->first, len);
        memset(data + len, 0, pad8(len) - len);
        return GL_DIFF_HEADER + mlen + pad8(len);
    }
    size_t at = s->first, start;
    while (next_run(mask, b, &at, &start)) {
        size_t rlen = at - start;
        put_header(out + w, addr + start, (uint32_t)rlen, GL_DIFF_RUN);
        memcpy(out + w + GL_DIFF_HEADER, snap + start, rlen);
        memset(out + w + GL_DIFF_HEADER + rlen, 0, pad8(rlen) - rlen);
        w += GL_DIFF_HEADER + pad8(rlen);
    }
    return w;
}

size_t gl_diff_encode(uint64_t addr, const uint8_t *cur, uint8_t *twin, size_t n, uint8_t *out,
                      size_t cap, size_t *scanned)
{
    uint8_t snap[GL_DIFF_BLOCK];
    uint64_t mask[WORDS];
    size_t w = 0, at = 0;

    while (at < n) {
        size_t b = n - at < GL_DIFF_BLOCK ? n - at : GL_DIFF_BLOCK;
        if (memcmp(cur + at, twin + at, b) != 0) {
            memcpy(snap, cur + at, b);
            change_mask(snap, twin + at, b, mask);
            block_shape s = shape_of(mask, b);
            if (s.first < b) {
                size_t masked = masked_bytes(s.last - s.first + 1);
                size_t need = s.run_bytes <= masked ? s.run_bytes : masked;
                if (need > cap - w)
                    break;
                w += emit_block(addr + at, snap, mask, b, &s, out + w);
                memcpy(twin + at, snap, b); /* unchanged bytes are equal already */
            }
        }
        at += b;
    }
    *scanned = at;
    return w;
}

int gl_diff_next(const uint8_t *buf, size_t len, size_t *pos, gl_diff_entry *e)
{
    size_t p = *pos;
    uint32_t elen, form;

    if (p == len)
        return 0;
    if (p > len || len - p < GL_DIFF_HEADER)
        return -1;
    memcpy(&e->addr, buf + p, 8);
    memcpy(&elen, buf + p + 8, 4);
    memcpy(&form, buf + p + 12, 4);
    if (elen == 0 || elen > GL_DIFF_BLOCK || e->addr > UINT64_MAX - elen)
        return -1;
    size_t body = pad8(elen), mlen = 0;
    if (form == GL_DIFF_MASKED)
        mlen = pad8((elen + 7) / 8);
    else if (form != GL_DIFF_RUN)
        return -1;
    p += GL_DIFF_HEADER;
    if (len - p < mlen + body)
        return -1;
    e->len = elen;
    e->form = form;
    e->mask = form == GL_DIFF_MASKED ? buf + p : NULL;
    e->data = buf + p + mlen;
    *pos = p + mlen + body;
    return 1;
}

void gl_diff_apply(const gl_diff_entry *e, uint8_t *mem, uint8_t *twin)
{
    if (e->form == GL_DIFF_RUN) {
        memcpy(mem, e->data, e->len);
        memcpy(twin, e->data, e->len);
        return;
    }
    /* Eight bytes at a time where all eight changed; else byte by byte: the
     * bytes between masked ones may be the receiver's own newer writes, which
     * a wider store would overwrite. */
    for (uint32_t i = 0; i < e->len; i += 8) {
        uint8_t m = e->mask[i / 8];
        uint32_t n = e->len - i < 8 ? e->len - i : 8;
        if (m == 0xFF && n == 8) {
            memcpy(mem + i, e->data + i, 8);
            memcpy(twin + i, e->data + i, 8);
            continue;
        }
        for (uint32_t k = 0; k < n; k++) {
            if (m & (1u << k)) {
                mem[i + k] = e->data[i + k];
                twin[i + k] = e->data[i + k];
            }
        }
    }
}

size_t gl_diff_conflicts(const gl_diff_entry *e, const uint8_t *mem, const uint8_t *twin)
{
    size_t n = 0;
    if (memcmp(mem, twin, e->len) == 0)
        return 0; /* the receiver changed nothing here: the common case */
    for (uint32_t i = 0; i < e->len; i++) {
        int sent = e->form == GL_DIFF_RUN || (e->mask[i / 8] & (1u << (i % 8)));
        n += sent && mem[i] != twin[i];
    }
    return n;
}
