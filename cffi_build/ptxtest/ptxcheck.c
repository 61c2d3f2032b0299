/* ptxcheck.c — parses and translates PTX files, prints each kernel's size or the error. */
#include <stdio.h>
#include <stdlib.h>

#include "ptx/ptx.h"

int main(int argc, char **argv)
{
    int bad = 0;
    for (int a = 1; a < argc; a++) {
        FILE *f = fopen(argv[a], "rb");
        if (!f) { perror(argv[a]); bad++; continue; }
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        char *b = malloc((size_t)n + 1);
        size_t got = fread(b, 1, (size_t)n, f);
        fclose(f);
        char err[256];
        ptx_module *m;
        if (ptx_module_load(b, got, &m, err, sizeof err) != 0) {
            printf("%s: %s\n", argv[a], err);
            bad++;
        } else {
            printf("%s: %zu kernels\n", argv[a], ptx_module_nkernels(m));
            ptx_module_free(m);
        }
        free(b);
    }
    return bad != 0;
}
