/*
 * dplocal.c — see dplocal.h. One mutex guards both queues: a frame is a
 * megabyte at most and moves once, so the lock is held for a pointer swap,
 * never for a copy (the copy into a frame happens before it is taken).
 */
#include "dplocal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dpstream.h"

typedef struct gl_lframe {
    struct gl_lframe *next;
    size_t len;
    uint8_t data[];
} gl_lframe;

typedef struct {
    gl_lframe *head, *tail;
    uint64_t bytes;
    gl_lframe *held; /* handed to this side's receiver, freed at its next receive */
} gl_lqueue;

/* Frames of a copy chunk's size are kept for reuse: a fresh megabyte from
 * malloc is a fresh mapping, whose page faults and zeroing cost more than the
 * copy into it (most of a 1 GiB transfer's time, measured). */
#define BIG_FRAME (64u * 1024u)
#define SPARES_MAX 32

struct gl_llink {
    pthread_mutex_t mu;
    pthread_cond_t moved; /* a frame was queued or taken, or the link closed */
    gl_lqueue q[2];       /* q[side]: what `side` receives */
    uint64_t max_queued;
    size_t big;           /* the capacity of every big frame: the largest frame */
    gl_lframe *spares;    /* big frames to reuse */
    int nspares;
    int closed;
    int refs;
};

gl_llink *gl_llink_new(uint64_t max_queued, size_t max_frame)
{
    gl_llink *l = calloc(1, sizeof *l);

    if (l == NULL)
        return NULL;
    if (pthread_mutex_init(&l->mu, NULL) != 0) {
        free(l);
        return NULL;
    }
    if (pthread_cond_init(&l->moved, NULL) != 0) {
        pthread_mutex_destroy(&l->mu);
        free(l);
        return NULL;
    }
    l->max_queued = max_queued;
    l->big = max_frame;
    l->refs = 2;
    return l;
}

int gl_llink_send(gl_llink *l, int side, const uint8_t *const *parts, const size_t *lens,
                  int nparts, size_t total)
{
    gl_lqueue *q = &l->q[!side];
    gl_lframe *f = NULL;
    size_t pos = 0;

    if (total >= BIG_FRAME && total <= l->big) {
        pthread_mutex_lock(&l->mu);
        if ((f = l->spares) != NULL) {
            l->spares = f->next;
            l->nspares--;
        }
        pthread_mutex_unlock(&l->mu);
        if (f == NULL)
            f = malloc(sizeof *f + l->big);
    } else {
        f = malloc(sizeof *f + total);
    }
    if (f == NULL)
        return GL_STREAM_E_NOMEM;
    for (int i = 0; i < nparts; i++) {
        memcpy(f->data + pos, parts[i], lens[i]);
        pos += lens[i];
    }
    f->next = NULL;
    f->len = total;
    pthread_mutex_lock(&l->mu);
    /* Backpressure, as TCP's window gives a socket: wait while the peer is a
     * queue's worth behind (one frame always fits an empty queue). */
    while (!l->closed && q->bytes > 0 && q->bytes + total > l->max_queued)
        pthread_cond_wait(&l->moved, &l->mu);
    if (l->closed) {
        pthread_mutex_unlock(&l->mu);
        free(f);
        return GL_STREAM_E_CLOSED;
    }
    if (q->tail != NULL)
        q->tail->next = f;
    else
        q->head = f;
    q->tail = f;
    q->bytes += total;
    pthread_cond_broadcast(&l->moved);
    pthread_mutex_unlock(&l->mu);
    return 0;
}

int64_t gl_llink_recv(gl_llink *l, int side, uint8_t **out)
{
    gl_lqueue *q = &l->q[side];
    gl_lframe *f, *done;

    pthread_mutex_lock(&l->mu);
    done = q->held;
    q->held = NULL;
    while (q->head == NULL && !l->closed)
        pthread_cond_wait(&l->moved, &l->mu);
    f = q->head;
    if (f != NULL) {
        q->head = f->next;
        if (q->head == NULL)
            q->tail = NULL;
        q->bytes -= f->len;
        q->held = f;
        pthread_cond_broadcast(&l->moved);
    }
    if (done != NULL && done->len >= BIG_FRAME && done->len <= l->big
        && l->nspares < SPARES_MAX) {
        done->next = l->spares;
        l->spares = done;
        l->nspares++;
        done = NULL;
    }
    pthread_mutex_unlock(&l->mu);
    free(done);
    if (f == NULL)
        return 0;
    *out = f->data;
    return (int64_t)f->len;
}

void gl_llink_close(gl_llink *l)
{
    pthread_mutex_lock(&l->mu);
    l->closed = 1;
    pthread_cond_broadcast(&l->moved);
    pthread_mutex_unlock(&l->mu);
}

static void drain(gl_lqueue *q)
{
    for (gl_lframe *f = q->head, *next; f != NULL; f = next) {
        next = f->next;
        free(f);
    }
    free(q->held);
    q->head = q->tail = q->held = NULL;
    q->bytes = 0;
}

void gl_llink_release(gl_llink *l, int side)
{
    int last;

    pthread_mutex_lock(&l->mu);
    l->closed = 1;
    free(l->q[side].held); /* this side's receiver is gone with it */
    l->q[side].held = NULL;
    last = --l->refs == 0;
    pthread_cond_broadcast(&l->moved);
    pthread_mutex_unlock(&l->mu);
    if (!last)
        return;
    drain(&l->q[0]);
    drain(&l->q[1]);
    for (gl_lframe *f = l->spares, *next; f != NULL; f = next) {
        next = f->next;
        free(f);
    }
    pthread_cond_destroy(&l->moved);
    pthread_mutex_destroy(&l->mu);
    free(l);
}
