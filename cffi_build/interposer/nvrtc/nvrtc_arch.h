/*
 * nvrtc_arch.h — which real architecture an NVRTC compile names, and the same
 * options naming its virtual architecture instead (nvrtc_arch.c).
 */
#ifndef GLEAM_NVRTC_ARCH_H
#define GLEAM_NVRTC_ARCH_H

/* A compile's options with every real architecture (sm_XX) made virtual
 * (compute_XX). opts has n entries: the caller's own strings where unchanged,
 * copies this owns where rewritten (owned[i] != NULL). */
typedef struct {
    const char **opts;
    char **owned;
    int n;
    int rewritten; /* how many architecture values became virtual; 0: opts are the caller's */
} gl_nvrtc_options;

/* Fills o from the caller's n options. Nothing is rewritten (rewritten == 0)
 * when no option names a real architecture, or when the compile makes LTO IR
 * (-dlto), which a virtual architecture would change. Returns 0, or -1 when
 * out of memory (o is then empty). */
int gl_nvrtc_options_make(gl_nvrtc_options *o, int n, const char *const *in);

/* Frees what gl_nvrtc_options_make allocated; the caller's strings stay. */
void gl_nvrtc_options_free(gl_nvrtc_options *o);

#endif
