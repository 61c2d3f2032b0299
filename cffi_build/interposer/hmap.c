/*
 * hmap.c — the interposer's thread-safe map from minted handles (and device
 * pointers) to pointers: contexts' devices, modules' entry tables, functions'
 * layouts. Any application thread may call in, so each map is the shared
 * table (include/gl_htable.h) behind its own mutex. Maps live as long as the
 * process; their values are the callers'.
 */
#include <pthread.h>
#include <stdlib.h>

#include "gl_htable.h"
#include "internal.h"

struct gl_hmap {
    pthread_mutex_t lock;
    gl_htable table;
};

gl_hmap *gl_hmap_new(void)
{
    gl_hmap *m = calloc(1, sizeof *m);

    if (m == NULL)
        return NULL;
    pthread_mutex_init(&m->lock, NULL);
    return m;
}

void *gl_hmap_get(gl_hmap *m, uint64_t key)
{
    pthread_mutex_lock(&m->lock);
    gl_hslot *s = gl_htable_find(&m->table, key);
    void *v = s ? s->val : NULL;
    pthread_mutex_unlock(&m->lock);
    return v;
}

int gl_hmap_put(gl_hmap *m, uint64_t key, void *value)
{
    pthread_mutex_lock(&m->lock);
    int rc = gl_htable_put(&m->table, key, value);
    pthread_mutex_unlock(&m->lock);
    return rc;
}

void *gl_hmap_take(gl_hmap *m, uint64_t key)
{
    pthread_mutex_lock(&m->lock);
    void *v = gl_htable_take(&m->table, key);
    pthread_mutex_unlock(&m->lock);
    return v;
}
