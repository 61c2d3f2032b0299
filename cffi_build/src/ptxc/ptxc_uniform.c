/*
 * ptxc_uniform.c — registers that hold the same value in every lane of a
 * warp that reads them: a grid-stride loop's stride and bound, a kernel
 * parameter, a block's base index. A lane loop reads such a register once,
 * before the loop, from its lowest lane (ptxc_seg.c), instead of 32 times.
 *
 * A register is uniform when
 *  - the kernel writes it once, with no guard (so every lane that has passed
 *    that write holds what it wrote, and nothing changes it afterwards);
 *  - that write gives the same value whenever and in whichever lane it runs:
 *    a lane-local instruction of uniform sources only (constants, the special
 *    registers that are one per warp or block, other uniform registers) that
 *    reads no predicate and no lane's frame, or a load of the kernel's
 *    parameters at a uniform address (they never change during a launch);
 *  - every read of it, anywhere, comes after that write on every path from
 *    the kernel's start (a must-be-written analysis over the blocks), so
 *    each lane that reads it has passed the write.
 * Registers stay per lane in the register file; only reads change. No
 * state; the plan owns p->uniform.
 */
#include <stdlib.h>
#include <string.h>

#include "ptxc.h"

/* The special registers that are one value for the whole warp. */
static int uniform_sreg(uint32_t r)
{
    switch (r) {
    case PTX_R_TID_X: case PTX_R_TID_Y: case PTX_R_TID_Z: case PTX_R_LANEID:
    case PTX_R_LM_EQ: case PTX_R_LM_LE: case PTX_R_LM_LT: case PTX_R_LM_GE: case PTX_R_LM_GT:
        return 0;
    default:
        return r < PTX_NSREG;
    }
}

static int uniform_source(const ptxc_plan *p, const uint8_t *uni, uint32_t r)
{
    return uniform_sreg(r) || p->is_const[r] || uni[r];
}

/* Whether I's result is the same in every lane when its sources are. */
static int uniform_form(const ptxc_plan *p, const ptx_insn *i)
{
    if (i->guard != 0)
        return 0;
    if (i->op >= PTX_OP_ld_p1 && i->op <= PTX_OP_ld_p8)
        return ptxc_uniform_load(i, p);
    return ptxc_kind(i) == PTXC_LANE && i->op != PTX_OP_cvta_local
           && i->op != PTX_OP_cvta_to_local;
}

/* Registers written unguarded on every path to each block's start (in), from
 * the start of the kernel: in[0] is empty, in[b] the meet of its
 * predecessors' outs. Register bits only (W words a set). */
static uint64_t *must_written(const ptxc_plan *p, uint32_t w)
{
    const ptx_kernel *k = p->k;
    uint64_t *in = malloc((size_t)p->nbb * w * sizeof *in);
    uint64_t *gen = calloc((size_t)p->nbb * w, sizeof *gen);
    uint64_t *out = malloc(w * sizeof *out);
    if (in == NULL || gen == NULL || out == NULL) {
        free(in);
        free(gen);
        free(out);
        return NULL;
    }
    memset(in, 0xff, (size_t)p->nbb * w * sizeof *in);
    memset(in, 0, w * sizeof *in);
    for (uint32_t b = 0; b < p->nbb; b++)
        for (uint32_t pc = p->bb[b].start; pc < p->bb[b].end; pc++) {
            ptxc_rw rw;
            ptxc_rw_of(&k->code[pc], &rw);
            for (uint32_t q = 0; q < rw.nwr && k->code[pc].guard == 0; q++)
                ptxc_set(gen + (size_t)b * w, rw.wr[q]);
        }
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t b = 0; b < p->nbb; b++) {
            uint32_t succ[2], ns = ptxc_successors(p, b, succ);
            for (uint32_t x = 0; x < w; x++)
                out[x] = in[(size_t)b * w + x] | gen[(size_t)b * w + x];
            for (uint32_t s = 0; s < ns; s++)
                for (uint32_t x = 0; x < w; x++) {
                    uint64_t *v = &in[(size_t)succ[s] * w + x];
                    if ((*v & out[x]) != *v) {
                        *v &= out[x];
                        changed = 1;
                    }
                }
        }
    }
    free(gen);
    free(out);
    return in;
}

/* Marks in LATE the registers some instruction reads where they may not have
 * been written yet on its lane's path. */
static void find_early_reads(const ptxc_plan *p, const uint64_t *in, uint32_t w, uint8_t *late)
{
    const ptx_kernel *k = p->k;
    uint64_t *cur = malloc(w * sizeof *cur);
    if (cur == NULL) {
        memset(late, 1, k->nregs);
        return;
    }
    for (uint32_t b = 0; b < p->nbb; b++) {
        memcpy(cur, in + (size_t)b * w, w * sizeof *cur);
        for (uint32_t pc = p->bb[b].start; pc < p->bb[b].end; pc++) {
            ptxc_rw rw;
            ptxc_rw_of(&k->code[pc], &rw);
            for (uint32_t q = 0; q < rw.nr; q++)
                if (!ptxc_bit(cur, rw.r[q]))
                    late[rw.r[q]] = 1;
            for (uint32_t q = 0; q < rw.nwr && k->code[pc].guard == 0; q++)
                ptxc_set(cur, rw.wr[q]);
        }
    }
    free(cur);
}

int ptxc_uniform_make(ptxc_plan *p)
{
    const ptx_kernel *k = p->k;
    uint32_t w = (k->nregs + 63) / 64;
    p->uniform = calloc(k->nregs, 1);
    uint32_t *writes = calloc(k->nregs, sizeof *writes), *def = calloc(k->nregs, sizeof *def);
    uint8_t *late = calloc(k->nregs, 1);
    uint64_t *in = p->uniform != NULL ? must_written(p, w) : NULL;
    int rc = -1;
    if (writes == NULL || def == NULL || late == NULL || in == NULL)
        goto done;
    for (uint32_t pc = 0; pc < k->ncode; pc++) {
        ptxc_rw rw;
        ptxc_rw_of(&k->code[pc], &rw);
        for (uint32_t q = 0; q < rw.nwr; q++) {
            writes[rw.wr[q]]++;
            def[rw.wr[q]] = pc;
        }
    }
    find_early_reads(p, in, w, late);
    /* a uniform source is written (and read) before its reader's write, so
     * each round adds at least one register until none qualifies */
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t r = PTX_NSREG; r < k->nregs; r++) {
            const ptx_insn *i = &k->code[def[r]];
            if (p->uniform[r] || writes[r] != 1 || late[r] || !uniform_form(p, i))
                continue;
            ptxc_rw rw;
            ptxc_rw_of(i, &rw);
            int ok = rw.np == 0;
            for (uint32_t q = 0; q < rw.nr && ok; q++)
                ok = uniform_source(p, p->uniform, rw.r[q]);
            if (ok)
                p->uniform[r] = changed = 1;
        }
    }
    rc = 0;
done:
    free(writes);
    free(def);
    free(late);
    free(in);
    return rc;
}
