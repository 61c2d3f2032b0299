/*
 * ptxc_run.c — the runtime side of ptxc_abi.h: a worker's views of its
 * warps and block for compiled code, and the calls compiled code makes back
 * (the launch's memory lookup, the time limit, instructions run by their
 * interpreter handler, faults, lane selection, barriers). Everything here
 * goes to the interpreter's own functions, so both tiers share one meaning.
 *
 * Ownership: a worker's views (ptxc_worker) are made at its first compiled
 * block and freed with the worker (ptxc_worker_free); they point into the
 * worker's warps and block, which outlive them. The thread-id tables are the
 * worker's. Threads: one worker, one thread. No global state.
 */
#include <stdlib.h>
#include <string.h>

#include "ptxc_tier.h"

/* What a speculative load that would fault reads (ptxc_abi.h, zero). */
static const uint8_t zero32[32] __attribute__((aligned(32)));

struct ptxc_worker {
    ptxc_block blk;
    ptxc_warp *warps;
    uint32_t nwarps;
    uint32_t *tid;       /* x, y, z tables of nwarps * 32 */
    const ptxc_code *code;
};

static int rt_gaddr(ptxc_block *B, uint64_t a, uint64_t size)
{
    ptx_block *b = B->rt;
    if (ptx_gaddr_slow(b, a, size) == NULL)
        return 0;
    memmove(B->range + 2, B->range, 6 * sizeof B->range[0]); /* the oldest range goes */
    B->range[0] = b->c_lo;
    B->range[1] = b->c_len;
    return 1;
}

static int rt_deadline(ptxc_block *B)
{
    return ptx_deadline_check(B->rt);
}

static int rt_fault(ptxc_block *B, uint32_t pc, uint64_t addr, int code)
{
    ptx_block *b = B->rt;
    b->err = code;
    b->err_line = pc < b->k->ncode ? b->k->code[pc].line : 0;
    b->err_addr = addr;
    return code;
}

static int rt_call(ptxc_block *B, ptxc_warp *W, uint32_t pc, uint32_t em)
{
    ptx_block *b = B->rt;
    if (pc >= b->k->ncode || b->k->code[pc].fn == NULL)
        return rt_fault(B, pc, 0, PTX_E_LAUNCH_FAILED);
    const ptx_insn *i = &b->k->code[pc];
    return i->fn(W->rt, i, em);
}

static int rt_select(ptxc_block *B, ptxc_warp *W, uint32_t *pc, uint32_t *m, uint32_t *mpc)
{
    (void)B;
    ptx_warp *w = W->rt;
    w->pc = *pc;
    w->mask = 0;
    int more = ptx_warp_select(w);
    *pc = w->pc;
    *m = w->mask;
    *mpc = w->merge_pc;
    return more;
}

static void rt_bar(ptxc_block *B, ptxc_warp *W, uint32_t pc, uint32_t em)
{
    ptx_block *b = B->rt;
    if (pc < b->k->ncode)
        ptx_bar_arrive(W->rt, &b->k->code[pc], em, pc);
}

static int rt_hold(ptxc_block *B, ptxc_warp *W, uint32_t pc, uint32_t em, uint32_t m)
{
    ptx_block *b = B->rt;
    return pc < b->k->ncode && ptx_sync_hold(W->rt, &b->k->code[pc], em, m);
}

static int bind(ptx_block *b, ptx_warp *warps, uint32_t nwarps, const ptx_launch_args *a,
                const ptxc_code *code)
{
    ptxc_worker *x = calloc(1, sizeof *x);
    if (x == NULL)
        return -1;
    x->warps = calloc(nwarps, sizeof *x->warps);
    x->tid = malloc((size_t)nwarps * 32 * 3 * sizeof *x->tid);
    if (x->warps == NULL || x->tid == NULL) {
        free(x->warps);
        free(x->tid);
        free(x);
        return -1;
    }
    x->nwarps = nwarps;
    x->code = code;
    uint32_t nt = nwarps * 32, bx = a->block[0], by = a->block[1];
    for (uint32_t t = 0; t < nt; t++) { /* as init_warp fills %tid, lanes past the block too */
        x->tid[t] = t % bx;
        x->tid[nt + t] = (t / bx) % by;
        x->tid[2 * nt + t] = t / (bx * by);
    }
    ptxc_block *B = &x->blk;
    *B = (ptxc_block){
        .shared = b->shared, .shared_size = b->shared_size, .local = b->local,
        .local_size = b->local_size, .params = b->params, .params_len = b->params_len,
        .ctaid = b->ctaid, .nwarps = nwarps, .dyn_smem = a->dynamic_shared,
        .total_smem = (uint32_t)b->shared_size, .tid = {x->tid, x->tid + nt, x->tid + 2 * nt},
        .yield_mask = b->yield_mask, .zero = zero32, .rt = b, .gaddr = rt_gaddr, .deadline = rt_deadline, .call = rt_call,
        .fault = rt_fault, .select = rt_select, .bar = rt_bar,
        .hold = rt_hold,
    };
    for (int d = 0; d < 3; d++) {
        B->ntid[d] = a->block[d];
        B->nctaid[d] = a->grid[d];
    }
    for (uint32_t wi = 0; wi < nwarps; wi++) {
        ptx_warp *w = &warps[wi];
        x->warps[wi] = (ptxc_warp){
            .r = w->r, .p = w->p, .pc = &w->pc, .mask = &w->mask, .merge_pc = &w->merge_pc,
            .live = &w->live, .parked = &w->parked, .lpc = w->lpc, .insns = &w->insns,
            .index = wi, .rt = w,
        };
    }
    b->ptxc = x;
    return 0;
}

int ptxc_worker_bind(ptx_block *b, ptx_warp *warps, uint32_t nwarps, const ptx_launch_args *a,
                     const ptxc_code *code)
{
    if (b->ptxc != NULL)
        return b->ptxc->code == code ? 0 : -1;
    return bind(b, warps, nwarps, a, code);
}

_Static_assert(PTXC_YIELD == PTX_WARP_YIELD, "a compiled warp yields as an interpreted one");

_Static_assert(PTXC_HANDOFF != PTX_WARP_YIELD && PTXC_HANDOFF < 0, "a hand-off is no result");

/* The interpreter runs the warp on, counting branches back on the same
 * counter as compiled code, so that it yields where a run of either tier
 * alone would (each yield runs the branch again, counted again). */
static int interpret(ptxc_worker *x, ptx_block *b, ptx_warp *w)
{
    b->backedges = x->blk.backedges;
    int rc = ptx_warp_run(w);
    x->blk.backedges = b->backedges;
    return rc;
}

/* Lanes holding at a .sync instruction (syncwait) are scheduled by the
 * interpreter's rule until none holds; compiled code never makes them. */
int ptxc_warp_run(ptx_block *b, uint32_t wi)
{
    ptxc_worker *x = b->ptxc;
    ptx_warp *w = x->warps[wi].rt;
    if (w->syncwait != 0)
        return interpret(x, b, w);
    int rc = x->code->fn(&x->blk, &x->warps[wi]);
    return rc == PTXC_HANDOFF ? interpret(x, b, w) : rc;
}

void ptxc_worker_free(ptx_block *b)
{
    ptxc_worker *x = b->ptxc;
    if (x == NULL)
        return;
    free(x->warps);
    free(x->tid);
    free(x);
    b->ptxc = NULL;
}
