/*
 * gl_error_names.h — the name and message of every CUresult of CUDA's cuda.h
 * (common/error_names.c, from the generated table gl_errors.h): the
 * interposer's cuGetErrorName/String and the executor's notes use them, and
 * Python its error numbers.
 */
#ifndef GLEAM_ERROR_NAMES_H
#define GLEAM_ERROR_NAMES_H

/* cdef: begin */
/* "CUDA_ERROR_INVALID_VALUE" for 1; NULL for a code cuda.h does not have. */
const char *gl_cuda_error_name(int code);
/* "invalid argument" for 1; NULL for a code cuda.h does not have. */
const char *gl_cuda_error_text(int code);
/* 1 for "CUDA_ERROR_INVALID_VALUE"; -1 for a name cuda.h does not have (Python
 * takes its error numbers from here, not from a copy). */
int gl_cuda_error_code(const char *name);
/* cdef: end */

#endif
