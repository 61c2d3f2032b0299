/*
 * ptx_parse.h — private to the PTX front end: ptx_parse.c (the lexer, the
 * symbol tables, declarations and the module's structure) and
 * ptx_translate.c (an instruction's operands and modifiers to compact code).
 * One parse state (ps) per ptx_module_load call; no global state.
 */
#ifndef GLEAM_PTX_PARSE_H
#define GLEAM_PTX_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "ptx_int.h"

/* ------------------------------------------------------------------ types */

enum {
    T_NONE, T_B8, T_B16, T_B32, T_B64, T_U8, T_U16, T_U32, T_U64, T_S8, T_S16, T_S32, T_S64,
    T_F16, T_F16X2, T_BF16, T_BF16X2, T_F32, T_F64, T_PRED, T_B128, T_TF32, T_S16X2, T_U16X2
};
static const char *const type_names[] = {
    "", "b8", "b16", "b32", "b64", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64",
    "f16", "f16x2", "bf16", "bf16x2", "f32", "f64", "pred", "b128", "tf32", "s16x2", "u16x2"};
#define NTYPES ((int)(sizeof type_names / sizeof type_names[0]))

static inline int tsize(int t)
{
    switch (t) {
    case T_B8: case T_U8: case T_S8: return 1;
    case T_B16: case T_U16: case T_S16: case T_F16: case T_BF16: return 2;
    case T_B32: case T_U32: case T_S32: case T_F32: case T_F16X2: case T_BF16X2: case T_TF32:
    case T_S16X2: case T_U16X2:
        return 4;
    case T_B64: case T_U64: case T_S64: case T_F64: return 8;
    case T_B128: return 16;
    default: return 0;
    }
}
static inline int tsigned(int t) { return t == T_S8 || t == T_S16 || t == T_S32 || t == T_S64; }
static inline int tfloat(int t) { return t == T_F32 || t == T_F64; }
/* Index in the INT6 order s16 u16 s32 u32 s64 u64, -1 if none. */
static inline int ix_int6(int t)
{
    switch (t) {
    case T_S16: return 0;
    case T_U16: case T_B16: return 1;
    case T_S32: return 2;
    case T_U32: case T_B32: return 3;
    case T_S64: return 4;
    case T_U64: case T_B64: return 5;
    default: return -1;
    }
}

/* cvt kinds (ptx_exec.c's h_cvt): integer by size and sign, f16, bf16, f32, f64. */
static inline int cvt_kind(int t)
{
    switch (t) {
    case T_U8: case T_B8: return CK_U8;
    case T_S8: return CK_S8;
    case T_U16: case T_B16: return CK_U16;
    case T_S16: return CK_S16;
    case T_U32: case T_B32: return CK_U32;
    case T_S32: return CK_S32;
    case T_U64: case T_B64: return CK_U64;
    case T_S64: return CK_S64;
    case T_F16: return CK_F16;
    case T_BF16: return CK_BF16;
    case T_F32: return CK_F32;
    case T_F64: return CK_F64;
    default: return -1;
    }
}

/* ------------------------------------------------------------------ lexer */

enum { K_EOF, K_ID, K_DIR, K_INT, K_FLT, K_F32, K_F64, K_STR, K_PUNCT };

typedef struct {
    int kind;
    const char *s;
    uint32_t n;
    uint64_t u;
    double f;
    uint32_t line;
} tok;

struct ptx_xtab; /* the names a link shares between its inputs (ptx_linkage.c) */

typedef struct {
    const char *p, *end;
    uint32_t line;
    ptx_module *m;
    struct ptx_xtab *x;
    uint16_t src;         /* this input's index in the link */
    const char *src_name; /* named in messages when the link has several inputs */
    char *err;
    size_t err_len;
    int failed;
    tok t;
    /* symbols: a stack with scope marks, found through a hash of chains */
    struct psym *syms;
    uint32_t nsyms, capsyms;
    uint32_t *head;
    uint32_t marks[64];
    int depth;
    /* labels of the current function */
    struct plabel *labels;
    uint32_t nlabels, caplabels;
    uint32_t *lhead;
    ptx_func *f;
    uint32_t fidx;
    uint32_t sink;  /* a scratch register for `_` */
    uint32_t psink; /* and a scratch predicate */
    uint32_t iline; /* line of the instruction being translated */
    int in_insn;    /* errors name iline */
} ps;

#define NBUCKETS 4096u
/* ---------------------------------------------------------------- symbols */

enum { S_REG, S_PRED, S_GVAR, S_SVAR, S_OSVAR, S_DSVAR, S_LVAR, S_KPARAM, S_FPARAM, S_FRET, S_FUNC,
       S_PROTO };

typedef struct psym {
    const char *s;
    uint32_t n;
    uint8_t kind, type;
    uint32_t idx;
    uint64_t val;
    uint32_t next; /* previous symbol of the same bucket + 1 */
} psym;

typedef struct plabel {
    const char *s;
    uint32_t n;
    int64_t pc; /* -1: not yet defined */
    uint32_t next;
} plabel;

/* -------------------------------------------------------------- operands */

enum { O_NONE, O_REG, O_PRED, O_INT, O_FLT, O_F32, O_F64, O_SYM, O_ADDR, O_VEC, O_SINK,
       O_LABEL };

typedef struct {
    int kind;
    int neg;
    uint32_t idx;     /* register / predicate */
    int rtype;
    uint64_t u;       /* integer / bits / symbol value */
    double f;
    int reloc, rarg;  /* for O_SYM and O_ADDR */
    int symkind;      /* psym kind for O_SYM / O_ADDR bases */
    int has_base;     /* O_ADDR: register base */
    uint32_t base;
    int64_t off;
    uint32_t vec[4];
    int vsink[4]; /* 1: `_`, 2: the immediate vval */
    uint64_t vval[4];
    int nvec;
    int has2;         /* a|b */
    uint32_t idx2;
    int kind2;
    const char *name;
    uint32_t nname;
} opnd;


#define SD(i, k, r) px_setf(i, PTX_F_D0 + (k), PTX_FK_REG, r)
#define SS(i, k, r) px_setf(i, PTX_F_S0 + (k), PTX_FK_REG, r)
#define SDP(i, k, r) px_setf(i, PTX_F_D0 + (k), PTX_FK_PRED, r)
#define SSP(i, k, r) px_setf(i, PTX_F_S0 + (k), PTX_FK_PRED, r)

/* ptx_parse.c */
void px_fail(ps *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void px_next(ps *s);
int px_is_p(ps *s, char c);
int px_tok_is(const tok *t, const char *w);
void px_expect(ps *s, char c);
uint64_t px_expect_int(ps *s);
psym *px_find(ps *s, const char *p, uint32_t n);
uint32_t px_label_id(ps *s, const char *p, uint32_t n);
ptx_insn *px_emit(ps *s, int op, uint32_t guard);
void px_setf(ptx_insn *i, int field, int kind, uint32_t v);
uint32_t px_new_reg(ps *s);
uint32_t px_cst(ps *s, uint64_t v, int reloc, int arg);
/* A new function slot named NAME (no symbol entered): its index, or -1. */
int px_new_func(ps *s, const tok *name, int is_entry);

/* ptx_linkage.c: declarations with a linking directive, shared by the inputs
 * of one link. Each returns -1 after px_fail. */
struct ptx_xtab *px_xtab_new(void);
void px_xtab_free(struct ptx_xtab *x);
/* The function slot every input shares for NAME (created unset when new):
 * its index, or -1. */
int px_xfunc(ps *s, const tok *name, int is_entry);
/* Where the body of function FI, declared with LINKAGE, is parsed: FI, or a
 * hidden slot for a .weak body that loses (or that a .visible one displaces,
 * moved there); -1 when two definitions clash. */
int px_xfunc_define(ps *s, uint32_t fi, int linkage);
/* Enters module variable GI (just added to m->globals) in the link. */
int px_xvar(ps *s, uint32_t gi);
/* After every input: binds each variable declaration to its definition
 * (target) and checks .common initialisers. 0, or -1 with a message. */
int px_xresolve(ptx_module *m, struct ptx_xtab *x, char *err, size_t err_len);

/* An instruction's mnemonic split at its dots: p[0] is the opcode, the
 * others its modifiers, each marked used once a builder consumed it. */
typedef struct {
    const char *full;
    uint32_t nfull;
    const char *p[16];
    uint8_t n[16];
    uint8_t used[16];
    int cnt;
} px_mods;

/* ptx_translate.c */
void px_parse_operand(ps *s, opnd *o);
/* Consumes modifier w (1), or 0 when absent; the first unused type (T_NONE). */
int px_take(px_mods *m, const char *w);
int px_take_type(px_mods *m);
/* 0 when every modifier was consumed, else the instruction is refused by name. */
int px_finish(ps *s, const px_mods *m);
int px_unsupported(ps *s, const px_mods *m);
/* Operand O as a source register of type T, a destination register or
 * predicate (or the sink), and instruction I's address fields from [A]. */
uint32_t px_src(ps *s, const opnd *o, int t);
uint32_t px_dst(ps *s, const opnd *o);
uint32_t px_pdst(ps *s, const opnd *o);
void px_set_addr(ps *s, ptx_insn *i, const opnd *a);

/* ptx_translate_async.c: mbarrier.* and (CP_ASYNC) cp.async.mbarrier.arrive,
 * their N operands O parsed. */
int px_mbarrier(ps *s, px_mods *m, opnd *o, int n, uint32_t guard, int cp_async);

/* ptx_translate_tex.c: tex, tld4, txq, suld, sust, suq (their operands
 * follow: the mnemonic token was consumed). */
int px_is_texture(const char *opcode);
int px_texture(ps *s, px_mods *m, uint32_t guard);
/* ptx_translate_wmma.c: wmma.load, wmma.store, wmma.mma (the mnemonic was
 * consumed; the operands follow). */
int px_wmma(ps *s, px_mods *m, uint32_t guard);
/* ptx_translate_video.c: the SIMD video instructions (vadd2 ... vset4; their
 * operands follow: the mnemonic token was consumed). */
int px_is_video(const char *opcode);
int px_video(ps *s, px_mods *m, uint32_t guard);
/* Translates the instruction at s->t (its guard already read): 0 or -1. */
int px_instruction(ps *s, uint32_t guard);

#endif /* GLEAM_PTX_PARSE_H */
