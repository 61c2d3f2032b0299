/*
 * error_names.c — every CUresult's name and message, from the table that
 * gen_errors.py generates out of cuda.h (cuda_errors.txt). Constant data,
 * no state.
 */
#include <stddef.h>
#include <string.h>

#include "gl_error_names.h"
#include "gl_errors.h"

typedef struct {
    int code;
    const char *name, *text;
} error_info;

#define GL_ERROR_ENTRY(code, name, text) {code, name, text},
static const error_info g_errors[] = {GL_CUDA_ERRORS(GL_ERROR_ENTRY)};

static const error_info *lookup(int code)
{
    for (size_t i = 0; i < sizeof g_errors / sizeof g_errors[0]; i++)
        if (g_errors[i].code == code)
            return &g_errors[i];
    return NULL;
}

const char *gl_cuda_error_name(int code)
{
    const error_info *e = lookup(code);
    return e != NULL ? e->name : NULL;
}

const char *gl_cuda_error_text(int code)
{
    const error_info *e = lookup(code);
    return e != NULL ? e->text : NULL;
}

int gl_cuda_error_code(const char *name)
{
    for (size_t i = 0; i < sizeof g_errors / sizeof g_errors[0]; i++)
        if (strcmp(g_errors[i].name, name) == 0)
            return g_errors[i].code;
    return -1;
}
