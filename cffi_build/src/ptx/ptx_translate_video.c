/*
 * ptx_translate_video.c — the SIMD video instructions to compact code
 * (encoding in ptx_video.h):
 *   vop2.dtype.atype.btype{.sat}  d{.mask}, a{.asel}, b{.bsel}, c;
 *   vop2.dtype.atype.btype.add    d{.mask}, a{.asel}, b{.bsel}, c;
 *   vset2.atype.btype.cmp{.add}   d{.mask}, a{.asel}, b{.bsel}, c;
 * and the same with 4 (vop = vadd vsub vavrg vabsdiff vmin vmax; types .u32
 * or .s32; .cmp = eq ne lt le gt ge). Selectors and masks are suffixes of the
 * register operands (%r1.b3210, %r2.h10), so these have their own operand
 * reader. Defaults, as the PTX ISA gives them: mask all elements, asel
 * .h10/.b3210 (a's own elements), bsel .h32/.b7654 (b's own elements).
 * Refused by name: .sat with .add (the ISA forbids it), selectors and masks
 * outside the ISA's lists. The scalar video instructions (vadd, vshl, vmad,
 * vset ...) are not implemented: nvcc emits none from CUDA's intrinsics,
 * and they are refused as unknown opcodes.
 * No state; the parse state is the caller's.
 */
#include <string.h>

#include "ptx_parse.h"
#include "ptx_video.h"

static const char *const vops[] = {"vadd", "vsub", "vavrg", "vabsdiff", "vmin", "vmax", "vset"};

/* The operation of OPCODE and its width (2 or 4), or -1. */
static int video_op(const char *opcode, int *four)
{
    size_t n = strlen(opcode);
    if (n < 5 || (opcode[n - 1] != '2' && opcode[n - 1] != '4'))
        return -1;
    for (int k = 0; k < (int)(sizeof vops / sizeof vops[0]); k++)
        if (strlen(vops[k]) == n - 1 && !memcmp(opcode, vops[k], n - 1)) {
            *four = opcode[n - 1] == '4';
            return k;
        }
    return -1;
}

int px_is_video(const char *opcode)
{
    int four;
    return video_op(opcode, &four) >= 0;
}

/* A register operand with an optional suffix (.b3210, .h10 ...): the
 * register, and the suffix without its dot (length 0 when none); an integer
 * immediate becomes a constant with no suffix. 0, or -1 after px_fail. */
static int operand(ps *s, uint32_t *reg, const char **sfx, uint32_t *nsfx)
{
    *sfx = NULL;
    *nsfx = 0;
    if (s->t.kind != K_ID) {
        opnd o;
        px_parse_operand(s, &o);
        if (s->failed)
            return -1;
        if (o.kind != O_INT) {
            px_fail(s, "a video instruction's operand is a register or an integer");
            return -1;
        }
        *reg = px_cst(s, (uint32_t)o.u, 0, 0);
        return 0;
    }
    tok t = s->t;
    uint32_t name = 1; /* register names have no dot; a suffix starts at one */
    while (name < t.n && t.s[name] != '.')
        name++;
    psym *y = px_find(s, t.s, name);
    if (y == NULL || y->kind != S_REG) {
        px_fail(s, "'%.*s' is not a register", (int)(name > 40 ? 40 : name), t.s);
        return -1;
    }
    *reg = y->idx;
    if (name < t.n) {
        *sfx = t.s + name + 1;
        *nsfx = t.n - name - 1;
    }
    px_next(s);
    return 0;
}

/* A selector: 'h' or 'b' and one digit per element, element n-1 first, each
 * below LIMIT; packed 3 bits per element, element 0 lowest. -1: malformed. */
static int64_t selector(const char *p, uint32_t n, int four)
{
    unsigned elems = four ? 4 : 2, limit = four ? 8 : 4;
    if (n != elems + 1 || p[0] != (four ? 'b' : 'h'))
        return -1;
    uint32_t v = 0;
    for (unsigned k = 0; k < elems; k++) {
        unsigned digit = (unsigned)(p[1 + k] - '0');
        if (digit >= limit)
            return -1;
        v |= digit << (PTX_VSEL_BITS * (elems - 1 - k));
    }
    return v;
}

/* A mask: 'h' or 'b' and the elements it names in strictly falling order
 * (.b3210, .b31, .h1 ...). Its bits, or -1. */
static int mask_bits(const char *p, uint32_t n, int four)
{
    unsigned elems = four ? 4 : 2;
    if (n < 2 || n > elems + 1 || p[0] != (four ? 'b' : 'h'))
        return -1;
    int bits = 0;
    unsigned last = elems;
    for (uint32_t k = 1; k < n; k++) {
        unsigned e = (unsigned)(p[k] - '0');
        if (e >= last)
            return -1;
        bits |= 1 << e;
        last = e;
    }
    return bits;
}

static int is_int32(int t) { return t == T_U32 || t == T_S32; }

int px_video(ps *s, px_mods *m, uint32_t guard)
{
    char opcode[16];
    size_t on = m->n[0] < sizeof opcode - 1 ? m->n[0] : sizeof opcode - 1;
    memcpy(opcode, m->p[0], on);
    opcode[on] = 0;
    m->used[0] = 1;
    int four = 0, op = video_op(opcode, &four);
    int is_set = op == 6;
    int td = is_set ? T_U32 : px_take_type(m), ta = px_take_type(m), tb = px_take_type(m);
    if (is_set) {
        static const char *const cmps[] = {"eq", "ne", "lt", "le", "gt", "ge"};
        op = -1;
        for (int k = 0; k < 6 && op < 0; k++)
            if (px_take(m, cmps[k]))
                op = PTX_V_SET_EQ + k;
    }
    int sat = px_take(m, "sat"), add = px_take(m, "add");
    if (op < 0 || !is_int32(td) || !is_int32(ta) || !is_int32(tb) || (sat && add)
        || (is_set && sat) || px_finish(s, m) != 0)
        return px_unsupported(s, m);
    uint32_t reg[4];
    const char *sfx[4];
    uint32_t nsfx[4];
    for (int k = 0; k < 4; k++) {
        if (operand(s, &reg[k], &sfx[k], &nsfx[k]) != 0)
            return -1;
        if (k < 3 && !px_is_p(s, ',')) {
            px_fail(s, "'%s' takes 4 operands", opcode);
            return -1;
        }
        if (k < 3)
            px_next(s);
    }
    px_expect(s, ';');
    if (s->failed)
        return -1;
    if (reg[0] < PTX_NSREG) {
        px_fail(s, "expected a destination register");
        return -1;
    }
    int mask = nsfx[0] ? mask_bits(sfx[0], nsfx[0], four) : (four ? 0xf : 0x3);
    int64_t asel = nsfx[1] ? selector(sfx[1], nsfx[1], four) : four ? 03210 : 010;
    int64_t bsel = nsfx[2] ? selector(sfx[2], nsfx[2], four) : four ? 07654 : 032;
    if (mask < 0 || asel < 0 || bsel < 0 || nsfx[3] != 0) {
        px_fail(s, "'%s': a mask or selector outside the PTX ISA's", opcode);
        return -1;
    }
    ptx_insn *i = px_emit(s, PTX_OP_vsimd, guard);
    if (i == NULL)
        return -1;
    i->mode = (uint8_t)op;
    i->mode2 = (uint16_t)((four ? PTX_VF_FOUR : 0) | (ta == T_S32 ? PTX_VF_ASIGNED : 0)
                          | (tb == T_S32 ? PTX_VF_BSIGNED : 0) | (td == T_S32 ? PTX_VF_DSIGNED : 0)
                          | (sat ? PTX_VF_SAT : 0) | (add ? PTX_VF_ADD : 0));
    i->aux = (uint32_t)asel | (uint32_t)bsel << PTX_VSEL_B_SHIFT;
    i->imm = mask;
    SD(i, 0, reg[0]);
    for (int k = 0; k < 3; k++)
        SS(i, k, reg[k + 1]);
    return 0;
}
