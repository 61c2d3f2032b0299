/*
 * ptx_cdp.c — dynamic parallelism on the host device (ptx_cdp.h): a grid's
 * queue of device-side work, its parameter buffers, streams and last errors,
 * and running the queue once the grid's blocks have ended.
 *
 * Everything a kernel hands in is checked before it is believed: a function
 * pointer must be a kernel of the module, a parameter buffer one this grid
 * gave out and not launched yet, a stream one of CUDA's names or a handle
 * this runtime minted, a configuration one a host launch could have. A
 * wrong value is CUDA's error code, returned to the kernel and kept as the
 * thread's last error; a pointer into the launching block's shared or local
 * memory among a child's parameters is a fault (CUDA forbids passing one; a
 * child reading it would read whatever lies there now).
 * Ownership and threads: see ptx_cdp.h. No global state.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "ptx_cdp.h"
#include "ptx_devrt.h"
#include "ptx_int.h"

#define STREAM_TAG 0x6364700000000000ull /* "cdp": the streams this runtime mints */
#define STREAM_NON_BLOCKING 1u           /* cudaStreamNonBlocking: the only flag CDP2 takes */
#define MEMCPY_DEVICE_TO_DEVICE 3u
#define MEMCPY_DEFAULT 4u
#define BUF_ALIGN 64u                    /* CUDA's parameter buffers are 64-byte aligned */

struct ptx_cdp_tree {
    uint32_t pending; /* atomic: launches queued and not finished */
    uint32_t limit;
};

enum { ITEM_KERNEL, ITEM_COPY, ITEM_SET };

typedef struct {
    uint8_t kind, tail, done;
    const ptx_kernel *k;
    unsigned grid[3], block[3], shared;
    uint8_t *params; /* owned: the buffer's bytes when the launch was made */
    uint64_t dst, src, n;
    uint8_t value;
} cdp_item;

/* A parameter buffer handed out: where it lies in the arena and, for one of
 * cudaGetParameterBufferV2, the launch it was made for (k NULL for V1). */
typedef struct {
    uint64_t off, size;
    const ptx_kernel *k;
    unsigned grid[3], block[3], shared;
    int launched;
    const char *text; /* an error's text held here (error_text), or NULL */
} cdp_buf;

typedef struct {
    uint32_t pos[6]; /* ctaid, tid */
    int32_t err;
    int used;
} cdp_lasterr;

struct ptx_cdp_grid {
    pthread_mutex_t lock; /* everything below but the constants */
    const ptx_module *m;
    const ptx_kernel *k;
    ptx_cdp_tree *tree;
    ptx_cdp_tree own; /* the tree when this grid is the host's */
    unsigned depth;
    uint8_t *arena;   /* mmap'd on first use, PTX_CDP_ARENA bytes */
    uint64_t arena_used;
    cdp_buf *bufs;    /* by offset, ascending */
    size_t nbufs, capbufs;
    cdp_item *items;
    size_t nitems, capitems;
    uint64_t streams; /* handles minted */
    cdp_lasterr *errs; /* open addressing, errcap slots (a power of two) */
    size_t errcap, nerrs;
};

ptx_cdp_grid *ptx_cdp_grid_new(const ptx_module *m, const ptx_kernel *k, ptx_cdp_tree *tree,
                               unsigned depth, uint32_t pending_limit)
{
    ptx_cdp_grid *g = calloc(1, sizeof *g);
    if (g == NULL)
        return NULL;
    pthread_mutex_init(&g->lock, NULL);
    g->m = m;
    g->k = k;
    g->depth = depth;
    g->own.limit = pending_limit;
    g->tree = tree != NULL ? tree : &g->own;
    return g;
}

void ptx_cdp_grid_free(ptx_cdp_grid *g)
{
    if (g == NULL)
        return;
    for (size_t i = 0; i < g->nitems; i++) {
        /* work that never ran (its grid or a sibling failed) is no longer pending */
        if (g->items[i].kind == ITEM_KERNEL && !g->items[i].done)
            __atomic_fetch_sub(&g->tree->pending, 1, __ATOMIC_SEQ_CST);
        free(g->items[i].params);
    }
    free(g->items);
    free(g->bufs);
    free(g->errs);
    if (g->arena != NULL)
        munmap(g->arena, PTX_CDP_ARENA);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

void ptx_cdp_arena(const ptx_cdp_grid *g, uint64_t *base, uint64_t *len)
{
    /* the arena's address never changes once mapped; a reader that sees
     * none yet cannot hold a pointer into it */
    uint8_t *a = __atomic_load_n(&g->arena, __ATOMIC_ACQUIRE);
    *base = (uint64_t)(uintptr_t)a;
    *len = a != NULL ? PTX_CDP_ARENA : 0;
}

/* ------------------------------------------------------------ last errors */

static size_t pos_hash(const uint32_t pos[6])
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 6; i++)
        h = (h ^ pos[i]) * 1099511628211ull;
    return (size_t)(h ^ (h >> 29));
}

static cdp_lasterr *err_slot(ptx_cdp_grid *g, const uint32_t pos[6])
{
    if (g->errcap == 0)
        return NULL;
    for (size_t i = pos_hash(pos) & (g->errcap - 1);; i = (i + 1) & (g->errcap - 1)) {
        cdp_lasterr *e = &g->errs[i];
        if (!e->used || memcmp(e->pos, pos, sizeof e->pos) == 0)
            return e;
    }
}

/* Keeps ERR as the thread's last error (a thread whose calls succeed costs
 * nothing); -1 when out of memory. */
static int set_last_error(ptx_cdp_grid *g, const uint32_t pos[6], int32_t err)
{
    cdp_lasterr *e = err_slot(g, pos);
    if (e != NULL && e->used) {
        e->err = err;
        return 0;
    }
    if (err == 0)
        return 0;
    if (2 * (g->nerrs + 1) > g->errcap) { /* grow, keeping the table half empty */
        size_t cap = g->errcap ? g->errcap * 2 : 64;
        cdp_lasterr *n = calloc(cap, sizeof *n), *old = g->errs;
        if (n == NULL)
            return -1;
        size_t oldcap = g->errcap;
        g->errs = n;
        g->errcap = cap;
        for (size_t i = 0; i < oldcap; i++)
            if (old[i].used)
                *err_slot(g, old[i].pos) = old[i];
        free(old);
    }
    e = err_slot(g, pos);
    memcpy(e->pos, pos, sizeof e->pos);
    e->err = err;
    e->used = 1;
    g->nerrs++;
    return 0;
}

static int32_t last_error(ptx_cdp_grid *g, const uint32_t pos[6], int clear)
{
    cdp_lasterr *e = err_slot(g, pos);
    if (e == NULL || !e->used)
        return 0;
    int32_t err = e->err;
    if (clear)
        e->err = 0;
    return err;
}

/* ------------------------------------------------------- checking inputs */

/* The kernel a function pointer names, or NULL (not an entry of the module). */
static const ptx_kernel *kernel_of(const ptx_cdp_grid *g, uint64_t func)
{
    uint64_t fid = func & 0xffffffffu;
    if ((func & ~0xffffffffull) != PTX_FUNC_TAG || fid >= g->m->nfuncs)
        return NULL;
    const ptx_func *f = &g->m->funcs[fid];
    if (!f->is_entry || !f->defined || f->hidden)
        return NULL;
    return ptx_module_kernel(g->m, f->name);
}

static int stream_ok(uint64_t s)
{
    return s == 0 || s == PTX_CDP_STREAM_TAIL || s == PTX_CDP_STREAM_FIRE_AND_FORGET
           || (s & ~0xffffffffull) == STREAM_TAG;
}

/* A configuration a host launch of K could have. */
static int config_ok(const ptx_kernel *k, const unsigned grid[3], const unsigned block[3],
                     unsigned shared)
{
    uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
    if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0 || grid[0] > 0x7fffffffu
        || grid[1] > 65535 || grid[2] > 65535)
        return 0;
    if (threads == 0 || threads > 1024 || block[0] > 1024 || block[1] > 1024 || block[2] > 64
        || (k->max_threads && threads > k->max_threads))
        return 0;
    return (uint64_t)k->dyn_base + shared <= PTX_MAX_SHARED;
}

static int in_window(uint64_t a, uint64_t n, const void *base, uint64_t len)
{
    uint64_t off = a - (uint64_t)(uintptr_t)base;
    return base != NULL && off < len && (n == 0 || len - off >= n);
}

/* Whether [a, a + n) is the block's shared or local memory. */
static int block_private(const ptx_block *b, uint64_t a, uint64_t n)
{
    return in_window(a, n ? n : 1, b->shared, b->shared_size)
           || in_window(a, n ? n : 1, b->local, b->local_total);
}

/* The first parameter word that points into the block's shared or local
 * memory: its value, 0 when none. Pointers are 8-byte aligned in a
 * parameter buffer; any word is looked at, so a pointer inside a struct
 * argument is found too. */
static uint64_t private_pointer(const ptx_block *b, const uint8_t *params, uint64_t len)
{
    for (uint64_t o = 0; o + 8 <= len; o += 8) {
        uint64_t v;
        memcpy(&v, params + o, 8);
        if (block_private(b, v, 1))
            return v;
    }
    return 0;
}

/* ------------------------------------------------------ the queue's parts */

static cdp_item *push_item(ptx_cdp_grid *g)
{
    if (g->nitems == g->capitems) {
        size_t cap = g->capitems ? g->capitems * 2 : 16;
        cdp_item *n = realloc(g->items, cap * sizeof *n);
        if (n == NULL)
            return NULL;
        g->items = n;
        g->capitems = cap;
    }
    cdp_item *it = &g->items[g->nitems++];
    memset(it, 0, sizeof *it);
    return it;
}

/* A parameter buffer of SIZE bytes aligned to ALIGN: its address, 0 when
 * the arena is full (or cannot be mapped); *bi its record's index. */
static uint64_t new_buffer(ptx_cdp_grid *g, uint64_t size, uint64_t align, size_t *bi)
{
    if (g->arena == NULL) {
        void *a = mmap(NULL, PTX_CDP_ARENA, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (a == MAP_FAILED)
            return 0;
        __atomic_store_n(&g->arena, (uint8_t *)a, __ATOMIC_RELEASE);
    }
    uint64_t off = (g->arena_used + align - 1) / align * align;
    if (size > PTX_CDP_ARENA || off > PTX_CDP_ARENA - size)
        return 0;
    if (g->nbufs == g->capbufs) {
        size_t cap = g->capbufs ? g->capbufs * 2 : 16;
        cdp_buf *n = realloc(g->bufs, cap * sizeof *n);
        if (n == NULL)
            return 0;
        g->bufs = n;
        g->capbufs = cap;
    }
    *bi = g->nbufs;
    cdp_buf *b = &g->bufs[g->nbufs++];
    memset(b, 0, sizeof *b);
    b->off = off;
    b->size = size;
    g->arena_used = off + (size ? size : 1);
    return (uint64_t)(uintptr_t)g->arena + off;
}

/* The record of the buffer at address A, or NULL (not one of this grid's). */
static cdp_buf *find_buffer(ptx_cdp_grid *g, uint64_t a)
{
    uint64_t off = a - (uint64_t)(uintptr_t)g->arena;
    if (g->arena == NULL || off >= PTX_CDP_ARENA)
        return NULL;
    size_t lo = 0, hi = g->nbufs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (g->bufs[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < g->nbufs && g->bufs[lo].off == off ? &g->bufs[lo] : NULL;
}

static void dim3_of(const uint64_t arg[2], unsigned out[3])
{
    uint32_t v[4];
    memcpy(v, arg, sizeof v);
    out[0] = v[0];
    out[1] = v[1];
    out[2] = v[2];
}

/* cudaLaunchDevice(V2): queues kernel K with the buffer's bytes. A CUDA
 * error code, or a fault (*fault set) for a private pointer. */
static int launch(ptx_cdp_grid *g, ptx_block *b, const ptx_kernel *k, cdp_buf *buf,
                  const unsigned grid[3], const unsigned block[3], unsigned shared, uint64_t stream,
                  int32_t *err, uint64_t *fault)
{
    *err = PTX_CDP_OK;
    if (!stream_ok(stream))
        return *err = PTX_CDP_INVALID_RESOURCE_HANDLE, 0;
    if (buf == NULL || buf->launched || k->params_size > buf->size)
        return *err = PTX_CDP_INVALID_VALUE, 0;
    if (!config_ok(k, grid, block, shared))
        return *err = PTX_CDP_INVALID_CONFIGURATION, 0;
    if (g->depth + 1 >= PTX_CDP_MAX_DEPTH)
        return *err = PTX_CDP_MAX_DEPTH_EXCEEDED, 0;
    const uint8_t *bytes = g->arena + buf->off;
    uint64_t bad = private_pointer(b, bytes, k->params_size);
    if (bad != 0) {
        *fault = bad;
        return ptx_devrt_fault(PTX_E_ILLEGAL_ADDRESS, "a child grid's parameters hold a pointer "
                               "to the launching block's shared or local memory, which CUDA "
                               "forbids passing to a child");
    }
    if (__atomic_add_fetch(&g->tree->pending, 1, __ATOMIC_SEQ_CST) > g->tree->limit) {
        __atomic_fetch_sub(&g->tree->pending, 1, __ATOMIC_SEQ_CST);
        return *err = PTX_CDP_PENDING_COUNT_EXCEEDED, 0;
    }
    uint8_t *copy = malloc(k->params_size ? k->params_size : 1);
    cdp_item *it = copy != NULL ? push_item(g) : NULL;
    if (it == NULL) {
        free(copy);
        __atomic_fetch_sub(&g->tree->pending, 1, __ATOMIC_SEQ_CST);
        return *err = PTX_CDP_MEMORY_ALLOCATION, 0;
    }
    memcpy(copy, bytes, k->params_size);
    it->kind = ITEM_KERNEL;
    it->tail = stream == PTX_CDP_STREAM_TAIL;
    it->k = k;
    memcpy(it->grid, grid, sizeof it->grid);
    memcpy(it->block, block, sizeof it->block);
    it->shared = shared;
    it->params = copy;
    buf->launched = 1;
    return 0;
}

/* cudaMemcpyAsync and cudaMemsetAsync: device memory only (not the block's
 * shared or local memory), queued in stream order. */
static int32_t queue_memory(ptx_cdp_grid *g, ptx_block *b, int kind, uint64_t dst, uint64_t src,
                            uint64_t n, uint8_t value, uint64_t stream)
{
    if (!stream_ok(stream))
        return PTX_CDP_INVALID_RESOURCE_HANDLE;
    if (n == 0)
        return PTX_CDP_OK;
    if (ptx_gaddr(b, dst, n) == NULL || block_private(b, dst, n)
        || (kind == ITEM_COPY && (ptx_gaddr(b, src, n) == NULL || block_private(b, src, n))))
        return PTX_CDP_INVALID_VALUE;
    cdp_item *it = push_item(g);
    if (it == NULL)
        return PTX_CDP_MEMORY_ALLOCATION;
    it->kind = (uint8_t)kind;
    it->tail = stream == PTX_CDP_STREAM_TAIL;
    it->dst = dst;
    it->src = src;
    it->n = n;
    it->value = value;
    return PTX_CDP_OK;
}

/* The codes the device runtime returns, by name and meaning. */
static const struct {
    int32_t code;
    const char *name, *text;
} errors[] = {
    {PTX_CDP_OK, "cudaSuccess", "no error"},
    {PTX_CDP_INVALID_VALUE, "cudaErrorInvalidValue", "invalid argument"},
    {PTX_CDP_MEMORY_ALLOCATION, "cudaErrorMemoryAllocation", "out of memory"},
    {PTX_CDP_INVALID_CONFIGURATION, "cudaErrorInvalidConfiguration",
     "invalid configuration argument"},
    {PTX_CDP_MAX_DEPTH_EXCEEDED, "cudaErrorLaunchMaxDepthExceeded",
     "launch would exceed the maximum depth of nested grids (24)"},
    {PTX_CDP_PENDING_COUNT_EXCEEDED, "cudaErrorLaunchPendingCountExceeded",
     "launch would exceed cudaLimitDevRuntimePendingLaunchCount"},
    {PTX_CDP_INVALID_DEVICE_FUNCTION, "cudaErrorInvalidDeviceFunction",
     "invalid device function"},
    {PTX_CDP_INVALID_RESOURCE_HANDLE, "cudaErrorInvalidResourceHandle",
     "invalid resource handle"},
};

/* cudaGetErrorString and cudaGetErrorName: the text, in a buffer of the
 * arena the kernel can read (one per text and grid); 0 when out of room. */
static uint64_t error_text(ptx_cdp_grid *g, int32_t code, int name)
{
    const char *t = name ? "cudaErrorUnknown" : "unrecognized error code";
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == code)
            t = name ? errors[i].name : errors[i].text;
    size_t n = strlen(t) + 1, bi = 0;
    for (size_t i = 0; i < g->nbufs; i++) /* a text given out before */
        if (g->bufs[i].text == t)
            return (uint64_t)(uintptr_t)g->arena + g->bufs[i].off;
    uint64_t p = new_buffer(g, n, 1, &bi);
    if (p != 0) {
        memcpy((void *)(uintptr_t)p, t, n);
        g->bufs[bi].text = t;
        g->bufs[bi].launched = 1; /* never a launch's */
    }
    return p;
}

/* One built-in's work under the grid's lock: 0 and *ret, or a fault. */
static int call_locked(ptx_cdp_grid *g, ptx_block *b, int builtin, const uint64_t (*a)[2],
                       const uint32_t pos[6], uint64_t *ret, uint64_t *fault)
{
    int32_t err = PTX_CDP_OK;
    int rc = 0;
    size_t bi = 0;
    unsigned grid[3], block[3];
    switch (builtin) {
    case PTX_BI_PARAM_BUFFER: /* (alignment, size): NULL when it cannot be had */
        if (a[0][0] == 0 || (a[0][0] & (a[0][0] - 1)) != 0 || a[0][0] > 4096
            || a[1][0] > PTX_CDP_PARAMS_MAX)
            err = PTX_CDP_INVALID_VALUE;
        else if ((*ret = new_buffer(g, a[1][0], a[0][0] > BUF_ALIGN ? a[0][0] : BUF_ALIGN,
                                    &bi)) == 0)
            err = PTX_CDP_MEMORY_ALLOCATION;
        break;
    case PTX_BI_PARAM_BUFFER_V2: { /* (func, grid, block, shared) */
        const ptx_kernel *k = kernel_of(g, a[0][0]);
        if (k == NULL) {
            err = PTX_CDP_INVALID_DEVICE_FUNCTION;
            break;
        }
        if ((*ret = new_buffer(g, k->params_size, BUF_ALIGN, &bi)) == 0) {
            err = PTX_CDP_MEMORY_ALLOCATION;
            break;
        }
        cdp_buf *buf = &g->bufs[bi];
        buf->k = k;
        dim3_of(a[1], buf->grid);
        dim3_of(a[2], buf->block);
        buf->shared = (unsigned)a[3][0];
        break;
    }
    case PTX_BI_LAUNCH_V2: { /* (buffer, stream) */
        cdp_buf *buf = find_buffer(g, a[0][0]);
        if (buf == NULL || buf->k == NULL) {
            err = PTX_CDP_INVALID_VALUE;
            break;
        }
        rc = launch(g, b, buf->k, buf, buf->grid, buf->block, buf->shared, a[1][0], &err, fault);
        break;
    }
    case PTX_BI_LAUNCH: { /* (func, buffer, grid, block, shared, stream) */
        const ptx_kernel *k = kernel_of(g, a[0][0]);
        if (k == NULL) {
            err = PTX_CDP_INVALID_DEVICE_FUNCTION;
            break;
        }
        dim3_of(a[2], grid);
        dim3_of(a[3], block);
        rc = launch(g, b, k, find_buffer(g, a[1][0]), grid, block, (unsigned)a[4][0], a[5][0],
                    &err, fault);
        break;
    }
    case PTX_BI_STREAM_CREATE: { /* (pStream, flags) */
        if ((uint32_t)a[1][0] != STREAM_NON_BLOCKING) {
            err = PTX_CDP_INVALID_VALUE;
            break;
        }
        uint8_t *p = ptx_gaddr(b, a[0][0], 8);
        if (p == NULL) {
            *fault = a[0][0];
            rc = ptx_devrt_fault(PTX_E_ILLEGAL_ADDRESS, "cudaStreamCreateWithFlags: the "
                                 "stream's address is not memory the thread may write");
            break;
        }
        uint64_t h = STREAM_TAG | (++g->streams & 0xffffffffu);
        memcpy(p, &h, 8);
        break;
    }
    case PTX_BI_STREAM_DESTROY: /* work queued in it still runs, as CUDA says */
        if ((a[0][0] & ~0xffffffffull) != STREAM_TAG)
            err = PTX_CDP_INVALID_RESOURCE_HANDLE;
        break;
    case PTX_BI_GET_LAST_ERROR:
    case PTX_BI_PEEK_LAST_ERROR:
        *ret = (uint32_t)last_error(g, pos, builtin == PTX_BI_GET_LAST_ERROR);
        return 0;
    case PTX_BI_MEMCPY_ASYNC: /* (dst, src, count, kind, stream) */
        if ((uint32_t)a[3][0] != MEMCPY_DEVICE_TO_DEVICE && (uint32_t)a[3][0] != MEMCPY_DEFAULT)
            err = PTX_CDP_INVALID_VALUE;
        else
            err = queue_memory(g, b, ITEM_COPY, a[0][0], a[1][0], a[2][0], 0, a[4][0]);
        break;
    case PTX_BI_MEMSET_ASYNC: /* (ptr, value, count, stream) */
        err = queue_memory(g, b, ITEM_SET, a[0][0], 0, a[2][0], (uint8_t)a[1][0], a[3][0]);
        break;
    case PTX_BI_ERROR_STRING:
    case PTX_BI_ERROR_NAME:
        *ret = error_text(g, (int32_t)a[0][0], builtin == PTX_BI_ERROR_NAME);
        return 0;
    default:
        return PTX_E_LAUNCH_FAILED;
    }
    if (rc != 0)
        return rc;
    if (builtin != PTX_BI_PARAM_BUFFER && builtin != PTX_BI_PARAM_BUFFER_V2)
        *ret = (uint32_t)err;
    else if (err != PTX_CDP_OK)
        *ret = 0;
    if (err != PTX_CDP_OK && set_last_error(g, pos, err) != 0)
        return PTX_E_OUT_OF_MEMORY;
    return 0;
}

int ptx_cdp_call(ptx_cdp_grid *g, ptx_block *b, int builtin, const uint64_t (*arg)[2],
                 const uint32_t pos[6], uint64_t *ret, uint64_t *fault)
{
    pthread_mutex_lock(&g->lock);
    int rc = call_locked(g, b, builtin, arg, pos, ret, fault);
    pthread_mutex_unlock(&g->lock);
    return rc;
}

/* ------------------------------------------------------- running children */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int run_child(ptx_cdp_grid *g, const cdp_item *it, ptx_launch_args *parent,
                     uint64_t deadline_ns)
{
    char err[1024] = "";
    uint64_t now = now_ns();
    if (now >= deadline_ns) {
        if (parent->err != NULL && parent->err_len > 0)
            snprintf(parent->err, parent->err_len, "time limit reached before child grid %s "
                     "(level %u) ran", it->k->name, g->depth + 2);
        return PTX_E_LAUNCH_TIMEOUT;
    }
    ptx_launch_args ca = {
        .grid = {it->grid[0], it->grid[1], it->grid[2]},
        .block = {it->block[0], it->block[1], it->block[2]},
        .dynamic_shared = it->shared,
        .params = it->params,
        .params_len = it->k->params_size,
        .allocs = parent->allocs,
        .extra = parent->extra,
        .texture = parent->texture,
        .texture_ctx = parent->texture_ctx,
        .rt = parent->rt,
        .timeout_s = (double)(deadline_ns - now) / 1e9,
        .threads = parent->threads,
        .cdp_tree = g->tree,
        .cdp_depth = g->depth + 1,
        .err = err,
        .err_len = sizeof err,
    };
    int rc = ptx_launch(g->m, it->k, &ca);
    parent->insns += ca.insns;
    if (rc == PTX_OK || parent->err == NULL || parent->err_len == 0)
        return rc;
    /* the deepest grid that failed names itself; its ancestors pass that on */
    if (strncmp(err, "child grid ", 11) == 0)
        snprintf(parent->err, parent->err_len, "%s", err);
    else
        snprintf(parent->err, parent->err_len, "child grid %s (level %u, launched by %s): %s",
                 it->k->name, g->depth + 2, g->k->name, err);
    return rc;
}

int ptx_cdp_run(ptx_cdp_grid *g, ptx_launch_args *parent, uint64_t deadline_ns)
{
    /* the ordinary and fire-and-forget work first, then the tail launches:
     * a tail launch waits for the rest of its parent's work */
    for (int tail = 0; tail <= 1; tail++)
        for (size_t i = 0; i < g->nitems; i++) {
            const cdp_item *it = &g->items[i];
            if (it->tail != tail)
                continue;
            if (it->kind == ITEM_COPY) {
                memmove((void *)(uintptr_t)it->dst, (const void *)(uintptr_t)it->src, it->n);
                continue;
            }
            if (it->kind == ITEM_SET) {
                memset((void *)(uintptr_t)it->dst, it->value, it->n);
                continue;
            }
            int rc = run_child(g, it, parent, deadline_ns);
            g->items[i].done = 1;
            __atomic_fetch_sub(&g->tree->pending, 1, __ATOMIC_SEQ_CST);
            if (rc != PTX_OK) /* the rest never runs (ptx_cdp_grid_free releases it) */
                return rc;
        }
    return PTX_OK;
}
