/*
 * htable.c — open addressing with linear probing (gl_htable.h has the rules).
 * Keys are mostly minted serials, which are dense: a multiplicative hash of
 * the key spreads them over the slots. A removed entry leaves a tombstone so
 * that probes for keys behind it still find them; a put reuses tombstones, and
 * a table that is mostly tombstones is rehashed at its own size, not doubled.
 */
#include <stdlib.h>

#include "gl_htable.h"

static char tomb_marker;
#define TOMB ((void *)&tomb_marker)

static size_t home(uint64_t key, size_t cap)
{
    return (size_t)((key * UINT64_C(0x9E3779B97F4A7C15)) >> 17) & (cap - 1);
}

static int is_live(const gl_hslot *s)
{
    return s->key != 0;
}

static int is_empty(const gl_hslot *s)
{
    return s->key == 0 && s->val != TOMB;
}

gl_hslot *gl_htable_find(gl_htable *t, uint64_t key)
{
    if (t->cap == 0 || key == 0)
        return NULL;
    for (size_t i = home(key, t->cap), n = 0; n < t->cap; i = (i + 1) & (t->cap - 1), n++) {
        if (t->slots[i].key == key)
            return &t->slots[i];
        if (is_empty(&t->slots[i]))
            return NULL;
    }
    return NULL;
}

static int rehash(gl_htable *t)
{
    size_t live = 0;
    for (size_t i = 0; i < t->cap; i++)
        live += is_live(&t->slots[i]);
    size_t cap = t->cap == 0 ? 64 : live * 4 < t->cap ? t->cap : t->cap * 2;
    gl_hslot *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        if (!is_live(&t->slots[i]))
            continue;
        size_t j = home(t->slots[i].key, cap);
        while (slots[j].key != 0)
            j = (j + 1) & (cap - 1);
        slots[j] = t->slots[i];
    }
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    t->used = live;
    return 0;
}

int gl_htable_put(gl_htable *t, uint64_t key, void *val)
{
    if (key == 0)
        return -1;
    gl_hslot *s = gl_htable_find(t, key);
    if (s != NULL) {
        s->val = val;
        return 0;
    }
    /* At most half the slots live or removed keeps probes short. */
    if ((t->used + 1) * 2 > t->cap && rehash(t) != 0)
        return -1;
    size_t i = home(key, t->cap);
    while (is_live(&t->slots[i]))
        i = (i + 1) & (t->cap - 1);
    if (is_empty(&t->slots[i]))
        t->used++;
    t->slots[i].key = key;
    t->slots[i].val = val;
    return 0;
}

void *gl_htable_take(gl_htable *t, uint64_t key)
{
    gl_hslot *s = gl_htable_find(t, key);
    if (s == NULL)
        return NULL;
    void *val = s->val;
    s->key = 0;
    s->val = TOMB;
    return val;
}

void gl_htable_each(gl_htable *t, void (*fn)(uint64_t key, void *val, void *arg), void *arg)
{
    for (size_t i = 0; i < t->cap; i++)
        if (is_live(&t->slots[i]))
            fn(t->slots[i].key, t->slots[i].val, arg);
}

void gl_htable_free(gl_htable *t)
{
    free(t->slots);
    t->slots = NULL;
    t->cap = 0;
    t->used = 0;
}
