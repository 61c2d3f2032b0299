/*
 * userobj.c — CUDA user objects (cuUserObjectCreate/Retain/Release,
 * cuGraphRetainUserObject/ReleaseUserObject), answered in the interposer:
 * a user object is a reference count and a destructor of the program's, and
 * graphs are the interposer's own objects, so nothing reaches the server.
 * cuda.core keeps a graph's kernel arguments alive with them.
 *
 * As NVIDIA documents: the creator owns initialRefcount references; a graph
 * owns the references retained for it (or moved to it with
 * CU_GRAPH_USER_OBJECT_MOVE) until it releases them or is destroyed; a copy
 * of a graph (cuGraphClone, a child graph node, an instantiation, whose exec
 * keeps its own copy) holds the same references again, so an exec keeps the
 * object alive after its graph is destroyed. When the count reaches zero the
 * destructor runs on this file's destructor thread, never on the caller's
 * ("executed by a shared internal thread"; it must not call CUDA). Unlike
 * NVIDIA's driver, a destroyed exec's references are dropped at once rather
 * than after its unsynchronized launches (the destructor frees the program's
 * host objects; the device memory they own is freed by calls that gleam
 * orders after those launches).
 *
 * Ownership: a user object is a gl_uobj this file mallocs, found through
 * g_objs (its address is its handle), freed after its destructor ran. A
 * graph's gl_uobj_refs array is the graph's. Locking: g_lock guards counts
 * and the queue; it may be taken with gl_graph_lock held, never the reverse.
 */
#include <limits.h>
#include <signal.h>
#include <pthread.h>
#include <stdlib.h>

#include "gl_client_gen.h"
#include "graph.h"

typedef struct gl_uobj {
    void *ptr;
    CUhostFn destroy;
    int64_t count;
    struct gl_uobj *next_dead; /* in the destructor queue */
} gl_uobj;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_dead_cv = PTHREAD_COND_INITIALIZER;
static gl_uobj *g_dead_head, *g_dead_tail;
static gl_hmap *g_objs;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_thread_ok;

static void *destructor_thread(void *unused)
{
    (void)unused;
    for (;;) {
        pthread_mutex_lock(&g_lock);
        while (g_dead_head == NULL)
            pthread_cond_wait(&g_dead_cv, &g_lock);
        gl_uobj *o = g_dead_head;
        g_dead_head = o->next_dead;
        if (g_dead_head == NULL)
            g_dead_tail = NULL;
        pthread_mutex_unlock(&g_lock);
        o->destroy(o->ptr);
        free(o);
    }
    return NULL;
}

static void start(void)
{
    pthread_t t;
    sigset_t all, old;

    g_objs = gl_hmap_new();
    sigfillset(&all); /* signals go to the program's own threads */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (g_objs != NULL && pthread_create(&t, NULL, destructor_thread, NULL) == 0) {
        pthread_detach(t);
        g_thread_ok = 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* The object behind a handle, with g_lock held (NULL: not a live one). */
static gl_uobj *uobj_of(CUuserObject h)
{
    return g_objs != NULL ? gl_hmap_get(g_objs, (uint64_t)(uintptr_t)h) : NULL;
}

/* Drops n references, with g_lock held; the last one queues the destructor. */
static void drop_locked(gl_uobj *o, int64_t n)
{
    o->count -= n;
    if (o->count > 0)
        return;
    gl_hmap_take(g_objs, (uint64_t)(uintptr_t)o);
    o->next_dead = NULL;
    if (g_dead_tail != NULL)
        g_dead_tail->next_dead = o;
    else
        g_dead_head = o;
    g_dead_tail = o;
    pthread_cond_signal(&g_dead_cv);
}

static int count_ok(unsigned int count)
{
    return count != 0 && count <= INT_MAX;
}

CUresult gls_cuUserObjectCreate(CUuserObject *object_out, void *ptr, CUhostFn destroy,
                                unsigned int initialRefcount, unsigned int flags, int ptds)
{
    (void)ptds;
    if (object_out == NULL || destroy == NULL || !count_ok(initialRefcount)
        || flags != 1 /* CU_USER_OBJECT_NO_DESTRUCTOR_SYNC, the one flag, required */)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_once(&g_once, start);
    gl_uobj *o = g_thread_ok ? calloc(1, sizeof *o) : NULL;
    if (o == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    o->ptr = ptr;
    o->destroy = destroy;
    o->count = initialRefcount;
    pthread_mutex_lock(&g_lock);
    int put = gl_hmap_put(g_objs, (uint64_t)(uintptr_t)o, o);
    pthread_mutex_unlock(&g_lock);
    if (put != 0) {
        free(o);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *object_out = (CUuserObject)o;
    return CUDA_SUCCESS;
}

/* Adds (sign 1) or drops (-1) the caller's references. */
static CUresult change(CUuserObject object, unsigned int count, int sign)
{
    if (!count_ok(count))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_lock);
    gl_uobj *o = uobj_of(object);
    if (o == NULL)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (sign > 0)
        o->count += count;
    else
        drop_locked(o, count);
    pthread_mutex_unlock(&g_lock);
    return r;
}

CUresult gls_cuUserObjectRetain(CUuserObject object, unsigned int count, int ptds)
{
    (void)ptds;
    return change(object, count, 1);
}

CUresult gls_cuUserObjectRelease(CUuserObject object, unsigned int count, int ptds)
{
    (void)ptds;
    return change(object, count, -1);
}

/* ------------------------------------------------- references of graphs */

static gl_uobj_ref *find_ref(gl_graph *g, const gl_uobj *o)
{
    for (uint32_t i = 0; i < g->nusers; i++)
        if (g->users[i].obj == o)
            return &g->users[i];
    return NULL;
}

void gl_uobj_refs_drop_locked(gl_graph *g)
{
    if (g->nusers == 0)
        return;
    pthread_mutex_lock(&g_lock);
    for (uint32_t i = 0; i < g->nusers; i++)
        drop_locked(g->users[i].obj, g->users[i].count);
    pthread_mutex_unlock(&g_lock);
    free(g->users);
    g->users = NULL;
    g->nusers = g->capusers = 0;
}

int gl_uobj_refs_copy_locked(gl_graph *dst, const gl_graph *src)
{
    if (src->nusers == 0)
        return 0;
    dst->users = malloc(src->nusers * sizeof *dst->users);
    if (dst->users == NULL)
        return -1;
    pthread_mutex_lock(&g_lock);
    for (uint32_t i = 0; i < src->nusers; i++) {
        dst->users[i] = src->users[i];
        src->users[i].obj->count += src->users[i].count;
    }
    pthread_mutex_unlock(&g_lock);
    dst->nusers = dst->capusers = src->nusers;
    return 0;
}

/* Takes gl_graph_lock, then g_lock; the graph and the object behind the
 * handles (NULL: not one) and the graph's references to it (NULL: none). */
static gl_uobj_ref *lock_graph_ref(CUgraph graph, CUuserObject object, gl_graph **g,
                                   gl_uobj **o)
{
    pthread_mutex_lock(&gl_graph_lock);
    pthread_mutex_lock(&g_lock);
    *g = gl_graph_of(graph);
    *o = uobj_of(object);
    return *g != NULL && *o != NULL ? find_ref(*g, *o) : NULL;
}

static void unlock_both(void)
{
    pthread_mutex_unlock(&g_lock);
    pthread_mutex_unlock(&gl_graph_lock);
}

CUresult gls_cuGraphRetainUserObject(CUgraph graph, CUuserObject object, unsigned int count,
                                     unsigned int flags, int ptds)
{
    (void)ptds;
    if (!count_ok(count) || (flags != 0 && flags != 1 /* CU_GRAPH_USER_OBJECT_MOVE */))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    gl_graph *g;
    gl_uobj *o;
    gl_uobj_ref *ref = lock_graph_ref(graph, object, &g, &o);
    if (g == NULL || o == NULL)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (ref == NULL
             && gl_grow(&g->users, &g->capusers, g->nusers, sizeof *g->users, 4) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else {
        if (ref == NULL)
            ref = &g->users[g->nusers++], *ref = (gl_uobj_ref){o, 0};
        ref->count += count;
        if (flags == 0) /* new references; a move takes the caller's */
            o->count += count;
    }
    unlock_both();
    return r;
}

CUresult gls_cuGraphReleaseUserObject(CUgraph graph, CUuserObject object, unsigned int count,
                                      int ptds)
{
    (void)ptds;
    if (!count_ok(count))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    gl_graph *g;
    gl_uobj *o;
    gl_uobj_ref *ref = lock_graph_ref(graph, object, &g, &o);
    if (ref == NULL || ref->count < count) /* more than the graph owns */
        r = CUDA_ERROR_INVALID_VALUE;
    else {
        ref->count -= count;
        drop_locked(o, count);
        if (ref->count == 0)
            *ref = g->users[--g->nusers];
    }
    unlock_both();
    return r;
}
