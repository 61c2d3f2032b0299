/*
 * ptx_wmma.h — the warp-level matrix instructions (PTX ISA "Warp Level
 * Matrix Multiply-Accumulate Instructions": wmma.load, wmma.store, wmma.mma),
 * shared by their translator (ptx_translate_wmma.c) and their handlers
 * (ptx_exec_wmma.c). No state.
 *
 * Encoding. wmma.load / wmma.store: mode = fragment kind (PTX_WM_*) | row or
 * column layout (PTX_WM_COL) | shared space (PTX_WM_SHARED); mode2 = the
 * element type (PTX_WT_*); aux = the shape (PTX_WS_*); ab + imm the address;
 * s[0] the stride's register (a constant holding the default stride when the
 * instruction has none). The fragment's registers follow in one or two
 * PTX_OP_nop carriers, four per carrier: d[] for a load, s[] for a store.
 * wmma.mma: mode = the type of A and B, mode2 = C's type | D's type << 4 |
 * PTX_WM_SATFINITE | PTX_WM_A_COL | PTX_WM_B_COL, aux = the shape; six carriers follow: d[] D0-3, s[] A0-3;
 * d[] D4-7, s[] A4-7; s[] B0-3; s[] B4-7; s[] C0-3; s[] C4-7. Nothing branches
 * into a carrier, and the linker renumbers their fields as any instruction's
 * (the texture instructions carry their extra operands the same way).
 */
#ifndef GLEAM_PTX_WMMA_H
#define GLEAM_PTX_WMMA_H

#include <stdint.h>

enum { PTX_WM_A, PTX_WM_B, PTX_WM_C };
#define PTX_WM_KIND 3u
#define PTX_WM_COL 4u
#define PTX_WM_SHARED 8u
#define PTX_WM_SATFINITE 0x100u
#define PTX_WM_A_COL 0x200u /* wmma.mma: A, B in column layout */
#define PTX_WM_B_COL 0x400u

/* Element types: the multiplicands' (f16 bf16 tf32 u8 s8 f64) and the
 * accumulators' (f16 f32 s32 f64). */
enum { PTX_WT_F16, PTX_WT_BF16, PTX_WT_TF32, PTX_WT_U8, PTX_WT_S8, PTX_WT_F32, PTX_WT_S32,
       PTX_WT_F64 };
enum { PTX_WS_M16N16K16, PTX_WS_M16N16K8, PTX_WS_M8N8K4 };

#define PTX_WMMA_MAX_REGS 8u
#define PTX_WMMA_MMA_CARRIERS 6u

/* A fragment: the logical matrix (rows x cols: A is M x K, B K x N, C and D
 * M x N), its registers per lane, the elements each register packs, and an
 * element's bytes in memory. */
typedef struct {
    uint8_t rows, cols, nregs, per_reg, esize;
} ptx_wmma_frag;

/* The fragment of KIND with element type TYPE in SHAPE; 0, or -1 when PTX has
 * no such fragment. */
static inline int ptx_wmma_frag_of(int shape, int kind, int type, ptx_wmma_frag *f)
{
    static const uint8_t mnk[3][3] = {{16, 16, 16}, {16, 16, 8}, {8, 8, 4}};
    if (shape < 0 || shape > PTX_WS_M8N8K4 || kind < 0 || kind > PTX_WM_C)
        return -1;
    const uint8_t *d = mnk[shape];
    f->rows = kind == PTX_WM_B ? d[2] : d[0];
    f->cols = kind == PTX_WM_A ? d[2] : d[1];
    int acc = kind == PTX_WM_C;
    switch (shape) {
    case PTX_WS_M16N16K16:
        if (acc && (type == PTX_WT_F32 || type == PTX_WT_S32))
            *f = (ptx_wmma_frag){f->rows, f->cols, 8, 1, 4};
        else if (acc && type == PTX_WT_F16)
            *f = (ptx_wmma_frag){f->rows, f->cols, 4, 2, 2};
        else if (!acc && type == PTX_WT_F16) /* each element twice (Volta's fragments) */
            *f = (ptx_wmma_frag){f->rows, f->cols, 8, 2, 2};
        else if (!acc && type == PTX_WT_BF16)
            *f = (ptx_wmma_frag){f->rows, f->cols, 4, 2, 2};
        else if (!acc && (type == PTX_WT_U8 || type == PTX_WT_S8))
            *f = (ptx_wmma_frag){f->rows, f->cols, 2, 4, 1};
        else
            return -1;
        return 0;
    case PTX_WS_M16N16K8:
        if ((acc && type == PTX_WT_F32) || (!acc && type == PTX_WT_TF32))
            *f = (ptx_wmma_frag){f->rows, f->cols, acc ? 8 : 4, 1, 4};
        else
            return -1;
        return 0;
    default:
        if (type != PTX_WT_F64)
            return -1;
        *f = (ptx_wmma_frag){f->rows, f->cols, acc ? 2 : 1, 1, 8};
        return 0;
    }
}

struct ptx_warp;
struct ptx_insn;
int ptx_h_wmma_load(struct ptx_warp *w, const struct ptx_insn *i, uint32_t m);
int ptx_h_wmma_store(struct ptx_warp *w, const struct ptx_insn *i, uint32_t m);
int ptx_h_wmma_mma(struct ptx_warp *w, const struct ptx_insn *i, uint32_t m);
int ptx_h_cvt_tf32(struct ptx_warp *w, const struct ptx_insn *i, uint32_t m);

#endif /* GLEAM_PTX_WMMA_H */
