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
 */
#include <string.h>

#include "gl_mirror_diff.h"

static size_t pad8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

static void put_header(uint8_t *p, uint64_t addr, uint32_t len, uint32_t form)
{
    memcpy(p, &addr, 8); /* both ends are little-endian (gl_session.h) */
    memcpy(p + 8, &len, 4);
    memcpy(p + 12, &form, 4);
}

/* The next run of changed bytes at or after *at: 1 with [*start, *at), or 0. */
static int next_run(const uint8_t *snap, const uint8_t *twin, size_t n, size_t *at,
                    size_t *start)
{
    size_t i = *at;
    while (i < n && snap[i] == twin[i])
        i++;
    if (i == n)
        return 0;
    *start = i;
    while (i < n && snap[i] != twin[i])
        i++;
    *at = i;
    return 1;
}

/* The runs of changed bytes in snap vs twin over [0, n): their count, encoded
 * size as runs, and the first and last changed byte. */
typedef struct {
    size_t runs, run_bytes, first, last;
} block_shape;

static block_shape shape_of(const uint8_t *snap, const uint8_t *twin, size_t n)
{
    block_shape s = {0, 0, n, 0};
    size_t at = 0, start;
    while (next_run(snap, twin, n, &at, &start)) {
        s.runs++;
        s.run_bytes += GL_DIFF_HEADER + pad8(at - start);
        if (s.first == n)
            s.first = start;
        s.last = at - 1;
    }
    return s;
}

static size_t masked_bytes(size_t len)
{
    return GL_DIFF_HEADER + pad8((len + 7) / 8) + pad8(len);
}

/* Writes the block's entries (the room was checked); returns their size. */
static size_t emit_block(uint64_t addr, const uint8_t *snap, const uint8_t *twin, size_t n,
                         const block_shape *s, uint8_t *out)
{
    size_t len = s->last - s->first + 1, w = 0;
    if (masked_bytes(len) < s->run_bytes) {
        size_t mlen = pad8((len + 7) / 8);
        put_header(out, addr + s->first, (uint32_t)len, GL_DIFF_MASKED);
        uint8_t *mask = out + GL_DIFF_HEADER;
        memset(mask, 0, mlen);
        for (size_t i = 0; i < len; i++)
            if (snap[s->first + i] != twin[s->first + i])
                mask[i / 8] |= (uint8_t)(1u << (i % 8));
        uint8_t *data = mask + mlen;
        memcpy(data, snap + s->first, len);
        memset(data + len, 0, pad8(len) - len);
        return GL_DIFF_HEADER + mlen + pad8(len);
    }
    size_t at = 0, start;
    while (next_run(snap, twin, n, &at, &start)) {
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
    size_t w = 0, at = 0;

    while (at < n) {
        size_t b = n - at < GL_DIFF_BLOCK ? n - at : GL_DIFF_BLOCK;
        /* memcmp first: most blocks are unchanged, and it is the fast path. */
        if (memcmp(cur + at, twin + at, b) != 0) {
            memcpy(snap, cur + at, b);
            block_shape s = shape_of(snap, twin + at, b);
            if (s.runs > 0) {
                size_t need = masked_bytes(s.last - s.first + 1);
                if (s.run_bytes < need)
                    need = s.run_bytes;
                if (need > cap - w)
                    break;
                w += emit_block(addr + at, snap, twin + at, b, &s, out + w);
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
    /* Byte by byte: the bytes between masked ones may be the receiver's own
     * newer writes, which a wider store would overwrite. */
    for (uint32_t i = 0; i < e->len; i++) {
        if (e->mask[i / 8] & (1u << (i % 8))) {
            mem[i] = e->data[i];
            twin[i] = e->data[i];
        }
    }
}
