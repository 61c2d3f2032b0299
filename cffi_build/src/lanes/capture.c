/*
 * capture.c — a checkpoint's snapshot reads in the client's lanes (pump.h,
 * gl_pump_capture_*): the pump sends them and counts their replies, the
 * downlink puts those replies on the capture queue, and the checkpoint's
 * thread takes them from it with a deadline. The queue and its counts are
 * under the reply lock; the taker waits on capture_cv (a monotonic clock, so
 * a deadline does not move with the wall clock).
 */
#include "pump.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Lets go of the replies not taken (the reply lock held). */
static void capture_clear(gl_pump *p)
{
    for (size_t i = p->taken; i < p->ncaptured; i++)
        gl_jblock_unref(p->captured[i]);
    p->taken = p->ncaptured = 0;
    p->capture_nomem = 0;
}

void gl_pump_capture_stop(gl_pump *p)
{
    p->capturing = 0;
    p->capture_due = 0;
    capture_clear(p);
    pthread_cond_broadcast(&p->capture_cv);
}

void gl_pump_capture_keep(gl_pump *p, const uint8_t *env, uint64_t n)
{
    if (p->ncaptured == p->captured_cap) {
        size_t cap = p->captured_cap ? 2 * p->captured_cap : 64;
        gl_jblock **grown = realloc(p->captured, cap * sizeof *grown);
        if (!grown) {
            p->capture_nomem = 1;
            goto wake;
        }
        p->captured = grown;
        p->captured_cap = cap;
    }
    gl_jblock *b = gl_jblock_new(n);
    if (!b) {
        p->capture_nomem = 1;
        goto wake;
    }
    memcpy(b->data, env, (size_t)n);
    p->captured[p->ncaptured++] = b;
    p->bytes_from_server += n;
wake:
    pthread_cond_broadcast(&p->capture_cv);
}

void gl_pump_capture_begin(gl_pump *p)
{
    pthread_mutex_lock(&p->reply_mu);
    gl_pump_capture_stop(p);
    p->capturing = 1;
    pthread_mutex_unlock(&p->reply_mu);
}

int gl_pump_capture_send(gl_pump *p, const uint8_t *env, size_t len)
{
    if (p->held || !p->out)
        return GL_PUMP_MOVED;
    gl_jblock *b = gl_jblock_new(len);
    if (!b)
        return GL_PUMP_E_NOMEM;
    memcpy(b->data, env, len);
    pthread_mutex_lock(&p->reply_mu);
    int capturing = p->capturing;
    if (capturing)
        p->capture_due++; /* before the send: its reply may come at once */
    pthread_mutex_unlock(&p->reply_mu);
    if (!capturing) {
        gl_jblock_unref(b);
        return GL_PUMP_MOVED;
    }
    int rc = gl_pump_seal_send(p, b, 0); /* (not a program's call: not in flight) */
    if (rc != 0) {
        pthread_mutex_lock(&p->reply_mu);
        if (p->capturing && p->capture_due > 0)
            p->capture_due--;
        pthread_mutex_unlock(&p->reply_mu);
    }
    return rc;
}

int gl_pump_capture_take(gl_pump *p, uint32_t timeout_ms, gl_jblock **out)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    int rc = GL_PUMP_E_TIMEOUT;
    pthread_mutex_lock(&p->reply_mu);
    for (;;) {
        if (!p->capturing) {
            rc = GL_PUMP_MOVED;
            break;
        }
        if (p->capture_nomem) {
            rc = GL_PUMP_E_NOMEM;
            break;
        }
        if (p->taken < p->ncaptured) {
            *out = p->captured[p->taken++];
            rc = GL_PUMP_TAKEN;
            break;
        }
        if (pthread_cond_timedwait(&p->capture_cv, &p->reply_mu, &until) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&p->reply_mu);
    return rc;
}

void gl_pump_capture_end(gl_pump *p)
{
    pthread_mutex_lock(&p->reply_mu);
    if (p->capturing)
        p->swallow += p->capture_due; /* what is still to come is nobody's */
    gl_pump_capture_stop(p);
    pthread_mutex_unlock(&p->reply_mu);
}
