/*
 * ptxc_home.c — where a register's value lives while the compiled code runs
 * one basic block. By default in the warp's register file, R[reg][lane]: 64
 * bits a lane, shared with the interpreter and the handlers. A register that
 * only this block's compiled code writes and then reads (its first access an
 * unguarded write, not live after the block, never touched by a handler or a
 * warp-wide step, and the block has no point where the interpreter may take
 * the warp over) lives instead in a private array of the compiled function:
 * nothing outside the block can see it, so it need not be in the file. Where
 * every write of it in the block yields a value below 2^32 (PTX's %r
 * registers), the array is 32-bit (XN<reg>[32]), half the bytes a lane loop
 * moves, and the same value when read back; otherwise 64-bit (XW<reg>[32]).
 *
 * What a lane cannot see does not change: a lane still reads what its own
 * path wrote, and a fault ends the launch, whose registers nobody reads.
 * The arrays of all blocks together stay under PTXC_PRIVATE_BYTES (stack of
 * the worker thread); past it, registers stay in the file. No state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptxc.h"

#define PTXC_PRIVATE_BYTES (32u << 10)

/* Per register while one block is scanned. */
enum { UNSEEN, PRIVATE, NOT_PRIVATE };

/* The interpreter may take the warp over before a warp-wide .sync
 * instruction (ptxc_emit.c emit_hold): it reads the register file. */
static int may_hand_off(const ptxc_bb *bb, const ptx_kernel *k)
{
    for (uint32_t pc = bb->start; pc < bb->end; pc++)
        if (ptx_sync_mask_operand(k->code[pc].op) >= 0)
            return 1;
    return 0;
}

/* Whether the code written for I names its registers by ptxc_slot: lane-local
 * instructions, loads, stores and atom.shared; handlers and warp-wide steps
 * read the register file. */
static int names_by_slot(const ptx_insn *i)
{
    int kind = ptxc_kind(i);
    return kind == PTXC_LANE || kind == PTXC_MEM;
}

static int writes_narrow(const ptx_insn *i, const ptxc_plan *p)
{
    return ptxc_kind(i) == PTXC_MEM ? ptxc_mem_narrow(i) : ptxc_lane_narrow(i, p);
}

/* One pass over the block: which registers are written first (unguarded),
 * by code that names them by slot, and only by such code; and whether each
 * write yields less than 2^32. */
static void scan(const ptxc_emitter *c, uint8_t *state, uint8_t *wide)
{
    const ptx_kernel *k = c->p->k;
    for (uint32_t pc = c->bb->start; pc < c->bb->end; pc++) {
        const ptx_insn *i = &k->code[pc];
        ptxc_rw rw;
        ptxc_rw_of(i, &rw);
        int by_slot = names_by_slot(i);
        for (uint32_t q = 0; q < rw.nr; q++) /* reads first: add r, r, 1 reads the old r */
            if (state[rw.r[q]] == UNSEEN || !by_slot)
                state[rw.r[q]] = NOT_PRIVATE; /* read before written here: live into the block */
        for (uint32_t q = 0; q < rw.nwr; q++) {
            uint32_t r = rw.wr[q];
            if (state[r] == UNSEEN)
                state[r] = i->guard == 0 && by_slot ? PRIVATE : NOT_PRIVATE;
            else if (!by_slot)
                state[r] = NOT_PRIVATE;
            if (!writes_narrow(i, c->p))
                wide[r] = 1;
        }
    }
}

int ptxc_homes(ptxc_emitter *c)
{
    const ptxc_plan *p = c->p;
    const ptx_kernel *k = p->k;
    memset(c->home, PTXC_HOME_FILE, k->nregs);
    if (may_hand_off(c->bb, k))
        return 0;
    uint8_t *state = calloc(k->nregs, 1), *wide = calloc(k->nregs, 1);
    if (state == NULL || wide == NULL) {
        free(state);
        free(wide);
        return -1;
    }
    scan(c, state, wide);
    const uint64_t *out = p->live_out + (size_t)(c->bb - p->bb) * p->words;
    for (uint32_t r = PTX_NSREG; r < k->nregs; r++) {
        if (state[r] != PRIVATE || ptxc_bit(out, r) || ptxc_bit(p->keep, r))
            continue;
        int home = wide[r] ? PTXC_HOME_WIDE : PTXC_HOME_NARROW;
        uint32_t bytes = home == PTXC_HOME_WIDE ? 256u : 128u;
        if (!(c->declared[r] & (1u << home))) {
            if (c->private_bytes + bytes > PTXC_PRIVATE_BYTES)
                continue;
            c->private_bytes += bytes;
            c->declared[r] |= (uint8_t)(1u << home);
        }
        c->home[r] = (uint8_t)home;
    }
    free(state);
    free(wide);
    return 0;
}

const char *ptxc_slot(const ptxc_emitter *c, uint32_t reg, char *buf, size_t n)
{
    switch (c->home != NULL ? c->home[reg] : PTXC_HOME_FILE) {
    case PTXC_HOME_WIDE:
        snprintf(buf, n, "XW%u", reg);
        break;
    case PTXC_HOME_NARROW:
        snprintf(buf, n, "XN%u", reg);
        break;
    default:
        snprintf(buf, n, "R[%u]", reg);
    }
    return buf;
}

void ptxc_put_private_arrays(const ptxc_emitter *c)
{
    for (uint32_t r = PTX_NSREG; r < c->p->k->nregs; r++) {
        if (c->declared[r] & (1u << PTXC_HOME_WIDE))
            ptxc_put(c->t, "uint64_t XW%u[32];\n", r);
        if (c->declared[r] & (1u << PTXC_HOME_NARROW))
            ptxc_put(c->t, "uint32_t XN%u[32];\n", r);
    }
}
