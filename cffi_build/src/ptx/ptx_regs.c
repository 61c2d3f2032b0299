/*
 * ptx_regs.c — how many registers a kernel holds live at once, the number
 * CU_FUNC_ATTRIBUTE_NUM_REGS reports on the host device (which allocates no
 * registers: a program sizing its occupancy still reads one). A register is
 * taken to live from its first mention in the linked code to its last, and
 * one that a loop uses again after the loop's start lives to the loop's back
 * edge; the answer is the most such ranges that overlap. Constants and the
 * fixed slots are not counted, each register is one, whatever its width. An
 * estimate, in one pass over the code and one over its back edges, made when
 * asked (not at load: CUB's modules have thousands of kernels). Owns nothing
 * after it returns.
 */
#include <stdint.h>
#include <stdlib.h>

#include "ptx_int.h"

#define PTX_REGS_WORK (1u << 24) /* back edges x registers the loop pass may visit */

static void mention(uint32_t *first, uint32_t *last, uint32_t r, uint32_t at)
{
    if (first[r] == UINT32_MAX)
        first[r] = at;
    last[r] = at;
}

uint32_t ptx_kernel_live_registers(const ptx_kernel *k)
{
    uint32_t n = k->nregs;
    uint32_t *first = malloc((size_t)n * sizeof *first), *last = malloc((size_t)n * sizeof *last);
    int32_t *delta = calloc((size_t)k->ncode + 1, sizeof *delta);
    uint32_t most = 0;

    if (first == NULL || last == NULL || delta == NULL)
        goto out;
    for (uint32_t r = 0; r < n; r++)
        first[r] = UINT32_MAX;
    for (uint32_t at = 0; at < k->ncode; at++) {
        const ptx_insn *in = &k->code[at];
        for (int fld = 0; fld < PTX_NFIELDS; fld++) {
            uint32_t v = fld <= PTX_F_D3 ? in->d[fld]
                         : fld <= PTX_F_S3 ? in->s[fld - PTX_F_S0] : in->ab;
            if (((in->fk >> (2 * fld)) & 3) == PTX_FK_REG && v >= PTX_NSREG && v < n)
                mention(first, last, v, at);
        }
    }
    for (uint32_t c = 0; c < k->nconsts; c++)
        if (k->consts[c].reg < n)
            first[k->consts[c].reg] = UINT32_MAX;
    /* A back edge (a branch to an earlier instruction) keeps alive to it
     * every register mentioned before the loop and inside it. Bounded work:
     * kernels of CUB's size skip this pass (the estimate is then lower). */
    uint64_t edges = 0;
    for (uint32_t at = 0; at < k->ncode; at++)
        edges += k->code[at].op == PTX_OP_ctl && k->code[at].ctl == PTX_C_BRA
                 && k->code[at].aux < at;
    for (uint32_t at = 0; edges * n <= PTX_REGS_WORK && at < k->ncode; at++) {
        const ptx_insn *in = &k->code[at];
        if (in->op != PTX_OP_ctl || in->ctl != PTX_C_BRA || in->aux >= at)
            continue;
        for (uint32_t r = PTX_NSREG; r < n; r++)
            if (first[r] < in->aux && last[r] >= in->aux && last[r] < at)
                last[r] = at;
    }
    for (uint32_t r = PTX_NSREG; r < n; r++) {
        if (first[r] == UINT32_MAX)
            continue;
        delta[first[r]]++;
        delta[last[r] + 1]--;
    }
    int64_t live = 0;
    for (uint32_t at = 0; at <= k->ncode; at++) {
        live += delta[at];
        if (live > (int64_t)most)
            most = (uint32_t)live;
    }
out:
    free(first);
    free(last);
    free(delta);
    return most;
}
