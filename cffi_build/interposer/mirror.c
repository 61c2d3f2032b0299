/*
 * mirror.c — mapped and managed memory. The program and the device are on
 * different machines, so memory both reach is kept twice: the program's
 * *view* here and the session's device memory on the server, each side with a
 * *twin* of what the two last agreed on. Before work that may read or
 * overwrite mirrored memory the bytes the program changed (view against twin)
 * go to the server (*push*, glMirrorPush); after work that may have written it,
 * the next call that waits for the server brings back the bytes the device
 * changed (*pull*, glMirrorPull). The diffs are exact bytes
 * (include/gl_mirror_diff.h), so both sides may write different bytes of one
 * page between agreements. The rule, what it costs and its limits:
 * docs/cuda-forwarding.md, "Mapped and managed memory".
 *
 * Views: managed memory and mapped host allocations are mapped here at their
 * device address (the session's range is free in this process: the server
 * chose it in a band no process maps), so one pointer serves the program and
 * its kernels; registered memory (cuMemHostRegister with DEVICEMAP) is the
 * program's own, mirrored at a device address of its own.
 *
 * Ownership and locks: the table owns each mirror's twin and, when it mapped
 * it, its view. g_coh orders every coherence step (push, pull, a mirror made
 * or dropped) and is taken before the batch's locks, never after; g_lock
 * guards the table for lookups from any thread, and is held by whoever
 * changes it with g_coh held too, so a holder of g_coh reads the table freely.
 * g_buf belongs to the holder of g_coh. A refresher thread pulls when the
 * program has made no call for a while after work that may have written
 * mirrored memory (a program polling a flag a kernel sets).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "gl_mirror_diff.h"
#include "gl_span.h"
#include "internal.h"
#include "ptx/ptx.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000 /* Linux 4.17; older kernels take it as a hint */
#endif

typedef struct {
    gl_mirror_info i;
    uint64_t twin_dev; /* the server's twin */
    uint8_t *twin;     /* this side's twin, size bytes */
    size_t mapped;     /* bytes of each mapping made here (view when owned, twin) */
    int owns_view;
    uint64_t module;   /* a managed module variable's module (the program's handle), else 0 */
} mirror;

static pthread_mutex_t g_coh = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static mirror *g_m;
static size_t g_n;
static uint32_t g_cap;
static atomic_size_t g_count;  /* g_n, read without a lock by the hooks */
/* Work sent that may have written mirrored memory, counted; and how much of it
 * the last completed pull covered. The device may have written what the views
 * do not show while g_covered < g_written. A caller that finds a pull in
 * flight waits for it (g_coh) and then finds nothing owed. */
static atomic_uint_fast64_t g_written, g_covered;
static uint8_t g_buf[GL_COPY_CHUNK];

static __thread int t_holding; /* this thread holds g_coh */

static void coh_lock(void)
{
    pthread_mutex_lock(&g_coh);
    t_holding = 1;
}

static void coh_unlock(void)
{
    t_holding = 0;
    pthread_mutex_unlock(&g_coh);
}

int gl_mirror_any(void)
{
    return atomic_load(&g_count) != 0 && !t_holding;
}

static pthread_mutex_t g_wake_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_wake = PTHREAD_COND_INITIALIZER;
static pthread_once_t g_refresher_once = PTHREAD_ONCE_INIT;

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

/* ------------------------------------------------------------- lookups */

static mirror *find_dev(uint64_t p)
{
    for (size_t k = 0; k < g_n; k++)
        if (p - g_m[k].i.dev < g_m[k].i.size)
            return &g_m[k];
    return NULL;
}

static mirror *find_view(uintptr_t p)
{
    for (size_t k = 0; k < g_n; k++)
        if (p - (uintptr_t)g_m[k].i.view < g_m[k].i.size)
            return &g_m[k];
    return NULL;
}

int gl_mirror_by_dev(uint64_t p, gl_mirror_info *m)
{
    if (atomic_load(&g_count) == 0)
        return 0;
    pthread_mutex_lock(&g_lock);
    mirror *f = find_dev(p);
    if (f != NULL)
        *m = f->i;
    pthread_mutex_unlock(&g_lock);
    return f != NULL;
}

int gl_mirror_overlaps(uint64_t lo, uint64_t len)
{
    int hit = 0;
    if (atomic_load(&g_count) == 0)
        return 0;
    pthread_mutex_lock(&g_lock);
    for (size_t k = 0; k < g_n && !hit; k++)
        hit = lo < g_m[k].i.dev + g_m[k].i.size && g_m[k].i.dev < lo + len;
    pthread_mutex_unlock(&g_lock);
    return hit;
}

int gl_mirror_view_overlaps(uint64_t lo, uint64_t len)
{
    int hit = 0;
    if (atomic_load(&g_count) == 0)
        return 0;
    pthread_mutex_lock(&g_lock);
    for (size_t k = 0; k < g_n && !hit; k++) {
        uint64_t v = (uint64_t)(uintptr_t)g_m[k].i.view;
        hit = lo < v + g_m[k].i.size && v < lo + len;
    }
    pthread_mutex_unlock(&g_lock);
    return hit;
}

int gl_mirror_by_view(const void *p, gl_mirror_info *m)
{
    if (atomic_load(&g_count) == 0)
        return 0;
    pthread_mutex_lock(&g_lock);
    mirror *f = find_view((uintptr_t)p);
    if (f != NULL)
        *m = f->i;
    pthread_mutex_unlock(&g_lock);
    return f != NULL;
}

/* ---------------------------------------------------------- push, pull */

/* The program's changes to m (view against twin), as one-way pushes. g_coh held. */
static CUresult push_one(mirror *m)
{
    size_t at = 0;
    while (at < m->i.size) {
        size_t scanned = 0;
        size_t w = gl_diff_encode(m->i.dev + at, m->i.view + at, m->twin + at, m->i.size - at,
                                  g_buf, sizeof g_buf, &scanned);
        if (w > 0) {
            CUresult r = glw_glMirrorPush(g_buf, w, 0);
            if (r != CUDA_SUCCESS)
                return r;
        }
        at += scanned;
    }
    return CUDA_SUCCESS;
}

CUresult gl_mirror_push(int all, uint64_t lo, uint64_t len)
{
    CUresult r = CUDA_SUCCESS;
    coh_lock();
    for (size_t k = 0; k < g_n && r == CUDA_SUCCESS; k++) {
        mirror *m = &g_m[k];
        if (all || (lo < m->i.dev + m->i.size && m->i.dev < lo + len))
            r = push_one(m);
    }
    coh_unlock();
    return r;
}

/* The server's reply bytes, checked whole, then applied. g_coh held. */
static CUresult apply_pull(const uint8_t *buf, size_t len)
{
    gl_diff_entry e;
    size_t pos = 0;
    int rc;
    while ((rc = gl_diff_next(buf, len, &pos, &e)) == 1) {
        mirror *m = find_dev(e.addr);
        if (m == NULL || e.len > m->i.size - (e.addr - m->i.dev))
            break;
    }
    if (rc != 0) {
        gl_lost("the server's changes to mapped or managed memory are malformed");
        return CUDA_ERROR_DEVICE_UNAVAILABLE;
    }
    pos = 0;
    size_t both = 0;
    uint64_t first = 0;
    while (gl_diff_next(buf, len, &pos, &e) == 1) {
        mirror *m = find_dev(e.addr);
        size_t off = (size_t)(e.addr - m->i.dev);
        size_t c = gl_diff_conflicts(&e, m->i.view + off, m->twin + off);
        if (c > 0 && both == 0)
            first = (uint64_t)(uintptr_t)(m->i.view + off);
        both += c;
        gl_diff_apply(&e, m->i.view + off, m->twin + off);
    }
    if (both == 0)
        return CUDA_SUCCESS;
    /* Both sides wrote these bytes between two agreements. A device with
     * concurrent managed access would have kept both orders' effects (atomics
     * from both sides add up); this one kept the device's, so the program must
     * not go on as if it had the right answer. */
    gl_log(GL_LOG_ERROR, "mirror", "%zu bytes of mapped or managed memory (the first at %p) "
           "were written by both the program and the device between two synchronizations; "
           "the device's bytes were kept there. gleam's devices have no concurrent managed access "
           "(CONCURRENT_MANAGED_ACCESS 0): synchronize before the CPU writes memory a kernel "
           "writes", both, (void *)(uintptr_t)first);
    return CUDA_ERROR_ILLEGAL_STATE;
}

static void wake_refresher(void)
{
    pthread_mutex_lock(&g_wake_lock);
    pthread_cond_signal(&g_wake);
    pthread_mutex_unlock(&g_wake_lock);
}

static int owed(void)
{
    return atomic_load(&g_covered) < atomic_load(&g_written);
}

static CUresult pull_locked(void)
{
    uint64_t from = 0;
    CUresult both = CUDA_SUCCESS; /* bytes both sides wrote: reported once it is all here */
    /* Work counted here was sent before the pull's record is. */
    uint_fast64_t covers = atomic_load(&g_written);
    do {
        size_t used = 0;
        CUdeviceptr next = 0;
        CUresult r = glw_glMirrorPull(g_buf, sizeof g_buf, from, &used, &next, 0);
        if (r == CUDA_SUCCESS)
            r = apply_pull(g_buf, used);
        if (r == CUDA_ERROR_ILLEGAL_STATE)
            both = r, r = CUDA_SUCCESS;
        if (r != CUDA_SUCCESS)
            return r; /* still owed */
        if (next != 0 && (next <= from || find_dev(next) == NULL)) {
            gl_lost("the server's changes to mapped or managed memory did not progress");
            return CUDA_ERROR_DEVICE_UNAVAILABLE;
        }
        from = next;
    } while (from != 0);
    atomic_store(&g_covered, covers);
    if (owed()) /* work sent meanwhile: a write that found this pull in flight did not wake */
        wake_refresher();
    return both;
}

/* A pull's finding that both sides wrote some bytes, owed to the program's next
 * refresh when the refresher thread made the pull. */
static atomic_int g_both_wrote;

CUresult gl_mirror_refresh(void)
{
    CUresult r = CUDA_SUCCESS;
    if (atomic_load(&g_count) == 0)
        return CUDA_SUCCESS;
    if (owed()) {
        coh_lock();
        if (owed())
            r = pull_locked();
        coh_unlock();
    }
    if (r == CUDA_SUCCESS && atomic_exchange(&g_both_wrote, 0))
        r = CUDA_ERROR_ILLEGAL_STATE;
    return r;
}

/* ------------------------------------------------------------- refresher */

static long refresh_ms(void)
{
    static long ms = -1; /* read once; a race only reads the same value twice */
    if (ms < 0) {
        const char *env = getenv("GLEAM_MIRROR_REFRESH_MS");
        long v = env != NULL && env[0] != '\0' ? strtol(env, NULL, 10) : 20;
        ms = v > 0 ? v : 0;
    }
    return ms;
}

void gl_mirror_mark_dirty(void)
{
    /* Only the first write since the views were up to date wakes the refresher. */
    if (atomic_fetch_add(&g_written, 1) == atomic_load(&g_covered))
        wake_refresher();
}

/* Pulls once the program has made no call for refresh_ms() while the device
 * may have written mirrored memory: a program that polls memory a kernel
 * writes, instead of synchronizing, then sees the kernel's writes once the
 * kernel has finished (never while it runs: docs). A program that keeps
 * making calls pulls at its own waiting calls. */
static void *refresher(void *unused)
{
    (void)unused;
    long ms = refresh_ms();
    struct timespec nap = {ms / 1000, (ms % 1000) * 1000000L};
    uint64_t seen = gl_batch_appended();
    /* Its pull holds g_coh, which a host function's graph launch takes (a push
     * before each stage): waiting behind that host function would never end
     * (cuda-samples' graphMemoryNodes). Behind one it is NOT_READY, still owed,
     * and tried again at the next turn. */
    gl_batch_not_behind_hold();

    while (gl_ready() == CUDA_SUCCESS) {
        pthread_mutex_lock(&g_wake_lock);
        while (!owed() && gl_ready() == CUDA_SUCCESS)
            pthread_cond_wait(&g_wake, &g_wake_lock);
        pthread_mutex_unlock(&g_wake_lock);
        nanosleep(&nap, NULL);
        uint64_t now = gl_batch_appended();
        if (now != seen) {
            seen = now; /* still busy: its own waiting calls will pull */
            continue;
        }
        coh_lock();
        if (owed() && pull_locked() == CUDA_ERROR_ILLEGAL_STATE)
            atomic_store(&g_both_wrote, 1); /* the program learns it at its next call */
        coh_unlock();
    }
    return NULL;
}

static void start_refresher(void)
{
    pthread_t t;
    sigset_t all, old;
    if (refresh_ms() == 0)
        return;
    /* No signals here: the program's handlers run on its own threads. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pthread_create(&t, NULL, refresher, NULL) == 0)
        pthread_detach(t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ------------------------------------------------------- making mirrors */

static void *map_anon(void *at, size_t size)
{
    int fixed = at != NULL ? MAP_FIXED_NOREPLACE : 0;
    void *p = mmap(at, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | fixed, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (at != NULL && p != at) { /* an old kernel took the address as a hint */
        munmap(p, size);
        return NULL;
    }
    return p;
}

static int table_add(const mirror *m)
{
    if (gl_grow(&g_m, &g_cap, g_n, sizeof *g_m, 16) != 0)
        return -1;
    g_m[g_n++] = *m;
    atomic_store(&g_count, g_n);
    return 0;
}

/* table_add under g_lock (the caller holds g_coh). */
static CUresult table_add_locked(const mirror *m)
{
    pthread_mutex_lock(&g_lock);
    int rc = table_add(m);
    pthread_mutex_unlock(&g_lock);
    return rc == 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* The server's side of a new mirror: its memory, its twin, the pairing.
 * Under g_coh, so no push or pull runs between. */
static CUresult server_side(mirror *m, size_t align)
{
    CUresult r = gl_va_alloc_aligned(m->i.size, align, &m->i.dev);
    if (r != CUDA_SUCCESS)
        return r;
    r = gl_va_alloc(m->i.size, &m->twin_dev);
    if (r != CUDA_SUCCESS) {
        gl_va_free(m->i.dev);
        return r;
    }
    r = glw_glMemAlloc(m->i.dev, m->i.size, 0);
    if (r == CUDA_SUCCESS)
        r = glw_glMemAlloc(m->twin_dev, m->i.size, 0);
    if (r == CUDA_SUCCESS)
        r = glw_glMirrorAdd(m->i.dev, m->twin_dev, m->i.size, 0);
    if (r != CUDA_SUCCESS) {
        /* Only a lost session fails to emit; its memory goes with it. */
        gl_va_free(m->twin_dev);
        gl_va_free(m->i.dev);
    }
    return r;
}

static void unmap_here(mirror *m)
{
    munmap(m->twin, m->mapped);
    if (m->owns_view)
        munmap(m->i.view, m->mapped);
}

CUresult gl_mirror_new(int kind, void *view, size_t size, unsigned flags, uint64_t *dev)
{
    mirror m = {.i = {.kind = kind, .flags = flags}};
    size_t page = page_size();
    CUresult r;

    if (size == 0 || dev == NULL || size > ((size_t)1 << 46))
        return CUDA_ERROR_INVALID_VALUE;
    /* A mapped view owns whole pages, so no other allocation shares one. */
    m.i.size = view == NULL ? (size + page - 1) / page * page : size;
    m.mapped = (m.i.size + page - 1) / page * page;
    m.twin = map_anon(NULL, m.mapped);
    if (m.twin == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    coh_lock();
    r = server_side(&m, view == NULL ? page : 256);
    if (r == CUDA_SUCCESS && view == NULL) {
        m.i.view = map_anon((void *)(uintptr_t)m.i.dev, m.mapped);
        m.owns_view = 1;
        if (m.i.view == NULL) {
            gl_log(GL_LOG_ERROR, "mirror", "cannot map %zu bytes of mapped or managed memory "
                   "at its device address 0x%llx in this process (it is in use here)",
                   m.mapped, (unsigned long long)m.i.dev);
            glw_glMemFree(m.twin_dev, 0);
            glw_glMemFree(m.i.dev, 0);
            gl_va_free(m.twin_dev);
            gl_va_free(m.i.dev);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        }
    } else if (r == CUDA_SUCCESS) {
        m.i.view = view;
    }
    if (r == CUDA_SUCCESS) {
        r = table_add_locked(&m);
        if (r != CUDA_SUCCESS) {
            glw_glMemFree(m.twin_dev, 0);
            glw_glMemFree(m.i.dev, 0);
            gl_va_free(m.twin_dev);
            gl_va_free(m.i.dev);
        }
    }
    coh_unlock();
    if (r != CUDA_SUCCESS) {
        m.owns_view = m.owns_view && m.i.view != NULL;
        unmap_here(&m);
        return r;
    }
    pthread_once(&g_refresher_once, start_refresher);
    *dev = m.i.dev;
    return CUDA_SUCCESS;
}

CUresult gl_mirror_free(int kind, const void *view)
{
    mirror m;
    int found = 0;

    coh_lock();
    /* Registered memory stays the program's: it gets what the device wrote. */
    CUresult pulled = kind == GL_MIRROR_REGISTERED && owed() ? pull_locked()
                                                                             : CUDA_SUCCESS;
    pthread_mutex_lock(&g_lock);
    for (size_t k = 0; k < g_n && !found; k++) {
        if (g_m[k].i.kind == kind && g_m[k].i.view == view && g_m[k].module == 0) {
            m = g_m[k];
            g_m[k] = g_m[--g_n];
            atomic_store(&g_count, g_n);
            found = 1;
        }
    }
    pthread_mutex_unlock(&g_lock);
    if (!found) {
        coh_unlock();
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* The free records go out before the ranges can be handed out again. */
    CUresult r = glw_glMemFree(m.i.dev, 0);
    CUresult r2 = glw_glMemFree(m.twin_dev, 0);
    gl_va_free(m.twin_dev);
    gl_va_free(m.i.dev);
    coh_unlock();
    if (kind == GL_MIRROR_MANAGED)
        gl_managed_forget(m.i.dev);
    unmap_here(&m);
    if (pulled != CUDA_SUCCESS)
        return pulled;
    return r != CUDA_SUCCESS ? r : r2;
}

/* ------------------------------------------------ managed module variables */

CUresult gl_mirror_module_var(uint64_t dev, size_t size, uint64_t module)
{
    size_t page = page_size();
    mirror m = {.i = {.kind = GL_MIRROR_MANAGED, .flags = GL_CU_MEM_ATTACH_GLOBAL, .dev = dev},
                .module = module, .owns_view = 1};
    CUresult r;

    if (size == 0 || dev % PTX_MANAGED_ALIGN != 0 || PTX_MANAGED_ALIGN % page != 0) {
        gl_log(GL_LOG_ERROR, "mirror", "a managed variable at 0x%llx (%zu bytes) that is not "
               "alone in its pages", (unsigned long long)dev, size);
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* the variable lies alone in whole pages of this size (ptx.h) */
    m.i.size = m.mapped = (size + PTX_MANAGED_ALIGN - 1) / PTX_MANAGED_ALIGN * PTX_MANAGED_ALIGN;
    if (gl_mirror_by_dev(dev, &m.i))
        return CUDA_SUCCESS; /* asked before */
    m.twin = map_anon(NULL, m.mapped);
    m.i.view = map_anon((void *)(uintptr_t)dev, m.mapped);
    if (m.twin == NULL || m.i.view == NULL) {
        gl_log(GL_LOG_ERROR, "mirror", "cannot map the managed variable at 0x%llx in this "
               "process (the address is in use here)", (unsigned long long)dev);
        m.owns_view = m.i.view != NULL;
        if (m.twin != NULL)
            unmap_here(&m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* both of this side's copies start as the variable (its initialiser, or what
     * kernels wrote before the program first asked for it) */
    r = gl_copy_dtoh(m.twin, dev, size, NULL, 0);
    if (r == CUDA_SUCCESS)
        memcpy(m.i.view, m.twin, size);
    coh_lock();
    if (r == CUDA_SUCCESS)
        r = gl_va_alloc(m.i.size, &m.twin_dev);
    if (r == CUDA_SUCCESS) {
        r = glw_glMemAlloc(m.twin_dev, m.i.size, 0);
        if (r == CUDA_SUCCESS) /* the server fills its twin from the variable */
            r = glw_glManagedVarMirror(dev, m.twin_dev, m.i.size, 0);
        if (r == CUDA_SUCCESS)
            r = table_add_locked(&m);
        if (r != CUDA_SUCCESS) {
            glw_glMemFree(m.twin_dev, 0);
            gl_va_free(m.twin_dev);
        }
    }
    coh_unlock();
    if (r != CUDA_SUCCESS) {
        gl_log(GL_LOG_ERROR, "mirror", "cannot make the managed variable at 0x%llx (%zu bytes) "
               "one address for the program and its kernels (error %d)",
               (unsigned long long)dev, size, (int)r);
        unmap_here(&m);
        return r;
    }
    pthread_once(&g_refresher_once, start_refresher);
    return CUDA_SUCCESS;
}

void gl_mirror_drop_module(uint64_t module)
{
    if (atomic_load(&g_count) == 0)
        return;
    coh_lock();
    for (;;) {
        mirror m;
        int found = 0;
        pthread_mutex_lock(&g_lock);
        for (size_t k = 0; k < g_n && !found; k++)
            if (g_m[k].module == module) {
                m = g_m[k];
                g_m[k] = g_m[--g_n];
                atomic_store(&g_count, g_n);
                found = 1;
            }
        pthread_mutex_unlock(&g_lock);
        if (!found)
            break;
        /* the variable's pages go with the module on the server; the twin is ours */
        glw_glMemFree(m.twin_dev, 0);
        gl_va_free(m.twin_dev);
        unmap_here(&m);
    }
    coh_unlock();
}
