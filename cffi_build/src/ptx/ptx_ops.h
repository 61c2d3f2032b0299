/*
 * ptx_ops.h — the one table of the interpreter's opcodes. Each X(name) is a
 * handler h_name in ptx_exec.c, run over the active lanes of a warp; the
 * translator (ptx_parse.c) picks a family's member by type index:
 *   INT6: s16 u16 s32 u32 s64 u64      (PTX_I_*)
 *   INT4: s16 u16 s32 u32              (the sources of .wide)
 *   INT32_64: s32 u32 s64 u64
 *   FLT2: f32 f64
 * No state; included by ptx_int.h (the enum) and ptx_exec.c (the handlers).
 */
#ifndef GLEAM_PTX_OPS_H
#define GLEAM_PTX_OPS_H

#define PTX_INT6(X, n) X(n##_s16) X(n##_u16) X(n##_s32) X(n##_u32) X(n##_s64) X(n##_u64)
#define PTX_INT4(X, n) X(n##_s16) X(n##_u16) X(n##_s32) X(n##_u32)
#define PTX_INT32_64(X, n) X(n##_s32) X(n##_u32) X(n##_s64) X(n##_u64)
#define PTX_FLT2(X, n) X(n##_f32) X(n##_f64)

/* Integer comparisons, then the float ones (the unordered forms and num/nan
 * exist for floats only); the order is the parser's PTX_CMP_* order. */
#define PTX_ICMPS(X, T) X(setp_eq_##T) X(setp_ne_##T) X(setp_lt_##T) X(setp_le_##T) \
    X(setp_gt_##T) X(setp_ge_##T)
#define PTX_FCMPS(X, T) PTX_ICMPS(X, T) X(setp_equ_##T) X(setp_neu_##T) X(setp_ltu_##T) \
    X(setp_leu_##T) X(setp_gtu_##T) X(setp_geu_##T) X(setp_num_##T) X(setp_nan_##T)

#define PTX_OPS(X)                                                                            \
    /* no-op and control placeholders (the dispatch loop runs control itself) */               \
    X(nop) X(ctl)                                                                             \
    /* integer arithmetic */                                                                  \
    PTX_INT6(X, add) PTX_INT6(X, sub) PTX_INT6(X, mullo) PTX_INT6(X, mulhi)                   \
    PTX_INT6(X, mad) PTX_INT6(X, madhi) PTX_INT6(X, div) PTX_INT6(X, rem)                     \
    PTX_INT6(X, min) PTX_INT6(X, max) PTX_INT6(X, neg) PTX_INT6(X, abs)                       \
    PTX_INT4(X, mulwide) PTX_INT4(X, madwide)                                                 \
    X(mul24_s32) X(mul24_u32) X(mad24_s32) X(mad24_u32) X(sad_s32) X(sad_u32)                 \
    X(add_sat_s32) X(sub_sat_s32) X(carry) X(minmax16x2)                                             \
    /* bits */                                                                                \
    PTX_INT6(X, and) PTX_INT6(X, or) PTX_INT6(X, xor) PTX_INT6(X, not) PTX_INT6(X, cnot)      \
    PTX_INT6(X, shl) PTX_INT6(X, shr) PTX_INT6(X, popc) PTX_INT6(X, clz) PTX_INT6(X, brev)    \
    PTX_INT32_64(X, bfe) PTX_INT32_64(X, bfi) PTX_INT32_64(X, bfind)                          \
    X(prmt) X(lop3_32) X(lop3_64) X(shf_l_wrap) X(shf_l_clamp) X(shf_r_wrap) X(shf_r_clamp)   \
    X(dp4a) X(dp2a)                                                                           \
    X(vsimd) /* the SIMD video instructions (ptx_video.c) */                                  \
    X(bmsk_wrap) X(bmsk_clamp)                                                                \
    /* floating point */                                                                      \
    PTX_FLT2(X, fadd) PTX_FLT2(X, fsub) PTX_FLT2(X, fmul) PTX_FLT2(X, ffma) PTX_FLT2(X, fdiv)  \
    PTX_FLT2(X, fmin) PTX_FLT2(X, fmax) PTX_FLT2(X, fneg) PTX_FLT2(X, fabs)                   \
    PTX_FLT2(X, fsqrt) PTX_FLT2(X, frcp) PTX_FLT2(X, frsqrt) PTX_FLT2(X, fcopysign)           \
    PTX_FLT2(X, ftestp)                                                                       \
    X(fsin_f32) X(fcos_f32) X(fex2_f32) X(flg2_f32) X(ftanh_f32) X(fex2_f64) X(flg2_f64)      \
    X(hadd) X(hsub) X(hmul) X(hfma) X(hneg) X(habs) X(hmin) X(hmax)                           \
    /* comparisons, selection, predicates */                                                  \
    PTX_ICMPS(X, s16) PTX_ICMPS(X, u16) PTX_ICMPS(X, s32) PTX_ICMPS(X, u32)                   \
    PTX_ICMPS(X, s64) PTX_ICMPS(X, u64) PTX_FCMPS(X, f32) PTX_FCMPS(X, f64)                   \
    X(hsetp)                                                                                  \
    X(selp) X(pand) X(por) X(pxor) X(pnot) X(pmov)                              \
    /* moves and conversions */                                                               \
    X(mov) X(pack2_32) X(pack2_16) X(pack4_16) X(unpack2_32) X(unpack2_16) X(unpack4_16)      \
    X(cvt) X(cvt_ext) X(clock) X(clock64) X(globaltimer)                                      \
    X(cvta_shared) X(cvta_to_shared) X(cvta_local) X(cvta_to_local) X(isspacep)               \
    /* memory: generic/global/const (g), shared (s), local (l), kernel param (p) */           \
    X(ld_g1) X(ld_g2) X(ld_g4) X(ld_g8) X(st_g1) X(st_g2) X(st_g4) X(st_g8)                  \
    X(ld_s1) X(ld_s2) X(ld_s4) X(ld_s8) X(st_s1) X(st_s2) X(st_s4) X(st_s8)                  \
    X(ld_l1) X(ld_l2) X(ld_l4) X(ld_l8) X(st_l1) X(st_l2) X(st_l4) X(st_l8)                  \
    X(ld_p1) X(ld_p2) X(ld_p4) X(ld_p8)                                                       \
    X(atom_g) X(atom_s) X(fence) X(cpasync)                                                              \
    /* warp-wide */                                                                           \
    X(shfl) X(redux) X(vote_all) X(vote_any) X(vote_uni) X(vote_ballot) X(activemask) X(match_any)     \
    X(match_all) X(warpsync)                                                                  \
    /* textures and surfaces (handlers in ptx_exec_tex.c) */                                  \
    X(tex) X(tld4) X(txq) X(suq) X(suld) X(sust)                                              \
    /* a call of the device runtime (printf, assert, malloc, free: ptx_builtin.c) */          \
    X(devcall)                                                                                \
    /* warp-level matrix instructions and cvt to tf32 (ptx_exec_wmma.c, ptx_wmma.h) */       \
    X(wmma_load) X(wmma_store) X(wmma_mma) X(cvt_tf32)                                        \
    /* asynchronous barriers: mbarrier.*, cp.async.mbarrier.arrive (ptx_mbarrier.c) */        \
    X(mbar_init) X(mbar_inval) X(mbar_arrive) X(mbar_tx) X(mbar_wait) X(mbar_pending)

#define PTX_OP_ENUM(n) PTX_OP_##n,
enum { PTX_OPS(PTX_OP_ENUM) PTX_NOPS };
#undef PTX_OP_ENUM

#endif /* GLEAM_PTX_OPS_H */
