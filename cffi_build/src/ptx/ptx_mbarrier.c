/*
 * ptx_mbarrier.c — asynchronous barriers (the PTX ISA's mbarrier objects) and
 * cp.async.mbarrier.arrive: the handlers of the opcodes mbar_* (encoded by
 * ptx_translate_async.c).
 *
 * An mbarrier is a 64-bit object in shared memory whose layout PTX leaves
 * opaque. Here it is (bits):
 *   0..19  pending arrivals of the current phase
 *   20..39 expected arrivals per phase (what init set, less arrive_drops)
 *   40..60 tx-count, 21 bits two's complement
 *   62     valid: set by init, cleared by inval
 *   63     the current phase's parity
 * A phase completes when its pending count and its tx-count are both zero:
 * the parity flips, pending becomes expected again, tx-count 0. The state an
 * arrive returns is the object as it was before that arrive (its parity is
 * what test_wait/try_wait compare: the phase of a state has completed once
 * the object's parity differs from it).
 *
 * All warps of a block run on one thread (ptx_launch.c), and an mbarrier
 * lives in the block's shared memory, so its updates need no atomics. cp.async
 * copies are done at issue (ptx_exec.c), so the arrive that
 * cp.async.mbarrier.arrive schedules "when the thread's copies complete"
 * happens at once: without .noinc it adds one pending arrival and takes it
 * back (no change), with .noinc it is one arrival.
 *
 * What the ISA leaves undefined is refused rather than run (a trap, with the
 * reason): a count outside [1, 2^20-1], an arrival with no arrival pending,
 * a tx-count leaving its range, any use of an object that init did not make
 * valid, and an address outside the block's shared memory (illegal address).
 *
 * Waiting: test_wait never blocks; try_wait may, for a time the system
 * chooses, and here it chooses none: both answer at once. When a lane's
 * phase has not completed, the warp's next loop back edge yields
 * (ptx_block.yield_mask), so the warps that will arrive run while it spins,
 * and a phase that never completes reaches the launch's time limit as any
 * endless loop does.
 * Thread-safety: as every handler, one warp on one thread.
 */
#include <stdio.h>
#include <string.h>

#include "ptx_int.h"

#define MB_PENDING_BITS 20
#define MB_COUNT_MAX ((1ull << MB_PENDING_BITS) - 1)
#define MB_TX_SHIFT 40
#define MB_TX_BITS 21
#define MB_VALID (1ull << 62)
#define MB_PHASE (1ull << 63)

typedef struct {
    uint32_t pending, expected;
    int32_t tx;
    int valid, phase;
} mbar_state;

static mbar_state mb_decode(uint64_t v)
{
    mbar_state s;
    s.pending = (uint32_t)(v & MB_COUNT_MAX);
    s.expected = (uint32_t)(v >> MB_PENDING_BITS & MB_COUNT_MAX);
    uint32_t tx = (uint32_t)(v >> MB_TX_SHIFT & ((1u << MB_TX_BITS) - 1));
    s.tx = (int32_t)(tx << (32 - MB_TX_BITS)) >> (32 - MB_TX_BITS);
    s.valid = (v & MB_VALID) != 0;
    s.phase = (v & MB_PHASE) != 0;
    return s;
}

static uint64_t mb_encode(const mbar_state *s)
{
    uint64_t tx = (uint64_t)(uint32_t)s->tx & ((1u << MB_TX_BITS) - 1);
    return (uint64_t)s->pending | (uint64_t)s->expected << MB_PENDING_BITS | tx << MB_TX_SHIFT
           | (s->valid ? MB_VALID : 0) | (s->phase ? MB_PHASE : 0);
}

/* Lane l's object: a pointer into the block's shared memory, or NULL after a
 * fault (*rc). The address is a shared-window offset, or generic
 * (PTX_MB_GENERIC) and then must point into the block's shared memory. */
static uint8_t *mb_at(ptx_warp *w, const ptx_insn *i, int l, int *rc)
{
    ptx_block *b = w->b;
    uint64_t a = w->r[i->ab][l] + (uint64_t)i->imm, off = a;
    if (i->mode & PTX_MB_GENERIC)
        off = a - (uint64_t)(uintptr_t)b->shared;
    if (off > b->shared_size || b->shared_size - off < 8) {
        *rc = ptx_fault_why(w, i, a, PTX_E_ILLEGAL_ADDRESS, "an mbarrier outside shared memory");
        return NULL;
    }
    if (off & 7) {
        *rc = ptx_fault_why(w, i, a, PTX_E_MISALIGNED, "");
        return NULL;
    }
    return b->shared + off;
}

static uint64_t mb_load(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void mb_store(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* Ends the phase when nothing is pending. */
static void mb_maybe_complete(mbar_state *s)
{
    if (s->pending == 0 && s->tx == 0) {
        s->phase ^= 1;
        s->pending = s->expected;
    }
}

/* The object at lane l's address, valid, or NULL after a fault. */
static uint8_t *mb_valid_at(ptx_warp *w, const ptx_insn *i, int l, mbar_state *s, int *rc)
{
    uint8_t *p = mb_at(w, i, l, rc);
    if (p == NULL)
        return NULL;
    *s = mb_decode(mb_load(p));
    if (!s->valid) {
        *rc = ptx_fault_why(w, i, (uint64_t)(uintptr_t)p, PTX_E_LAUNCH_FAILED,
                       "an mbarrier used before mbarrier.init or after mbarrier.inval");
        return NULL;
    }
    return p;
}

/* Adds DELTA to the tx-count: 0, or -1 when it would leave its range. */
static int mb_add_tx(mbar_state *s, int64_t delta)
{
    int64_t tx = (int64_t)s->tx + delta;
    if (delta > (int64_t)MB_COUNT_MAX || delta < -(int64_t)MB_COUNT_MAX
        || tx > (int64_t)MB_COUNT_MAX || tx < -(int64_t)MB_COUNT_MAX)
        return -1;
    s->tx = (int32_t)tx;
    return 0;
}

/* One lane's operation on its object P (decoded in *S): 0 or a fault. */
typedef int (*mb_lane_op)(ptx_warp *w, const ptx_insn *i, int l, uint8_t *p, mbar_state *s);

/* Runs OP for each lane of M in lane order, on a valid object unless ANY. */
static int mb_each(ptx_warp *w, const ptx_insn *i, uint32_t m, mb_lane_op op, int any)
{
    for (uint32_t q = m; q; q &= q - 1) {
        int l = __builtin_ctz(q), rc = 0;
        mbar_state s;
        uint8_t *p = any ? mb_at(w, i, l, &rc) : mb_valid_at(w, i, l, &s, &rc);
        if (p == NULL || (rc = op(w, i, l, p, &s)) != 0)
            return rc;
    }
    return 0;
}

#define MB_HANDLER(name, op, any)                                                            \
    int h_##name(ptx_warp *w, const ptx_insn *i, uint32_t m) { return mb_each(w, i, m, op, any); }

/* mbarrier.init [a], count (s0). */
static int mb_init_lane(ptx_warp *w, const ptx_insn *i, int l, uint8_t *p, mbar_state *s)
{
    uint64_t count = (uint32_t)w->r[i->s[0]][l];
    if (count < 1 || count > MB_COUNT_MAX)
        return ptx_fault_why(w, i, (uint64_t)(uintptr_t)p, PTX_E_LAUNCH_FAILED,
                        "mbarrier.init with a count outside [1, 2^20-1]");
    *s = (mbar_state){(uint32_t)count, (uint32_t)count, 0, 1, 0};
    mb_store(p, mb_encode(s));
    return 0;
}
MB_HANDLER(mbar_init, mb_init_lane, 1)

/* mbarrier.inval [a]: the object is no barrier any more. */
static int mb_inval_lane(ptx_warp *w, const ptx_insn *i, int l, uint8_t *p, mbar_state *s)
{
    (void)w, (void)i, (void)l, (void)s;
    mb_store(p, 0);
    return 0;
}
MB_HANDLER(mbar_inval, mb_inval_lane, 1)

/* The arrive family: d0 = the state before (or the sink), s0 = the count
 * (mbarrier.arrive{_drop}{.noComplete}: 1 unless given) and s1 the tx-count
 * an .expect_tx adds first; PTX_MB_DROP also lowers the expected count,
 * PTX_MB_NOCOMPLETE refuses to complete the phase, PTX_MB_CP_INC is
 * cp.async.mbarrier.arrive without .noinc (one more pending, then the
 * arrival: no change). */
static int mb_arrive_lane(ptx_warp *w, const ptx_insn *i, int l, uint8_t *p, mbar_state *s)
{
    uint64_t addr = (uint64_t)(uintptr_t)p;
    w->r[i->d[0]][l] = mb_load(p);
    if (i->mode & PTX_MB_CP_INC)
        return 0;
    uint64_t count = (uint32_t)w->r[i->s[0]][l];
    if ((i->mode & PTX_MB_EXPECT_TX) && mb_add_tx(s, (uint32_t)w->r[i->s[1]][l]) != 0)
        return ptx_fault_why(w, i, addr, PTX_E_LAUNCH_FAILED,
                        "an mbarrier's tx-count leaves [-(2^20-1), 2^20-1]");
    if (count < 1 || count > s->pending)
        return ptx_fault_why(w, i, addr, PTX_E_LAUNCH_FAILED,
                        "an mbarrier arrival with fewer arrivals pending");
    if ((i->mode & PTX_MB_DROP) && count > s->expected)
        return ptx_fault_why(w, i, addr, PTX_E_LAUNCH_FAILED,
                        "mbarrier.arrive_drop below zero expected arrivals");
    s->pending -= (uint32_t)count;
    if (i->mode & PTX_MB_DROP)
        s->expected -= (uint32_t)count;
    if ((i->mode & PTX_MB_NOCOMPLETE) && s->pending == 0 && s->tx == 0)
        return ptx_fault_why(w, i, addr, PTX_E_LAUNCH_FAILED,
                        "an mbarrier arrival .noComplete that completes the phase");
    mb_maybe_complete(s);
    mb_store(p, mb_encode(s));
    return 0;
}

MB_HANDLER(mbar_arrive, mb_arrive_lane, 0)

/* mbarrier.expect_tx (s0 added to the tx-count) and mbarrier.complete_tx
 * (PTX_MB_COMPLETE_TX: s0 taken from it, which may complete the phase). */
static int mb_tx_lane(ptx_warp *w, const ptx_insn *i, int l, uint8_t *p, mbar_state *s)
{
    int64_t n = (uint32_t)w->r[i->s[0]][l];
    if (mb_add_tx(s, (i->mode & PTX_MB_COMPLETE_TX) ? -n : n) != 0)
        return ptx_fault_why(w, i, (uint64_t)(uintptr_t)p, PTX_E_LAUNCH_FAILED,
                        "an mbarrier's tx-count leaves [-(2^20-1), 2^20-1]");
    if (i->mode & PTX_MB_COMPLETE_TX)
        mb_maybe_complete(s);
    mb_store(p, mb_encode(s));
    return 0;
}

MB_HANDLER(mbar_tx, mb_tx_lane, 0)

/* mbarrier.test_wait / try_wait: predicate d0 = the phase of state s0 (or,
 * with PTX_MB_PARITY, the phase of parity s0) has completed. */
static int mb_wait_lane(ptx_warp *w, const ptx_insn *i, int l, uint8_t *p, mbar_state *s)
{
    (void)p;
    uint64_t v = w->r[i->s[0]][l];
    int phase = (i->mode & PTX_MB_PARITY) ? (int)(v & 1) : (v & MB_PHASE) != 0;
    uint32_t bit = 1u << l;
    w->p[i->d[0]] = (w->p[i->d[0]] & ~bit) | (s->phase != phase ? bit : 0);
    return 0;
}

int h_mbar_wait(ptx_warp *w, const ptx_insn *i, uint32_t m)
{
    int rc = mb_each(w, i, m, mb_wait_lane, 0);
    if (rc == 0 && (w->p[i->d[0]] & m) != m) /* let the arriving warps run before it spins again */
        w->b->backedges |= w->b->yield_mask;
    return rc;
}

/* mbarrier.pending_count d0, state s0: the pending arrivals the state holds. */
int h_mbar_pending(ptx_warp *w, const ptx_insn *i, uint32_t m)
{
    for (uint32_t q = m; q; q &= q - 1) {
        int l = __builtin_ctz(q);
        w->r[i->d[0]][l] = mb_decode(w->r[i->s[0]][l]).pending;
    }
    return 0;
}
