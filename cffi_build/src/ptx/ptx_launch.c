/*
 * ptx_launch.c — running a grid: blocks are handed out to worker threads
 * (an atomic counter; each worker runs whole blocks), a block's warps run in
 * turn until each has exited or waits at a barrier, then the barrier opens;
 * a warp that goes round loops long enough yields so that the others run
 * (one may be spinning on what another will write; ptx_block.yield_mask).
 * Every generic/global access must lie in the block's shared or local
 * window, the module's variables, or the caller's ranges; the first fault,
 * trap or timeout stops the launch and is its result.
 *
 * Ownership: a launch allocates its workers' buffers and frees them before
 * it returns; it reads the module, the parameter buffer and the ranges,
 * which must not change while it runs. Threads: created per launch (none
 * for a single block or GLEAM_PTX_THREADS=1), joined before returning.
 * Environment: GLEAM_PTX_TIMEOUT_S (default 60), GLEAM_PTX_THREADS (default
 * the online CPU count). No global state.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ptx_cdp.h"
#include "ptx_devrt.h"
#include "ptx_int.h"
#include "ptxc/ptxc_tier.h"

typedef struct ptx_launch_ctx {
    const ptx_module *m;
    const ptx_kernel *k;
    const ptx_launch_args *a;
    uint64_t nblocks, nthreads;
    uint32_t nwarps;
    uint64_t shared_size;
    uint64_t next;      /* atomic: the next block to run */
    uint64_t chunk;     /* blocks a worker takes at once (run_grid) */
    int err;            /* atomic: the first failure */
    uint64_t insns;     /* atomic */
    uint64_t deadline;  /* CLOCK_MONOTONIC ns */
    ptxc_policy tier;   /* the compile tier's rule for this launch */
    int ran;            /* atomic: PTX_RAN_* */
    uint64_t workspace; /* a cooperative grid's barrier words (%envreg1:2); 0 otherwise */
    ptx_cdp_grid *cdp;  /* its device-side launches (ptx_cdp.h); NULL: it makes none */
    pthread_mutex_t lock;
    char msg[1024]; /* kernel names of templated code run to hundreds of bytes */
} ptx_launch_ctx;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int ptx_deadline_check(ptx_block *b)
{
    if (__atomic_load_n(&b->lc->err, __ATOMIC_RELAXED) != 0)
        return b->err = -1; /* another block failed: stop quietly */
    if (mono_ns() > b->lc->deadline) {
        b->err = PTX_E_LAUNCH_TIMEOUT;
        return PTX_E_LAUNCH_TIMEOUT;
    }
    return 0;
}

static int window(uint64_t a, uint64_t size, uint64_t base, uint64_t len)
{
    uint64_t off = a - base;
    return off < len && len - off >= size;
}

uint8_t *ptx_gaddr_slow(ptx_block *b, uint64_t a, uint64_t size)
{
    const ptx_launch_ctx *lc = b->lc;
    uint64_t base = 0, len = 0;
    if (window(a, size, (uint64_t)(uintptr_t)b->shared, b->shared_size)) {
        base = (uint64_t)(uintptr_t)b->shared;
        len = b->shared_size;
    } else if (window(a, size, (uint64_t)(uintptr_t)b->local, b->local_total)) {
        base = (uint64_t)(uintptr_t)b->local;
        len = b->local_total;
    } else if (lc->m->storage_size
               && window(a, size, (uint64_t)(uintptr_t)lc->m->storage, lc->m->storage_size)) {
        base = (uint64_t)(uintptr_t)lc->m->storage;
        len = lc->m->storage_size;
    } else if (lc->workspace && window(a, size, lc->workspace, PTX_GRID_WORKSPACE)) {
        base = lc->workspace;
        len = PTX_GRID_WORKSPACE;
    } else if (lc->cdp != NULL && (ptx_cdp_arena(lc->cdp, &base, &len), len > 0)
               && window(a, size, base, len)) {
        /* the parameter buffers of the grid's device-side launches */
    } else {
        const gl_range *r = lc->a->allocs ? gl_ranges_find(lc->a->allocs, a, size) : NULL;
        if (r == NULL && lc->a->extra != NULL)
            for (size_t g = 0; g < lc->a->extra->n && r == NULL; g++)
                if (gl_range_holds(&lc->a->extra->r[g], a, size))
                    r = &lc->a->extra->r[g];
        if (r == NULL)
            return NULL;
        base = r->base;
        len = r->size;
    }
    /* a two-entry cache: kernels stream through two or three buffers */
    b->c2_lo = b->c_lo;
    b->c2_len = b->c_len;
    b->c_lo = base;
    b->c_len = len;
    return (uint8_t *)(uintptr_t)a;
}

struct ptx_cdp_grid *ptx_block_cdp(const ptx_block *b)
{
    return b->lc->cdp;
}

const ptx_texref *ptx_texture_of(ptx_block *b, uint64_t value, int surface)
{
    const ptx_launch_args *a = b->lc->a;
    return a->texture != NULL ? a->texture(a->texture_ctx, value, surface) : NULL;
}

/* The state of one resident block: an ordinary grid has one per worker
 * thread, reused block after block; a cooperative grid one per block. */
typedef struct {
    ptx_launch_ctx *lc;
    ptx_block b;
    ptx_warp *warps;
    uint64_t (*regs)[PTX_LANES];
    uint32_t *preds;
    uint64_t idx;  /* the block it runs */
    int done;
    void *shared_raw, *local_raw; /* what b.shared and b.local were carved from */
} worker;

/* SIZE zeroed bytes at a multiple of ALIGN (a power of two), carved from
 * *raw (calloc: large buffers stay untouched pages until used). */
static uint8_t *aligned_zeroed(void **raw, size_t size, size_t align)
{
    *raw = calloc(1, size + align);
    if (*raw == NULL)
        return NULL;
    return (uint8_t *)(((uintptr_t)*raw + align - 1) & ~(uintptr_t)(align - 1));
}

static void set_error(ptx_launch_ctx *lc, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#include <stdarg.h>
static void set_error(ptx_launch_ctx *lc, int code, const char *fmt, ...)
{
    int zero = 0;
    if (!__atomic_compare_exchange_n(&lc->err, &zero, code, 0, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST))
        return;
    pthread_mutex_lock(&lc->lock);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(lc->msg, sizeof lc->msg, fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&lc->lock);
}

/* A warp at the block's start. Compiled code computes the special
 * registers and constants itself: their slots are filled only for the
 * interpreter and for the handlers compiled code calls. */
static void init_warp(worker *wk, uint32_t wi, const unsigned ctaid[3], const ptxc_code *code)
{
    ptx_launch_ctx *lc = wk->lc;
    const ptx_kernel *k = lc->k;
    const ptx_launch_args *a = lc->a;
    ptx_warp *w = &wk->warps[wi];
    uint64_t (*r)[PTX_LANES] = w->r;
    unsigned bx = a->block[0], by = a->block[1];
    uint64_t left = lc->nthreads - (uint64_t)wi * 32; /* threads from this warp on */
    uint32_t live = left >= 32 ? PTX_FULL : (1u << left) - 1;
    for (int l = 0; l < PTX_LANES && (code == NULL || code->fill_sregs); l++) {
        uint64_t t = (uint64_t)wi * 32 + (uint64_t)l;
        r[PTX_R_ZERO][l] = 0;
        r[PTX_R_TID_X][l] = t % bx;
        r[PTX_R_TID_Y][l] = (t / bx) % by;
        r[PTX_R_TID_Z][l] = t / ((uint64_t)bx * by);
        r[PTX_R_NTID_X][l] = a->block[0];
        r[PTX_R_NTID_Y][l] = a->block[1];
        r[PTX_R_NTID_Z][l] = a->block[2];
        r[PTX_R_CTAID_X][l] = ctaid[0];
        r[PTX_R_CTAID_Y][l] = ctaid[1];
        r[PTX_R_CTAID_Z][l] = ctaid[2];
        r[PTX_R_NCTAID_X][l] = a->grid[0];
        r[PTX_R_NCTAID_Y][l] = a->grid[1];
        r[PTX_R_NCTAID_Z][l] = a->grid[2];
        r[PTX_R_LANEID][l] = (uint64_t)l;
        r[PTX_R_WARPID][l] = wi;
        r[PTX_R_NWARPID][l] = lc->nwarps;
        r[PTX_R_LM_EQ][l] = 1u << l;
        r[PTX_R_LM_LE][l] = (uint32_t)((2ull << l) - 1);
        r[PTX_R_LM_LT][l] = (1u << l) - 1;
        r[PTX_R_LM_GE][l] = ~((1u << l) - 1);
        r[PTX_R_LM_GT][l] = (uint32_t)~((2ull << l) - 1);
        r[PTX_R_SMID][l] = 0;
        r[PTX_R_NSMID][l] = 1;
        r[PTX_R_GRIDID][l] = 0;
        r[PTX_R_DYN_SMEM][l] = a->dynamic_shared;
        /* the PTX ISA: %total_smem_size leaves the reserved region out, %aggr_smem_size not */
        r[PTX_R_TOTAL_SMEM][l] = lc->shared_size - k->rsv_size;
        r[PTX_R_AGGR_SMEM][l] = lc->shared_size;
        r[PTX_R_WARPSZ][l] = 32;
        r[PTX_R_ENVREG1][l] = lc->workspace >> 32;
        r[PTX_R_ENVREG2][l] = lc->workspace & 0xffffffffu;
    }
    for (uint32_t c = 0; c < k->nconsts && (code == NULL || code->fill_consts); c++) {
        uint64_t v = k->consts[c].value, *dst = r[k->consts[c].reg];
        for (int l = 0; l < PTX_LANES; l++)
            dst[l] = v;
    }
    w->p[PTX_P_FALSE] = 0;
    w->p[PTX_P_TRUE] = PTX_FULL;
    w->live = live;
    w->atbar = 0;
    w->syncwait = 0;
    /* lpc needs no clear: only parked lanes' entries are read, and a lane's
     * is written before it parks. fp only where a call moved it: a clear of
     * every warp's lpc and fp was a quarter of a short block's start (bench
     * ptx, saxpy; the compiler made it a rep stos) */
    if (w->frames_moved) {
        memset(w->fp, 0, sizeof w->fp);
        w->frames_moved = 0;
    }
    w->cw_used = 0;
    w->bar = NULL;
    /* every live lane at pc 0: what ptx_warp_select picks */
    w->parked = 0;
    w->pc = 0;
    w->mask = live;
    w->merge_pc = UINT32_MAX;
}

static void reset_red(ptx_block *b)
{
    b->red_popc = 0;
    b->red_all = 1;
    b->red_any = 0;
}

static void block_start(worker *wk, uint64_t idx, const ptxc_code *code)
{
    ptx_launch_ctx *lc = wk->lc;
    const ptx_launch_args *a = lc->a;
    unsigned ctaid[3] = {(unsigned)(idx % a->grid[0]),
                         (unsigned)((idx / a->grid[0]) % a->grid[1]),
                         (unsigned)(idx / ((uint64_t)a->grid[0] * a->grid[1]))};
    wk->b.err = 0;
    wk->b.why[0] = '\0';
    wk->idx = idx;
    memcpy(wk->b.ctaid, ctaid, sizeof ctaid);
    for (uint32_t wi = 0; wi < lc->nwarps; wi++)
        init_warp(wk, wi, ctaid, code);
    reset_red(&wk->b);
    /* every block starts with the reserved region zero (PTX_RESERVED_SMEM) */
    if (lc->k->rsv_size)
        memset(wk->b.shared + lc->k->rsv_base, 0, lc->k->rsv_size);
}

/* Runs the block's warps until the block ends (0), one of them yields
 * (PTX_WARP_YIELD: the block resumes where it was), or one fails. A pass
 * runs every warp that can run, so a warp that waits on another yields to
 * it; a barrier opens only once no warp yielded and all wait there. CODE:
 * the block's compiled code, or NULL (the interpreter). */
static int block_step(worker *wk, const ptxc_code *code)
{
    ptx_launch_ctx *lc = wk->lc;
    for (;;) {
        uint32_t waiting = 0;
        int yielded = 0;
        for (uint32_t wi = 0; wi < lc->nwarps; wi++) {
            ptx_warp *w = &wk->warps[wi];
            if (w->mask || w->parked) {
                int rc = code != NULL ? ptxc_warp_run(&wk->b, wi) : ptx_warp_run(w);
                if (rc == PTX_WARP_YIELD)
                    yielded = 1;
                else if (rc != 0)
                    return rc;
            }
            waiting |= w->atbar;
        }
        if (yielded)
            return PTX_WARP_YIELD;
        if (waiting == 0)
            return 0;
        /* every warp has exited or waits: the barrier opens (with the result
         * of a bar.red for the lanes that asked) */
        ptx_block *b = &wk->b;
        for (uint32_t wi = 0; wi < lc->nwarps; wi++) {
            ptx_warp *w = &wk->warps[wi];
            const ptx_insn *bi = w->bar;
            if (w->atbar && bi != NULL && (bi->mode & 3)) {
                int kind = bi->mode & 3;
                if (kind == 1)
                    for (uint32_t q = w->atbar; q; q &= q - 1)
                        w->r[bi->d[0]][__builtin_ctz(q)] = b->red_popc;
                else {
                    int v = kind == 2 ? b->red_all : b->red_any;
                    w->p[bi->d[0]] = (w->p[bi->d[0]] & ~w->atbar) | (v ? w->atbar : 0);
                }
            }
            ptx_bar_release(w);
        }
        reset_red(b);
    }
}

/* A block of an ordinary grid runs to its end: its yields only let its own
 * warps take turns. */
static int run_block(worker *wk, uint64_t idx, const ptxc_code *code)
{
    block_start(wk, idx, code);
    int rc;
    while ((rc = block_step(wk, code)) == PTX_WARP_YIELD)
        ;
    return rc;
}

static const char *fault_name(int code)
{
    switch (code) {
    case PTX_E_ILLEGAL_ADDRESS: return "illegal address";
    case PTX_E_MISALIGNED: return "misaligned address";
    case PTX_E_LAUNCH_FAILED: return "trap";
    case PTX_E_LAUNCH_TIMEOUT: return "time limit reached";
    case PTX_E_ASSERT: return "device assertion failed";
    default: return "failure";
    }
}

/* Counts a block's instructions and records its failure: 0 to go on. */
static int block_end(worker *wk, int rc, uint64_t *total)
{
    ptx_launch_ctx *lc = wk->lc;
    for (uint32_t wi = 0; wi < lc->nwarps; wi++) {
        *total += wk->warps[wi].insns;
        wk->warps[wi].insns = 0;
    }
    if (rc > 0)
        set_error(lc, rc, "%s%s%s (PTX line %u, address 0x%llx, block %llu)", fault_name(rc),
                  wk->b.why[0] ? ": " : "", wk->b.why, wk->b.err_line,
                  (unsigned long long)wk->b.err_addr, (unsigned long long)wk->idx);
    return rc;
}

/* An ordinary grid: each worker takes the next block and runs it to its end. */
static void *work(void *arg)
{
    worker *wk = arg;
    ptx_launch_ctx *lc = wk->lc;
    uint64_t total = 0, by_tier[2] = {0, 0};
    uint64_t idx = 0, end = 0, chunk = lc->chunk ? lc->chunk : 1;
    for (;; idx++) {
        if (__atomic_load_n(&lc->err, __ATOMIC_RELAXED) != 0)
            break;
        if (idx >= end) {
            idx = __atomic_fetch_add(&lc->next, chunk, __ATOMIC_RELAXED);
            end = idx + chunk < lc->nblocks ? idx + chunk : lc->nblocks;
        }
        if (idx >= lc->nblocks)
            break;
        /* a kernel compiled while the launch runs takes over at the next block */
        const ptxc_code *code = ptxc_code_for(lc->k, &lc->tier);
        if (code != NULL && ptxc_worker_bind(&wk->b, wk->warps, lc->nwarps, lc->a, code) != 0)
            code = NULL;
        uint64_t before = total;
        int rc = block_end(wk, run_block(wk, idx, code), &total);
        by_tier[code != NULL]++;
        if (code == NULL)
            ptxc_note_interpreted(lc->k, total - before, &lc->tier);
        if (rc != 0)
            break;
    }
    __atomic_fetch_add(&lc->insns, total, __ATOMIC_RELAXED);
    __atomic_fetch_or(&lc->ran, (by_tier[0] ? PTX_RAN_INTERP : 0)
                                    | (by_tier[1] ? PTX_RAN_COMPILED : 0), __ATOMIC_RELAXED);
    ptxc_count_blocks(by_tier[1], by_tier[0]);
    return NULL;
}

/* A cooperative grid: every block is resident at once. Thread T owns blocks
 * T, T + stride, ... and runs them in turn, each until it ends or yields, so
 * a block spinning at a grid barrier lets the others reach it. */
typedef struct {
    worker *blocks;
    uint64_t first, stride;
} coop_share;

static void *work_coop(void *arg)
{
    const coop_share *sh = arg;
    ptx_launch_ctx *lc = sh->blocks[0].lc;
    uint64_t total = 0, left = 0;
    for (uint64_t i = sh->first; i < lc->nblocks; i += sh->stride, left++)
        block_start(&sh->blocks[i], i, NULL); /* cooperative grids stay interpreted */
    while (left > 0 && __atomic_load_n(&lc->err, __ATOMIC_RELAXED) == 0) {
        int progressed = 0;
        for (uint64_t i = sh->first; i < lc->nblocks && left > 0; i += sh->stride) {
            worker *wk = &sh->blocks[i];
            if (wk->done)
                continue;
            int rc = block_step(wk, NULL);
            if (rc == PTX_WARP_YIELD)
                continue;
            wk->done = 1;
            left--;
            progressed = 1;
            if (block_end(wk, rc, &total) != 0)
                left = 0;
        }
        if (!progressed)
            sched_yield(); /* every block waits: let the other threads' blocks run */
    }
    __atomic_fetch_add(&lc->insns, total, __ATOMIC_RELAXED);
    __atomic_fetch_or(&lc->ran, PTX_RAN_INTERP, __ATOMIC_RELAXED);
    return NULL;
}

static void worker_free(worker *wk)
{
    ptxc_worker_free(&wk->b);
    free(wk->warps);
    free(wk->regs);
    free(wk->preds);
    free(wk->shared_raw);
    free(wk->local_raw);
}

/* The first N of an array of workers, and the array. */
static void workers_free(worker *wks, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        worker_free(&wks[i]);
    free(wks);
}

static int worker_init(worker *wk, ptx_launch_ctx *lc)
{
    const ptx_kernel *k = lc->k;
    memset(wk, 0, sizeof *wk);
    wk->lc = lc;
    wk->b.k = k;
    wk->b.lc = lc;
    wk->b.params = lc->a->params;
    wk->b.params_len = lc->a->params_len;
    wk->b.shared_size = lc->shared_size;
    wk->b.local_size = k->local_size;
    /* a cooperative grid's blocks take turns often (one may spin at a grid
     * barrier); an ordinary block's warps seldom (a warp may wait on another) */
    wk->b.yield_mask = lc->a->cooperative ? 63 : 1023;
    wk->b.rt = lc->a->rt;
    wk->b.local_total = (uint64_t)lc->nwarps * 32 * k->local_size;
    wk->warps = calloc(lc->nwarps, sizeof *wk->warps);
    wk->regs = aligned_alloc(64, (size_t)lc->nwarps * k->nregs * sizeof *wk->regs);
    wk->preds = calloc((size_t)lc->nwarps * k->npreds, sizeof *wk->preds);
    /* zeroed once, never between blocks: shared and local memory start
     * undefined on a GPU too; a non-NULL buffer even when empty. Aligned so
     * that the offsets' alignment (.align of .shared and .local variables,
     * up to PTX's 4096 for shared memory) is the addresses' too. */
    wk->b.shared = aligned_zeroed(&wk->shared_raw, lc->shared_size + 16, 4096);
    wk->b.local = aligned_zeroed(&wk->local_raw, wk->b.local_total + 16,
                                 k->local_align > 64 ? k->local_align : 64);
    if (wk->warps == NULL || wk->regs == NULL || wk->preds == NULL || wk->b.shared == NULL
        || wk->b.local == NULL) {
        worker_free(wk);
        return -1;
    }
    memset(wk->regs, 0, (size_t)lc->nwarps * k->nregs * sizeof *wk->regs);
    for (uint32_t wi = 0; wi < lc->nwarps; wi++) { /* a warp's files stay its own all launch */
        ptx_warp *w = &wk->warps[wi];
        w->r = wk->regs + (size_t)wi * k->nregs;
        w->p = wk->preds + (size_t)wi * k->npreds;
        w->b = &wk->b;
        w->index = wi;
    }
    return 0;
}

static unsigned env_unsigned(const char *name, unsigned dflt)
{
    const char *v = getenv(name);
    if (v == NULL || *v == 0)
        return dflt;
    char *end;
    unsigned long n = strtoul(v, &end, 10);
    return *end == 0 && n > 0 && n < 4096 ? (unsigned)n : dflt;
}

/* The launch's first failure, once its threads have ended. */
static int grid_result(ptx_launch_ctx *lc)
{
    int e = __atomic_load_n(&lc->err, __ATOMIC_SEQ_CST);
    return e > 0 ? e : PTX_OK;
}

/* Starts FN on ARGS[1 .. NW-1] (SIZE bytes each; the calling thread takes
 * ARGS[0]): how many started, in order. */
static unsigned start_threads(pthread_t *tids, unsigned nw, void *(*fn)(void *), void *args,
                              size_t size)
{
    unsigned started = 0;
    for (unsigned t = 1; t < nw; t++, started++)
        if (pthread_create(&tids[t], NULL, fn, (char *)args + (size_t)t * size) != 0)
            break;
    return started;
}

static void join_threads(pthread_t *tids, unsigned started)
{
    for (unsigned t = 1; t <= started; t++)
        pthread_join(tids[t], NULL);
}

/* NW workers (the calling thread one of them), each with one block's state. */
static int run_grid(ptx_launch_ctx *lc, unsigned nw)
{
    worker *wks = calloc(nw, sizeof *wks);
    pthread_t *tids = calloc(nw, sizeof *tids);
    int rc = PTX_OK;
    unsigned started = 0, inited = 0;
    if (wks == NULL || tids == NULL)
        rc = PTX_E_OUT_OF_MEMORY;
    for (unsigned t = 0; rc == PTX_OK && t < nw; t++, inited++)
        if (worker_init(&wks[t], lc) != 0) {
            if (t == 0)
                rc = PTX_E_OUT_OF_MEMORY;
            nw = t; /* run with the workers we could equip */
            break;
        }
    if (rc == PTX_OK) {
        /* a large grid of short blocks is taken a few at a time: one shared
         * counter per block cost as much as a saxpy block with two workers
         * (its cache line moving between the cores); 64 takes a worker
         * leave the grid's tail evenly spread */
        uint64_t chunk = lc->nblocks / ((uint64_t)nw * 64);
        lc->chunk = chunk < 1 ? 1 : chunk > 8 ? 8 : chunk;
        started = start_threads(tids, nw, work, wks, sizeof *wks);
        work(&wks[0]); /* the calling thread is a worker too */
        join_threads(tids, started);
        rc = grid_result(lc);
    }
    workers_free(wks, inited);
    free(tids);
    return rc;
}

/* Every block resident at once, shared out over NW threads, and the grid's
 * workspace (%envreg1:2) for cooperative groups' grid barrier. All or
 * nothing: a block that cannot be equipped fails the launch. */
static int run_cooperative(ptx_launch_ctx *lc, unsigned nw)
{
    uint64_t nb = lc->nblocks;
    worker *blocks = calloc(nb, sizeof *blocks);
    coop_share *shares = calloc(nw, sizeof *shares);
    pthread_t *tids = calloc(nw, sizeof *tids);
    void *workspace = aligned_alloc(64, PTX_GRID_WORKSPACE);
    uint64_t inited = 0;
    int rc = blocks && shares && tids && workspace ? PTX_OK : PTX_E_OUT_OF_MEMORY;
    for (; rc == PTX_OK && inited < nb; inited++)
        if (worker_init(&blocks[inited], lc) != 0) {
            rc = PTX_E_OUT_OF_MEMORY; /* worker_init freed what it had */
            break;
        }
    if (rc == PTX_OK) {
        memset(workspace, 0, PTX_GRID_WORKSPACE);
        lc->workspace = (uint64_t)(uintptr_t)workspace;
        for (unsigned t = 0; t < nw; t++)
            shares[t] = (coop_share){blocks, t, nw};
        unsigned started = start_threads(tids, nw, work_coop, shares, sizeof *shares);
        /* a thread that did not start leaves blocks nobody runs: the others
         * would wait at their barrier forever, so the launch stops */
        if (started + 1 < nw)
            set_error(lc, PTX_E_OUT_OF_MEMORY, "could not start the grid's threads");
        else
            work_coop(&shares[0]);
        join_threads(tids, started);
        rc = grid_result(lc);
    }
    workers_free(blocks, inited);
    free(shares);
    free(tids);
    free(workspace);
    return rc;
}

static void launch_err(ptx_launch_args *a, const char *msg)
{
    if (a->err != NULL && a->err_len > 0)
        snprintf(a->err, a->err_len, "%s", msg);
}

int ptx_launch(const ptx_module *m, const ptx_kernel *k, ptx_launch_args *a)
{
    a->insns = 0;
    if (a->err != NULL && a->err_len > 0)
        a->err[0] = 0;
    uint64_t nthreads = (uint64_t)a->block[0] * a->block[1] * a->block[2];
    uint64_t nblocks = (uint64_t)a->grid[0] * a->grid[1] * a->grid[2];
    if (nthreads == 0 || nthreads > 1024 || nblocks == 0) {
        launch_err(a, "bad launch dimensions");
        return PTX_E_INVALID_VALUE;
    }
    if (a->params_len < k->params_size) {
        launch_err(a, "parameter buffer smaller than the kernel's parameters");
        return PTX_E_INVALID_VALUE;
    }
    uint64_t dynbase = k->dyn_base;
    if (dynbase + a->dynamic_shared > PTX_MAX_SHARED) {
        launch_err(a, "too much shared memory");
        return PTX_E_INVALID_VALUE;
    }
    ptx_launch_ctx lc = {
        .m = m, .k = k, .a = a, .nblocks = nblocks, .nthreads = nthreads,
        .nwarps = (uint32_t)((nthreads + 31) / 32),
        .shared_size = dynbase + a->dynamic_shared,
    };
    double timeout = a->timeout_s;
    if (timeout <= 0) {
        const char *v = getenv("GLEAM_PTX_TIMEOUT_S");
        timeout = v != NULL ? strtod(v, NULL) : 0;
        if (!(timeout > 0))
            timeout = 60;
    }
    ptxc_launch_begin(k, a->tier, &lc.tier);
    lc.deadline = mono_ns() + (uint64_t)(timeout * 1e9);
    pthread_mutex_init(&lc.lock, NULL);
    /* A GPU refuses a block whose registers its register file cannot hold; the
     * host device one whose slots would pass PTX_MAX_REGFILE, and it runs
     * fewer workers at once rather than pass PTX_MAX_REGFILES. */
    uint64_t regfile = (uint64_t)lc.nwarps * k->nregs * sizeof(uint64_t) * PTX_LANES;
    if (regfile > PTX_MAX_REGFILE) {
        if (a->err != NULL && a->err_len > 0)
            snprintf(a->err, a->err_len, "too many resources requested for launch: %u registers "
                     "for each of %llu threads take %llu MiB on the host device (%llu at most)",
                     k->nregs, (unsigned long long)nthreads,
                     (unsigned long long)(regfile >> 20),
                     (unsigned long long)(PTX_MAX_REGFILE >> 20));
        pthread_mutex_destroy(&lc.lock);
        return PTX_E_OUT_OF_RESOURCES;
    }
    unsigned nw = a->threads ? a->threads : env_unsigned("GLEAM_PTX_THREADS", 0);
    if (nw == 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        nw = c > 0 ? (unsigned)c : 1;
    }
    if (nw > nblocks)
        nw = (unsigned)nblocks;
    if (regfile > 0 && nw > PTX_MAX_REGFILES / regfile)
        nw = (unsigned)(PTX_MAX_REGFILES / regfile);
    /* a small grid runs on the calling thread: starting workers would cost
     * more than the blocks (tens of microseconds each) */
    if (a->threads == 0 && nblocks * nthreads < 16384)
        nw = 1;
    if (k->devrt_uses & PTX_BI_CDP_MASK) {
        lc.cdp = ptx_cdp_grid_new(m, k, a->cdp_tree, a->cdp_depth,
                                  ptx_devrt_pending_launches(a->rt));
        if (lc.cdp == NULL) {
            launch_err(a, "out of memory");
            pthread_mutex_destroy(&lc.lock);
            return PTX_E_OUT_OF_MEMORY;
        }
    }
    int rc = a->cooperative ? run_cooperative(&lc, nw) : run_grid(&lc, nw);
    if (rc == PTX_E_OUT_OF_MEMORY)
        launch_err(a, "out of memory");
    else if (rc != PTX_OK)
        launch_err(a, lc.msg);
    pthread_mutex_destroy(&lc.lock);
    a->insns = lc.insns;
    a->ran = lc.ran;
    if (lc.cdp != NULL) { /* the grid is complete once its children are */
        if (rc == PTX_OK)
            rc = ptx_cdp_run(lc.cdp, a, lc.deadline);
        ptx_cdp_grid_free(lc.cdp);
    }
    return rc;
}

/* ------------------------------------------------------------ accessors */

const ptx_kernel *ptx_module_kernel(const ptx_module *m, const char *name)
{
    for (uint32_t k = 0; k < m->nkernels; k++)
        if (strcmp(m->kernels[k].name, name) == 0)
            return &m->kernels[k];
    return NULL;
}

size_t ptx_module_nkernels(const ptx_module *m)
{
    return m->nkernels;
}

const char *ptx_module_kernel_name(const ptx_module *m, size_t i)
{
    return i < m->nkernels ? m->kernels[i].name : NULL;
}

int ptx_module_global(const ptx_module *m, const char *name, void **addr, size_t *size)
{
    /* a name's declarations all bind to the definition that stands */
    for (uint32_t g = 0; g < m->nglobals; g++)
        if (m->globals[g].target >= 0 && strcmp(m->globals[g].name, name) == 0) {
            const ptx_var *v = &m->globals[m->globals[g].target];
            *addr = m->storage + v->offset;
            *size = (size_t)v->size;
            return 0;
        }
    return -1;
}

void ptx_module_storage(const ptx_module *m, void **base, size_t *size)
{
    *base = m->storage;
    *size = (size_t)m->storage_size;
}

unsigned ptx_module_target(const ptx_module *m)
{
    return m->target;
}

void ptx_kernel_get_info(const ptx_kernel *k, ptx_kernel_info *out)
{
    out->nparams = k->nparams;
    out->params_size = k->params_size;
    out->param_offsets = k->param_offsets;
    out->param_sizes = k->param_sizes;
    out->static_shared = k->static_shared;
    out->dyn_base = k->dyn_base;
    out->local_size = k->local_size;
    out->nregs = k->nregs;
    out->ninsns = k->ncode;
    out->max_threads = k->max_threads;
    out->maxnreg = k->maxnreg;
    out->const_size = k->const_size;
    out->devrt_uses = k->devrt_uses;
}

/* --------------------------------------------------------- Python entries */

int gl_ptx_check(const char *text, size_t len, char *err, size_t err_len)
{
    ptx_module *m;
    if (ptx_module_load(text, len, &m, err, err_len) != 0)
        return -1;
    ptx_module_free(m);
    return 0;
}

ptx_module *gl_ptx_link_load(const char *const *texts, const size_t *lens, size_t n, int devrt,
                             char *err, size_t err_len)
{
    if (n > PTX_MAX_SOURCES) {
        if (err != NULL && err_len > 0)
            snprintf(err, err_len, "more than %u inputs to link", PTX_MAX_SOURCES);
        return NULL;
    }
    ptx_source *src = calloc(n + 1, sizeof *src);
    char (*names)[16] = calloc(n + 1, sizeof *names);
    ptx_module *m = NULL;
    if (src != NULL && names != NULL) {
        for (size_t k = 0; k < n; k++) {
            snprintf(names[k], sizeof names[k], "input%zu", k);
            src[k] = (ptx_source){texts[k], lens[k], names[k]};
        }
        if (devrt)
            src[n++] = ptx_cudadevrt_source();
        if (ptx_module_link(src, n, &m, err, err_len) != 0)
            m = NULL;
    } else if (err != NULL && err_len > 0)
        snprintf(err, err_len, "out of memory");
    free(src);
    free(names);
    return m;
}

ptx_module *gl_ptx_load(const char *text, size_t len, char *err, size_t err_len)
{
    ptx_module *m;
    return ptx_module_load(text, len, &m, err, err_len) == 0 ? m : NULL;
}

void gl_ptx_unload(ptx_module *m)
{
    ptx_module_free(m);
}

static int range_cmp(const void *x, const void *y)
{
    const gl_range *a = x, *b = y;
    return a->base < b->base ? -1 : a->base > b->base;
}

int gl_ptx_global(ptx_module *m, const char *name, uint64_t *addr, uint64_t *size)
{
    void *a;
    size_t n;
    if (m == NULL || name == NULL || ptx_module_global(m, name, &a, &n) != 0)
        return -1;
    *addr = (uint64_t)(uintptr_t)a;
    *size = n;
    return 0;
}

/* One launch on host ranges: TIER (PTX_TIER_*), *ran the tiers that ran. */
static int run_entry(ptx_module *m, const char *entry, const unsigned *grid3,
                     const unsigned *block3, unsigned dynamic_shared, const void *params,
                     size_t params_len, const uint64_t *ranges, size_t nranges, unsigned threads,
                     int tier, int *ran, uint64_t *insns, char *err, size_t err_len,
                     int cooperative)
{
    const ptx_kernel *k = m != NULL && entry != NULL ? ptx_module_kernel(m, entry) : NULL;
    if (k == NULL) {
        if (err != NULL && err_len > 0)
            snprintf(err, err_len, "no kernel named %s", entry ? entry : "(null)");
        return PTX_E_INVALID_VALUE;
    }
    gl_ranges t = {0};
    if (nranges > 0) {
        t.r = malloc(nranges * sizeof *t.r);
        if (t.r == NULL)
            return PTX_E_OUT_OF_MEMORY;
        for (size_t q = 0; q < nranges; q++)
            t.r[q] = (gl_range){ranges[2 * q], ranges[2 * q + 1], 0};
        qsort(t.r, nranges, sizeof *t.r, range_cmp);
        t.n = t.cap = nranges;
    }
    ptx_launch_args a = {
        .grid = {grid3[0], grid3[1], grid3[2]}, .block = {block3[0], block3[1], block3[2]},
        .dynamic_shared = dynamic_shared, .params = params, .params_len = params_len,
        .allocs = &t, .threads = threads, .tier = tier, .err = err, .err_len = err_len,
        .cooperative = cooperative,
    };
    int rc = ptx_launch(m, k, &a);
    if (insns != NULL)
        *insns = a.insns;
    if (ran != NULL)
        *ran = a.ran;
    free(t.r);
    return rc;
}

int gl_ptx_run(ptx_module *m, const char *entry, const unsigned *grid3, const unsigned *block3,
               unsigned dynamic_shared, const void *params, size_t params_len,
               const uint64_t *ranges, size_t nranges, unsigned threads, uint64_t *insns,
               char *err, size_t err_len)
{
    return run_entry(m, entry, grid3, block3, dynamic_shared, params, params_len, ranges, nranges,
                     threads, PTX_TIER_AUTO, NULL, insns, err, err_len, 0);
}

int gl_ptx_run_tier(ptx_module *m, const char *entry, const unsigned *grid3,
                    const unsigned *block3, unsigned dynamic_shared, const void *params,
                    size_t params_len, const uint64_t *ranges, size_t nranges, unsigned threads,
                    int tier, int *ran, uint64_t *insns, char *err, size_t err_len)
{
    return run_entry(m, entry, grid3, block3, dynamic_shared, params, params_len, ranges, nranges,
                     threads, tier, ran, insns, err, err_len, 0);
}

int gl_ptx_run_cooperative(ptx_module *m, const char *entry, const unsigned *grid3,
                           const unsigned *block3, unsigned dynamic_shared, const void *params,
                           size_t params_len, const uint64_t *ranges, size_t nranges,
                           unsigned threads, uint64_t *insns, char *err, size_t err_len)
{
    return run_entry(m, entry, grid3, block3, dynamic_shared, params, params_len, ranges, nranges,
                     threads, PTX_TIER_INTERP, NULL, insns, err, err_len, 1);
}
