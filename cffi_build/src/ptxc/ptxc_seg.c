/*
 * ptxc_seg.c — a run of lane-local instructions (and loads) as one loop over
 * the lanes of the group: registers become the lane's C locals, loaded from
 * the register file where the run reads them first and stored back only
 * where a later instruction (in the block, or live after it) reads them;
 * predicates are gathered into lane masks after the loop.
 *
 * Running lane by lane where the interpreter runs instruction by
 * instruction changes nothing a lane can see for lane-local instructions.
 * For loads it changes only which fault would come first: no store happens
 * inside a run, so every value read is the interpreter's. A run with loads
 * is therefore speculative: a load that would fault reads zeros and marks
 * the run bad, nothing the run wrote is visible yet (registers it also reads
 * are written to temporaries, predicates after the loop), and a bad run is
 * done again instruction by instruction in the interpreter's order, which
 * faults exactly where the interpreter does (or passes, when the fast check
 * was only too cautious).
 *
 * A gather is a load of generic memory, lane-local instructions on what it
 * read, and an atom.shared (a histogram's trip: bins[data[i]] += 1). When
 * every lane runs and the warp's 32 loads are consecutive and readable (one
 * check before the loop), the three become one loop: each lane reads its
 * element straight from the loaded line into the atom's read-modify-write,
 * with no array between them. The interpreter's order differs only in when
 * a lane's load happens against another lane's atom, and they cannot meet:
 * the load reads the launch's device memory and the atom the block's shared
 * buffer, which is neither. Loads that were checked cannot fault, and
 * lane-local instructions do not, so a bad atom address faults at the same
 * lane with the same lanes before it done, as the atom's own step does. No
 * state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptxc.h"

/* Per register-set bit of a run: */
enum { IN = 1, WRITTEN = 2, STORED = 4 };

typedef struct {
    uint8_t *st;      /* per bit: IN | WRITTEN | STORED */
    uint32_t *order;  /* the bits the run touches, in first-touch order */
    uint32_t nord;
    int guarded, loads, generic;
} run_info;

int ptxc_needed_after(const ptxc_emitter *c, uint32_t bit, uint32_t after)
{
    const ptxc_plan *p = c->p;
    if (ptxc_bit(p->live_out + (size_t)(c->bb - p->bb) * p->words, bit) || ptxc_bit(p->keep, bit))
        return 1;
    for (uint32_t pc = after; pc < c->bb->end; pc++) {
        ptxc_rw rw;
        uint32_t bits[PTXC_RW_MAX];
        ptxc_rw_of(&p->k->code[pc], &rw);
        for (uint32_t q = 0, n = ptxc_bits(&rw, p->k->nregs, 0, bits); q < n; q++)
            if (bits[q] == bit)
                return 1;
    }
    return 0;
}

/* What [s, e) reads first, writes and must store (ALL_OUT: every write). */
static int analyse(const ptxc_emitter *c, uint32_t s, uint32_t e, int all_out, run_info *ri)
{
    const ptxc_plan *p = c->p;
    const ptx_kernel *k = p->k;
    memset(ri, 0, sizeof *ri);
    ri->st = calloc(k->nregs + k->npreds, 1);
    ri->order = malloc(((size_t)(e - s) * 24 + 1) * sizeof *ri->order);
    if (ri->st == NULL || ri->order == NULL)
        return -1;
    for (uint32_t pc = s; pc < e; pc++) {
        const ptx_insn *i = &k->code[pc];
        ptxc_rw rw;
        uint32_t bits[PTXC_RW_MAX], w[PTXC_RW_MAX];
        ptxc_rw_of(i, &rw);
        ri->guarded |= i->guard != 0;
        if (ptxc_is_load(i)) {
            ri->loads = 1;
            ri->generic |= i->op >= PTX_OP_ld_g1 && i->op <= PTX_OP_ld_g8;
        }
        for (uint32_t q = 0, n = ptxc_bits(&rw, k->nregs, 0, bits); q < n; q++) {
            uint32_t b = bits[q];
            if (b < k->nregs && (b < PTX_NSREG || p->is_const[b]))
                continue; /* an expression, not a local */
            if (!ri->st[b])
                ri->order[ri->nord++] = b;
            if (!(ri->st[b] & WRITTEN))
                ri->st[b] |= IN;
        }
        for (uint32_t q = 0, n = ptxc_bits(&rw, k->nregs, 1, w); q < n; q++) {
            if (!ri->st[w[q]])
                ri->order[ri->nord++] = w[q];
            if (i->guard && !(ri->st[w[q]] & WRITTEN))
                ri->st[w[q]] |= IN; /* lanes the guard leaves keep the old value */
            ri->st[w[q]] |= WRITTEN;
        }
    }
    for (uint32_t q = 0; q < ri->nord; q++) {
        uint32_t b = ri->order[q];
        if ((ri->st[b] & WRITTEN) && (all_out || ptxc_needed_after(c, b, e)))
            ri->st[b] |= STORED;
    }
    return 0;
}

static void run_free(run_info *ri)
{
    free(ri->st);
    free(ri->order);
}

/* A register the speculative run stores but also reads from the file goes
 * to a temporary until the run is known good. */
static int via_temp(const run_info *ri, uint32_t b, int spec, uint32_t nregs)
{
    return spec && b < nregs && (ri->st[b] & (IN | STORED)) == (IN | STORED);
}

/* A register the run reads from the register file that has one value in
 * every lane (ptxc_uniform.c): read once, before the loop, into UR<reg>. The
 * loop's lanes are in m; the lowest has passed the register's write, as every
 * lane that reads it has. */
static int read_once(const ptxc_emitter *c, const run_info *ri, uint32_t b)
{
    return b < c->p->k->nregs && (ri->st[b] & IN) && c->p->uniform[b]
           && c->home[b] == PTXC_HOME_FILE && b != c->trip_reg;
}

/* The lanes' locals, [s, e) on them, and the stores of what crosses the run.
 * In a gather (GATHER), code[s] takes its element at q_ and code[e - 1] is
 * the atom. */
static int put_body(ptxc_emitter *c, uint32_t s, uint32_t e, const run_info *ri, int spec,
                    int gather)
{
    const ptx_kernel *k = c->p->k;
    ptxc_text *t = c->t;
    char slot[24];
    for (uint32_t q = 0; q < ri->nord; q++) {
        uint32_t b = ri->order[q];
        if (b >= k->nregs)
            ptxc_put(t, " uint32_t q%u = Pi%u >> l & 1;", b - k->nregs, b - k->nregs);
        else if (b == c->trip_reg)
            ptxc_put(t, " uint64_t v%u = %s;", b, ptxc_trip_lane);
        else if (read_once(c, ri, b))
            ptxc_put(t, " uint64_t v%u = UR%u;", b, b);
        else if (ri->st[b] & IN)
            ptxc_put(t, " uint64_t v%u = %s[l];", b, ptxc_slot(c, b, slot, sizeof slot));
        else
            ptxc_put(t, " uint64_t v%u;", b);
    }
    ptxc_put(t, "\n");
    for (uint32_t pc = s; pc < e; pc++) {
        const ptx_insn *i = &k->code[pc];
        if (i->guard) {
            uint32_t g = i->guard & ~PTX_GUARD_NEG;
            char gx[24];
            if (g == PTX_P_TRUE || g == PTX_P_FALSE)
                snprintf(gx, sizeof gx, "%s", g == PTX_P_TRUE ? "1u" : "0u");
            else
                snprintf(gx, sizeof gx, "q%u", g);
            ptxc_put(t, "{ uint32_t g_ = %s%s; cnt += g_; if (g_) ", gx,
                     (i->guard & PTX_GUARD_NEG) ? " ^ 1u" : "");
        }
        int rc = 0;
        if (gather && pc == s)
            ptxc_put_gather_elem(t, i);
        else if (gather && pc == e - 1)
            ptxc_put_atom_lane(c, pc);
        else
            rc = ptxc_is_load(i) ? ptxc_lane_load(t, i, pc, c->p) : ptxc_lane(t, i, c->p);
        if (rc != 0)
            return -1;
        if (i->guard)
            ptxc_put(t, "}\n");
    }
    for (uint32_t q = 0; q < ri->nord; q++) {
        uint32_t b = ri->order[q];
        if (!(ri->st[b] & STORED))
            continue;
        if (b >= k->nregs)
            ptxc_put(t, " Po%u |= q%u << l;", b - k->nregs, b - k->nregs);
        else if (via_temp(ri, b, spec, k->nregs))
            ptxc_put(t, " T%u[l] = v%u;", b, b);
        else
            ptxc_put(t, " %s[l] = v%u;", ptxc_slot(c, b, slot, sizeof slot), b);
    }
    return 0;
}

/* After a good run: temporaries into the file, predicates, the count. */
static void put_commit(const ptxc_emitter *c, const run_info *ri, int spec)
{
    const ptx_kernel *k = c->p->k;
    char slot[24];
    for (uint32_t q = 0; q < ri->nord; q++) {
        uint32_t b = ri->order[q];
        if (via_temp(ri, b, spec, k->nregs))
            ptxc_put(c->t, " PTXC_LANES(m, %s[l] = T%u[l]);", ptxc_slot(c, b, slot, sizeof slot),
                     b);
        else if (b >= k->nregs && (ri->st[b] & STORED))
            ptxc_put(c->t, " P[%u] = (P[%u] & ~m) | (Po%u & m);", b - k->nregs, b - k->nregs,
                     b - k->nregs);
    }
    if (ri->guarded)
        ptxc_put(c->t, " n += cnt;");
}

/* Before a run's loop: its predicates' lane masks, temporaries, and the
 * uniform registers read once. */
static void put_locals_head(const ptxc_emitter *c, const run_info *ri, int spec)
{
    const ptx_kernel *k = c->p->k;
    for (uint32_t q = 0; q < ri->nord; q++) {
        uint32_t b = ri->order[q];
        if (b >= k->nregs) {
            ptxc_put(c->t, " const uint32_t Pi%u = P[%u];", b - k->nregs, b - k->nregs);
            if (ri->st[b] & STORED)
                ptxc_put(c->t, " uint32_t Po%u = 0;", b - k->nregs);
        } else if (via_temp(ri, b, spec, k->nregs))
            ptxc_put(c->t, " uint64_t T%u[32];", b);
        if (read_once(c, ri, b))
            ptxc_put(c->t, " const uint64_t UR%u = R[%u][__builtin_ctz(m | 0x80000000u)];", b,
                     b);
    }
}

static int emit_run(ptxc_emitter *c, uint32_t s, uint32_t e, int all_out);

/* The run again as steps, in the interpreter's order (after a bad speculative run). */
static int emit_exact(ptxc_emitter *c, uint32_t s, uint32_t e)
{
    for (uint32_t pc = s; pc < e; pc++) {
        const ptx_insn *i = &c->p->k->code[pc];
        if ((ptxc_is_load(i) ? ptxc_emit_mem(c, pc) : emit_run(c, pc, pc + 1, 1)) != 0)
            return -1;
    }
    return 0;
}

static int emit_run(ptxc_emitter *c, uint32_t s, uint32_t e, int all_out)
{
    const ptx_kernel *k = c->p->k;
    ptxc_text *t = c->t;
    run_info ri;
    if (analyse(c, s, e, all_out, &ri) != 0) {
        run_free(&ri);
        return -1;
    }
    int spec = ri.loads;
    ptxc_put(t, "{ /* %u..%u */", s, e - 1);
    put_locals_head(c, &ri, spec);
    if (ri.guarded)
        ptxc_put(t, " uint64_t cnt = 0;");
    if (spec)
        ptxc_put(t, " uint32_t bad_ = 0;");
    if (ri.generic) /* the ranges, out of the loop's reach (a store to R could alias them) */
        ptxc_put(t, " const uint64_t G0_ = B->range[0], G1_ = B->range[1], G2_ = B->range[2],"
                    " G3_ = B->range[3], G4_ = B->range[4], G5_ = B->range[5],"
                    " G6_ = B->range[6], G7_ = B->range[7];");
    int rc = 0;
    for (uint32_t pc = s; pc < e && rc == 0; pc++)
        if (ptxc_uniform_load(&k->code[pc], c->p))
            rc = ptxc_hoist_load(t, &k->code[pc], pc, c->p);
    ptxc_put(t, "\nPTXC_LANES(m,\n");
    if (rc == 0)
        rc = put_body(c, s, e, &ri, spec, 0);
    ptxc_put(t, ");\n");
    if (rc == 0 && spec) {
        ptxc_put(t, "if (bad_) {\n");
        rc = emit_exact(c, s, e);
        ptxc_put(t, "} else {");
        put_commit(c, &ri, spec);
        ptxc_put(t, " }");
    } else if (rc == 0)
        put_commit(c, &ri, spec);
    ptxc_put(t, " }\n");
    run_free(&ri);
    return rc;
}
int ptxc_emit_segment(ptxc_emitter *c, uint32_t s, uint32_t e)
{
    return emit_run(c, s, e, 0);
}

uint32_t ptxc_gather_end(const ptxc_plan *p, const ptxc_bb *bb, uint32_t s)
{
    const ptx_insn *code = p->k->code;
    if (!ptxc_gather_load(&code[s]))
        return 0;
    for (uint32_t pc = s + 1; pc < bb->end && pc - s <= PTXC_GATHER_LANE_MAX + 1; pc++) {
        const ptx_insn *i = &code[pc];
        if (i->guard != 0)
            return 0;
        if (ptxc_atom_inline(i))
            return pc + 1;
        if (ptxc_kind(i) != PTXC_LANE)
            return 0;
    }
    return 0;
}

int ptxc_emit_gather(ptxc_emitter *c, uint32_t s, uint32_t e)
{
    ptxc_text *t = c->t;
    run_info ri;
    if (analyse(c, s, e, 0, &ri) != 0) {
        run_free(&ri);
        return -1;
    }
    ptxc_put(t, "{ /* %u..%u: a gather */ uint32_t em = m; int done_ = 0;\n", s, e - 1);
    ptxc_put_gather_head(c, s);
    put_locals_head(c, &ri, 0);
    ptxc_put(t, "\nfor (int l = 0; l < 32; l++) {\n");
    int rc = put_body(c, s, e, &ri, 0, 1);
    ptxc_put(t, "}\n");
    put_commit(c, &ri, 0);
    ptxc_put(t, " done_ = 1; } }\nif (!done_) {\n");
    run_free(&ri);
    if (rc == 0)
        rc = ptxc_emit_mem(c, s);
    if (rc == 0 && e - 1 > s + 1)
        rc = ptxc_emit_segment(c, s + 1, e - 1);
    if (rc == 0)
        ptxc_emit_atom_s(c, e - 1);
    ptxc_put(t, "} }\n");
    return rc;
}
