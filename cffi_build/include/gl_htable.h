/*
 * gl_htable.h — the open-addressing table from 64-bit keys (minted handles,
 * device pointers) to pointers that the interposer (interposer/hmap.c, behind
 * a lock) and the executor (a session's handle table) share. The code is in
 * cffi_build/common/htable.c, compiled into both.
 *
 * Ownership rules
 *   - The table owns its slot array only; values are the caller's, never
 *     dereferenced or freed here. gl_htable_free() releases the slots.
 *   - No locking and no global state: a table is used by one thread at a time
 *     (the caller locks where several threads share one).
 *   - Key 0 is reserved (it marks an empty slot): put refuses it, get and
 *     take never find it. Minted handles and device pointers are never 0.
 *   - A zeroed gl_htable is an empty table; the slots are allocated on the
 *     first put.
 */
#ifndef GLEAM_HTABLE_H
#define GLEAM_HTABLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t key; /* 0: empty, or removed when val is the tombstone */
    void *val;
} gl_hslot;

typedef struct {
    gl_hslot *slots;
    size_t cap;  /* a power of two, or 0 before the first put */
    size_t used; /* live and removed slots: what lengthens a probe */
} gl_htable;

/* The slot holding key, or NULL. The slot stays valid until the next put. */
gl_hslot *gl_htable_find(gl_htable *t, uint64_t key);
/* Binds key to val, replacing any previous value: 0, or -1 when key is 0 or
 * memory is short (the table is then unchanged). */
int gl_htable_put(gl_htable *t, uint64_t key, void *val);
/* Removes key and returns its value (NULL when absent). */
void *gl_htable_take(gl_htable *t, uint64_t key);
/* Calls fn for every live entry. fn may take entries (its own or others),
 * but must not put. */
void gl_htable_each(gl_htable *t, void (*fn)(uint64_t key, void *val, void *arg), void *arg);
/* Releases the slots; the table is empty (and usable) again. */
void gl_htable_free(gl_htable *t);

#endif /* GLEAM_HTABLE_H */
