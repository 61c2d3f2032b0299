/*
 * hmap.c — a small thread-safe hash map from minted handles to pointers
 * (contexts' devices, modules' entry tables, functions' layouts). Open
 * addressing with linear probing; minted serials are dense, so the low bits
 * mixed with a multiply spread well. Removal leaves a tombstone.
 */
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

#define TOMB ((void *)&tomb_marker)
static char tomb_marker;

typedef struct {
    uint64_t key; /* 0: never used */
    void *value;  /* TOMB: removed */
} slot;

struct gl_hmap {
    pthread_mutex_t lock;
    slot *slots;
    size_t cap;  /* power of two */
    size_t used; /* live + tombstones */
};

gl_hmap *gl_hmap_new(void)
{
    gl_hmap *m = calloc(1, sizeof *m);

    if (m == NULL)
        return NULL;
    pthread_mutex_init(&m->lock, NULL);
    return m;
}

static size_t hash(uint64_t key, size_t cap)
{
    return (size_t)((key * UINT64_C(0x9E3779B97F4A7C15)) >> 17) & (cap - 1);
}

static slot *find(gl_hmap *m, uint64_t key)
{
    if (m->cap == 0)
        return NULL;
    for (size_t i = hash(key, m->cap), n = 0; n < m->cap; i = (i + 1) & (m->cap - 1), n++) {
        if (m->slots[i].key == key && m->slots[i].value != TOMB)
            return &m->slots[i];
        if (m->slots[i].key == 0)
            return NULL;
    }
    return NULL;
}

static int grow(gl_hmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    slot *old = m->slots, *s = calloc(cap, sizeof *s);

    if (s == NULL)
        return -1;
    m->slots = s;
    size_t oldcap = m->cap;
    m->cap = cap;
    m->used = 0;
    for (size_t i = 0; i < oldcap; i++) {
        if (old[i].key == 0 || old[i].value == TOMB)
            continue;
        size_t j = hash(old[i].key, cap);
        while (s[j].key != 0)
            j = (j + 1) & (cap - 1);
        s[j] = old[i];
        m->used++;
    }
    free(old);
    return 0;
}

void *gl_hmap_get(gl_hmap *m, uint64_t key)
{
    void *v;

    pthread_mutex_lock(&m->lock);
    slot *s = find(m, key);
    v = s ? s->value : NULL;
    pthread_mutex_unlock(&m->lock);
    return v;
}

int gl_hmap_put(gl_hmap *m, uint64_t key, void *value)
{
    int rc = 0;

    pthread_mutex_lock(&m->lock);
    slot *s = find(m, key);
    if (s != NULL) {
        s->value = value;
    } else if ((m->used + 1) * 2 > m->cap && grow(m) != 0) {
        rc = -1;
    } else {
        size_t i = hash(key, m->cap);
        while (m->slots[i].key != 0)
            i = (i + 1) & (m->cap - 1);
        m->slots[i].key = key;
        m->slots[i].value = value;
        m->used++;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

void *gl_hmap_take(gl_hmap *m, uint64_t key)
{
    void *v = NULL;

    pthread_mutex_lock(&m->lock);
    slot *s = find(m, key);
    if (s != NULL) {
        v = s->value;
        s->value = TOMB;
    }
    pthread_mutex_unlock(&m->lock);
    return v;
}
