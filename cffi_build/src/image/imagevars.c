/*
 * imagevars.c — does a module image declare variables (imagevars.h)?
 */
#define _GNU_SOURCE /* memmem */
#include "imagevars.h"

#include <ctype.h>
#include <string.h>

#include "fatbin.h"

/* A module-scope declaration in the .global state space: a line whose first
 * directive is .global, after any of .visible/.extern/.weak. Instructions
 * (ld.global) and parameters (.param .u64 .ptr .global) do not start so. */
static int ptx_has_vars(const uint8_t *p, size_t n)
{
    static const char *const linkage[] = {".visible", ".extern", ".weak"};
    size_t i = 0;
    while (i < n) {
        while (i < n && (p[i] == ' ' || p[i] == '\t'))
            i++;
        for (int again = 1; again;) {
            again = 0;
            for (int k = 0; k < 3; k++) {
                size_t len = strlen(linkage[k]);
                if (n - i > len && memcmp(p + i, linkage[k], len) == 0 && isspace(p[i + len])) {
                    i += len;
                    while (i < n && (p[i] == ' ' || p[i] == '\t'))
                        i++;
                    again = 1;
                }
            }
        }
        if (n - i > 7 && memcmp(p + i, ".global", 7) == 0 && isspace(p[i + 7]))
            return 1;
        while (i < n && p[i] != '\n')
            i++;
        i++;
    }
    return 0;
}

int gl_image_may_have_vars(const uint8_t *img, size_t n)
{
    /* A cubin's variables are its .nv.global(.init) sections, whose names the
     * section string table holds. */
    if (n >= 4 && memcmp(img, "\177ELF", 4) == 0)
        return memmem(img, n, ".nv.global", 10) != NULL;
    if (n >= 4 && (uint32_t)(img[0] | img[1] << 8 | img[2] << 16 | (uint32_t)img[3] << 24)
                      == GL_FATBIN_MAGIC) {
        uint8_t *ptx = NULL;
        size_t len = 0;
        if (gl_fatbin_ptx(img, n, &ptx, &len, NULL, 0) != 1)
            return 1; /* SASS only or unreadable: cannot tell */
        int has = ptx_has_vars(ptx, len);
        gl_fatbin_free(ptx);
        return has;
    }
    return ptx_has_vars(img, n);
}
