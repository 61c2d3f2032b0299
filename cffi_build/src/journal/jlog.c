/*
 * jlog.c — the journal's blocks and their order (jlog.h).
 */
#include "jlog.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "journal.h"
#include "mem/spares.h"

struct gl_jlog {
    pthread_mutex_t mu;
    gl_jblock **v;
    size_t n, cap;
    uint64_t bytes, batches, limit;
    uint64_t answered; /* atomic: the reply side adds to it without the mutex */
    int broken, denied;
    uint8_t *deny;
    size_t deny_len;
};

gl_jblock *gl_jblock_new(uint64_t len)
{
    size_t cap;
    gl_jblock *b = gl_spare_alloc(sizeof *b + (size_t)len, &cap);
    if (!b)
        return NULL;
    b->cap = cap;
    b->refs = 1;
    b->waits = 0;
    b->len = len;
    b->data = (uint8_t *)(b + 1);
    return b;
}

void gl_jblock_ref(gl_jblock *b)
{
    __atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
}

void gl_jblock_unref(gl_jblock *b)
{
    if (b && __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0)
        gl_spare_free(b, b->cap);
}

void gl_jblock_unref_data(uint8_t *data)
{
    if (data)
        gl_jblock_unref((gl_jblock *)data - 1);
}

gl_jlog *gl_jlog_new(uint64_t limit, const uint8_t *deny, size_t deny_len)
{
    gl_jlog *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->deny = malloc(deny_len ? deny_len : 1);
    if (!j->deny) {
        free(j);
        return NULL;
    }
    if (deny_len)
        memcpy(j->deny, deny, deny_len);
    j->deny_len = deny_len;
    j->limit = limit;
    j->broken = limit ? GL_JLOG_KEEPING : GL_JLOG_OFF;
    j->denied = -1;
    pthread_mutex_init(&j->mu, NULL);
    return j;
}

/* With the mutex held. */
static void drop_all(gl_jlog *j)
{
    for (size_t i = 0; i < j->n; i++)
        gl_jblock_unref(j->v[i]);
    j->n = 0;
    j->bytes = 0;
}

void gl_jlog_free(gl_jlog *j)
{
    if (!j)
        return;
    drop_all(j);
    free(j->v);
    free(j->deny);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

static int push(gl_jlog *j, gl_jblock *b)
{
    if (j->n == j->cap) {
        size_t cap = j->cap ? 2 * j->cap : 64;
        gl_jblock **v = realloc(j->v, cap * sizeof *v);
        if (!v)
            return -1;
        j->v = v;
        j->cap = cap;
    }
    gl_jblock_ref(b);
    j->v[j->n++] = b;
    j->bytes += b->len;
    return 0;
}

int gl_jlog_add(gl_jlog *j, gl_jblock *b, size_t body_at, int *waits, uint32_t *max_inline,
                int *refs)
{
    gl_journal_seen seen;
    int rc = body_at <= b->len
                 ? gl_journal_scan(b->data + body_at, b->len - body_at, j->deny, j->deny_len, &seen)
                 : -1;
    if (waits)
        *waits = rc == 0 && seen.waits;
    if (max_inline)
        *max_inline = rc == 0 ? seen.max_inline : 0;
    if (refs)
        *refs = rc == 0 ? seen.refs : 0;
    return gl_jlog_keep(j, b, rc == 0, rc == 0 && seen.waits, rc == 0 ? seen.denied : -1);
}

int gl_jlog_denies(const gl_jlog *j, uint16_t call_id)
{
    size_t byte = call_id / 8u;
    return byte < j->deny_len && (j->deny[byte] >> (call_id % 8u)) & 1u;
}

int gl_jlog_keep(gl_jlog *j, gl_jblock *b, int well_formed, int waits, int denied)
{
    b->waits = (uint32_t)(waits != 0);
    pthread_mutex_lock(&j->mu);
    j->batches++;
    int state = j->broken;
    if (state == GL_JLOG_KEEPING) {
        if (!well_formed)
            state = GL_JLOG_MALFORMED;
        else if (denied >= 0) {
            state = GL_JLOG_DENIED;
            j->denied = denied;
        } else if (j->bytes + b->len > j->limit)
            state = GL_JLOG_BOUND;
        else if (push(j, b) != 0)
            state = GL_JLOG_BOUND; /* no memory is a bound too */
        if (state != GL_JLOG_KEEPING) {
            /* Past the bound nothing is kept: the memory goes back at once. */
            j->broken = state;
            drop_all(j);
        }
    } else if (state != GL_JLOG_OFF) {
        state = GL_JLOG_BROKEN;
    }
    pthread_mutex_unlock(&j->mu);
    return state;
}

void gl_jlog_break(gl_jlog *j, int why)
{
    pthread_mutex_lock(&j->mu);
    if (j->broken == GL_JLOG_KEEPING) {
        j->broken = why;
        drop_all(j);
    }
    pthread_mutex_unlock(&j->mu);
}

void gl_jlog_replace(gl_jlog *j, gl_jblock *const *blocks, size_t n, uint64_t answered)
{
    pthread_mutex_lock(&j->mu);
    if (j->broken == GL_JLOG_KEEPING) {
        drop_all(j);
        for (size_t i = 0; i < n; i++) {
            if (push(j, blocks[i]) != 0) {
                j->broken = GL_JLOG_BOUND;
                drop_all(j);
                break;
            }
        }
        __atomic_store_n(&j->answered, answered, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&j->mu);
}

gl_jblock *gl_jlog_entry(gl_jlog *j, size_t i)
{
    gl_jblock *b = NULL;
    pthread_mutex_lock(&j->mu);
    if (i < j->n) {
        b = j->v[i];
        gl_jblock_ref(b);
    }
    pthread_mutex_unlock(&j->mu);
    return b;
}

void gl_jlog_get(gl_jlog *j, gl_jlog_state *out)
{
    pthread_mutex_lock(&j->mu);
    out->bytes = j->bytes;
    out->entries = j->n;
    out->batches = j->batches;
    out->limit = j->limit;
    out->broken = j->broken;
    out->denied = j->denied;
    pthread_mutex_unlock(&j->mu);
    out->answered = __atomic_load_n(&j->answered, __ATOMIC_RELAXED);
}

void gl_jlog_set_answered(gl_jlog *j, uint64_t answered)
{
    __atomic_store_n(&j->answered, answered, __ATOMIC_RELAXED);
}

void gl_jlog_answered_add(gl_jlog *j, uint64_t n)
{
    __atomic_add_fetch(&j->answered, n, __ATOMIC_RELAXED);
}
