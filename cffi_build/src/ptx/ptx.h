/*
 * ptx.h — gleam's PTX interpreter: the public face. A PTX module is parsed
 * and translated once (ptx_module_load) into kernels in a compact,
 * pre-resolved form; ptx_launch runs one kernel warp-wide over a grid, blocks
 * spread across worker threads, every memory access checked.
 *
 * Ownership: a ptx_module owns its kernels and the storage of its .global /
 * .const variables; everything it hands out lives until ptx_module_free.
 * Thread-safety: a loaded module is immutable, so any number of launches may
 * run it at once; ptx_module_load/free have no shared state. The library
 * keeps no global state besides read-only tables.
 */
#ifndef GLEAM_PTX_H
#define GLEAM_PTX_H

#include <stddef.h>
#include <stdint.h>

#include "ptx_tex.h"
#include "mem/ranges.h"

/* cdef: begin */
typedef struct ptx_module ptx_module;
/* cdef: end */
typedef struct ptx_kernel ptx_kernel;

/* Input bounds: anything larger is refused with a message. */
#define PTX_MAX_TEXT (64u << 20)   /* bytes of PTX text */
#define PTX_MAX_CODE (1u << 22)    /* instructions of one kernel after inlining */
/* Registers of one kernel after inlining: virtual registers, as PTX declares
 * them (NVVM's are single-assignment: cuda-samples' tensor-core GEMM declares
 * 35,000), each a slot per lane; what a block's slots take is bounded at launch. */
#define PTX_MAX_REGS (1u << 18)
#define PTX_MAX_REGFILE (256ull << 20) /* bytes of one block's register slots */
#define PTX_MAX_REGFILES (1ull << 30)  /* ... of all the launch's workers' together */
#define PTX_MAX_CALL_DEPTH 32      /* nested .func calls (inlined) */
#define PTX_MAX_PARAMS 64          /* parameters of an entry or a function */
#define PTX_MAX_PARAM_BYTES 32764u /* a kernel's parameters: CUDA 12.1's limit on Volta and later */
#define PTX_MAX_LOCAL (1u << 20)   /* local bytes per thread */
#define PTX_MAX_SHARED (1u << 20)  /* static + dynamic shared bytes per block */
/* A managed module variable (.attribute(.managed)) lies alone in pages of this
 * size, in a module storage mapped in the band (vaband.h), so the program can
 * map its own view of exactly it at the same address (docs/cuda-forwarding.md,
 * "Managed variables"); the interposer rounds the same way. */
#define PTX_MANAGED_ALIGN (64u << 10)

/* Results of ptx_launch: CUresult values. */
enum {
    PTX_OK = 0,
    PTX_E_INVALID_VALUE = 1,
    PTX_E_OUT_OF_MEMORY = 2,
    PTX_E_ILLEGAL_ADDRESS = 700,
    PTX_E_OUT_OF_RESOURCES = 701, /* a launch that did not start: the context stays */
    PTX_E_LAUNCH_TIMEOUT = 702,
    PTX_E_ASSERT = 710,
    PTX_E_MISALIGNED = 716,
    PTX_E_LAUNCH_FAILED = 719
};

/* Parses and translates TEXT (LEN bytes, a trailing NUL allowed). 0 and *out,
 * or -1 and a one-line message "line N: what" in err. */
int ptx_module_load(const char *text, size_t len, ptx_module **out, char *err, size_t err_len);

/* One input of a link: PTX text and the name messages give it. */
typedef struct {
    const char *text;
    size_t len;
    const char *name;
} ptx_source;
#define PTX_MAX_SOURCES 256u

/* Parses N inputs and links them into one module (PTX ISA linking rules:
 * .extern names resolve against .visible, .weak and .common definitions of
 * any input, ptx_linkage.c). 0 and *out, or -1 and a message that names the
 * input ("input 'x.ptx' line N: what") when N > 1. */
int ptx_module_link(const ptx_source *src, size_t n, ptx_module **out, char *err,
                    size_t err_len);

/* What the host device links in place of libcudadevrt: cooperative groups'
 * entry points, in PTX (ptx_cudadevrt.c). */
ptx_source ptx_cudadevrt_source(void);
void ptx_module_free(ptx_module *m);

/* Kernel entries by name (NULL: none). */
const ptx_kernel *ptx_module_kernel(const ptx_module *m, const char *name);
size_t ptx_module_nkernels(const ptx_module *m);
const char *ptx_module_kernel_name(const ptx_module *m, size_t i);
/* A module-scope .global/.const variable: 0 and its host address and size. */
int ptx_module_global(const ptx_module *m, const char *name, void **addr, size_t *size);
/* The one block holding every module variable (base NULL, size 0 if none). */
void ptx_module_storage(const ptx_module *m, void **base, size_t *size);
/* The architecture of the module's .target (sm_100: 100), 0 when it names none. */
unsigned ptx_module_target(const ptx_module *m);

typedef struct {
    uint32_t nparams, params_size;
    const uint32_t *param_offsets, *param_sizes;
    uint32_t static_shared; /* bytes: the module's .shared variables and the kernel's own */
    uint32_t dyn_base;      /* where dynamic shared memory starts (static, aligned) */
    uint32_t local_size;    /* bytes per thread (frames of inlined calls included) */
    uint32_t nregs;         /* registers of the translated form */
    uint32_t ninsns;
    uint32_t max_threads;   /* launch bounds: .maxntid or .reqntid threads; 0: none */
    uint32_t maxnreg;       /* .maxnreg; 0: none */
    uint64_t const_size;    /* the module's .const bytes, which every kernel can read */
    uint32_t devrt_uses;    /* the device runtime's built-ins it calls (1 << PTX_BI_*) */
} ptx_kernel_info;
void ptx_kernel_get_info(const ptx_kernel *k, ptx_kernel_info *out);
/* The most registers the kernel holds live at once, an estimate (ptx_regs.c):
 * what CU_FUNC_ATTRIBUTE_NUM_REGS reports. Computed on each call. */
uint32_t ptx_kernel_live_registers(const ptx_kernel *k);

typedef struct {
    unsigned grid[3], block[3];
    unsigned dynamic_shared;
    const void *params; /* the kernel's parameter buffer, params_len bytes */
    size_t params_len;
    /* Memory a generic/global access may touch besides the block's shared
     * and local windows and the module's own variables: sorted,
     * non-overlapping (allocs) and an unsorted list (extra); either NULL. */
    const gl_ranges *allocs;
    const gl_ranges *extra;
    /* Texture and surface objects (ptx_tex.h): NULL resolves none. */
    ptx_texture_fn texture;
    void *texture_ctx;
    struct ptx_devrt *rt; /* printf, assert, the heap (ptx_devrt.h); NULL: none */
    double timeout_s;  /* <= 0: GLEAM_PTX_TIMEOUT_S or 60 s */
    int cooperative;   /* every block resident at once, with a grid barrier's workspace */
    unsigned threads;  /* workers; 0: GLEAM_PTX_THREADS or the CPU count */
    int tier;          /* PTX_TIER_* (ptxc_tier.h): 0 the compile tier's own rule */
    /* A child grid's place (ptx_cdp.h): its launch tree and level; NULL
     * and 0 for a grid the host launched. */
    struct ptx_cdp_tree *cdp_tree;
    unsigned cdp_depth;
    /* out */
    uint64_t insns;    /* thread-instructions executed (active lanes) */
    int ran;           /* PTX_RAN_* bits: the tiers its blocks ran on */
    char *err;         /* a message on failure, when non-NULL */
    size_t err_len;
} ptx_launch_args;

/* Runs the grid to completion, and the grids it launched (ptx_cdp.h);
 * PTX_OK or a PTX_E_* (a CUresult). */
int ptx_launch(const ptx_module *m, const ptx_kernel *k, ptx_launch_args *a);

/* ---- entry points for Python (in the cdef: cffi_build/cdef.py) ---- */

/* cdef: begin */
/* Parses and translates only: 0, or -1 with a message (fuzzing, `check`). */
int gl_ptx_check(const char *text, size_t len, char *err, size_t err_len);
/* Links N texts (lens[k] bytes each; devrt: with the host device's stand-in
 * for libcudadevrt last): the module, or NULL with a message. */
ptx_module *gl_ptx_link_load(const char *const *texts, const size_t *lens, size_t n, int devrt,
                             char *err, size_t err_len);
/* Load once, run on caller-owned host buffers (benchmarks): the buffers the
 * kernel may touch are given as (base, size) pairs, sorted by base. */
ptx_module *gl_ptx_load(const char *text, size_t len, char *err, size_t err_len);
void gl_ptx_unload(ptx_module *m);
int gl_ptx_run(ptx_module *m, const char *entry, const unsigned *grid3, const unsigned *block3,
               unsigned dynamic_shared, const void *params, size_t params_len,
               const uint64_t *ranges, size_t nranges, unsigned threads, uint64_t *insns,
               char *err, size_t err_len);
/* The same on one tier: 0 the compile tier's rule, 1 the interpreter, 2
 * compiled code (compiled first; *ran says which tiers ran: 1 interpreter,
 * 2 compiled, so a kernel the tier cannot compile shows 1). */
int gl_ptx_run_tier(ptx_module *m, const char *entry, const unsigned *grid3,
                    const unsigned *block3, unsigned dynamic_shared, const void *params,
                    size_t params_len, const uint64_t *ranges, size_t nranges, unsigned threads,
                    int tier, int *ran, uint64_t *insns, char *err, size_t err_len);
/* A module variable's host address and size: 0, or -1 when it has none. */
int gl_ptx_global(ptx_module *m, const char *name, uint64_t *addr, uint64_t *size);
/* The C the compile tier writes for a kernel: 0 and its length in *len (the
 * text when it fits in out), or -1 and why it stays interpreted. */
int gl_ptx_kernel_c(ptx_module *m, const char *entry, char *out, size_t cap, size_t *len,
                    char *why, size_t why_len);
/* The compile tier's counters since the process started. */
typedef struct {
    uint64_t compiled;   /* kernels compiled by the C compiler */
    uint64_t cache_hits; /* kernels loaded from the cache */
    uint64_t failed;     /* kernels that stay interpreted: not compilable, or the compile failed */
    uint64_t blocks_compiled, blocks_interpreted;
} gl_ptx_tier_stats;
void gl_ptx_tier_get_stats(gl_ptx_tier_stats *out);
/* The same for a cooperative grid: every block resident at once. */
int gl_ptx_run_cooperative(ptx_module *m, const char *entry, const unsigned *grid3,
                           const unsigned *block3, unsigned dynamic_shared, const void *params,
                           size_t params_len, const uint64_t *ranges, size_t nranges,
                           unsigned threads, uint64_t *insns, char *err, size_t err_len);
/* cdef: end */

#endif /* GLEAM_PTX_H */
