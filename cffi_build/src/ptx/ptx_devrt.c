/*
 * ptx_devrt.c — the session's device runtime (ptx_devrt.h): the printf FIFO
 * and the output queue, the built-ins' entry points, the heap's lock.
 *
 * The FIFO and the queue hold records laid out as the reply's sections
 * (gl_session.h: kind, flags, 0, length, text), so a reply takes them almost
 * as they are; consecutive records of one kind are merged as they arrive.
 * Ownership: a ptx_devrt owns its buffers, not the heap's memory (the
 * session's allocation). No global state besides the per-thread reason of
 * the last fault (ptx_devrt_why).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gl_bytes.h"
#include "gl_session.h"
#include "ptx.h"
#include "ptx_devrt.h"
#include "ptx_heap.h"

#define REC GL_SECTION_HEADER_SIZE
#define ASSERT_STR_MAX 4096 /* bytes read of each of an assertion's strings */
#define ASSERT_SLACK (64u << 10) /* assertion text the FIFO takes beyond its size */

typedef struct {
    uint8_t *p;
    size_t len, cap;
    size_t last; /* offset of the last record (merging), SIZE_MAX: none */
} recbuf;

struct ptx_devrt {
    pthread_mutex_t lock;      /* fifo, fifo_used, dropped, queue */
    pthread_mutex_t heap_lock; /* heap */
    recbuf fifo;
    uint64_t fifo_limit, fifo_used, dropped;
    recbuf queue;
    size_t q_head;             /* the queue's first unsent byte */
    uint64_t queue_dropped;
    ptx_heap heap;
    int printed;               /* a kernel that calls vprintf was launched */
    uint32_t pending_launches; /* CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT */
    const ptx_cond_scope *cond; /* the graph running now (exec_graphs.c), else NULL */
};

static __thread char t_why[160];

const char *ptx_devrt_why(void)
{
    return t_why;
}

static int why(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int why(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_why, sizeof t_why, fmt, ap);
    va_end(ap);
    return code;
}

int ptx_devrt_fault(int code, const char *reason)
{
    return why(code, "%s", reason);
}

ptx_devrt *ptx_devrt_new(void)
{
    ptx_devrt *rt = calloc(1, sizeof *rt);
    if (rt == NULL)
        return NULL;
    pthread_mutex_init(&rt->lock, NULL);
    pthread_mutex_init(&rt->heap_lock, NULL);
    rt->fifo_limit = PTX_DEVRT_FIFO_DEFAULT;
    rt->pending_launches = PTX_DEVRT_PENDING_DEFAULT;
    rt->fifo.last = rt->queue.last = SIZE_MAX;
    return rt;
}

void ptx_devrt_delete(ptx_devrt *rt)
{
    if (rt == NULL)
        return;
    free(rt->fifo.p);
    free(rt->queue.p);
    pthread_mutex_destroy(&rt->lock);
    pthread_mutex_destroy(&rt->heap_lock);
    free(rt);
}

static uint32_t rec_len(const uint8_t *r)
{
    return gl_get_u32(r + offsetof(gl_section_head, len));
}

static void rec_header(uint8_t *r, int kind, int flags, uint32_t len)
{
    gl_section_header(r, (uint8_t)kind, (uint8_t)flags, len);
}

/* Appends text of KIND to b, into its last record when that has the same
 * kind; -1 when out of memory. */
static int rec_append(recbuf *b, int kind, const char *text, size_t n)
{
    int merge = b->last != SIZE_MAX && b->p[b->last] == kind
                && (uint64_t)rec_len(b->p + b->last) + n <= UINT32_MAX;
    size_t need = b->len + n + (merge ? 0 : REC);
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < need)
            cap *= 2;
        uint8_t *np = realloc(b->p, cap);
        if (np == NULL)
            return -1;
        b->p = np;
        b->cap = cap;
    }
    if (merge)
        rec_header(b->p + b->last, kind, 0, rec_len(b->p + b->last) + (uint32_t)n);
    else {
        b->last = b->len;
        rec_header(b->p + b->len, kind, 0, (uint32_t)n);
        b->len += REC;
    }
    memcpy(b->p + b->len, text, n);
    b->len += n;
    return 0;
}

/* A record for the FIFO: kept when it fits (assertions get some slack beyond
 * the FIFO's size), else dropped and counted. */
static void fifo_put(ptx_devrt *rt, int kind, const char *text, size_t n, uint64_t slack)
{
    pthread_mutex_lock(&rt->lock);
    uint64_t cost = (uint64_t)n + PTX_DEVRT_RECORD_COST;
    if (rt->fifo_used + cost <= rt->fifo_limit + slack
        && rec_append(&rt->fifo, kind, text, n) == 0)
        rt->fifo_used += cost;
    else
        rt->dropped++;
    pthread_mutex_unlock(&rt->lock);
}

/* ------------------------------------------------------------ built-ins */

int ptx_devrt_vprintf(ptx_devrt *rt, const ptx_devmem *m, uint64_t fmt, uint64_t args,
                      int32_t *ret, uint64_t *fault)
{
    /* Formatted outside the lock; a record larger than the whole FIFO can
     * never fit, so that bounds the text. */
    ptx_text t = {.max = rt != NULL ? rt->fifo_limit : PTX_DEVRT_FIFO_DEFAULT};
    int n = ptx_printf_format(m, fmt, args, &t, fault);
    if (n == PTX_PRINTF_FAULT) {
        ptx_text_free(&t);
        return why(PTX_E_ILLEGAL_ADDRESS, "printf read outside device memory");
    }
    if (n == PTX_PRINTF_TOO_LONG) {
        if (rt != NULL) {
            pthread_mutex_lock(&rt->lock);
            rt->dropped++;
            pthread_mutex_unlock(&rt->lock);
        }
        n = PTX_PRINTF_INTERNAL;
    }
    if (n >= 0 && rt != NULL && t.len > 0)
        fifo_put(rt, GL_SECTION_STDOUT, t.p, t.len, 0);
    ptx_text_free(&t);
    *ret = n;
    return 0;
}

/* One of an assertion's strings ("(null)" for NULL); NULL on a fault. */
static char *assert_str(const ptx_devmem *m, uint64_t p, uint64_t *fault)
{
    size_t n;
    if (p == 0)
        return strdup("(null)");
    return ptx_devstr(m, p, ASSERT_STR_MAX, &n, fault);
}

int ptx_devrt_assertfail(ptx_devrt *rt, const ptx_devmem *m, const ptx_thread_pos *t,
                         uint64_t msg, uint64_t file, uint32_t line, uint64_t func,
                         uint64_t *fault)
{
    *fault = 0;
    char *s_msg = assert_str(m, msg, fault);
    char *s_file = s_msg != NULL ? assert_str(m, file, fault) : NULL;
    char *s_func = s_file != NULL ? assert_str(m, func, fault) : NULL;
    int rc = PTX_E_ASSERT;
    if (s_func != NULL) {
        /* NVIDIA's driver's words, which users (and PyTorch's docs) know */
        static const char form[] =
            "%s:%u: %s: block: [%u,%u,%u], thread: [%u,%u,%u] Assertion `%s` failed.\n";
        int n = snprintf(NULL, 0, form, s_file, line, s_func, t->ctaid[0], t->ctaid[1],
                         t->ctaid[2], t->tid[0], t->tid[1], t->tid[2], s_msg);
        char *text = n > 0 ? malloc((size_t)n + 1) : NULL;
        if (text != NULL) {
            snprintf(text, (size_t)n + 1, form, s_file, line, s_func, t->ctaid[0], t->ctaid[1],
                     t->ctaid[2], t->tid[0], t->tid[1], t->tid[2], s_msg);
            if (rt != NULL)
                fifo_put(rt, GL_SECTION_STDERR, text, (size_t)n, ASSERT_SLACK);
            free(text);
        }
        why(0, "device assertion failed");
    } else if (*fault != 0)
        rc = why(PTX_E_ILLEGAL_ADDRESS, "__assertfail read outside device memory");
    free(s_msg);
    free(s_file);
    free(s_func);
    return rc;
}

int ptx_devrt_malloc(ptx_devrt *rt, uint64_t size, uint64_t *ptr, uint64_t *fault)
{
    *ptr = 0;
    if (rt == NULL)
        return 0;
    pthread_mutex_lock(&rt->heap_lock);
    int r = ptx_heap_alloc(&rt->heap, size, ptr, fault);
    pthread_mutex_unlock(&rt->heap_lock);
    if (r == PTX_HEAP_CORRUPT)
        return why(PTX_E_ILLEGAL_ADDRESS, "malloc found the device heap corrupted (a kernel "
                   "wrote over the header of a block)");
    return 0;
}

int ptx_devrt_free(ptx_devrt *rt, uint64_t ptr, uint64_t *fault)
{
    if (ptr == 0)
        return 0;
    int r = PTX_HEAP_BAD_FREE;
    if (rt != NULL) {
        pthread_mutex_lock(&rt->heap_lock);
        r = ptx_heap_free(&rt->heap, ptr);
        pthread_mutex_unlock(&rt->heap_lock);
    }
    if (r == PTX_HEAP_OK)
        return 0;
    *fault = ptr;
    return why(PTX_E_ILLEGAL_ADDRESS, "free of a pointer that malloc did not return, or "
               "freed already");
}

/* --------------------------------------------------------- session side */

int ptx_devrt_set_fifo(ptx_devrt *rt, uint64_t bytes)
{
    if (rt->printed)
        return -1;
    rt->fifo_limit = bytes;
    return 0;
}

int ptx_devrt_set_heap(ptx_devrt *rt, uint8_t *base, uint64_t size)
{
    pthread_mutex_lock(&rt->heap_lock);
    int refuse = rt->heap.used || ptx_heap_live(&rt->heap);
    if (!refuse)
        ptx_heap_init(&rt->heap, base, size);
    pthread_mutex_unlock(&rt->heap_lock);
    return refuse ? -1 : 0;
}

uint8_t *ptx_devrt_heap_base(ptx_devrt *rt)
{
    pthread_mutex_lock(&rt->heap_lock);
    uint8_t *base = rt->heap.size ? rt->heap.base : NULL;
    pthread_mutex_unlock(&rt->heap_lock);
    return base;
}

void ptx_devrt_set_cond_scope(ptx_devrt *rt, const ptx_cond_scope *scope)
{
    rt->cond = scope;
}

int ptx_devrt_set_conditional(ptx_devrt *rt, uint64_t handle, uint32_t value)
{
    const ptx_cond_scope *c = rt != NULL ? rt->cond : NULL;
    for (uint32_t k = 0; c != NULL && k < c->n; k++)
        if (c->keys[k] == handle) {
            /* racing calls are undefined in CUDA; each store is whole here */
            __atomic_store_n(&c->values[k], (uint64_t)value, __ATOMIC_RELAXED);
            return 0;
        }
    return why(PTX_E_LAUNCH_FAILED, "cudaGraphSetConditional: handle %#llx is not one of the "
               "launching graph's%s", (unsigned long long)handle,
               c == NULL ? " (the kernel was not launched by a graph)" : "");
}

void ptx_devrt_launch(ptx_devrt *rt, uint32_t uses)
{
    if (uses & (1u << PTX_BI_VPRINTF))
        rt->printed = 1;
}

uint64_t ptx_devrt_take_dropped(ptx_devrt *rt)
{
    pthread_mutex_lock(&rt->lock);
    uint64_t n = rt->dropped + rt->queue_dropped;
    rt->dropped = rt->queue_dropped = 0;
    pthread_mutex_unlock(&rt->lock);
    return n;
}

void ptx_devrt_flush(ptx_devrt *rt)
{
    pthread_mutex_lock(&rt->lock);
    /* the sent part of the queue goes first, so the queue does not grow */
    if (rt->q_head > 0) {
        memmove(rt->queue.p, rt->queue.p + rt->q_head, rt->queue.len - rt->q_head);
        rt->queue.len -= rt->q_head;
        rt->queue.last = rt->queue.last != SIZE_MAX && rt->queue.last >= rt->q_head
                             ? rt->queue.last - rt->q_head : SIZE_MAX;
        rt->q_head = 0;
    }
    for (size_t off = 0; off < rt->fifo.len;) {
        const uint8_t *r = rt->fifo.p + off;
        uint32_t n = rec_len(r);
        if (rt->queue.len + n > PTX_DEVRT_QUEUE_MAX
            || rec_append(&rt->queue, r[0], (const char *)r + REC, n) != 0)
            rt->queue_dropped++;
        off += REC + n;
    }
    rt->fifo.len = 0;
    rt->fifo.last = SIZE_MAX;
    rt->fifo_used = 0;
    pthread_mutex_unlock(&rt->lock);
}

size_t ptx_devrt_pending(const ptx_devrt *rt)
{
    return rt->queue.len - rt->q_head;
}

size_t ptx_devrt_take(ptx_devrt *rt, uint8_t *out, size_t cap, int *more)
{
    size_t used = 0, last = SIZE_MAX;
    pthread_mutex_lock(&rt->lock);
    recbuf *q = &rt->queue;
    while (rt->q_head < q->len && cap - used > REC) {
        uint8_t *r = q->p + rt->q_head;
        uint32_t n = rec_len(r), k = n;
        if (k > cap - used - REC)
            k = (uint32_t)(cap - used - REC);
        last = used;
        rec_header(out + used, r[0], 0, k);
        memcpy(out + used + REC, r + REC, k);
        used += REC + k;
        if (k == n) {
            rt->q_head += REC + n;
            continue;
        }
        /* the rest of the record stays: its header moves up over what was sent */
        int kind = r[0];
        rt->q_head += k;
        rec_header(q->p + rt->q_head, kind, 0, n - k);
        if (q->last == rt->q_head - k)
            q->last = rt->q_head;
        break;
    }
    if (rt->q_head == q->len) { /* all sent */
        q->len = rt->q_head = 0;
        q->last = SIZE_MAX;
    }
    *more = rt->q_head < q->len;
    if (*more && last == SIZE_MAX && cap - used >= REC) { /* no room: say only that more waits */
        last = used;
        rec_header(out + used, GL_SECTION_STDOUT, 0, 0);
        used += REC;
    }
    if (*more && last != SIZE_MAX)
        out[last + 1] |= GL_SECTION_MORE;
    pthread_mutex_unlock(&rt->lock);
    return used;
}

int ptx_devrt_set_pending_launches(ptx_devrt *rt, uint64_t count)
{
    /* CUDA takes the limit before kernels run; here a launch reads it when
     * it begins, so setting it between launches is harmless. */
    if (count == 0 || count > PTX_DEVRT_PENDING_MAX)
        return -1;
    rt->pending_launches = (uint32_t)count;
    return 0;
}

uint32_t ptx_devrt_pending_launches(const ptx_devrt *rt)
{
    return rt != NULL ? rt->pending_launches : PTX_DEVRT_PENDING_DEFAULT;
}
