/*
 * client.h — the interposer's core, as the generated stubs (gl_stubs.c) and
 * the hand-written client functions (gli_*, gls_*) see it. The core owns the
 * session with the local agent, the batch being filled, minting, the
 * device-memory sub-allocator and the per-thread context stack.
 *
 * Threading: every function here may be called from any application thread.
 * Emitting is serialized by one lock, so records from all threads form one
 * ordered stream; at most one waiting call is outstanding at a time.
 */
#ifndef GLEAM_CLIENT_H
#define GLEAM_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "gl_cuda.h"
#include "gl_session.h"

/* The session with the agent or the server is gone (CUDA's number for a
 * device that became unavailable); every call returns it from then on. */
#ifndef CUDA_ERROR_DEVICE_UNAVAILABLE
#define CUDA_ERROR_DEVICE_UNAVAILABLE 46
#endif

/* gl_emit/gl_wait flags. */
#define GL_EMIT_CTX 1 /* the call needs the calling thread's context on the server */

/* One entry of the exported-symbol table (generated). */
typedef struct {
    const char *base;  /* the name cuGetProcAddress is asked for */
    const char *name;  /* the exported symbol */
    int since;         /* first CUDA version that gets this symbol for base */
    int per_thread;    /* the _ptds/_ptsz twin */
    void *fn;
} gl_symbol;

extern const gl_symbol gl_symbols[];
extern const int gl_symbol_count;
extern void *const gl_unsupported_slots[];
extern const int gl_unsupported_slot_count;

/* NVIDIA's exported names gleam does not forward, each with its stub
 * (generated from driver_symbols.txt). */
typedef struct {
    const char *name;
    void *fn;
} gl_unforwarded_symbol;

extern const gl_unforwarded_symbol gl_unforwarded[];
extern const int gl_unforwarded_count;

/* CUDA_SUCCESS once cuInit succeeded; CUDA_ERROR_NOT_INITIALIZED before;
 * the session's failure code after the agent or the server was lost. */
CUresult gl_ready(void);

/* A fresh handle of a kind (GL_H_*): 0x67 << 56 | kind << 48 | serial. */
uint64_t gl_mint(int kind);
/* CUDA_ERROR_INVALID_HANDLE unless h is a minted handle of that kind
 * (streams also accept 0, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD). */
CUresult gl_check_handle(int kind, uint64_t h);
/* A device's facts from the session's HELLO (device.c), or NULL with *r set
 * (the session is not ready, or there is no such device). */
const gl_device_info *gl_device(CUdevice dev, CUresult *r);
/* The stream as sent: under per-thread default stream semantics (ptds != 0)
 * the NULL stream means CU_STREAM_PER_THREAD. */
uint64_t gl_stream_arg(uint64_t h, int ptds);
/* CUDA_ERROR_INVALID_VALUE unless [ptr, ptr + size) lies inside one live
 * allocation of this session (size 0 needs ptr inside one, or ptr 0). */
CUresult gl_check_dptr(uint64_t ptr, uint64_t size);

/* Appends a one-way record (captures payload before returning) and returns
 * CUDA_SUCCESS, or the session's failure. Payloads above GL_INLINE_MAX are
 * written straight from the caller's buffer (the batch is flushed first). */
CUresult gl_emit(uint16_t call, int flags, const uint64_t *args, uint8_t nargs,
                 const void *payload, size_t len);
/* Appends a waiting record, flushes, waits for the reply. Fills values[0 ..
 * nvalues) and out[0 .. out_len) (received straight into out). Returns the
 * deferred error of earlier one-way calls if there is one, else the call's
 * own result. */
CUresult gl_wait(uint16_t call, int flags, const uint64_t *args, uint8_t nargs,
                 const void *payload, size_t len, uint64_t *values, uint32_t nvalues,
                 void *out, size_t out_len);

/* The trampoline for unsupported symbol slot i: logs the name once on
 * stderr and returns CUDA_ERROR_NOT_SUPPORTED. */
CUresult gl_unsupported_call(int slot);

/* A message for the user: one "gleam: ..." line on stderr, also kept in the
 * driver's log for cuLogs* and its callbacks (logs.c). entry names the call. */
#define GL_LOG_ERROR 0
#define GL_LOG_WARNING 1
void gl_log(int level, const char *entry, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The same for a named stub of gl_unforwarded. */
CUresult gl_not_forwarded(const char *name);

/* GLEAM_TRACE=1 (read once when the library loads): every exported call and
 * every symbol gleam does not forward is named on stderr (trace.c), and so
 * is each failing call's result; gl_trace_errors is set for that too, and
 * alone by GLEAM_TRACE=errors (failing results only). Off, a stub pays one
 * predictable branch on gl_trace_errors. */
extern int gl_trace_on;
extern int gl_trace_errors;
void gl_trace_call(const char *name);
CUresult gl_trace_result(const char *name, CUresult r);
/* The failing call in progress answers as NVIDIA's driver does (a probe for
 * a table or symbol that a driver may lack, which programs expect to fail):
 * GLEAM_TRACE=errors leaves its result out, GLEAM_TRACE=1 marks it. */
void gl_trace_as_driver(void);

/* The stub gate (hostfn.c): nonzero while a host function runs or a capture
 * is in progress; every exported stub then asks gl_gate_check first, which
 * refuses CUDA calls from host functions (CUDA_ERROR_NOT_PERMITTED) and, for
 * stubs marked GL_GATE_UNSAFE, calls a capture forbids (capture.c). Stubs
 * marked GL_GATE_ANY_TIME (error strings) are allowed in host functions. */
#define GL_GATE_UNSAFE 1
#define GL_GATE_ANY_TIME 2
extern _Atomic int gl_gate;
CUresult gl_gate_check(const char *name, int cls);

/* The return address of the exported call in progress on this thread, set
 * by the stubs of rows marked `caller` (caller.c tells whose code it is). */
extern __thread const void *gl_caller;

#endif /* GLEAM_CLIENT_H */
