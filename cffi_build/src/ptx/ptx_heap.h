/*
 * ptx_heap.h — the device heap behind a kernel's malloc and free (and C++'s
 * new and delete): one range of the session's device memory, of
 * CU_LIMIT_MALLOC_HEAP_SIZE bytes, that the program's interposer allocated
 * like any other and named with glDeviceHeap.
 *
 * The heap's whole state lives in its own bytes: blocks tile the range, each
 * behind a 16-byte header (its size, whether it is in use, and a check word
 * derived from both and its offset). So a session that moves to another
 * server carries its heap in the memory snapshot, live blocks and all
 * (docs/consistency.md). The bytes are the kernels' to scribble on, so every
 * header is checked before it is believed: a kernel that wrote over one makes
 * the next malloc report the heap corrupted (a fault), never read or write
 * outside the range. Payloads are 16-byte aligned, as CUDA's are.
 *
 * Not thread-safe: the caller (ptx_devrt.c) holds a lock around each call.
 */
#ifndef GLEAM_PTX_HEAP_H
#define GLEAM_PTX_HEAP_H

#include <stdint.h>

typedef struct {
    uint8_t *base;   /* the range's host address (the host device's device address) */
    uint64_t size;   /* a multiple of 16; 0: no heap */
    uint64_t rover;  /* offset of the block the next search starts at (a hint) */
    int used;        /* malloc ran on this heap since it was set here */
} ptx_heap;

enum { PTX_HEAP_OK = 0, PTX_HEAP_BAD_FREE = 1, PTX_HEAP_CORRUPT = 2 };

/* Makes [base, base + size) an empty heap (one free block). */
void ptx_heap_init(ptx_heap *h, uint8_t *base, uint64_t size);
/* A block of at least n bytes: PTX_HEAP_OK and *out (0 when no block is
 * large enough: malloc's NULL), or PTX_HEAP_CORRUPT with *bad the address of
 * the header that failed its check. */
int ptx_heap_alloc(ptx_heap *h, uint64_t n, uint64_t *out, uint64_t *bad);
/* Frees what ptx_heap_alloc returned: PTX_HEAP_OK, or PTX_HEAP_BAD_FREE when p
 * is not a block in use (never returned, or freed already). */
int ptx_heap_free(ptx_heap *h, uint64_t p);
/* Whether a block is in use (or a header fails its check). */
int ptx_heap_live(const ptx_heap *h);

#endif /* GLEAM_PTX_HEAP_H */
