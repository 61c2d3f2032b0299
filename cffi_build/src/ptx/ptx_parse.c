/*
 * ptx_parse.c — PTX text to per-function compact code (see ptx_int.h): the
 * lexer, the symbol tables, declarations and the module's structure; each
 * instruction is translated by ptx_translate.c.
 *
 * The text is untrusted: the lexer never reads past its end, every size and
 * count is bounded, nothing recurses on the input (scopes and initialiser
 * lists are loops with explicit depth limits), and every refusal is a message
 * "line N: what". An instruction, modifier, directive or state space this file
 * does not translate is refused by name, so nothing runs with a meaning we
 * did not implement. Ownership: the parser allocates the module's funcs and
 * variables; on failure ptx_module_load frees whatever was built.
 * Thread-safety: no globals; one parse state per call.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>

#include "ptx_parse.h"
#include "ptxc/ptxc_tier.h"
#include "mem/vaband.h"


void px_fail(ps *s, const char *fmt, ...)
{
    if (s->failed)
        return;
    s->failed = 1;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    unsigned line = s->in_insn ? s->iline : s->t.line ? s->t.line : s->line;
    if (s->err != NULL && s->err_len > 0 && s->src_name != NULL)
        snprintf(s->err, s->err_len, "input '%.120s' line %u: %s", s->src_name, line, msg);
    else if (s->err != NULL && s->err_len > 0)
        snprintf(s->err, s->err_len, "line %u: %s", line, msg);
}

static int isid0(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c == '%';
}
static int isid(int c) { return isid0(c) || (c >= '0' && c <= '9'); }
static int hexv(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void skip_space(ps *s)
{
    while (s->p < s->end) {
        char c = *s->p;
        if (c == '\n') {
            s->line++;
            s->p++;
        } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v' || c == 0) {
            s->p++;
        } else if (c == '/' && s->p + 1 < s->end && s->p[1] == '/') {
            while (s->p < s->end && *s->p != '\n')
                s->p++;
        } else if (c == '/' && s->p + 1 < s->end && s->p[1] == '*') {
            s->p += 2;
            while (s->p < s->end && !(*s->p == '*' && s->p + 1 < s->end && s->p[1] == '/')) {
                if (*s->p == '\n')
                    s->line++;
                s->p++;
            }
            s->p = s->p < s->end ? s->p + 2 : s->end;
        } else
            break;
    }
}

void px_next(ps *s)
{
    skip_space(s);
    tok *t = &s->t;
    t->line = s->line;
    t->s = s->p;
    t->u = 0;
    t->f = 0;
    if (s->p >= s->end) {
        t->kind = K_EOF;
        t->n = 0;
        return;
    }
    const char *p = s->p, *e = s->end;
    char c = *p;
    if (isid0(c)) {
        while (p < e && (isid(*p) || *p == '.' || (*p == ':' && p + 1 < e && p[1] == ':')))
            p += *p == ':' ? 2 : 1;
        t->kind = K_ID;
    } else if (c == '.' && p + 1 < e && isid(p[1])) {
        p++;
        while (p < e && isid(*p))
            p++;
        t->kind = K_DIR;
    } else if (c >= '0' && c <= '9') {
        if (c == '0' && p + 1 < e && (p[1] == 'f' || p[1] == 'F' || p[1] == 'd' || p[1] == 'D')) {
            int is64 = p[1] == 'd' || p[1] == 'D', nd = is64 ? 16 : 8;
            p += 2;
            uint64_t v = 0;
            int k = 0;
            for (; k < nd && p < e && hexv(*p) >= 0; k++, p++)
                v = v << 4 | (uint64_t)hexv(*p);
            if (k != nd) {
                px_fail(s, "malformed floating-point literal");
                t->kind = K_EOF;
                return;
            }
            t->kind = is64 ? K_F64 : K_F32;
            t->u = v;
        } else if (c == '0' && p + 1 < e && (p[1] == 'x' || p[1] == 'X')) {
            p += 2;
            uint64_t v = 0;
            while (p < e && hexv(*p) >= 0)
                v = v << 4 | (uint64_t)hexv(*p++);
            t->kind = K_INT;
            t->u = v;
        } else if (c == '0' && p + 1 < e && (p[1] == 'b' || p[1] == 'B')) {
            p += 2;
            uint64_t v = 0;
            while (p < e && (*p == '0' || *p == '1'))
                v = v << 1 | (uint64_t)(*p++ - '0');
            t->kind = K_INT;
            t->u = v;
        } else {
            const char *q = p;
            while (q < e && *q >= '0' && *q <= '9')
                q++;
            if (q < e && (*q == '.' || *q == 'e' || *q == 'E')) {
                char buf[64];
                size_t n = 0;
                while (q < e && n < sizeof buf - 1
                       && ((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E'
                           || ((*q == '-' || *q == '+') && (q[-1] == 'e' || q[-1] == 'E'))))
                    buf[n++] = *q++;
                buf[n] = 0;
                t->kind = K_FLT;
                t->f = strtod(buf, NULL);
                p = q;
            } else {
                uint64_t v = 0;
                int octal = *p == '0' && q - p > 1;
                for (; p < q; p++)
                    v = octal ? v * 8 + (uint64_t)(*p - '0') : v * 10 + (uint64_t)(*p - '0');
                t->kind = K_INT;
                t->u = v;
            }
        }
        if (p < e && (*p == 'U' || *p == 'u'))
            p++;
    } else if (c == '"') {
        p++;
        while (p < e && *p != '"' && *p != '\n')
            p++;
        if (p < e && *p == '"')
            p++;
        t->kind = K_STR;
    } else {
        p++;
        t->kind = K_PUNCT;
    }
    t->n = (uint32_t)(p - s->p);
    s->p = p;
}

int px_is_p(ps *s, char c) { return s->t.kind == K_PUNCT && s->t.s[0] == c; }
static int is_dir(ps *s, const char *d)
{
    return s->t.kind == K_DIR && s->t.n == strlen(d) && memcmp(s->t.s, d, s->t.n) == 0;
}
int px_tok_is(const tok *t, const char *w)
{
    return t->n == strlen(w) && memcmp(t->s, w, t->n) == 0;
}
void px_expect(ps *s, char c)
{
    if (!px_is_p(s, c))
        px_fail(s, "expected '%c' near '%.*s'", c, (int)(s->t.n > 40 ? 40 : s->t.n), s->t.s);
    else
        px_next(s);
}
/* Skips raw text to the end of the line (.loc, .file, .version ...). */
static void skip_line(ps *s)
{
    while (s->p < s->end && *s->p != '\n')
        s->p++;
    px_next(s);
}
static void skip_to_semi(ps *s)
{
    while (!s->failed && s->t.kind != K_EOF && !px_is_p(s, ';'))
        px_next(s);
    if (px_is_p(s, ';'))
        px_next(s);
}
uint64_t px_expect_int(ps *s)
{
    if (s->t.kind != K_INT) {
        px_fail(s, "expected an integer near '%.*s'", (int)(s->t.n > 40 ? 40 : s->t.n), s->t.s);
        return 0;
    }
    uint64_t v = s->t.u;
    px_next(s);
    return v;
}
static int parse_type(ps *s)
{
    if (s->t.kind != K_DIR)
        return T_NONE;
    for (int t = 1; t < NTYPES; t++)
        if (s->t.n - 1 == strlen(type_names[t]) && memcmp(s->t.s + 1, type_names[t], s->t.n - 1) == 0)
            return t;
    return T_NONE;
}

static uint32_t hash(const char *p, uint32_t n)
{
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 16777619u;
    return h % NBUCKETS;
}

psym *px_find(ps *s, const char *p, uint32_t n)
{
    for (uint32_t k = s->head[hash(p, n)]; k; k = s->syms[k - 1].next)
        if (s->syms[k - 1].n == n && memcmp(s->syms[k - 1].s, p, n) == 0)
            return &s->syms[k - 1];
    return NULL;
}

/* Makes room for element N of the array P (capacity *CAP, elements of ELEM
 * bytes), doubling from FIRST; refuses N >= MAX (0: no bound) with the
 * message TOO_MANY. Returns the array, moved or not, or NULL after px_fail. */
static void *grow(ps *s, void *p, uint32_t *cap, uint32_t n, size_t elem, uint32_t first,
                  uint32_t max, const char *too_many)
{
    if (max != 0 && n >= max) {
        px_fail(s, "%s", too_many);
        return NULL;
    }
    if (n < *cap)
        return p;
    uint32_t nc = *cap ? *cap * 2 : first;
    void *np = realloc(p, nc * elem);
    if (np == NULL) {
        px_fail(s, "out of memory");
        return NULL;
    }
    *cap = nc;
    return np;
}

/* The array P of N elements of ELEM bytes, one longer (for the module's
 * short lists, sized exactly); NULL after px_fail. */
static void *grow_one(ps *s, void *p, uint32_t n, size_t elem)
{
    void *np = realloc(p, ((size_t)n + 1) * elem);
    if (np == NULL)
        px_fail(s, "out of memory");
    return np;
}

static psym *add_sym(ps *s, const char *p, uint32_t n, int kind)
{
    psym *ns = grow(s, s->syms, &s->capsyms, s->nsyms, sizeof *ns, 1024, 1u << 22,
                    "too many symbols");
    if (ns == NULL)
        return NULL;
    s->syms = ns;
    uint32_t b = hash(p, n);
    psym *y = &s->syms[s->nsyms++];
    *y = (psym){.s = p, .n = n, .kind = (uint8_t)kind, .next = s->head[b]};
    s->head[b] = s->nsyms;
    return y;
}

static void push_scope(ps *s)
{
    if (s->depth >= 64) {
        px_fail(s, "scopes nested too deeply");
        return;
    }
    s->marks[s->depth++] = s->nsyms;
}

static void pop_scope(ps *s)
{
    if (s->depth == 0)
        return;
    uint32_t mark = s->marks[--s->depth];
    while (s->nsyms > mark) {
        psym *y = &s->syms[--s->nsyms];
        s->head[hash(y->s, y->n)] = y->next;
        if ((y->kind == S_REG || y->kind == S_PRED) && y->val)
            free((void *)y->s); /* a register name built from %r<N> */
    }
}

uint32_t px_label_id(ps *s, const char *p, uint32_t n)
{
    uint32_t b = hash(p, n);
    for (uint32_t k = s->lhead[b]; k; k = s->labels[k - 1].next)
        if (s->labels[k - 1].n == n && memcmp(s->labels[k - 1].s, p, n) == 0)
            return k - 1;
    plabel *nl = grow(s, s->labels, &s->caplabels, s->nlabels, sizeof *nl, 256, 1u << 22,
                      "too many labels");
    if (nl == NULL)
        return 0;
    s->labels = nl;
    s->labels[s->nlabels] = (plabel){.s = p, .n = n, .pc = -1, .next = s->lhead[b]};
    s->lhead[b] = ++s->nlabels;
    return s->nlabels - 1;
}

/* ------------------------------------------------------------- emission */

ptx_insn *px_emit(ps *s, int op, uint32_t guard)
{
    ptx_func *f = s->f;
    if (s->failed)
        return NULL;
    ptx_insn *nc = grow(s, f->code, &f->capcode, f->ncode, sizeof *nc, 256, PTX_MAX_CODE,
                        "function too long");
    if (nc == NULL)
        return NULL;
    f->code = nc;
    ptx_insn *i = &f->code[f->ncode++];
    memset(i, 0, sizeof *i);
    i->op = (uint16_t)op;
    i->fn = op == PTX_OP_ctl ? NULL : ptx_handlers[op];
    i->guard = guard;
    i->line = s->iline;
    return i;
}

void px_setf(ptx_insn *i, int field, int kind, uint32_t v)
{
    i->fk |= (uint32_t)kind << (2 * field);
    if (field <= PTX_F_D3)
        i->d[field] = v;
    else if (field <= PTX_F_S3)
        i->s[field - PTX_F_S0] = v;
    else
        i->ab = v;
}

uint32_t px_new_reg(ps *s)
{
    if (s->f->nregs >= PTX_MAX_REGS) {
        px_fail(s, "too many registers");
        return PTX_R_ZERO;
    }
    return s->f->nregs++;
}

uint32_t px_cst(ps *s, uint64_t v, int reloc, int arg)
{
    ptx_func *f = s->f;
    if (reloc == PTX_RL_NONE)
        for (uint32_t k = f->nconsts; k-- > 0 && k + 64 >= f->nconsts;)
            if (f->consts[k].reloc == PTX_RL_NONE && f->consts[k].value == v)
                return f->consts[k].reg; /* recent duplicates only: cheap, bounded */
    if (v == 0 && reloc == PTX_RL_NONE)
        return PTX_R_ZERO;
    ptx_const *nc = grow(s, f->consts, &f->capconsts, f->nconsts, sizeof *nc, 64, 0, NULL);
    if (nc == NULL)
        return PTX_R_ZERO;
    f->consts = nc;
    uint32_t r = px_new_reg(s);
    f->consts[f->nconsts++] = (ptx_const){r, (uint8_t)reloc, (uint8_t)arg, v};
    return r;
}

/* --------------------------------------------------------- declarations */

/* Allocates SIZE bytes aligned to ALIGN in a growing layout. */
static uint64_t place(uint64_t *top, uint64_t align, uint64_t size)
{
    if (align == 0)
        align = 1;
    uint64_t at = (*top + align - 1) / align * align;
    *top = at + size;
    return at;
}

typedef struct {
    int space; /* 0 global, 1 shared, 2 local, 3 param, 4 module-scope const */
    int align;
    int type;
    int vec;
    int is_extern;
    int managed; /* .attribute(.managed) */
} declspec;

/* Parses `.align N .v4 .type` in any order. */
static void decl_attrs(ps *s, declspec *d)
{
    int ptr = 0;
    for (int guard = 0; guard < 8 && !s->failed; guard++) {
        if (is_dir(s, ".align")) {
            px_next(s);
            uint64_t a = px_expect_int(s);
            if (a == 0 || a > 4096 || (a & (a - 1))) {
                px_fail(s, "bad alignment");
                return;
            }
            /* After .ptr it is the pointee's alignment, not the parameter's:
             * `.param .u64 .ptr .align 1 p` still lies on 8 bytes (the
             * interposer's layout, interposer/ptx.c, reads it the same way). */
            if (!ptr)
                d->align = (int)a;
        } else if (is_dir(s, ".v2") || is_dir(s, ".v4")) {
            d->vec = s->t.s[2] - '0';
            px_next(s);
        } else if (is_dir(s, ".ptr")) {
            ptr = 1;
            px_next(s);
        } else if (is_dir(s, ".global") || is_dir(s, ".shared") || is_dir(s, ".const")
                   || is_dir(s, ".local")) {
            px_next(s); /* .ptr .global: a hint on a pointer parameter */
        } else if (parse_type(s) != T_NONE) {
            d->type = parse_type(s);
            px_next(s);
        } else if (is_dir(s, ".attribute")) {
            /* .attribute(.managed): __managed__ (the only attribute of a
             * variable besides .unified, which is refused) */
            px_next(s);
            px_expect(s, '(');
            if (s->failed || !is_dir(s, ".managed")) {
                px_fail(s, "unsupported variable attribute");
                return;
            }
            px_next(s);
            px_expect(s, ')');
            d->managed = 1;
        } else {
            if (is_dir(s, ".texref") || is_dir(s, ".samplerref") || is_dir(s, ".surfref"))
                px_fail(s, "unsupported: texture, sampler and surface references (%.*s; "
                           "texture and surface objects are supported)", (int)s->t.n, s->t.s);
            return;
        }
    }
}

static uint64_t array_len(ps *s, int *unsized)
{
    uint64_t n = 1;
    *unsized = 0;
    for (int k = 0; k < 4 && px_is_p(s, '['); k++) {
        px_next(s);
        if (px_is_p(s, ']')) {
            *unsized = 1;
            px_next(s);
            continue;
        }
        uint64_t d = px_expect_int(s);
        px_expect(s, ']');
        if (d == 0 || d > (1u << 30) || n * d > (1u << 30)) {
            px_fail(s, "array too large");
            return 0;
        }
        n *= d;
    }
    return n;
}

/* Staging for initialised module data: copied into storage at the end, where
 * the addresses of variables in initialisers are patched in (relocs: the
 * 8-byte slot at `at` gets storage + `target`). */
typedef struct {
    uint8_t *data;
    uint64_t size;
    struct { uint64_t at, target; } *relocs;
    uint32_t nrelocs;
} stage;

/* An address in an initialiser: generic(var)+off, var+off, or a function. */
static int init_address(ps *s, stage *g, uint64_t at, int es, uint64_t *v)
{
    int generic = s->t.kind == K_ID && px_tok_is(&s->t, "generic");
    if (generic) {
        px_next(s);
        px_expect(s, '(');
    }
    if (s->t.kind != K_ID || es != 8) {
        px_fail(s, "unsupported initialiser");
        return -1;
    }
    psym *y = px_find(s, s->t.s, s->t.n);
    px_next(s);
    if (generic)
        px_expect(s, ')');
    int64_t off = 0;
    if (px_is_p(s, '+')) {
        px_next(s);
        uint64_t u = px_expect_int(s);
        if (u > PTX_GREF_MAX_DISP) {
            px_fail(s, "address offset too large in an initialiser");
            return -1;
        }
        off = (int64_t)u;
    }
    if (y != NULL && y->kind == S_FUNC && !generic && off == 0) {
        ptx_module *m = s->m;
        uint32_t *nt = grow_one(s, m->taken, m->ntaken, sizeof *nt);
        if (nt == NULL)
            return -1;
        m->taken = nt;
        m->taken[m->ntaken++] = y->idx;
        *v = PTX_FUNC_TAG | y->idx;
        return 0;
    }
    if (y == NULL || y->kind != S_GVAR || g->nrelocs >= 65536) {
        px_fail(s, "unsupported initialiser (the address of what is not a module variable)");
        return -1;
    }
    void *nr = grow_one(s, g->relocs, g->nrelocs, sizeof *g->relocs);
    if (nr == NULL)
        return -1;
    g->relocs = nr;
    g->relocs[g->nrelocs].at = at;
    g->relocs[g->nrelocs++].target = y->val + (uint64_t)off;
    *v = 0;
    return 0;
}

/* D as the bits of an initialiser element of TYPE (f32, else f64). */
static uint64_t float_bits(double d, int type)
{
    uint64_t v;
    if (type == T_F32) {
        float f = (float)d;
        uint32_t b;
        memcpy(&b, &f, 4);
        v = b;
    } else
        memcpy(&v, &d, 8);
    return v;
}

/* A module variable's initialiser: = value or = { v, v, ... } (nested
 * braces are a flat list: read with a depth counter, no recursion). */
static void initialiser(ps *s, stage *g, uint64_t base, uint64_t size, int type)
{
    int es = tsize(type);
    uint64_t at = 0;
    int depth = 0;
    do {
        if (px_is_p(s, '{')) {
            if (++depth > 8) {
                px_fail(s, "initialiser nested too deeply");
                return;
            }
            px_next(s);
            continue;
        }
        if (px_is_p(s, '}')) {
            depth--;
            px_next(s);
        } else if (s->t.kind == K_ID) {
            uint64_t v;
            if (at + (uint64_t)es > size) {
                px_fail(s, "initialiser longer than the variable");
                return;
            }
            if (init_address(s, g, base + at, es, &v) != 0)
                return;
            memcpy(g->data + base + at, &v, 8);
            at += 8;
        } else {
            opnd o;
            px_parse_operand(s, &o);
            if (s->failed)
                return;
            uint64_t v;
            if (o.kind == O_INT)
                v = tfloat(type) ? 0 : o.u;
            else if (o.kind == O_F32 || o.kind == O_F64 || o.kind == O_FLT) {
                double d = o.kind == O_FLT ? o.f : 0;
                if (o.kind == O_F32) {
                    uint32_t b = (uint32_t)o.u;
                    float f;
                    memcpy(&f, &b, 4);
                    d = f;
                } else if (o.kind == O_F64)
                    memcpy(&d, &o.u, 8);
                v = float_bits(d, type);
            } else {
                px_fail(s, "unsupported initialiser (addresses in initialisers)");
                return;
            }
            if (o.kind == O_INT && tfloat(type))
                v = float_bits((double)(int64_t)o.u, type);
            if (at + (uint64_t)es > size) {
                px_fail(s, "initialiser longer than the variable");
                return;
            }
            memcpy(g->data + base + at, &v, (size_t)es); /* little-endian host */
            at += (uint64_t)es;
        }
        if (px_is_p(s, ','))
            px_next(s);
    } while (depth > 0 && !s->failed && s->t.kind != K_EOF);
}

/* A module variable's declaration: its index in m->globals, or -1. */
static int add_global(ps *s, const char *name, uint32_t n, uint64_t off, uint64_t size,
                      int linkage)
{
    ptx_module *m = s->m;
    if (m->nglobals >= (1u << 20)) {
        px_fail(s, "too many module variables");
        return -1;
    }
    ptx_var *nv = grow_one(s, m->globals, m->nglobals, sizeof *nv);
    if (nv == NULL)
        return -1;
    m->globals = nv;
    char *c = malloc(n + 1);
    if (c == NULL) {
        px_fail(s, "out of memory");
        return -1;
    }
    memcpy(c, name, n);
    c[n] = 0;
    m->globals[m->nglobals] = (ptx_var){.name = c, .offset = off, .size = size, .target = -1,
                                        .defined = linkage != PTX_LK_EXTERN,
                                        .linkage = (uint8_t)linkage, .src = s->src};
    return (int)m->nglobals++;
}


/* A variable declaration after its state space directive; s->t is the first
 * token after it. Works at module and function scope. */
/* var_decl's state space of a module-scope .const (0 is .global; both live in
 * the module's storage). */
#define SP_MODULE_CONST 4

static void var_decl(ps *s, int sp, int linkage, stage *g, uint64_t *gtop)
{
    int is_extern = linkage == PTX_LK_EXTERN;
    declspec d = {.space = sp, .align = 0};
    decl_attrs(s, &d);
    if (d.type == T_NONE || d.type == T_PRED) {
        px_fail(s, "a variable needs a type");
        return;
    }
    if (d.vec == 0)
        d.vec = 1;
    for (int count = 0; !s->failed; count++) {
        if (s->t.kind != K_ID) {
            px_fail(s, "expected a variable name");
            return;
        }
        tok name = s->t;
        px_next(s);
        int unsized;
        uint64_t n = array_len(s, &unsized);
        uint64_t es = (uint64_t)tsize(d.type) * (uint64_t)d.vec;
        uint64_t size = n * es;
        uint64_t align = d.align ? (uint64_t)d.align : es;
        if (s->failed)
            return;
        psym *y;
        if (sp == 1) {
            if (unsized || is_extern) {
                y = add_sym(s, name.s, name.n, S_DSVAR);
                if (y)
                    y->val = 0;
                if (align > s->m->dyn_align) /* where dynamic shared memory starts */
                    s->m->dyn_align = (uint32_t)align;
                s->m->has_dyn_shared = 1;
            } else {
                /* A kernel's own .shared variables are numbered from 0 and
                 * placed above all of the module's when the kernel is linked
                 * (PTX_RL_OWNSH): a block holds the module's and its kernel's,
                 * not every kernel's (Thrust's module declares megabytes over
                 * thousands of kernels). A .func's are the module's. */
                int own = s->f != NULL && s->f->is_entry;
                uint64_t top = own ? s->f->shared_top : s->m->static_shared;
                uint64_t at = place(&top, align, size);
                if (top > PTX_MAX_SHARED) {
                    px_fail(s, "too much shared memory");
                    return;
                }
                if (own) {
                    s->f->shared_top = (uint32_t)top;
                    if (align > s->f->shared_align)
                        s->f->shared_align = (uint32_t)align;
                } else
                    s->m->static_shared = (uint32_t)top;
                y = add_sym(s, name.s, name.n, own ? S_OSVAR : S_SVAR);
                if (y)
                    y->val = at;
            }
        } else if (sp == 2 || (sp == 3 && s->f != NULL)) {
            if (s->f == NULL) {
                px_fail(s, ".local variables at module scope are not supported");
                return;
            }
            uint64_t top = s->f->local_size;
            uint64_t at = place(&top, align < 4 ? 4 : align, size);
            if (top > PTX_MAX_LOCAL) {
                px_fail(s, "too much local memory");
                return;
            }
            s->f->local_size = (uint32_t)top;
            if (align > s->f->local_align) /* where its frame must start (ptx_link.c) */
                s->f->local_align = (uint32_t)align;
            y = add_sym(s, name.s, name.n, S_LVAR);
            if (y) {
                y->val = at;
                y->idx = (uint32_t)size; /* call arguments copy this many bytes */
            }
        } else if ((sp == 0 || sp == SP_MODULE_CONST) && is_extern) {
            /* declared here, defined by another input: no storage of its own */
            if (px_is_p(s, '=')) {
                px_fail(s, "an .extern variable cannot be initialised");
                return;
            }
            int gi = add_global(s, name.s, name.n, 0, unsized ? 0 : size, linkage);
            if (gi < 0 || px_xvar(s, (uint32_t)gi) != 0)
                return;
            y = add_sym(s, name.s, name.n, S_GVAR);
            if (y)
                y->val = PTX_GREF(gi);
        } else if (sp == 0 || sp == SP_MODULE_CONST) {
            if (unsized) {
                px_fail(s, "unsized global variable");
                return;
            }
            if (sp == SP_MODULE_CONST) /* the constant bank's bytes, as a GPU lays them out */
                place(&s->m->const_size, align, size);
            if (d.managed && (sp != 0 || s->f != NULL)) {
                px_fail(s, ".attribute(.managed) on a variable that is not a module's .global");
                return;
            }
            if (d.managed) { /* alone in whole pages: the program maps exactly these */
                align = PTX_MANAGED_ALIGN;
                *gtop = (*gtop + PTX_MANAGED_ALIGN - 1) / PTX_MANAGED_ALIGN * PTX_MANAGED_ALIGN;
            }
            uint64_t at = place(gtop, align < 16 ? 16 : align, size);
            if (d.managed) {
                *gtop = (*gtop + PTX_MANAGED_ALIGN - 1) / PTX_MANAGED_ALIGN * PTX_MANAGED_ALIGN;
                s->m->has_managed = 1;
            }
            if (*gtop > (256u << 20)) {
                px_fail(s, "module variables too large");
                return;
            }
            if (*gtop > g->size) {
                uint64_t cap = g->size ? g->size : 4096;
                while (cap < *gtop)
                    cap *= 2;
                uint8_t *nd = realloc(g->data, cap);
                if (nd == NULL) {
                    px_fail(s, "out of memory");
                    return;
                }
                memset(nd + g->size, 0, cap - g->size);
                g->data = nd;
                g->size = cap;
            }
            /* code names the declaration; the link binds it (PTX_GREF) */
            int gi = add_global(s, name.s, name.n, at, size,
                                s->f != NULL ? PTX_LK_NONE : linkage);
            if (gi < 0)
                return;
            s->m->globals[gi].managed = (uint8_t)d.managed;
            y = add_sym(s, name.s, name.n, S_GVAR);
            if (y)
                y->val = PTX_GREF(gi);
            if (px_is_p(s, '=')) {
                px_next(s);
                s->m->globals[gi].has_init = 1;
                initialiser(s, g, at, size, d.type);
            }
            if (s->m->globals[gi].linkage != PTX_LK_NONE && px_xvar(s, (uint32_t)gi) != 0)
                return;
        } else {
            px_fail(s, "unsupported state space for a variable");
            return;
        }
        if (!px_is_p(s, ','))
            break;
        px_next(s);
        if (count > 4096) {
            px_fail(s, "too many declarators");
            return;
        }
    }
    px_expect(s, ';');
}

static void reg_decl(ps *s)
{
    px_next(s); /* .reg */
    declspec d = {0};
    decl_attrs(s, &d);
    if (d.type == T_NONE || d.vec) {
        px_fail(s, "unsupported register declaration");
        return;
    }
    while (!s->failed) {
        if (s->t.kind != K_ID) {
            px_fail(s, "expected a register name");
            return;
        }
        tok name = s->t;
        px_next(s);
        uint64_t count = 0;
        int ranged = 0;
        if (px_is_p(s, '<')) {
            px_next(s);
            count = px_expect_int(s);
            px_expect(s, '>');
            ranged = 1;
            if (count > PTX_MAX_REGS) {
                px_fail(s, "too many registers");
                return;
            }
        }
        if (name.n > 200) {
            px_fail(s, "register name too long");
            return;
        }
        for (uint64_t k = 0; k < (ranged ? count : 1) && !s->failed; k++) {
            /* names %r0 ... live in the text only as their prefix: keep a copy */
            char buf[216];
            int len = ranged ? snprintf(buf, sizeof buf, "%.*s%llu", (int)name.n, name.s,
                                        (unsigned long long)k)
                             : snprintf(buf, sizeof buf, "%.*s", (int)name.n, name.s);
            char *c = NULL;
            if (ranged) {
                /* interned in a side arena: freed with the parse state */
                c = malloc((size_t)len);
                if (c == NULL) {
                    px_fail(s, "out of memory");
                    return;
                }
                memcpy(c, buf, (size_t)len);
            }
            psym *y = add_sym(s, ranged ? c : name.s, (uint32_t)len,
                              d.type == T_PRED ? S_PRED : S_REG);
            if (y == NULL) {
                free(c);
                return;
            }
            y->type = (uint8_t)d.type;
            y->val = ranged; /* owns its name */
            if (d.type == T_PRED) {
                if (s->f->npreds >= PTX_MAX_REGS) {
                    px_fail(s, "too many predicates");
                    return;
                }
                y->idx = s->f->npreds++;
            } else
                y->idx = px_new_reg(s);
        }
        if (!px_is_p(s, ','))
            break;
        px_next(s);
    }
    px_expect(s, ';');
}

static void free_sym_names(ps *s, uint32_t from)
{
    for (uint32_t k = from; k < s->nsyms; k++)
        if ((s->syms[k].kind == S_REG || s->syms[k].kind == S_PRED) && s->syms[k].val)
            free((void *)s->syms[k].s);
}

/* Parameters of an entry or function: "(.param ... name, ...)". */
static void params(ps *s, ptx_func *f, int rets)
{
    px_expect(s, '(');
    uint32_t top = 0;
    while (!s->failed && !px_is_p(s, ')')) {
        if (!is_dir(s, ".param")) {
            px_fail(s, "unsupported parameter (only .param)");
            return;
        }
        px_next(s);
        declspec d = {0};
        decl_attrs(s, &d);
        if (d.type == T_NONE || d.type == T_PRED || s->t.kind != K_ID) {
            px_fail(s, "malformed parameter");
            return;
        }
        tok name = s->t;
        px_next(s);
        int unsized;
        uint64_t n = array_len(s, &unsized);
        uint64_t es = (uint64_t)tsize(d.type) * (uint64_t)(d.vec ? d.vec : 1);
        uint64_t size = n * es, align = d.align ? (uint64_t)d.align : es;
        uint32_t k = rets ? f->nrets : f->nparams;
        if (unsized || size > PTX_MAX_PARAM_BYTES || f->nrets + f->nparams >= PTX_MAX_PARAMS
            || s->failed) {
            if (!s->failed)
                px_fail(s, "unsupported parameter");
            return;
        }
        uint64_t t64 = top;
        uint64_t at = place(&t64, align, size);
        if (t64 > PTX_MAX_PARAM_BYTES) {
            px_fail(s, "parameters larger than %u bytes (CUDA's limit)", PTX_MAX_PARAM_BYTES);
            return;
        }
        top = (uint32_t)t64;
        psym *y = add_sym(s, name.s, name.n, f->is_entry ? S_KPARAM : rets ? S_FRET : S_FPARAM);
        if (y == NULL)
            return;
        y->idx = k;
        y->val = f->is_entry ? at : 0;
        if (!rets) {
            f->param_offsets[k] = (uint32_t)at;
            f->param_sizes[k] = (uint32_t)size;
            f->nparams++;
            f->params_size = top;
        } else {
            f->nrets++;
            f->rets_sig = f->rets_sig * 31u + (uint32_t)size;
        }
        if (px_is_p(s, ','))
            px_next(s);
    }
    px_expect(s, ')');
}

/* The performance directives after a function's parameters. The launch
 * bounds are kept: .maxntid and .reqntid (the product of their extents: a
 * launch of more threads is refused, as on a GPU) and .maxnreg; the rest are
 * hints the host device has no use for. */
static void perf_directives(ps *s, ptx_func *f)
{
    while (!s->failed && s->t.kind == K_DIR) {
        int bound = is_dir(s, ".maxntid") || is_dir(s, ".reqntid"), regs = is_dir(s, ".maxnreg");
        if (bound || regs || is_dir(s, ".minnctapersm")
            || is_dir(s, ".maxclusterrank") || is_dir(s, ".reqnctapercluster")
            || is_dir(s, ".explicitcluster") || is_dir(s, ".noreturn") || is_dir(s, ".pragma")) {
            px_next(s);
            uint64_t product = 1;
            int extents = 0;
            while (s->t.kind == K_INT || px_is_p(s, ',') || s->t.kind == K_STR) {
                if (s->t.kind == K_INT && extents++ < 3) {
                    uint64_t v = s->t.u;
                    product = v > 1024 || product * v > 1024 ? 1025 : product * v;
                }
                px_next(s);
            }
            if (bound && extents > 0 && (f->max_threads == 0 || product < f->max_threads))
                f->max_threads = (uint32_t)product;
            if (regs && extents > 0)
                f->maxnreg = (uint32_t)(product > 1024 ? 1024 : product);
            if (px_is_p(s, ';') && !px_is_p(s, '{'))
                px_next(s);
        } else
            return;
    }
}

int px_new_func(ps *s, const tok *name, int is_entry)
{
    ptx_module *m = s->m;
    if (m->nfuncs >= 65536) {
        px_fail(s, "too many functions");
        return -1;
    }
    ptx_func *nf = grow_one(s, m->funcs, m->nfuncs, sizeof *nf);
    if (nf == NULL)
        return -1;
    m->funcs = nf;
    ptx_func *f = &m->funcs[m->nfuncs];
    memset(f, 0, sizeof *f);
    f->name = malloc(name->n + 1);
    if (f->name == NULL) {
        px_fail(s, "out of memory");
        return -1;
    }
    memcpy(f->name, name->s, name->n);
    f->name[name->n] = 0;
    f->is_entry = is_entry;
    f->line = name->line;
    f->src = s->src;
    return (int)m->nfuncs++;
}

/* The slot of a function this input declares: its own, or with a linking
 * directive the one every input of the link shares (ptx_linkage.c). */
static int func_slot(ps *s, const tok *name, int is_entry, int linkage)
{
    psym *y = px_find(s, name->s, name->n);
    if (y != NULL) {
        if (y->kind != S_FUNC) {
            px_fail(s, "'%.*s' redeclared", (int)(name->n > 60 ? 60 : name->n), name->s);
            return -1;
        }
        return (int)y->idx;
    }
    int fi = linkage != PTX_LK_NONE ? px_xfunc(s, name, is_entry) : px_new_func(s, name, is_entry);
    if (fi < 0 || (y = add_sym(s, name->s, name->n, S_FUNC)) == NULL)
        return -1;
    y->idx = (uint32_t)fi;
    return fi;
}

static void body(ps *s, stage *g, uint64_t *gtop)
{
    ptx_func *f = s->f;
    f->nregs = PTX_NSREG;
    f->npreds = PTX_NSPRED;
    s->sink = px_new_reg(s);
    s->psink = f->npreds++;
    int depth = 0;
    px_next(s); /* '{' */
    push_scope(s);
    uint32_t lmark = s->nlabels;
    while (!s->failed) {
        if (s->t.kind == K_EOF) {
            px_fail(s, "unexpected end of text in a function body");
            return;
        }
        if (px_is_p(s, '{')) {
            px_next(s);
            push_scope(s);
            depth++;
            continue;
        }
        if (px_is_p(s, '}')) {
            px_next(s);
            pop_scope(s);
            if (depth-- == 0)
                break;
            continue;
        }
        if (s->t.kind == K_DIR) {
            if (is_dir(s, ".reg"))
                reg_decl(s);
            else if (is_dir(s, ".local")) {
                px_next(s);
                var_decl(s, 2, 0, g, gtop);
            } else if (is_dir(s, ".param")) {
                px_next(s);
                var_decl(s, 3, 0, g, gtop);
            } else if (is_dir(s, ".shared")) {
                px_next(s);
                var_decl(s, 1, 0, g, gtop);
            } else if (is_dir(s, ".loc") || is_dir(s, ".file"))
                skip_line(s);
            else if (is_dir(s, ".pragma"))
                skip_to_semi(s);
            else
                px_fail(s, "unsupported directive '%.*s' in a function",
                     (int)(s->t.n > 40 ? 40 : s->t.n), s->t.s);
            continue;
        }
        uint32_t guard = 0;
        if (px_is_p(s, '@')) {
            px_next(s);
            int neg = 0;
            if (px_is_p(s, '!')) {
                neg = 1;
                px_next(s);
            }
            psym *y = s->t.kind == K_ID ? px_find(s, s->t.s, s->t.n) : NULL;
            if (y == NULL || y->kind != S_PRED) {
                px_fail(s, "a guard must be a predicate");
                return;
            }
            guard = y->idx | (neg ? PTX_GUARD_NEG : 0);
            px_next(s);
        } else if (s->t.kind == K_ID) {
            /* a label? */
            const char *save_p = s->p;
            uint32_t save_line = s->line;
            tok save = s->t;
            px_next(s);
            if (px_is_p(s, ':')) {
                px_next(s);
                if (is_dir(s, ".callprototype")) {
                    skip_to_semi(s);
                    psym *y = add_sym(s, save.s, save.n, S_PROTO);
                    (void)y;
                    continue;
                }
                uint32_t id = px_label_id(s, save.s, save.n);
                if (s->failed)
                    return;
                if (s->labels[id].pc >= 0) {
                    px_fail(s, "label '%.*s' defined twice", (int)(save.n > 40 ? 40 : save.n), save.s);
                    return;
                }
                s->labels[id].pc = f->ncode;
                continue;
            }
            s->p = save_p;
            s->line = save_line;
            s->t = save;
        }
        if (s->t.kind != K_ID) {
            px_fail(s, "expected an instruction near '%.*s'", (int)(s->t.n > 40 ? 40 : s->t.n),
                 s->t.s);
            return;
        }
        px_instruction(s, guard);
    }
    if (s->failed)
        return;
    /* resolve branch targets */
    for (uint32_t k = 0; k < f->ncode; k++) {
        ptx_insn *i = &f->code[k];
        if (i->op == PTX_OP_ctl && i->ctl == PTX_C_BRA) {
            plabel *l = &s->labels[i->aux];
            if (l->pc < 0) {
                s->t.line = i->line;
                px_fail(s, "undefined label '%.*s'", (int)(l->n > 40 ? 40 : l->n), l->s);
                return;
            }
            i->aux = (uint32_t)l->pc;
        }
    }
    /* forget this function's labels */
    for (uint32_t k = s->nlabels; k-- > lmark;)
        s->lhead[hash(s->labels[k].s, s->labels[k].n)] = s->labels[k].next;
    s->nlabels = lmark;
    f->defined = 1;
}

/* Every declaration of a function (in any input of a link) and its
 * definition must agree on the parameters: a call lays its arguments out by
 * its own declaration, the body reads them by the definition's. */
static int same_signature(const ptx_func *f, const ptx_func *t)
{
    return f->nparams == t->nparams && f->nrets == t->nrets && f->rets_sig == t->rets_sig
           && memcmp(f->param_sizes, t->param_sizes, t->nparams * sizeof *t->param_sizes) == 0
           && memcmp(f->param_offsets, t->param_offsets,
                     t->nparams * sizeof *t->param_offsets) == 0;
}

static void function(ps *s, int is_entry, int linkage, stage *g, uint64_t *gtop)
{
    px_next(s); /* .entry / .func */
    ptx_func tmp = {.is_entry = is_entry};
    push_scope(s); /* the parameters */
    int has_ret = 0;
    if (!is_entry && px_is_p(s, '(')) {
        params(s, &tmp, 1);
        has_ret = 1;
    }
    if (s->t.kind != K_ID) {
        px_fail(s, "expected a function name");
        return;
    }
    tok name = s->t;
    px_next(s);
    if (px_is_p(s, '('))
        params(s, &tmp, 0);
    perf_directives(s, &tmp);
    if (s->failed)
        return;
    /* The function's name belongs to the module scope, below its parameters:
     * lift the parameters off, add the name, put them back. */
    uint32_t nps = s->nsyms - s->marks[s->depth - 1];
    psym saved[PTX_MAX_PARAMS];
    if (nps > PTX_MAX_PARAMS) {
        px_fail(s, "too many parameters");
        return;
    }
    if (nps > 0)
        memcpy(saved, &s->syms[s->nsyms - nps], nps * sizeof *saved);
    pop_scope(s);
    int fi = func_slot(s, &name, is_entry, linkage);
    if (fi < 0)
        return;
    push_scope(s);
    for (uint32_t k = 0; k < nps; k++) {
        psym *y = add_sym(s, saved[k].s, saved[k].n, saved[k].kind);
        if (y == NULL)
            return;
        y->idx = saved[k].idx;
        y->val = saved[k].val;
        y->type = saved[k].type;
    }
    ptx_func *f = &s->m->funcs[fi];
    if (f->is_entry != is_entry) {
        px_fail(s, "'%s' declared as both .entry and .func", f->name);
        return;
    }
    (void)has_ret;
    if (f->signed_ && !same_signature(f, &tmp)) {
        px_fail(s, "'%s' declared with other parameters than before", f->name);
        return;
    }
    f->nparams = tmp.nparams;
    f->nrets = tmp.nrets;
    f->rets_sig = tmp.rets_sig;
    f->params_size = tmp.params_size;
    f->max_threads = tmp.max_threads;
    f->maxnreg = tmp.maxnreg;
    memcpy(f->param_offsets, tmp.param_offsets, sizeof f->param_offsets);
    memcpy(f->param_sizes, tmp.param_sizes, sizeof f->param_sizes);
    f->signed_ = 1;
    if (px_is_p(s, ';')) {
        px_next(s);
        pop_scope(s);
        return;
    }
    if (!px_is_p(s, '{')) {
        px_fail(s, "expected a function body");
        return;
    }
    if (linkage == PTX_LK_EXTERN) {
        px_fail(s, "'%s' is .extern but has a body", f->name);
        return;
    }
    if (linkage == PTX_LK_COMMON) {
        px_fail(s, "'%s': .common is for variables only", f->name);
        return;
    }
    /* an input-local function defined twice clashes at once; a shared name
     * follows the linking rules */
    if (f->defined && f->linkage == PTX_LK_NONE && linkage == PTX_LK_NONE) {
        px_fail(s, "'%s' defined twice", f->name);
        return;
    }
    if ((fi = px_xfunc_define(s, (uint32_t)fi, linkage)) < 0)
        return;
    f = &s->m->funcs[fi];
    s->f = f;
    s->fidx = (uint32_t)fi;
    body(s, g, gtop);
    s->f = NULL;
    pop_scope(s);
}

static void section(ps *s)
{
    /* debug sections: skip a balanced brace block */
    while (!s->failed && s->t.kind != K_EOF && !px_is_p(s, '{'))
        px_next(s);
    int depth = 0;
    while (!s->failed && s->t.kind != K_EOF) {
        if (px_is_p(s, '{'))
            depth++;
        else if (px_is_p(s, '}') && --depth == 0) {
            px_next(s);
            return;
        }
        px_next(s);
    }
}

static void module(ps *s, stage *g, uint64_t *gtop)
{
    px_next(s);
    while (!s->failed && s->t.kind != K_EOF) {
        if (s->t.kind != K_DIR) {
            px_fail(s, "unexpected '%.*s' at module scope", (int)(s->t.n > 40 ? 40 : s->t.n),
                 s->t.s);
            return;
        }
        if (is_dir(s, ".version") || is_dir(s, ".target") || is_dir(s, ".address_size")
            || is_dir(s, ".file") || is_dir(s, ".loc")) {
            if (is_dir(s, ".target")) {
                /* sm_XX[a|f]: the architecture the PTX was written for (what
                 * cuFuncGetAttribute(PTX_VERSION) tells: CUB picks its tile
                 * sizes on the host by it, and they must match the code's) */
                px_next(s);
                /* a link's first input names it */
                if (s->t.kind == K_ID && s->t.n > 3 && memcmp(s->t.s, "sm_", 3) == 0
                    && s->m->target == 0) {
                    uint32_t v = 0;
                    for (size_t k = 3; k < s->t.n && s->t.s[k] >= '0' && s->t.s[k] <= '9'
                                       && v < 100000; k++)
                        v = v * 10 + (uint32_t)(s->t.s[k] - '0');
                    s->m->target = v;
                }
            }
            if (is_dir(s, ".address_size")) {
                px_next(s);
                if (s->t.kind == K_INT && s->t.u != 64) {
                    px_fail(s, "only .address_size 64 is supported");
                    return;
                }
            }
            skip_line(s);
            continue;
        }
        if (is_dir(s, ".section")) {
            section(s);
            continue;
        }
        if (is_dir(s, ".pragma")) {
            skip_to_semi(s);
            continue;
        }
        int linkage = PTX_LK_NONE;
        while (is_dir(s, ".visible") || is_dir(s, ".extern") || is_dir(s, ".weak")
               || is_dir(s, ".common")) {
            linkage = is_dir(s, ".extern")    ? PTX_LK_EXTERN
                      : is_dir(s, ".visible") ? PTX_LK_VISIBLE
                      : is_dir(s, ".weak")    ? PTX_LK_WEAK
                                              : PTX_LK_COMMON;
            px_next(s);
        }
        if (is_dir(s, ".entry"))
            function(s, 1, linkage, g, gtop);
        else if (is_dir(s, ".func"))
            function(s, 0, linkage, g, gtop);
        else if (is_dir(s, ".global") || is_dir(s, ".const")) {
            int sp = is_dir(s, ".const") ? SP_MODULE_CONST : 0;
            px_next(s);
            var_decl(s, sp, linkage, g, gtop);
        } else if (is_dir(s, ".shared")) {
            px_next(s);
            var_decl(s, 1, linkage == PTX_LK_EXTERN ? PTX_LK_EXTERN : PTX_LK_NONE, g, gtop);
        } else
            px_fail(s, "unsupported directive '%.*s'", (int)(s->t.n > 40 ? 40 : s->t.n), s->t.s);
    }
}

void ptx_func_free(ptx_func *f)
{
    free(f->name);
    free(f->code);
    free(f->consts);
    free(f->calls);
}

void ptx_module_free(ptx_module *m)
{
    if (m == NULL)
        return;
    for (uint32_t k = 0; k < m->nfuncs; k++)
        ptx_func_free(&m->funcs[k]);
    free(m->funcs);
    for (uint32_t k = 0; k < m->nkernels; k++) {
        free(m->kernels[k].name);
        free(m->kernels[k].code);
        free(m->kernels[k].consts);
        free(m->kernels[k].ocalls);
        free(m->kernels[k].bodies);
        free(m->kernels[k].body_of);
        ptxc_kernel_release(m->kernels[k].ptxc);
        free(m->kernels[k].dcalls);
    }
    free(m->kernels);
    for (uint32_t k = 0; k < m->nglobals; k++)
        free(m->globals[k].name);
    free(m->globals);
    free(m->taken);
    if (m->storage_mapped)
        munmap(m->storage, m->storage_mapped);
    else
        free(m->storage);
    for (uint32_t k = 0; k < m->nsrcs; k++)
        free(m->srcnames[k]);
    free(m->srcnames);
    free(m);
}

/* One input of a link into the shared module: its own symbols and labels,
 * the link's functions, variables and names. */
static int parse_source(ps *proto, const ptx_source *src, stage *g, uint64_t *gtop)
{
    ps s = *proto;
    s.p = src->text;
    s.end = src->text + src->len;
    s.line = 1;
    s.head = calloc(NBUCKETS, sizeof *s.head);
    s.lhead = calloc(NBUCKETS, sizeof *s.lhead);
    if (s.head == NULL || s.lhead == NULL)
        px_fail(&s, "out of memory");
    else
        module(&s, g, gtop);
    free_sym_names(&s, 0);
    free(s.syms);
    free(s.head);
    free(s.labels);
    free(s.lhead);
    return s.failed ? -1 : 0;
}

/* The storage of module variables: one block, registered as a whole, with
 * the addresses initialisers hold patched in once every variable is bound. */
static int build_storage(ptx_module *m, const stage *g, uint64_t gtop, char *err, size_t err_len)
{
    m->storage_size = gtop;
    if (gtop == 0)
        return 0;
    if (m->has_managed) {
        /* in the band, where the program can map its views of the managed
         * variables at their addresses (gtop is whole PTX_MANAGED_ALIGN pages
         * past the last one; mmap zeroes) */
        uint64_t size = (gtop + PTX_MANAGED_ALIGN - 1) / PTX_MANAGED_ALIGN * PTX_MANAGED_ALIGN;
        m->storage = gl_va_band_map(size);
        if (m->storage == NULL) {
            snprintf(err, err_len, "no room for managed variables where the program can map them");
            return -1;
        }
        m->storage_mapped = size;
    } else {
        m->storage = aligned_alloc(256, (gtop + 255) / 256 * 256);
        if (m->storage == NULL) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
        memset(m->storage, 0, (gtop + 255) / 256 * 256);
    }
    memcpy(m->storage, g->data, gtop);
    for (uint32_t r = 0; r < g->nrelocs; r++) {
        uint32_t gi;
        int64_t disp;
        if (ptx_gref_split(g->relocs[r].target, m->nglobals, &gi, &disp) != 0)
            continue;
        int32_t t = m->globals[gi].target;
        if (t < 0) {
            snprintf(err, err_len, "undefined reference to variable '%.200s' in an initialiser",
                     m->globals[gi].name);
            return -1;
        }
        uint64_t v = (uint64_t)(uintptr_t)m->storage + m->globals[t].offset + (uint64_t)disp;
        if (g->relocs[r].at + 8 <= gtop)
            memcpy(m->storage + g->relocs[r].at, &v, 8);
    }
    return 0;
}

static int keep_names(ptx_module *m, const ptx_source *src, size_t n)
{
    m->srcnames = calloc(n, sizeof *m->srcnames);
    if (m->srcnames == NULL)
        return -1;
    m->nsrcs = (uint32_t)n;
    for (size_t k = 0; k < n; k++) {
        const char *name = src[k].name != NULL ? src[k].name : "?";
        if ((m->srcnames[k] = strndup(name, 200)) == NULL)
            return -1;
    }
    return 0;
}

int ptx_module_link(const ptx_source *src, size_t n, ptx_module **out, char *err,
                    size_t err_len)
{
    char scratch[8];
    *out = NULL;
    if (err == NULL || err_len == 0) {
        err = scratch;
        err_len = sizeof scratch;
    }
    err[0] = 0;
    size_t total = 0;
    for (size_t k = 0; k < n; k++)
        total += src[k].len <= PTX_MAX_TEXT ? src[k].len : (size_t)PTX_MAX_TEXT + 1;
    if (n == 0 || n > PTX_MAX_SOURCES || total > PTX_MAX_TEXT) {
        snprintf(err, err_len, n == 0 ? "nothing to link"
                 : n > PTX_MAX_SOURCES ? "more than %u inputs to link"
                 : "PTX text larger than %u bytes", n > PTX_MAX_SOURCES ? PTX_MAX_SOURCES
                 : PTX_MAX_TEXT);
        return -1;
    }
    ptx_module *m = calloc(1, sizeof *m);
    struct ptx_xtab *x = px_xtab_new();
    stage g = {0};
    uint64_t gtop = 0;
    int failed = m == NULL || x == NULL || (n > 1 && keep_names(m, src, n) != 0);
    if (failed)
        snprintf(err, err_len, "out of memory");
    ps proto = {.m = m, .x = x, .err = err, .err_len = err_len};
    for (size_t k = 0; k < n && !failed; k++) {
        proto.src = (uint16_t)k;
        proto.src_name = n > 1 ? m->srcnames[k] : NULL;
        failed = parse_source(&proto, &src[k], &g, &gtop) != 0;
    }
    if (!failed)
        failed = px_xresolve(m, x, err, err_len) != 0
                 || build_storage(m, &g, gtop, err, err_len) != 0;
    px_xtab_free(x);
    free(g.data);
    free(g.relocs);
    if (!failed && ptx_link(m, err, err_len) != 0)
        failed = 1;
    if (failed) {
        ptx_module_free(m);
        return -1;
    }
    *out = m;
    return 0;
}

int ptx_module_load(const char *text, size_t len, ptx_module **out, char *err, size_t err_len)
{
    const ptx_source one = {text, len, NULL};
    return ptx_module_link(&one, 1, out, err, err_len);
}
