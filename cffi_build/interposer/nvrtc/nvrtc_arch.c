/*
 * nvrtc_arch.c — the option rewrite of libgleam_nvrtc.so (nvrtc_ptx.c): an
 * NVRTC compile for a real architecture becomes one for the matching virtual
 * architecture, so that NVRTC makes PTX only.
 *
 * NVRTC takes the architecture as --gpu-architecture=V or -arch=V, or as the
 * option name followed by V in the next element ("-arch", "sm_75"); the last
 * one given wins (NVRTC warns about the earlier ones). V of the form sm_N[a|f]
 * is a real architecture; compute_N[a|f] is its virtual one, and every other
 * value (compute_XX already, or one NVRTC refuses) is left as it is.
 *
 * Ownership: gl_nvrtc_options owns its arrays and the rewritten strings; it
 * borrows the caller's strings. No global state.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "nvrtc_arch.h"

static const char *const ARCH_NAMES[] = {"--gpu-architecture", "-arch"};
static const char *const LTO_OPTIONS[] = {"-dlto", "--dlink-time-opt"};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* A real architecture's name: sm_, a digit, then anything NVRTC will judge. */
static int is_real_arch(const char *value)
{
    return strncmp(value, "sm_", 3) == 0 && isdigit((unsigned char)value[3]);
}

/* The architecture option's name that opt is (1: alone, its value follows),
 * or that opt starts with followed by '=' (2: the value is after it). */
static int arch_option(const char *opt, size_t *name_len)
{
    for (size_t k = 0; k < COUNT(ARCH_NAMES); k++) {
        size_t len = strlen(ARCH_NAMES[k]);
        if (strncmp(opt, ARCH_NAMES[k], len) != 0)
            continue;
        *name_len = len;
        if (opt[len] == '\0')
            return 1;
        if (opt[len] == '=')
            return 2;
    }
    return 0;
}

static int makes_lto_ir(int n, const char *const *in)
{
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < COUNT(LTO_OPTIONS); k++)
            if (in[i] != NULL && strcmp(in[i], LTO_OPTIONS[k]) == 0)
                return 1;
    return 0;
}

/* prefix followed by "compute_" and what followed "sm_" in value. */
static char *virtual_of(const char *prefix, size_t prefix_len, const char *value)
{
    size_t rest = strlen(value + 3);
    char *s = malloc(prefix_len + 8 + rest + 1);
    if (s == NULL)
        return NULL;
    memcpy(s, prefix, prefix_len);
    memcpy(s + prefix_len, "compute_", 8);
    memcpy(s + prefix_len + 8, value + 3, rest + 1);
    return s;
}

/* Makes in[i]'s architecture (or, for the option alone, in[i + 1]'s) virtual
 * where it is real. Returns 0, or -1 when out of memory. */
static int rewrite_at(gl_nvrtc_options *o, int i, const char *const *in)
{
    size_t name_len = 0;
    int form = arch_option(in[i], &name_len);
    int at = form == 1 ? i + 1 : i;
    const char *value = form == 1 ? (at < o->n ? in[at] : NULL) : in[i] + name_len + 1;

    if (form == 0 || value == NULL || !is_real_arch(value))
        return 0;
    o->owned[at] = form == 1 ? virtual_of("", 0, value) : virtual_of(in[i], name_len + 1, value);
    if (o->owned[at] == NULL)
        return -1;
    o->opts[at] = o->owned[at];
    o->rewritten++;
    return 0;
}

int gl_nvrtc_options_make(gl_nvrtc_options *o, int n, const char *const *in)
{
    memset(o, 0, sizeof *o);
    if (n <= 0 || in == NULL)
        return 0;
    o->opts = calloc((size_t)n, sizeof *o->opts);
    o->owned = calloc((size_t)n, sizeof *o->owned);
    if (o->opts == NULL || o->owned == NULL) {
        gl_nvrtc_options_free(o);
        return -1;
    }
    o->n = n;
    memcpy(o->opts, in, (size_t)n * sizeof *o->opts);
    for (int i = 0; i < n; i++)
        if (in[i] == NULL) /* NVRTC's to refuse, as the program gave it */
            return 0;
    if (makes_lto_ir(n, in))
        return 0;
    for (int i = 0; i < n; i++)
        if (rewrite_at(o, i, in) != 0) {
            gl_nvrtc_options_free(o);
            return -1;
        }
    return 0;
}

void gl_nvrtc_options_free(gl_nvrtc_options *o)
{
    for (int i = 0; o->owned != NULL && i < o->n; i++)
        free(o->owned[i]);
    free(o->owned);
    free(o->opts);
    memset(o, 0, sizeof *o);
}
