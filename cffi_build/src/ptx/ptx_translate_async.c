/*
 * ptx_translate_async.c — the asynchronous barriers to compact code (the
 * handlers and the object's layout are in ptx_mbarrier.c):
 *   mbarrier.init [a], count          mbarrier.inval [a]
 *   mbarrier.arrive{.expect_tx}{.noComplete} state, [a]{, count | txCount}
 *   mbarrier.arrive_drop{.expect_tx}{.noComplete} state, [a]{, count | txCount}
 *   mbarrier.expect_tx [a], txCount   mbarrier.complete_tx [a], txCount
 *   mbarrier.test_wait{.parity} p, [a], state | parity
 *   mbarrier.try_wait{.parity} p, [a], state | parity{, suspendTimeHint}
 *   mbarrier.pending_count count, state
 *   cp.async.mbarrier.arrive{.noinc} [a]
 * each with .shared, .shared::cta or no space (generic), .b64, and the
 * memory-order qualifiers (.relaxed .acquire .release, .cta .cluster: one
 * block's warps run on one thread, in order, so every order holds).
 * .shared::cluster (another block's barrier) is refused by name.
 *
 * Encoding: ab + imm the object's address, mode the PTX_MB_* flags, d0 the
 * result (state, predicate, count), s0 the count, state or parity, s1 the
 * tx-count of an arrive.expect_tx.
 * No state; the parse state is the caller's.
 */
#include <string.h>

#include "ptx_parse.h"

/* The address space: PTX_MB_GENERIC, 0 for shared, -1 for any other. */
static int mb_space(px_mods *m, const opnd *a)
{
    if (px_take(m, "shared") || px_take(m, "shared::cta"))
        return 0;
    if (px_take(m, "shared::cluster") || px_take(m, "global"))
        return -1;
    /* a shared variable named directly is a shared-window address */
    if (a != NULL && !a->has_base
        && (a->symkind == S_SVAR || a->symkind == S_OSVAR || a->symkind == S_DSVAR))
        return 0;
    return PTX_MB_GENERIC;
}

static void mb_orders(px_mods *m)
{
    static const char *const q[] = {"relaxed", "acquire", "release", "cta", "cluster"};
    for (size_t k = 0; k < sizeof q / sizeof q[0]; k++)
        px_take(m, q[k]);
}

/* An instruction with its address operand A checked and set, or NULL. */
static ptx_insn *mb_emit(ps *s, px_mods *m, int op, uint32_t guard, const opnd *a, int flags)
{
    int sp = mb_space(m, a);
    mb_orders(m);
    int t = px_take_type(m);
    if (sp < 0 || t != T_B64 || px_finish(s, m) != 0) {
        px_unsupported(s, m);
        return NULL;
    }
    if (a->kind != O_ADDR) {
        px_fail(s, "expected an address operand");
        return NULL;
    }
    ptx_insn *i = px_emit(s, op, guard);
    if (i == NULL)
        return NULL;
    px_set_addr(s, i, a);
    i->mode = (uint8_t)(sp | flags);
    return i;
}

static int mb_nops(ps *s, const px_mods *m, int n, int lo, int hi)
{
    if (n >= lo && n <= hi)
        return 0;
    px_fail(s, "'%.*s' takes %d to %d operands", (int)m->nfull, m->full, lo, hi);
    return -1;
}

static int mb_arrive(ps *s, px_mods *m, opnd *o, int n, uint32_t guard, int drop)
{
    int etx = px_take(m, "expect_tx"), noc = px_take(m, "noComplete");
    if (etx && noc)
        return px_unsupported(s, m);
    if (mb_nops(s, m, n, noc || etx ? 3 : 2, 3) != 0)
        return -1;
    int flags = (drop ? PTX_MB_DROP : 0) | (etx ? PTX_MB_EXPECT_TX : 0)
                | (noc ? PTX_MB_NOCOMPLETE : 0);
    ptx_insn *i = mb_emit(s, m, PTX_OP_mbar_arrive, guard, &o[1], flags);
    if (i == NULL)
        return -1;
    SD(i, 0, px_dst(s, &o[0]));
    SS(i, 0, n == 3 && !etx ? px_src(s, &o[2], T_U32) : px_cst(s, 1, 0, 0));
    SS(i, 1, etx ? px_src(s, &o[2], T_U32) : PTX_R_ZERO);
    return 0;
}

static int mb_wait(ps *s, px_mods *m, opnd *o, int n, uint32_t guard, int tries)
{
    int parity = px_take(m, "parity");
    /* try_wait's suspend-time hint bounds a wait that does not block here */
    if (mb_nops(s, m, n, 3, tries ? 4 : 3) != 0)
        return -1;
    ptx_insn *i = mb_emit(s, m, PTX_OP_mbar_wait, guard, &o[1], parity ? PTX_MB_PARITY : 0);
    if (i == NULL)
        return -1;
    SDP(i, 0, px_pdst(s, &o[0]));
    SS(i, 0, px_src(s, &o[2], parity ? T_U32 : T_B64));
    return 0;
}

/* cp.async.mbarrier.arrive{.noinc}{.shared{::cta}}.b64 [a]: the copies are
 * done at issue, so the arrival happens now. */
static int mb_cp_arrive(ps *s, px_mods *m, opnd *o, int n, uint32_t guard)
{
    px_take(m, "arrive");
    int noinc = px_take(m, "noinc");
    if (mb_nops(s, m, n, 1, 1) != 0)
        return -1;
    ptx_insn *i = mb_emit(s, m, PTX_OP_mbar_arrive, guard, &o[0], noinc ? 0 : PTX_MB_CP_INC);
    if (i == NULL)
        return -1;
    SD(i, 0, s->sink);
    SS(i, 0, px_cst(s, 1, 0, 0));
    SS(i, 1, PTX_R_ZERO);
    return 0;
}

int px_mbarrier(ps *s, px_mods *m, opnd *o, int n, uint32_t guard, int cp_async)
{
    if (cp_async)
        return mb_cp_arrive(s, m, o, n, guard);
    /* the arrives first: .expect_tx is their modifier as well as a verb */
    if (px_take(m, "arrive"))
        return mb_arrive(s, m, o, n, guard, 0);
    if (px_take(m, "arrive_drop"))
        return mb_arrive(s, m, o, n, guard, 1);
    int init = px_take(m, "init"), expect = !init && px_take(m, "expect_tx");
    int complete = !init && !expect && px_take(m, "complete_tx");
    if (init || expect || complete) {
        if (mb_nops(s, m, n, 2, 2) != 0)
            return -1;
        ptx_insn *i = mb_emit(s, m, init ? PTX_OP_mbar_init : PTX_OP_mbar_tx, guard, &o[0],
                              complete ? PTX_MB_COMPLETE_TX : 0);
        if (i == NULL)
            return -1;
        SS(i, 0, px_src(s, &o[1], T_U32));
        return 0;
    }
    if (px_take(m, "inval")) {
        if (mb_nops(s, m, n, 1, 1) != 0)
            return -1;
        return mb_emit(s, m, PTX_OP_mbar_inval, guard, &o[0], 0) ? 0 : -1;
    }
    if (px_take(m, "test_wait"))
        return mb_wait(s, m, o, n, guard, 0);
    if (px_take(m, "try_wait"))
        return mb_wait(s, m, o, n, guard, 1);
    if (px_take(m, "pending_count")) {
        if (px_take_type(m) != T_B64 || px_finish(s, m) != 0)
            return px_unsupported(s, m);
        if (mb_nops(s, m, n, 2, 2) != 0)
            return -1;
        ptx_insn *i = px_emit(s, PTX_OP_mbar_pending, guard);
        if (i == NULL)
            return -1;
        SD(i, 0, px_dst(s, &o[0]));
        SS(i, 0, px_src(s, &o[1], T_B64));
        return 0;
    }
    return px_unsupported(s, m);
}
