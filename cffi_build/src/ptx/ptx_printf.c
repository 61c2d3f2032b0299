/*
 * ptx_printf.c — vprintf's text, as a GPU's driver formats it on the host
 * (ptx_printf.h). Each conversion is parsed here, its argument read from the
 * device buffer at the offset its size aligns it to, and the host's snprintf
 * formats that one value with a specification rebuilt from the parsed parts
 * (flags, width, precision, conversion), so the format string itself never
 * reaches the host's printf. `%n` reads its pointer and writes nothing.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_printf.h"

/* Room for n more bytes and a NUL, within out->max: 0 or -1. */
static int reserve(ptx_text *out, size_t n)
{
    if (n > out->max || out->len > out->max - n)
        return -1;
    if (out->len + n + 1 > out->cap) {
        size_t cap = out->cap ? out->cap : 256;
        while (cap < out->len + n + 1)
            cap *= 2;
        char *np = realloc(out->p, cap);
        if (np == NULL)
            return -1;
        out->p = np;
        out->cap = cap;
    }
    return 0;
}

int ptx_text_put(ptx_text *out, const char *s, size_t n)
{
    if (reserve(out, n) != 0)
        return -1;
    memcpy(out->p + out->len, s, n);
    out->len += n;
    out->p[out->len] = '\0';
    return 0;
}

void ptx_text_free(ptx_text *t)
{
    free(t->p);
    t->p = NULL;
    t->len = t->cap = 0;
}

/* snprintf of one value into out; -1 when it would pass out->max. */
static int put_fmt(ptx_text *out, const char *spec, ...) __attribute__((format(printf, 2, 3)));
static int put_fmt(ptx_text *out, const char *spec, ...)
{
    va_list ap;
    va_start(ap, spec);
    int n = vsnprintf(NULL, 0, spec, ap);
    va_end(ap);
    if (n < 0 || reserve(out, (size_t)n) != 0)
        return -1;
    va_start(ap, spec);
    vsnprintf(out->p + out->len, (size_t)n + 1, spec, ap);
    va_end(ap);
    out->len += (size_t)n;
    return 0;
}

char *ptx_devstr(const ptx_devmem *m, uint64_t addr, size_t max, size_t *len, uint64_t *fault)
{
    size_t cap = 64, n = 0;
    char *s = malloc(cap);
    *fault = 0;
    if (s == NULL)
        return NULL;
    for (; n < max; n++) {
        const uint8_t *p = m->at(m->ctx, addr + n, 1);
        if (p == NULL) {
            *fault = addr + n;
            free(s);
            return NULL;
        }
        if (*p == 0)
            break;
        if (n + 1 >= cap) {
            char *ns = realloc(s, cap * 2);
            if (ns == NULL) {
                free(s);
                return NULL;
            }
            s = ns;
            cap *= 2;
        }
        s[n] = (char)*p;
    }
    s[n] = '\0';
    *len = n;
    return s;
}

/* One conversion as parsed: what the rebuilt specification keeps. */
typedef struct {
    char flags[8];
    int nflags;
    long width, prec; /* -1: not given */
    int len;          /* 0 none, 'H' hh, 'h', 'l', 'L' ll (and j z t), 'D' L */
    char conv;
} spec_t;

typedef struct {
    const ptx_devmem *m;
    uint64_t args, off;
    int nargs;
    uint64_t fault;
} argbuf;

/* The next argument of SIZE bytes (4 or 8), at its alignment; -1 on a fault. */
static int next_arg(argbuf *a, unsigned size, uint64_t *v)
{
    a->off = (a->off + size - 1) / size * size;
    const uint8_t *p = a->m->at(a->m->ctx, a->args + a->off, size);
    if (p == NULL) {
        a->fault = a->args + a->off;
        return -1;
    }
    *v = 0;
    memcpy(v, p, size); /* little-endian host and device */
    a->off += size;
    a->nargs++;
    return 0;
}

static long clamp_field(long v)
{
    return v > (long)PTX_PRINTF_MAX_FIELD ? (long)PTX_PRINTF_MAX_FIELD : v;
}

/* The host specification "%[flags][width][.prec]<mods><conv>" for SP; KEEP
 * lists the flags this conversion takes (the others mean nothing for it). */
static void rebuild(char *out, size_t cap, const spec_t *sp, const char *keep, int use_prec,
                    const char *mods, char conv)
{
    size_t k = 0;
    out[k++] = '%';
    for (int f = 0; f < sp->nflags; f++)
        if (strchr(keep, sp->flags[f]) != NULL)
            out[k++] = sp->flags[f];
    int n;
    if (sp->width >= 0)
        n = snprintf(out + k, cap - k, "%ld", sp->width), k += (size_t)n;
    if (use_prec && sp->prec >= 0)
        n = snprintf(out + k, cap - k, ".%ld", sp->prec), k += (size_t)n;
    snprintf(out + k, cap - k, "%s%c", mods, conv);
}

static int is_int_conv(char c)
{
    return c == 'd' || c == 'i' || c == 'u' || c == 'x' || c == 'X' || c == 'o';
}

/* Formats one conversion: 0, -1 (too long / no memory) or -2 (a fault). */
static int convert(const spec_t *sp, argbuf *a, ptx_text *out)
{
    char spec[64];
    uint64_t v;
    char c = sp->conv;
    if (is_int_conv(c)) {
        int wide = sp->len == 'l' || sp->len == 'L';
        if (next_arg(a, wide ? 8 : 4, &v) != 0)
            return -2;
        char conv = c == 'i' ? 'd' : c;
        rebuild(spec, sizeof spec, sp, "-+ #0", 1, "ll", conv);
        if (conv == 'd') {
            long long s = wide ? (long long)(int64_t)v : (long long)(int32_t)v;
            if (sp->len == 'h')
                s = (short)s;
            else if (sp->len == 'H')
                s = (signed char)s;
            return put_fmt(out, spec, s);
        }
        unsigned long long u = wide ? v : (uint32_t)v;
        if (sp->len == 'h')
            u = (unsigned short)u;
        else if (sp->len == 'H')
            u = (unsigned char)u;
        return put_fmt(out, spec, u);
    }
    switch (c) {
    case 'c':
        if (next_arg(a, 4, &v) != 0)
            return -2;
        rebuild(spec, sizeof spec, sp, "-", 0, "", 'c');
        return put_fmt(out, spec, (int)(unsigned char)v);
    case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': case 'a': case 'A': {
        if (next_arg(a, 8, &v) != 0)
            return -2;
        double d;
        memcpy(&d, &v, 8);
        rebuild(spec, sizeof spec, sp, "-+ #0", 1, "", c);
        return put_fmt(out, spec, d);
    }
    case 'p':
        if (next_arg(a, 8, &v) != 0)
            return -2;
        rebuild(spec, sizeof spec, sp, "-", 0, "", 'p');
        return put_fmt(out, spec, (void *)(uintptr_t)v);
    case 'n':
        return next_arg(a, 8, &v) != 0 ? -2 : 0; /* counts nothing, writes nowhere */
    case 's': {
        if (next_arg(a, 8, &v) != 0)
            return -2;
        /* read one byte past the room left: a longer string cannot fit */
        size_t room = out->max - out->len, n = 0;
        size_t lim = sp->prec >= 0 && (size_t)sp->prec <= room ? (size_t)sp->prec : room + 1;
        char *str = NULL;
        if (v == 0)
            str = strdup("(null)"), n = 6; /* what the host's printf prints for NULL */
        else if ((str = ptx_devstr(a->m, v, lim, &n, &a->fault)) == NULL)
            return a->fault ? -2 : -1;
        if (str == NULL)
            return -1;
        if (sp->prec >= 0 && n > (size_t)sp->prec)
            n = (size_t)sp->prec;
        if (n > room) {
            free(str);
            return -1;
        }
        spec_t s2 = *sp;
        s2.prec = (long)n;
        rebuild(spec, sizeof spec, &s2, "-", 1, "", 's');
        int rc = put_fmt(out, spec, str);
        free(str);
        return rc;
    }
    default:
        return 0;
    }
}

/* A `*` field's argument (-1 on a fault), or none when the conversion is past
 * CUDA's argument limit (it is then printed as written). */
static int star_arg(argbuf *a, int may_read, long *v, int *skipped)
{
    uint64_t raw;
    if (!may_read) {
        *skipped = 1;
        return 0;
    }
    if (next_arg(a, 4, &raw) != 0)
        return -1;
    *v = (int32_t)raw;
    return 0;
}

static void add_flag(spec_t *sp, char f)
{
    if (sp->nflags < (int)sizeof sp->flags && memchr(sp->flags, f, (size_t)sp->nflags) == NULL)
        sp->flags[sp->nflags++] = f;
}

/* Parses the conversion at fmt[*i] (just past its '%') into SP, reading the
 * `*` fields' arguments when MAY_READ; *i ends past it. 1: a conversion to
 * format; 0: one to print as written (unknown, or past the argument limit);
 * -2: a fault. */
static int parse_spec(const char *fmt, size_t *i, spec_t *sp, argbuf *a, int may_read)
{
    size_t k = *i;
    int skipped = 0;
    long v = 0;
    memset(sp, 0, sizeof *sp);
    sp->width = sp->prec = -1;
    while (fmt[k] != 0 && strchr("-+ #0", fmt[k]) != NULL)
        add_flag(sp, fmt[k++]);
    if (fmt[k] == '*') {
        k++;
        if (star_arg(a, may_read, &v, &skipped) != 0)
            return -2;
        if (v < 0) {
            v = v == -2147483648L ? 2147483647L : -v;
            add_flag(sp, '-');
        }
        sp->width = clamp_field(v);
    } else if (fmt[k] >= '0' && fmt[k] <= '9') {
        long w = 0;
        while (fmt[k] >= '0' && fmt[k] <= '9')
            w = clamp_field(w * 10 + (fmt[k++] - '0'));
        sp->width = w;
    }
    if (fmt[k] == '.') {
        k++;
        long p = 0;
        if (fmt[k] == '*') {
            k++;
            if (star_arg(a, may_read, &p, &skipped) != 0)
                return -2;
        } else
            while (fmt[k] >= '0' && fmt[k] <= '9')
                p = clamp_field(p * 10 + (fmt[k++] - '0'));
        sp->prec = p < 0 ? -1 : clamp_field(p);
    }
    if (fmt[k] == 'h' && fmt[k + 1] == 'h')
        sp->len = 'H', k += 2;
    else if (fmt[k] == 'h')
        sp->len = 'h', k++;
    else if (fmt[k] == 'l' && fmt[k + 1] == 'l')
        sp->len = 'L', k += 2;
    else if (fmt[k] == 'l')
        sp->len = 'l', k++;
    else if (fmt[k] == 'z' || fmt[k] == 'j' || fmt[k] == 't')
        sp->len = 'L', k++;
    else if (fmt[k] == 'L')
        sp->len = 'D', k++;
    sp->conv = fmt[k];
    if (fmt[k] == 0 || strchr("diuxXocsfFeEgGaApn%", fmt[k]) == NULL) {
        *i = fmt[k] == 0 ? k : k + 1;
        return 0;
    }
    *i = k + 1;
    if (sp->conv == '%')
        return 1;
    return may_read && !skipped;
}

int ptx_printf_format(const ptx_devmem *m, uint64_t fmt, uint64_t args, ptx_text *out,
                      uint64_t *fault)
{
    *fault = 0;
    if (fmt == 0)
        return PTX_PRINTF_NULL;
    size_t flen;
    char *f = ptx_devstr(m, fmt, PTX_PRINTF_MAX_FORMAT, &flen, fault);
    if (f == NULL)
        return *fault ? PTX_PRINTF_FAULT : PTX_PRINTF_INTERNAL;
    if (flen >= PTX_PRINTF_MAX_FORMAT) {
        free(f);
        return PTX_PRINTF_INTERNAL;
    }
    size_t start = out->len, i = 0;
    argbuf a = {.m = m, .args = args};
    int rc = 0;
    while (rc == 0 && i < flen) {
        const char *pct = memchr(f + i, '%', flen - i);
        size_t lit = pct != NULL ? (size_t)(pct - (f + i)) : flen - i;
        if (ptx_text_put(out, f + i, lit) != 0) {
            rc = -1;
            break;
        }
        i += lit;
        if (pct == NULL)
            break;
        size_t at = i++;
        spec_t sp;
        int got = parse_spec(f, &i, &sp, &a, a.nargs < PTX_PRINTF_MAX_ARGS);
        if (got < 0)
            rc = got;
        else if (got == 0)
            rc = ptx_text_put(out, f + at, i - at); /* as written */
        else if (sp.conv == '%')
            rc = ptx_text_put(out, "%", 1);
        else
            rc = convert(&sp, &a, out);
    }
    free(f);
    if (rc != 0) {
        out->len = start;
        if (out->p != NULL)
            out->p[start] = '\0';
        if (rc == -2) {
            *fault = a.fault;
            return PTX_PRINTF_FAULT;
        }
        return PTX_PRINTF_TOO_LONG;
    }
    return a.nargs;
}
