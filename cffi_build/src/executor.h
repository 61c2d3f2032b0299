/*
 * executor.h — the server side of a forwarded session: a gl_exec holds one
 * session's handle table, its device-memory allocations and its backend, and
 * runs batches of records against them (one executor thread per session; the
 * functions are not thread-safe for one gl_exec, distinct gl_exec are
 * independent).
 */
#ifndef GLEAM_EXECUTOR_H
#define GLEAM_EXECUTOR_H

#include <stddef.h>
#include <stdint.h>

#include "gl_cuda.h"
#include "records.h"

struct gl_exec;
typedef struct gl_exec gl_exec;

/* A waiting call's output while it is being produced. */
typedef struct {
    uint64_t values[8];
    uint32_t nvalues;
    uint8_t *bytes; /* the reply's byte area, cap bytes */
    size_t cap;
    size_t len;
} gl_reply_out;

/* Generated (gl_dispatch.c): decode, check, translate, call, encode. */
CUresult gl_dispatch(gl_exec *x, const gl_record *rec, gl_reply_out *o);

/* Used by the generated dispatch. */
CUresult gl_exec_handle(gl_exec *x, int kind, uint64_t minted, void **real);
CUresult gl_exec_check_mint(gl_exec *x, int kind, uint64_t minted);
CUresult gl_exec_bind(gl_exec *x, int kind, uint64_t minted, void *real);
void gl_exec_unbind(gl_exec *x, int kind, uint64_t minted);
CUresult gl_exec_check_dptr(gl_exec *x, uint64_t ptr, uint64_t size);
void *gl_exec_slot(gl_exec *x, int call);

#endif /* GLEAM_EXECUTOR_H */
