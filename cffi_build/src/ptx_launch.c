/*
 * ptx_launch.c — running a grid: blocks are handed out to worker threads
 * (an atomic counter; each worker runs whole blocks), a block's warps run in
 * turn until each has exited or waits at a barrier, then the barrier opens.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ptx_int.h"
#include "ptxc_tier.h"

typedef struct ptx_launch_ctx {
    const ptx_module *m;
    const ptx_kernel *k;
    const ptx_launch_args *a;
    uint64_t nblocks, nthreads;
    uint32_t nwarps;
    uint64_t shared_size;
    uint64_t next;      /* atomic: the next block to run */
    int err;            /* atomic: the first failure */
    uint64_t insns;     /* atomic */
    uint64_t deadline;  /* CLOCK_MONOTONIC ns */
    ptxc_policy tier;   /* the compile tier's rule for this launch */
    int ran;            /* atomic: PTX_RAN_* */
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

typedef struct {
    ptx_launch_ctx *lc;
    ptx_block b;
    ptx_warp *warps;
    uint64_t (*regs)[PTX_LANES];
    uint32_t *preds;
} worker;

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
        r[PTX_R_TOTAL_SMEM][l] = lc->shared_size;
        r[PTX_R_WARPSZ][l] = 32;
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
    /* lpc is read only for parked lanes, which get theirs when parked; frame
     * pointers move only in out-of-line calls (a lane may exit inside one) */
    if (k->nocalls > 0)
        memset(w->fp, 0, sizeof w->fp);
    w->cw_used = 0;
    w->bar = NULL;
    /* every live lane at pc 0: what ptx_warp_select picks */
    w->parked = 0;
    w->pc = 0;
    w->mask = live;
    w->merge_pc = UINT32_MAX;
}

/* Runs block IDX, with compiled CODE or (NULL) the interpreter. */
static int run_block(worker *wk, uint64_t idx, const ptxc_code *code)
{
    ptx_launch_ctx *lc = wk->lc;
    const ptx_launch_args *a = lc->a;
    unsigned ctaid[3] = {(unsigned)(idx % a->grid[0]),
                         (unsigned)((idx / a->grid[0]) % a->grid[1]),
                         (unsigned)(idx / ((uint64_t)a->grid[0] * a->grid[1]))};
    memcpy(wk->b.ctaid, ctaid, sizeof ctaid);
    for (uint32_t wi = 0; wi < lc->nwarps; wi++)
        init_warp(wk, wi, ctaid, code);
    for (;;) {
        uint32_t waiting = 0;
        wk->b.red_popc = 0;
        wk->b.red_all = 1;
        wk->b.red_any = 0;
        for (uint32_t wi = 0; wi < lc->nwarps; wi++) {
            ptx_warp *w = &wk->warps[wi];
            if (w->mask || w->parked) {
                int rc = code != NULL ? ptxc_warp_run(&wk->b, wi) : ptx_warp_run(w);
                if (rc != 0)
                    return rc;
            }
            waiting |= w->atbar;
        }
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
            w->bar = NULL;
            w->parked |= w->atbar;
            w->atbar = 0;
            ptx_warp_select(w);
        }
    }
}

static const char *fault_name(int code)
{
    switch (code) {
    case PTX_E_ILLEGAL_ADDRESS: return "illegal address";
    case PTX_E_MISALIGNED: return "misaligned address";
    case PTX_E_LAUNCH_FAILED: return "trap";
    case PTX_E_LAUNCH_TIMEOUT: return "time limit reached";
    default: return "failure";
    }
}

static void *work(void *arg)
{
    worker *wk = arg;
    ptx_launch_ctx *lc = wk->lc;
    uint64_t total = 0, by_tier[2] = {0, 0};
    for (;;) {
        if (__atomic_load_n(&lc->err, __ATOMIC_RELAXED) != 0)
            break;
        uint64_t idx = __atomic_fetch_add(&lc->next, 1, __ATOMIC_RELAXED);
        if (idx >= lc->nblocks)
            break;
        wk->b.err = 0;
        /* a kernel compiled while the launch runs takes over at the next block */
        const ptxc_code *code = ptxc_code_for(lc->k, &lc->tier);
        if (code != NULL && ptxc_worker_bind(&wk->b, wk->warps, lc->nwarps, lc->a, code) != 0)
            code = NULL;
        int rc = run_block(wk, idx, code);
        uint64_t block = 0;
        for (uint32_t wi = 0; wi < lc->nwarps; wi++) {
            block += wk->warps[wi].insns;
            wk->warps[wi].insns = 0;
        }
        total += block;
        by_tier[code != NULL]++;
        if (code == NULL)
            ptxc_note_interpreted(lc->k, block, &lc->tier);
        if (rc > 0)
            set_error(lc, rc, "%s (PTX line %u, address 0x%llx, block %llu)", fault_name(rc),
                      wk->b.err_line, (unsigned long long)wk->b.err_addr,
                      (unsigned long long)idx);
        if (rc != 0)
            break;
    }
    __atomic_fetch_add(&lc->insns, total, __ATOMIC_RELAXED);
    __atomic_fetch_or(&lc->ran, (by_tier[0] ? PTX_RAN_INTERP : 0)
                                    | (by_tier[1] ? PTX_RAN_COMPILED : 0), __ATOMIC_RELAXED);
    ptxc_count_blocks(by_tier[1], by_tier[0]);
    return NULL;
}

static void worker_free(worker *wk)
{
    ptxc_worker_free(&wk->b);
    free(wk->warps);
    free(wk->regs);
    free(wk->preds);
    free(wk->b.shared);
    free(wk->b.local);
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
    wk->b.local_total = (uint64_t)lc->nwarps * 32 * k->local_size;
    wk->warps = calloc(lc->nwarps, sizeof *wk->warps);
    wk->regs = aligned_alloc(64, (size_t)lc->nwarps * k->nregs * sizeof *wk->regs);
    wk->preds = calloc((size_t)lc->nwarps * k->npreds, sizeof *wk->preds);
    /* zeroed once, never between blocks: shared and local memory start
     * undefined on a GPU too; a non-NULL buffer even when empty */
    wk->b.shared = calloc(1, lc->shared_size + 16);
    wk->b.local = calloc(1, wk->b.local_total + 16);
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
    unsigned nw = a->threads ? a->threads : env_unsigned("GLEAM_PTX_THREADS", 0);
    if (nw == 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        nw = c > 0 ? (unsigned)c : 1;
    }
    if (nw > nblocks)
        nw = (unsigned)nblocks;
    /* a small grid runs on the calling thread: starting workers would cost
     * more than the blocks (tens of microseconds each) */
    if (a->threads == 0 && nblocks * nthreads < 16384)
        nw = 1;
    worker *wks = calloc(nw, sizeof *wks);
    pthread_t *tids = calloc(nw, sizeof *tids);
    int rc = PTX_OK;
    unsigned started = 0, inited = 0;
    if (wks == NULL || tids == NULL)
        rc = PTX_E_OUT_OF_MEMORY;
    for (unsigned t = 0; rc == PTX_OK && t < nw; t++, inited++)
        if (worker_init(&wks[t], &lc) != 0) {
            if (t == 0)
                rc = PTX_E_OUT_OF_MEMORY;
            nw = t; /* run with the workers we could equip */
            break;
        }
    if (rc == PTX_OK) {
        for (unsigned t = 1; t < nw; t++, started++)
            if (pthread_create(&tids[t], NULL, work, &wks[t]) != 0)
                break;
        work(&wks[0]); /* the calling thread is a worker too */
        for (unsigned t = 1; t <= started; t++)
            pthread_join(tids[t], NULL);
        int e = __atomic_load_n(&lc.err, __ATOMIC_SEQ_CST);
        if (e > 0) {
            rc = e;
            launch_err(a, lc.msg);
        }
    } else
        launch_err(a, "out of memory");
    for (unsigned t = 0; t < inited; t++)
        worker_free(&wks[t]);
    free(wks);
    free(tids);
    pthread_mutex_destroy(&lc.lock);
    a->insns = lc.insns;
    a->ran = lc.ran;
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
    for (uint32_t g = 0; g < m->nglobals; g++)
        if (strcmp(m->globals[g].name, name) == 0) {
            *addr = m->storage + m->globals[g].offset;
            *size = (size_t)m->globals[g].size;
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

int gl_ptx_run(ptx_module *m, const char *entry, const unsigned *grid3, const unsigned *block3,
               unsigned dynamic_shared, const void *params, size_t params_len,
               const uint64_t *ranges, size_t nranges, unsigned threads, uint64_t *insns,
               char *err, size_t err_len)
{
    return gl_ptx_run_tier(m, entry, grid3, block3, dynamic_shared, params, params_len, ranges,
                           nranges, threads, PTX_TIER_AUTO, NULL, insns, err, err_len);
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

int gl_ptx_run_tier(ptx_module *m, const char *entry, const unsigned *grid3,
                    const unsigned *block3, unsigned dynamic_shared, const void *params,
                    size_t params_len, const uint64_t *ranges, size_t nranges, unsigned threads,
                    int tier, int *ran, uint64_t *insns, char *err, size_t err_len)
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
    };
    int rc = ptx_launch(m, k, &a);
    if (insns != NULL)
        *insns = a.insns;
    if (ran != NULL)
        *ran = a.ran;
    free(t.r);
    return rc;
}
