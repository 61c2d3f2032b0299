/*
 * ptx_linkage.c — the names the inputs of one link share, and the PTX ISA's
 * rules for them ("Linking Directives"): a declaration without a directive
 * is local to its input; .extern declares a name defined elsewhere; .visible
 * defines it for every input (two .visible definitions clash); .weak defines
 * it unless a .visible definition exists (the first .weak one stands
 * otherwise); .common defines a variable that several inputs may define, the
 * largest standing, and only that one may carry an initialiser.
 *
 * A function name maps to one slot of m->funcs, whatever input declares it,
 * so calls (by slot) reach the definition that stands; a .weak body that
 * loses is kept in a hidden slot, never a kernel. A variable name maps to the
 * declaration in m->globals whose storage stands (the code of every input
 * names variables by declaration and the link binds each, px_xresolve).
 *
 * Ownership: the table owns its copies of the names; ptx_module_link frees
 * it. Untrusted input: names and counts are bounded by the parser's limits;
 * nothing here recurses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_parse.h"

#define XBUCKETS 1024u

enum { X_FUNC, X_VAR };

typedef struct {
    char *name;
    uint32_t next;     /* the previous name in this bucket + 1 */
    uint8_t kind;      /* X_FUNC, X_VAR */
    uint32_t func;     /* X_FUNC: the slot */
    int32_t def;       /* X_VAR: the declaration whose storage stands; -1: none yet */
} xsym;

struct ptx_xtab {
    xsym *syms;
    uint32_t n, cap;
    uint32_t head[XBUCKETS];
};

static uint32_t xhash(const char *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t k = 0; k < n; k++)
        h = (h ^ (uint8_t)p[k]) * 16777619u;
    return h % XBUCKETS;
}

struct ptx_xtab *px_xtab_new(void)
{
    return calloc(1, sizeof(struct ptx_xtab));
}

void px_xtab_free(struct ptx_xtab *x)
{
    if (x == NULL)
        return;
    for (uint32_t k = 0; k < x->n; k++)
        free(x->syms[k].name);
    free(x->syms);
    free(x);
}

static xsym *xfind(struct ptx_xtab *x, const char *p, size_t n)
{
    for (uint32_t k = x->head[xhash(p, n)]; k; k = x->syms[k - 1].next)
        if (strlen(x->syms[k - 1].name) == n && memcmp(x->syms[k - 1].name, p, n) == 0)
            return &x->syms[k - 1];
    return NULL;
}

static xsym *xadd(ps *s, const char *p, size_t n, int kind)
{
    struct ptx_xtab *x = s->x;
    if (x->n == x->cap) {
        uint32_t cap = x->cap ? x->cap * 2 : 64;
        xsym *grown = cap <= (1u << 22) ? realloc(x->syms, cap * sizeof *grown) : NULL;
        if (grown == NULL) {
            px_fail(s, "out of memory");
            return NULL;
        }
        x->syms = grown;
        x->cap = cap;
    }
    char *name = malloc(n + 1);
    if (name == NULL) {
        px_fail(s, "out of memory");
        return NULL;
    }
    memcpy(name, p, n);
    name[n] = 0;
    uint32_t b = xhash(p, n);
    xsym *y = &x->syms[x->n++];
    *y = (xsym){.name = name, .next = x->head[b], .kind = (uint8_t)kind, .def = -1};
    x->head[b] = x->n;
    return y;
}

/* "in 'a'", or nothing when the link has one input. */
static const char *src_of(const ptx_module *m, uint16_t src)
{
    return m->srcnames != NULL && src < m->nsrcs ? m->srcnames[src] : NULL;
}

int px_xfunc(ps *s, const tok *name, int is_entry)
{
    xsym *y = xfind(s->x, name->s, name->n);
    if (y != NULL && y->kind != X_FUNC) {
        px_fail(s, "'%.*s' is a variable in another input", (int)(name->n > 60 ? 60 : name->n),
                name->s);
        return -1;
    }
    if (y != NULL)
        return (int)y->func;
    int fi = px_new_func(s, name, is_entry);
    if (fi < 0 || (y = xadd(s, name->s, name->n, X_FUNC)) == NULL)
        return -1;
    y->func = (uint32_t)fi;
    return fi;
}

/* A slot beside FI for a body that does not stand: same name and
 * parameters, never resolved by name nor made a kernel. */
static int hidden_slot(ps *s, uint32_t fi)
{
    const ptx_func *f = &s->m->funcs[fi];
    tok name = {.s = f->name, .n = (uint32_t)strlen(f->name), .line = f->line};
    int hi = px_new_func(s, &name, f->is_entry);
    if (hi < 0)
        return -1;
    f = &s->m->funcs[fi]; /* the array may have moved */
    ptx_func *h = &s->m->funcs[hi];
    h->hidden = 1;
    h->nparams = f->nparams;
    h->nrets = f->nrets;
    h->params_size = f->params_size;
    memcpy(h->param_offsets, f->param_offsets, sizeof h->param_offsets);
    memcpy(h->param_sizes, f->param_sizes, sizeof h->param_sizes);
    h->signed_ = 1;
    return hi;
}

int px_xfunc_define(ps *s, uint32_t fi, int linkage)
{
    ptx_func *f = &s->m->funcs[fi];
    if (!f->defined) {
        f->linkage = (uint8_t)linkage;
        f->src = s->src;
        return (int)fi;
    }
    if (linkage == PTX_LK_WEAK)
        return hidden_slot(s, fi); /* the first definition stands */
    if (f->linkage == PTX_LK_WEAK) {
        /* a .visible body displaces a .weak one: the weak body moves aside */
        int hi = hidden_slot(s, fi);
        if (hi < 0)
            return -1;
        ptx_func *h = &s->m->funcs[hi], *d = &s->m->funcs[fi];
        char *hname = h->name;
        *h = *d;
        h->name = hname;
        h->hidden = 1;
        d->code = NULL;
        d->consts = NULL;
        d->calls = NULL;
        d->ncode = d->capcode = d->nconsts = d->capconsts = d->ncalls = d->capcalls = 0;
        d->local_size = d->shared_top = d->shared_align = 0;
        d->nregs = d->npreds = 0;
        d->defined = 0;
        d->linkage = (uint8_t)linkage;
        d->src = s->src;
        return (int)fi;
    }
    const char *where = src_of(s->m, f->src);
    if (where != NULL)
        px_fail(s, "'%s' defined twice (also in '%s')", f->name, where);
    else
        px_fail(s, "'%s' defined twice", f->name);
    return -1;
}

/* Which of two definitions of one name stands: 1 the new one, 0 the old,
 * -1 they clash. */
static int new_stands(const ptx_var *old, const ptx_var *nv)
{
    if (nv->linkage == PTX_LK_VISIBLE)
        return old->linkage == PTX_LK_VISIBLE ? -1 : 1;
    if (old->linkage == PTX_LK_VISIBLE)
        return 0;
    if (nv->linkage == PTX_LK_COMMON)
        return old->linkage != PTX_LK_COMMON || nv->size > old->size;
    return 0; /* .weak: the first stands */
}

int px_xvar(ps *s, uint32_t gi)
{
    ptx_module *m = s->m;
    const ptx_var *v = &m->globals[gi];
    size_t n = strlen(v->name);
    xsym *y = xfind(s->x, v->name, n);
    if (y != NULL && y->kind != X_VAR) {
        px_fail(s, "'%s' is a function in another input", v->name);
        return -1;
    }
    if (y == NULL && (y = xadd(s, v->name, n, X_VAR)) == NULL)
        return -1;
    if (!v->defined)
        return 0;
    if (y->def < 0) {
        y->def = (int32_t)gi;
        return 0;
    }
    const ptx_var *old = &m->globals[y->def];
    int r = new_stands(old, v);
    if (r < 0) {
        const char *where = src_of(m, old->src);
        if (where != NULL)
            px_fail(s, "'%s' defined twice (also in '%s')", v->name, where);
        else
            px_fail(s, "'%s' defined twice", v->name);
        return -1;
    }
    if (r > 0)
        y->def = (int32_t)gi;
    return 0;
}

static int xfail(char *err, size_t err_len, const char *what, const char *name)
{
    if (err != NULL && err_len > 0)
        snprintf(err, err_len, "%s '%.200s'", what, name);
    return -1;
}

int px_xresolve(ptx_module *m, struct ptx_xtab *x, char *err, size_t err_len)
{
    for (uint32_t g = 0; g < m->nglobals; g++) {
        ptx_var *v = &m->globals[g];
        if (v->linkage == PTX_LK_NONE) {
            v->target = (int32_t)g;
            continue;
        }
        const xsym *y = xfind(x, v->name, strlen(v->name));
        v->target = y != NULL ? y->def : -1;
        /* .common: only the definition that stands (the largest) may be initialised */
        if (v->linkage == PTX_LK_COMMON && v->has_init && v->target != (int32_t)g)
            return xfail(err, err_len, "an initialised .common variable is not the largest, or "
                         "another is initialised too:", v->name);
        if (v->target >= 0 && m->globals[v->target].size < v->size && v->defined == 0
            && v->size > 0)
            return xfail(err, err_len, "an .extern declaration is larger than the definition of",
                         v->name);
    }
    return 0;
}
