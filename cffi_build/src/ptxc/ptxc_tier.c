/*
 * ptxc_tier.c — when a kernel is compiled, and by whom. Each kernel has a
 * small state (created at its first launch): the thread-instructions the
 * interpreter ran of it, and NEW -> QUEUED -> READY or FAILED. Past the
 * threshold, the block that crosses it writes the kernel's C and queues it;
 * one background thread compiles (or finds in the cache) and loads queued
 * kernels one at a time, so a 2-core server is not flooded with compilers,
 * and publishes the code, which the launches' next blocks pick up.
 *
 * Ownership: a kernel state is shared by its module and a queued job
 * (reference counts); the last to let go unloads the code and frees it. The
 * module's kernel (ptx_kernel.ptxc) points to it from its first launch.
 * Global state (documented here, guarded by `queue_lock`): the queue of
 * jobs, the compile thread (started at the first job, detached, alive until
 * the process ends), the condition launches wait on; and the counters.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx/ptx.h"
#include "ptxc.h"
#include "ptxc_tier.h"

enum { S_NEW, S_QUEUED, S_READY, S_FAILED };
enum { MODE_OFF, MODE_ON, MODE_WAIT };
#define DEFAULT_AFTER (UINT64_C(1) << 25)

struct ptxc_kernel {
    int refs;             /* atomic */
    int state;            /* atomic; code is valid once S_READY (acquire) */
    uint64_t interpreted; /* atomic */
    ptxc_code code;
    ptxc_loaded loaded;
    char *source;         /* the C, while queued */
    size_t len;
    char why[200];
    struct ptxc_kernel *next;
};

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_work = PTHREAD_COND_INITIALIZER, queue_done = PTHREAD_COND_INITIALIZER;
static ptxc_kernel *queue_head, *queue_tail;
static int thread_started;
static gl_ptx_tier_stats stats; /* atomic fields */

static void release(ptxc_kernel *s)
{
    if (s == NULL || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    ptxc_cc_unload(&s->loaded);
    free(s->source);
    free(s);
}

void ptxc_kernel_release(ptxc_kernel *s)
{
    release(s);
}

/* The kernel's state, made at its first use (two launches may race: one wins). */
static ptxc_kernel *state_of(const ptx_kernel *k)
{
    ptxc_kernel *s = __atomic_load_n(&k->ptxc, __ATOMIC_ACQUIRE);
    if (s != NULL)
        return s;
    ptxc_kernel *fresh = calloc(1, sizeof *fresh);
    if (fresh == NULL)
        return NULL;
    fresh->refs = 1;
    ptxc_kernel *expected = NULL;
    ptxc_kernel **slot = (ptxc_kernel **)&k->ptxc; /* the kernel's one mutable field */
    if (__atomic_compare_exchange_n(slot, &expected, fresh, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        return fresh;
    free(fresh);
    return expected;
}

static void fail(ptxc_kernel *s, const char *why)
{
    snprintf(s->why, sizeof s->why, "%s", why);
    __atomic_add_fetch(&stats.failed, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&s->state, S_FAILED, __ATOMIC_RELEASE);
}

/* Wakes the launches waiting for a kernel to leave QUEUED. */
static void built(void)
{
    pthread_mutex_lock(&queue_lock);
    pthread_cond_broadcast(&queue_done);
    pthread_mutex_unlock(&queue_lock);
}

/* Compiles or loads S's source and publishes the result (any thread). */
static void build(ptxc_kernel *s)
{
    char why[200];
    if (ptxc_cc_load(s->source, s->len, &s->loaded, why, sizeof why) != 0) {
        fail(s, why);
    } else {
        s->code.fn = s->loaded.fn;
        __atomic_add_fetch(s->loaded.from_cache ? &stats.cache_hits : &stats.compiled, 1,
                           __ATOMIC_RELAXED);
        __atomic_store_n(&s->state, S_READY, __ATOMIC_RELEASE);
    }
    free(s->source);
    s->source = NULL;
}

static void *compile_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&queue_lock);
    for (;;) {
        while (queue_head == NULL)
            pthread_cond_wait(&queue_work, &queue_lock);
        ptxc_kernel *s = queue_head;
        queue_head = s->next;
        if (queue_head == NULL)
            queue_tail = NULL;
        pthread_mutex_unlock(&queue_lock);
        if (__atomic_load_n(&s->refs, __ATOMIC_ACQUIRE) > 1)
            build(s);
        else /* its module is gone: nobody would run it */
            fail(s, "abandoned");
        built();
        release(s);
        pthread_mutex_lock(&queue_lock);
    }
    return NULL;
}

/* NEW -> QUEUED by the caller that wins: writes the C. 1: the caller owns
 * the build now; 0: someone else has it (or it failed). */
static int claim(ptxc_kernel *s, const ptx_kernel *k)
{
    int expected = S_NEW;
    if (!__atomic_compare_exchange_n(&s->state, &expected, S_QUEUED, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return 0;
    ptxc_text t = {0};
    ptxc_needs needs = {0};
    char why[200];
    if (ptxc_emit(k, &t, &needs, why, sizeof why) != 0) {
        ptxc_text_free(&t);
        fail(s, why);
        built();
        return 0;
    }
    s->source = t.s;
    s->len = t.n;
    s->code.fill_sregs = needs.fill_sregs;
    s->code.fill_consts = needs.fill_consts;
    return 1;
}

static void enqueue(ptxc_kernel *s)
{
    __atomic_add_fetch(&s->refs, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_lock(&queue_lock);
    if (!thread_started) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        thread_started = pthread_create(&t, &attr, compile_thread, NULL) == 0;
        pthread_attr_destroy(&attr);
    }
    if (!thread_started) { /* no thread: build here, once */
        pthread_mutex_unlock(&queue_lock);
        build(s);
        built();
        release(s);
        return;
    }
    s->next = NULL;
    if (queue_tail != NULL)
        queue_tail->next = s;
    else
        queue_head = s;
    queue_tail = s;
    pthread_cond_signal(&queue_work);
    pthread_mutex_unlock(&queue_lock);
}

/* Waits until S is no longer queued (built by the thread or by us). */
static void wait_built(ptxc_kernel *s)
{
    pthread_mutex_lock(&queue_lock);
    while (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == S_QUEUED)
        pthread_cond_wait(&queue_done, &queue_lock);
    pthread_mutex_unlock(&queue_lock);
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    if (v == NULL || *v == 0)
        return dflt;
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    return *end == 0 ? (uint64_t)n : dflt;
}

void ptxc_launch_begin(const ptx_kernel *k, int tier, ptxc_policy *pol)
{
    const char *v = getenv("GLEAM_PTX_JIT");
    pol->tier = tier;
    pol->mode = v == NULL || *v == 0 ? MODE_ON
                : (strcmp(v, "0") == 0 || strcmp(v, "off") == 0) ? MODE_OFF
                : strcmp(v, "wait") == 0 ? MODE_WAIT : MODE_ON;
    pol->after = env_u64("GLEAM_PTX_JIT_AFTER", DEFAULT_AFTER);
    if (tier == PTX_TIER_INTERP || (tier == PTX_TIER_AUTO && pol->mode == MODE_OFF))
        return;
    ptxc_kernel *s = state_of(k);
    if (s == NULL)
        return;
    int now = tier == PTX_TIER_COMPILED
              || (pol->mode == MODE_WAIT
                  && __atomic_load_n(&s->interpreted, __ATOMIC_RELAXED) >= pol->after);
    if (!now)
        return;
    if (claim(s, k)) { /* build it here: the launch waits for it anyway */
        build(s);
        built();
    } else
        wait_built(s);
}

const ptxc_code *ptxc_code_for(const ptx_kernel *k, const ptxc_policy *pol)
{
    if (pol->tier == PTX_TIER_INTERP || (pol->tier == PTX_TIER_AUTO && pol->mode == MODE_OFF))
        return NULL;
    ptxc_kernel *s = __atomic_load_n(&k->ptxc, __ATOMIC_ACQUIRE);
    if (s == NULL || __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != S_READY)
        return NULL;
    return &s->code;
}

void ptxc_note_interpreted(const ptx_kernel *k, uint64_t insns, const ptxc_policy *pol)
{
    if (pol->tier != PTX_TIER_AUTO || pol->mode == MODE_OFF)
        return;
    ptxc_kernel *s = state_of(k);
    if (s == NULL || __atomic_load_n(&s->state, __ATOMIC_RELAXED) != S_NEW)
        return;
    if (__atomic_add_fetch(&s->interpreted, insns, __ATOMIC_RELAXED) >= pol->after
        && claim(s, k))
        enqueue(s);
}

void ptxc_count_blocks(uint64_t compiled, uint64_t interpreted)
{
    __atomic_add_fetch(&stats.blocks_compiled, compiled, __ATOMIC_RELAXED);
    __atomic_add_fetch(&stats.blocks_interpreted, interpreted, __ATOMIC_RELAXED);
}

const char *ptxc_kernel_why(const ptx_kernel *k)
{
    ptxc_kernel *s = __atomic_load_n(&k->ptxc, __ATOMIC_ACQUIRE);
    return s != NULL && __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == S_FAILED ? s->why : "";
}

void gl_ptx_tier_get_stats(gl_ptx_tier_stats *out)
{
    out->compiled = __atomic_load_n(&stats.compiled, __ATOMIC_RELAXED);
    out->cache_hits = __atomic_load_n(&stats.cache_hits, __ATOMIC_RELAXED);
    out->failed = __atomic_load_n(&stats.failed, __ATOMIC_RELAXED);
    out->blocks_compiled = __atomic_load_n(&stats.blocks_compiled, __ATOMIC_RELAXED);
    out->blocks_interpreted = __atomic_load_n(&stats.blocks_interpreted, __ATOMIC_RELAXED);
}

int gl_ptx_kernel_c(ptx_module *m, const char *entry, char *out, size_t cap, size_t *len,
                    char *why, size_t why_len)
{
    const ptx_kernel *k = m != NULL && entry != NULL ? ptx_module_kernel(m, entry) : NULL;
    if (k == NULL) {
        snprintf(why, why_len, "no kernel named %s", entry != NULL ? entry : "(null)");
        return -1;
    }
    ptxc_text t = {0};
    if (ptxc_emit(k, &t, NULL, why, why_len) != 0) {
        ptxc_text_free(&t);
        return -1;
    }
    *len = t.n;
    if (out != NULL && t.n < cap) {
        memcpy(out, t.s, t.n);
        out[t.n] = 0;
    }
    ptxc_text_free(&t);
    return 0;
}
