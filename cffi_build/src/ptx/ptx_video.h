/*
 * ptx_video.h — the encoding of the SIMD video instructions (PTX ISA
 * "SIMD Video Instructions": vadd2/4, vsub2/4, vavrg2/4, vabsdiff2/4,
 * vmin2/4, vmax2/4, vset2/4), shared by their translator
 * (ptx_translate_video.c) and their handler (ptx_video.c).
 *
 * One opcode, PTX_OP_vsimd; s[0..2] are a, b, c, d[0] is d;
 *   mode   the operation (PTX_V_*);
 *   mode2  PTX_VF_* flags;
 *   aux    asel in bits 0-11 and bsel in bits 12-23: one 3-bit selector per
 *          element, element 0 lowest; a 2-way selector names a half-word
 *          (0-1 of a, 2-3 of b), a 4-way one a byte (0-3 of a, 4-7 of b);
 *   imm    the mask: bit i set when element i of d takes the result.
 * No state.
 */
#ifndef GLEAM_PTX_VIDEO_H
#define GLEAM_PTX_VIDEO_H

/* The arithmetic operations, then vset's comparisons in .cmp's order. */
enum { PTX_V_ADD, PTX_V_SUB, PTX_V_AVRG, PTX_V_ABSDIFF, PTX_V_MIN, PTX_V_MAX, PTX_V_SET_EQ,
       PTX_V_SET_NE, PTX_V_SET_LT, PTX_V_SET_LE, PTX_V_SET_GT, PTX_V_SET_GE };

enum {
    PTX_VF_FOUR = 1,     /* four byte elements (else two half-words) */
    PTX_VF_ASIGNED = 2,  /* .atype .s32: a's elements are sign-extended */
    PTX_VF_BSIGNED = 4,  /* .btype .s32 */
    PTX_VF_DSIGNED = 8,  /* .dtype .s32: .sat clamps to the signed range */
    PTX_VF_SAT = 16,     /* clamp each result to its element's range */
    PTX_VF_ADD = 32      /* secondary accumulate: d = c + the masked results */
};

#define PTX_VSEL_BITS 3u
#define PTX_VSEL_B_SHIFT 12u

#endif /* GLEAM_PTX_VIDEO_H */
