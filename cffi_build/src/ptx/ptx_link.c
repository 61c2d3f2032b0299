/*
 * ptx_link.c — one flat kernel per .entry. Every direct, non-recursive .func
 * call is inlined with its own registers and its own local frame (the
 * caller's frame plus its size), parameters become local-memory slots, `ret`
 * a branch to the end of the inlined body: the interpreter needs no call
 * stack for them, and divergence inside a callee reconverges like any other
 * branch. Recursive calls and indirect calls (through a function's address)
 * go to an out-of-line body of the callee, generated once per kernel after
 * the entry's code, which runs in a frame of its own (ptx_body, ptx_ocall).
 * Call depth and the translated size are bounded (PTX_MAX_CALL_DEPTH,
 * PTX_MAX_CODE), so a crafted module cannot make this blow up: the recursion
 * of splice() is at most PTX_MAX_CALL_DEPTH deep.
 * Ownership: writes m->kernels (freed by ptx_module_free). No global state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_devrt.h"
#include "ptx_int.h"

/* Local bytes per thread of a kernel with out-of-line calls: room for this
 * many nested frames (a deeper recursion is a launch failure). */
#define OUTLINE_DEPTH 24
#define OUTLINE_STACK_MAX (64u << 10)

typedef struct {
    const ptx_module *m;
    ptx_kernel *k;
    uint32_t capcode, capconsts, capocalls;
    uint8_t *onstack;
    uint64_t stack;
    uint64_t dynbase; /* the kernel's extern .shared */
    uint64_t ownbase; /* the kernel's own .shared variables, above the module's */
    uint64_t rsvbase; /* the reserved shared region (PTX_RESERVED_SMEM) */
    uint32_t *queue; /* functions whose out-of-line body is wanted */
    uint32_t nqueue;
    uint32_t capdcalls;
    uint64_t falign; /* frames of out-of-line calls, and each thread's, start at multiples of this */
    char *err;
    size_t err_len;
    int failed;
    uint16_t src; /* the input of the function being spliced, for messages */
} lk;

static int lfail(lk *L, uint32_t line, const char *msg, const char *name)
{
    /* a link of several inputs names the one the function came from */
    const ptx_module *m = L->m;
    const char *src = m->srcnames != NULL && L->src < m->nsrcs ? m->srcnames[L->src] : NULL;
    if (!L->failed && L->err != NULL && L->err_len > 0 && src != NULL)
        snprintf(L->err, L->err_len, "input '%s' line %u: %s%s%s", src, line, msg,
                 name ? " " : "", name ? name : "");
    else if (!L->failed && L->err != NULL && L->err_len > 0)
        snprintf(L->err, L->err_len, "line %u: %s%s%s", line, msg, name ? " " : "",
                 name ? name : "");
    L->failed = 1;
    return -1;
}

/* Where module variable reference V (PTX_GREF plus a displacement) lies. */
static uint64_t global_address(lk *L, uint64_t v)
{
    const ptx_module *m = L->m;
    uint32_t gi;
    int64_t disp;
    if (ptx_gref_split(v, m->nglobals, &gi, &disp) != 0) {
        lfail(L, 0, "a bad reference to a module variable", NULL);
        return 0;
    }
    int32_t t = m->globals[gi].target;
    if (t < 0) {
        lfail(L, 0, "undefined reference to variable", m->globals[gi].name);
        return 0;
    }
    return (uint64_t)(uintptr_t)m->storage + m->globals[t].offset + (uint64_t)disp;
}

static ptx_insn *append(lk *L, const ptx_insn *src)
{
    ptx_kernel *k = L->k;
    if (k->ncode >= PTX_MAX_CODE) {
        lfail(L, src->line, "kernel too large after inlining device functions", NULL);
        return NULL;
    }
    if (k->ncode == L->capcode) {
        uint32_t cap = L->capcode ? L->capcode * 2 : 1024;
        ptx_insn *nc = realloc(k->code, cap * sizeof *nc);
        if (nc == NULL) {
            lfail(L, src->line, "out of memory", NULL);
            return NULL;
        }
        k->code = nc;
        L->capcode = cap;
    }
    ptx_insn *i = &k->code[k->ncode++];
    *i = *src;
    return i;
}

/* The body index of function FI, queued for generation on first use. */
static int32_t body_for(lk *L, uint32_t fi)
{
    ptx_kernel *k = L->k;
    if (k->body_of[fi] >= 0)
        return k->body_of[fi];
    ptx_body *nb = realloc(k->bodies, (k->nbodies + 1) * sizeof *nb);
    uint32_t *nq = realloc(L->queue, (L->nqueue + 1) * sizeof *nq);
    if (nb != NULL)
        k->bodies = nb;
    if (nq != NULL)
        L->queue = nq;
    if (nb == NULL || nq == NULL) {
        lfail(L, 0, "out of memory", NULL);
        return -1;
    }
    memset(&k->bodies[k->nbodies], 0, sizeof *nb);
    k->bodies[k->nbodies].func = fi;
    L->queue[L->nqueue++] = fi;
    k->body_of[fi] = (int32_t)k->nbodies;
    return (int32_t)k->nbodies++;
}

static uint64_t alignup(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

/* A call of a function without a body that is one of the device runtime's
 * built-ins (ptx_builtin.c) becomes one devcall instruction; -2: CALLEE is
 * no built-in (the call is refused as before). */
static int emit_builtin(lk *L, const ptx_insn *call, const ptx_callsite *cs,
                        const ptx_func *callee, uint64_t fbase)
{
    ptx_kernel *k = L->k;
    ptx_dcall d;
    char why[96];
    int r = ptx_builtin_resolve(callee->name, cs, &d, why, sizeof why);
    if (r == -2)
        return -2;
    if (r != 0)
        return lfail(L, call->line, why, callee->name);
    for (uint32_t a = 0; a < d.nret + d.nargs; a++)
        d.off[a] = (uint32_t)(fbase + d.off[a]);
    if (k->ndcalls == L->capdcalls) {
        uint32_t cap = L->capdcalls ? L->capdcalls * 2 : 8;
        ptx_dcall *nd = realloc(k->dcalls, cap * sizeof *nd);
        if (nd == NULL)
            return lfail(L, call->line, "out of memory", NULL);
        k->dcalls = nd;
        L->capdcalls = cap;
    }
    k->dcalls[k->ndcalls] = d;
    ptx_insn in = *call;
    in.op = PTX_OP_devcall;
    in.fn = ptx_handlers[PTX_OP_devcall];
    in.ctl = PTX_C_NONE;
    in.aux = k->ndcalls++;
    in.fk = 0;
    k->devrt_uses |= 1u << d.builtin;
    return append(L, &in) != NULL ? 0 : -1;
}

static uint64_t relocate(lk *L, uint64_t v, int reloc, int arg, uint64_t fbase,
                         const uint32_t *argoff, const uint32_t *retoff)
{
    switch (reloc) {
    case PTX_RL_LOCAL: return v + fbase;
    case PTX_RL_ARG: return v + (argoff ? argoff[arg] : 0);
    case PTX_RL_RET: return v + (retoff ? retoff[arg] : 0);
    case PTX_RL_GLOBAL: return global_address(L, v);
    case PTX_RL_DYNSH: return v + L->dynbase;
    case PTX_RL_OWNSH: return v + L->ownbase;
    case PTX_RL_RSVSH: return v + L->rsvbase;
    case PTX_RL_FUNC:
        /* a kernel's address names it for a device-side launch (ptx_cdp.c) */
        if (v < L->m->nfuncs && L->m->funcs[v].is_entry)
            return PTX_FUNC_TAG | v;
        if (v < L->m->nfuncs && L->m->funcs[v].defined && body_for(L, (uint32_t)v) >= 0)
            return PTX_FUNC_TAG | v;
        return PTX_FUNC_TAG | 0xffffffffu; /* calling it fails at run time */
    default: return v;
    }
}

static int add_ocall(lk *L, const ptx_callsite *cs, uint64_t fbase, uint64_t k, int32_t body)
{
    ptx_kernel *kk = L->k;
    if (kk->nocalls == L->capocalls) {
        uint32_t cap = L->capocalls ? L->capocalls * 2 : 8;
        ptx_ocall *no = realloc(kk->ocalls, cap * sizeof *no);
        if (no == NULL)
            return lfail(L, 0, "out of memory", NULL);
        kk->ocalls = no;
        L->capocalls = cap;
    }
    ptx_ocall *o = &kk->ocalls[kk->nocalls];
    memset(o, 0, sizeof *o);
    o->body = body;
    o->nret = cs->nret;
    o->nargs = cs->nargs;
    for (uint32_t a = 0; a < cs->nret + cs->nargs; a++) {
        o->off[a] = (uint32_t)(fbase + cs->off[a]);
        o->size[a] = cs->size[a];
    }
    o->k = (uint32_t)k;
    for (uint32_t a = 0; a < cs->nret; a++)
        if (cs->size[a] > 16)
            return lfail(L, 0, "a return value larger than 16 bytes in a recursive or indirect call",
                         NULL);
    return (int)kk->nocalls++;
}

/* Emits function FI with its frame at FBASE (relative to the lane's frame
 * pointer). BODY >= 0: this is that out-of-line body's top level. */
static int splice(lk *L, uint32_t fi, uint64_t fbase, const uint32_t *argoff,
                  const uint32_t *retoff, int depth, int32_t body)
{
    const ptx_func *f = &L->m->funcs[fi];
    ptx_kernel *k = L->k;
    uint16_t caller_src = L->src;
    L->src = f->src;
    if (!f->defined)
        return lfail(L, f->line, "call of a function without a body:", f->name);
    if ((uint64_t)k->nregs + f->nregs - PTX_NSREG > PTX_MAX_REGS
        || (uint64_t)k->npreds + f->npreds - PTX_NSPRED > PTX_MAX_REGS)
        return lfail(L, f->line, "too many registers after inlining into", k->name);
    uint32_t rb = k->nregs, pb = k->npreds;
    k->nregs += f->nregs - PTX_NSREG;
    k->npreds += f->npreds - PTX_NSPRED;
    if (fbase + f->local_size > L->stack)
        L->stack = fbase + f->local_size;
    if (L->stack > PTX_MAX_LOCAL)
        return lfail(L, f->line, "local memory too large after inlining into", k->name);
    /* constants */
    if (k->nconsts + f->nconsts > L->capconsts) {
        uint32_t cap = (k->nconsts + f->nconsts) * 2 + 16;
        ptx_const *nc = realloc(k->consts, cap * sizeof *nc);
        if (nc == NULL)
            return lfail(L, f->line, "out of memory", NULL);
        k->consts = nc;
        L->capconsts = cap;
    }
    for (uint32_t c = 0; c < f->nconsts; c++) {
        const ptx_const *src = &f->consts[c];
        uint64_t v = relocate(L, src->value, src->reloc, src->reloc_arg, fbase, argoff, retoff);
        k->consts[k->nconsts++] = (ptx_const){src->reg - PTX_NSREG + rb, 0, 0, v};
    }
    uint32_t *pcmap = malloc(((size_t)f->ncode + 1) * sizeof *pcmap);
    uint32_t *fix = malloc(((size_t)f->ncode + 1) * sizeof *fix); /* own branches */
    uint32_t nfix = 0;
    if (pcmap == NULL || fix == NULL) {
        free(pcmap);
        free(fix);
        return lfail(L, f->line, "out of memory", NULL);
    }
    int rc = L->failed ? -1 : 0;
    uint64_t frame_end = fbase + f->local_size;
    for (uint32_t j = 0; j < f->ncode && rc == 0; j++) {
        pcmap[j] = k->ncode;
        ptx_insn in = f->code[j];
        uint32_t g = in.guard & ~PTX_GUARD_NEG;
        if (in.guard && g >= PTX_NSPRED)
            in.guard = (g - PTX_NSPRED + pb) | (in.guard & PTX_GUARD_NEG);
        if (in.op == PTX_OP_ctl && in.ctl == PTX_C_CALL) {
            const ptx_callsite *cs = &f->calls[in.aux];
            const ptx_func *callee = cs->indirect ? NULL : &L->m->funcs[cs->callee];
            if (callee != NULL && !callee->defined) {
                int b = emit_builtin(L, &in, cs, callee, fbase);
                if (b == 0)
                    continue;
                if (b == -1) {
                    rc = -1;
                    break;
                }
            }
            if (callee != NULL && (cs->nargs != callee->nparams || cs->nret != callee->nrets)) {
                rc = lfail(L, in.line, "call does not match the parameters of", callee->name);
                break;
            }
            if (cs->indirect || L->onstack[cs->callee]) { /* out of line */
                int32_t bi = cs->indirect ? -1 : body_for(L, cs->callee);
                uint64_t callee_base = alignup(frame_end, L->falign);
                int oc = L->failed ? -1 : add_ocall(L, cs, fbase, callee_base, bi);
                if (oc < 0) {
                    rc = -1;
                    break;
                }
                in.ctl = PTX_C_OCALL;
                in.aux = (uint32_t)oc;
                if (cs->indirect && in.s[0] >= PTX_NSREG)
                    in.s[0] = in.s[0] - PTX_NSREG + rb;
                in.fk = 0;
                if (append(L, &in) == NULL)
                    rc = -1;
                continue;
            }
            if (depth + 1 > PTX_MAX_CALL_DEPTH) {
                rc = lfail(L, in.line, "calls nested too deeply at", callee->name);
                break;
            }
            uint32_t aoff[PTX_MAX_PARAMS], roff[PTX_MAX_PARAMS];
            for (uint32_t a = 0; a < cs->nret; a++)
                roff[a] = (uint32_t)(fbase + cs->off[a]);
            for (uint32_t a = 0; a < cs->nargs; a++)
                aoff[a] = (uint32_t)(fbase + cs->off[cs->nret + a]);
            uint32_t skip_at = UINT32_MAX;
            if (in.guard) { /* @p call: branch around the inlined body when !p */
                ptx_insn b = in;
                b.ctl = PTX_C_BRA;
                b.guard = in.guard ^ PTX_GUARD_NEG;
                if (append(L, &b) == NULL) {
                    rc = -1;
                    break;
                }
                skip_at = k->ncode - 1;
            }
            /* the callee's frame at its variables' alignment (numba's local
             * arrays ask for 64 and 256), relative to the thread's frame,
             * which starts at a multiple of L->falign */
            uint64_t callee_base = alignup(frame_end, callee->local_align > 16 ? callee->local_align : 16);
            L->onstack[cs->callee] = 1;
            rc = splice(L, cs->callee, callee_base, aoff, roff, depth + 1, -1);
            L->onstack[cs->callee] = 0;
            if (skip_at != UINT32_MAX)
                k->code[skip_at].aux = k->ncode;
            continue;
        }
        if (in.op == PTX_OP_ctl && in.ctl == PTX_C_RET) {
            if (depth == 0 && body >= 0) {
                in.ctl = PTX_C_ORET;
                in.aux = (uint32_t)body;
            } else if (depth == 0)
                in.ctl = PTX_C_EXIT;
            else {
                in.ctl = PTX_C_BRA;
                in.aux = UINT32_MAX; /* the end of this body, set below */
            }
        }
        for (int fld = 0; fld < PTX_NFIELDS; fld++) {
            int kind = (int)(in.fk >> (2 * fld)) & 3;
            uint32_t *v = fld <= PTX_F_D3 ? &in.d[fld]
                          : fld <= PTX_F_S3 ? &in.s[fld - PTX_F_S0] : &in.ab;
            if (kind == PTX_FK_REG && *v >= PTX_NSREG)
                *v = *v - PTX_NSREG + rb;
            else if (kind == PTX_FK_PRED && *v >= PTX_NSPRED)
                *v = *v - PTX_NSPRED + pb;
        }
        in.imm = (int64_t)relocate(L, (uint64_t)in.imm, in.reloc, in.reloc_arg, fbase, argoff,
                                   retoff);
        in.reloc = PTX_RL_NONE;
        if (append(L, &in) == NULL) {
            rc = -1;
            break;
        }
        if (in.op == PTX_OP_ctl && in.ctl == PTX_C_BRA)
            fix[nfix++] = k->ncode - 1;
    }
    if (rc == 0) {
        pcmap[f->ncode] = k->ncode;
        for (uint32_t q = 0; q < nfix; q++) {
            ptx_insn *b = &k->code[fix[q]];
            b->aux = b->aux == UINT32_MAX ? k->ncode : pcmap[b->aux];
        }
        if (body >= 0 && depth == 0) { /* falling off the end of a body returns */
            ptx_insn r = {.op = PTX_OP_ctl, .ctl = PTX_C_ORET, .aux = (uint32_t)body,
                          .line = f->line};
            if (append(L, &r) == NULL)
                rc = -1;
        }
    }
    free(pcmap);
    free(fix);
    L->src = caller_src;
    return L->failed ? -1 : rc;
}

static uint32_t align16(uint64_t v)
{
    return (uint32_t)((v + 15) / 16 * 16);
}

/* Out-of-line bodies, until none is wanted any more (a body may want others). */
static int bodies(lk *L, uint64_t *need)
{
    ptx_kernel *k = L->k;
    uint32_t maxframe = 0, maxk = 0;
    for (uint32_t q = 0; q < L->nqueue; q++) {
        uint32_t fi = L->queue[q];
        const ptx_func *f = &L->m->funcs[fi];
        uint32_t bi = (uint32_t)k->body_of[fi];
        uint32_t pofs[PTX_MAX_PARAMS], rofs[PTX_MAX_PARAMS], top = 0;
        if (f->nparams + f->nrets > PTX_MAX_PARAMS)
            return lfail(L, f->line, "too many parameters for an out-of-line call:", f->name);
        for (uint32_t a = 0; a < f->nparams; a++) {
            pofs[a] = top;
            top += align16(f->param_sizes[a]);
        }
        for (uint32_t a = 0; a < f->nrets; a++) {
            rofs[a] = top;
            top += 16; /* return values are scalars or small vectors */
        }
        top = (uint32_t)alignup(top, L->falign); /* the body's own variables */
        uint32_t rb = k->nregs, pb = k->npreds, entry = k->ncode, oc0 = k->nocalls;
        uint64_t saved_stack = L->stack;
        L->stack = top;
        memset(L->onstack, 0, L->m->nfuncs);
        L->onstack[fi] = 1;
        if (splice(L, fi, top, pofs, rofs, 0, (int32_t)bi) != 0)
            return -1;
        L->onstack[fi] = 0;
        ptx_body *b = &k->bodies[bi];
        b->entry = entry;
        b->rets = f->nrets ? rofs[0] : top;
        b->rb = rb;
        b->nr = k->nregs - rb;
        b->pb = pb;
        b->np = k->npreds - pb;
        b->hdr = align16(L->stack);
        b->save = b->hdr + 16;
        uint64_t frame = (uint64_t)b->save + 8ull * b->nr + b->np;
        if (frame > OUTLINE_STACK_MAX)
            return lfail(L, f->line, "frame too large for an out-of-line call:", f->name);
        b->frame = (uint32_t)alignup(frame, L->falign);
        /* calls made from this body put their frames above all of it */
        for (uint32_t o = oc0; o < k->nocalls; o++)
            k->ocalls[o].k = b->frame;
        maxframe = b->frame > maxframe ? b->frame : maxframe;
        L->stack = saved_stack;
    }
    for (uint32_t o = 0; o < k->nocalls; o++)
        maxk = k->ocalls[o].k > maxk ? k->ocalls[o].k : maxk;
    if (k->nbodies > 0) {
        uint64_t n = *need + (uint64_t)OUTLINE_DEPTH * (maxframe + maxk);
        *need = n > OUTLINE_STACK_MAX ? (*need > OUTLINE_STACK_MAX ? *need : OUTLINE_STACK_MAX) : n;
    }
    return 0;
}

int ptx_link(ptx_module *m, char *err, size_t err_len)
{
    uint32_t n = 0;
    for (uint32_t f = 0; f < m->nfuncs; f++)
        n += m->funcs[f].is_entry && m->funcs[f].defined && !m->funcs[f].hidden;
    m->kernels = calloc(n ? n : 1, sizeof *m->kernels);
    uint8_t *onstack = calloc(m->nfuncs ? m->nfuncs : 1, 1);
    if (m->kernels == NULL || onstack == NULL) {
        free(onstack);
        if (err != NULL && err_len > 0)
            snprintf(err, err_len, "out of memory");
        return -1;
    }
    lk L = {.m = m, .onstack = onstack, .err = err, .err_len = err_len, .falign = 16};
    for (uint32_t f = 0; f < m->nfuncs; f++)
        if (m->funcs[f].local_align > L.falign)
            L.falign = m->funcs[f].local_align;
    for (uint32_t fi = 0; fi < m->nfuncs && !L.failed; fi++) {
        const ptx_func *f = &m->funcs[fi];
        if (!f->is_entry || !f->defined || f->hidden)
            continue;
        L.src = f->src;
        ptx_kernel *k = &m->kernels[m->nkernels++];
        k->name = strdup(f->name);
        k->body_of = malloc((m->nfuncs ? m->nfuncs : 1) * sizeof *k->body_of);
        if (k->name == NULL || k->body_of == NULL) {
            lfail(&L, f->line, "out of memory", NULL);
            break;
        }
        for (uint32_t q = 0; q < m->nfuncs; q++)
            k->body_of[q] = -1;
        k->nfuncs = m->nfuncs;
        k->nregs = PTX_NSREG;
        k->npreds = PTX_NSPRED;
        k->nparams = f->nparams;
        uint64_t own_align = f->shared_align > 16 ? f->shared_align : 16;
        L.ownbase = ((uint64_t)m->static_shared + own_align - 1) / own_align * own_align;
        if (L.ownbase + f->shared_top > PTX_MAX_SHARED) {
            lfail(&L, f->line, "too much shared memory", NULL);
            break;
        }
        k->static_shared = (uint32_t)(f->shared_top ? L.ownbase + f->shared_top : m->static_shared);
        uint64_t dyn_align = m->dyn_align > 16 ? m->dyn_align : 16; /* extern .shared */
        /* the reserved region lies between the static and the dynamic memory */
        L.rsvbase = ((uint64_t)k->static_shared + 15) / 16 * 16;
        k->rsv_size = m->uses_reserved_smem ? PTX_RESERVED_SMEM : 0;
        k->rsv_base = m->uses_reserved_smem ? (uint32_t)L.rsvbase : 0;
        uint64_t dyn_from = m->uses_reserved_smem ? L.rsvbase + PTX_RESERVED_SMEM : k->static_shared;
        L.dynbase = (dyn_from + dyn_align - 1) / dyn_align * dyn_align;
        if (L.dynbase > PTX_MAX_SHARED) {
            lfail(&L, f->line, "too much shared memory", NULL);
            break;
        }
        k->dyn_base = (uint32_t)L.dynbase;
        k->params_size = f->params_size;
        k->max_threads = f->max_threads;
        k->maxnreg = f->maxnreg;
        k->const_size = m->const_size;
        memcpy(k->param_offsets, f->param_offsets, sizeof k->param_offsets);
        memcpy(k->param_sizes, f->param_sizes, sizeof k->param_sizes);
        L.k = k;
        L.capcode = L.capconsts = L.capocalls = L.capdcalls = 0;
        L.stack = 0;
        L.nqueue = 0;
        memset(onstack, 0, m->nfuncs);
        onstack[fi] = 1;
        if (splice(&L, fi, 0, NULL, NULL, 0, -1) != 0)
            break;
        ptx_insn end = {.op = PTX_OP_ctl, .ctl = PTX_C_EXIT, .line = f->line};
        if (append(&L, &end) == NULL)
            break;
        for (uint32_t t = 0; t < m->ntaken; t++) /* tables of function pointers */
            if (m->taken[t] < m->nfuncs && m->funcs[m->taken[t]].defined
                && !m->funcs[m->taken[t]].is_entry && body_for(&L, m->taken[t]) < 0)
                break;
        if (L.failed)
            break;
        uint64_t need = L.stack;
        if (bodies(&L, &need) != 0)
            break;
        k->local_align = (uint32_t)L.falign;
        k->local_size = (uint32_t)alignup(need, L.falign);
    }
    free(onstack);
    free(L.queue);
    /* A kernel that launches kernels may launch any of the module's, so it
     * needs what each of them uses (the heap, the printf FIFO) made ready
     * before its launch. */
    uint32_t all = 0;
    for (uint32_t q = 0; q < m->nkernels; q++)
        all |= m->kernels[q].devrt_uses;
    for (uint32_t q = 0; q < m->nkernels; q++)
        if (m->kernels[q].devrt_uses & PTX_BI_CDP_MASK)
            m->kernels[q].devrt_uses |= all;
    return L.failed ? -1 : 0;
}
