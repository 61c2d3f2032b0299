/*
 * ptx_heap.c — next-fit over blocks that tile the heap (ptx_heap.h). A
 * header is {u64 size | in-use bit, u64 check}; free neighbours are merged
 * when a search walks over them, so free() only flips the bit. The search
 * starts where the last one ended and wraps once around the heap.
 */
#include <string.h>

#include "ptx_heap.h"

#define HDR 16u
#define USED 1ull

static uint64_t check_word(uint64_t off, uint64_t word)
{
    uint64_t x = (off ^ word ^ 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
    return x ^ (x >> 29);
}

static void put_header(ptx_heap *h, uint64_t off, uint64_t size, int used)
{
    uint64_t w[2] = {size | (used ? USED : 0), 0};
    w[1] = check_word(off, w[0]);
    memcpy(h->base + off, w, sizeof w);
}

/* The block at off: 1 and its size and state, or 0 when its header is not one
 * this heap wrote (or the block would leave the heap). */
static int get_header(const ptx_heap *h, uint64_t off, uint64_t *size, int *used)
{
    uint64_t w[2];
    if (off % HDR != 0 || off > h->size - HDR)
        return 0;
    memcpy(w, h->base + off, sizeof w);
    uint64_t s = w[0] & ~USED;
    if (w[1] != check_word(off, w[0]) || s < 2 * HDR || s % HDR != 0 || s > h->size - off)
        return 0;
    *size = s;
    *used = (int)(w[0] & USED);
    return 1;
}

void ptx_heap_init(ptx_heap *h, uint8_t *base, uint64_t size)
{
    memset(h, 0, sizeof *h);
    size -= size % HDR;
    if (base == NULL || size < 2 * HDR)
        return;
    h->base = base;
    h->size = size;
    put_header(h, 0, size, 0);
}

int ptx_heap_alloc(ptx_heap *h, uint64_t n, uint64_t *out, uint64_t *bad)
{
    *out = 0;
    if (h->size == 0 || n > h->size)
        return PTX_HEAP_OK;
    uint64_t need = (n == 0 ? HDR : (n + HDR - 1) / HDR * HDR) + HDR;
    uint64_t off = h->rover < h->size ? h->rover : 0, walked = 0;
    while (walked < h->size) {
        uint64_t size, nsize;
        int used, nused;
        if (!get_header(h, off, &size, &used)) {
            *bad = (uint64_t)(uintptr_t)(h->base + off);
            return PTX_HEAP_CORRUPT;
        }
        if (!used) { /* merge the free blocks that follow (not across the end) */
            while (off + size < h->size) {
                if (!get_header(h, off + size, &nsize, &nused)) {
                    *bad = (uint64_t)(uintptr_t)(h->base + off + size);
                    return PTX_HEAP_CORRUPT;
                }
                if (nused)
                    break;
                if (h->rover > off && h->rover < off + size + nsize)
                    h->rover = off;
                size += nsize;
                put_header(h, off, size, 0);
            }
            if (size >= need) {
                uint64_t take = size - need >= 2 * HDR ? need : size;
                if (take < size)
                    put_header(h, off + take, size - take, 0);
                put_header(h, off, take, 1);
                h->rover = off + take < h->size ? off + take : 0;
                h->used = 1;
                *out = (uint64_t)(uintptr_t)(h->base + off + HDR);
                return PTX_HEAP_OK;
            }
        }
        walked += size;
        off += size;
        if (off >= h->size)
            off = 0;
    }
    return PTX_HEAP_OK; /* full: malloc returns NULL */
}

int ptx_heap_free(ptx_heap *h, uint64_t p)
{
    uint64_t base = (uint64_t)(uintptr_t)h->base, size;
    int used;
    if (h->size == 0 || p < base + HDR || p - base - HDR >= h->size)
        return PTX_HEAP_BAD_FREE;
    uint64_t off = p - base - HDR;
    if (!get_header(h, off, &size, &used) || !used)
        return PTX_HEAP_BAD_FREE;
    put_header(h, off, size, 0);
    return PTX_HEAP_OK;
}

int ptx_heap_live(const ptx_heap *h)
{
    uint64_t size;
    int used;
    for (uint64_t off = 0; off < h->size; off += size)
        if (!get_header(h, off, &size, &used) || used)
            return 1;
    return 0;
}
