/*
 * ptx_devrt.h — CUDA's device runtime on the host device: what a kernel's
 * calls of vprintf, __assertfail, malloc and free reach. PTX declares them
 * `.extern .func` without a body; the linker (ptx_link.c) makes each call a
 * built-in (ptx_builtin.c), and each built-in is one C entry point below,
 * which the interpreter calls per thread and a compiled kernel can call too.
 *
 * A ptx_devrt belongs to one session (the executor's gl_exec owns it):
 *   - the printf FIFO: records the session's kernels printed since the last
 *     flush point, at most CU_LIMIT_PRINTF_FIFO_SIZE bytes (each record costs
 *     its text and 8 bytes); a record that does not fit is dropped and
 *     counted, as a full FIFO on a GPU loses output;
 *   - the output queue: what flush points moved out of the FIFO, waiting for
 *     the program's next reply (sections of its stdout and stderr,
 *     gl_session.h); bounded by PTX_DEVRT_QUEUE_MAX;
 *   - the device heap (ptx_heap.h).
 * Thread-safety: the entry points run on a launch's worker threads at once
 * (a lock each for the FIFO and the heap); the rest runs on the session's
 * executor thread.
 */
#ifndef GLEAM_PTX_DEVRT_H
#define GLEAM_PTX_DEVRT_H

#include <stddef.h>
#include <stdint.h>

#include "ptx_printf.h"

typedef struct ptx_devrt ptx_devrt;

#define PTX_DEVRT_FIFO_DEFAULT (1u << 20)   /* CUDA's default printf FIFO: 1 MiB */
#define PTX_DEVRT_HEAP_DEFAULT (8u << 20)   /* CUDA's default malloc heap: 8 MiB */
#define PTX_DEVRT_QUEUE_MAX (64u << 20)     /* flushed output waiting for replies */
#define PTX_DEVRT_RECORD_COST 8u            /* a FIFO record's bytes besides its text */
#define PTX_DEVRT_PENDING_DEFAULT 2048u     /* CUDA's default pending device launches */
#define PTX_DEVRT_PENDING_MAX (1u << 20)    /* the most the host device takes */

/* The built-ins a kernel calls (ptx_kernel_info.devrt_uses is a mask of 1 << these).
 * From PTX_BI_PARAM_BUFFER on: dynamic parallelism (ptx_cdp.h). */
enum { PTX_BI_VPRINTF, PTX_BI_ASSERTFAIL, PTX_BI_MALLOC, PTX_BI_FREE, PTX_BI_SET_CONDITIONAL,
       PTX_BI_PARAM_BUFFER, PTX_BI_PARAM_BUFFER_V2, PTX_BI_LAUNCH, PTX_BI_LAUNCH_V2,
       PTX_BI_STREAM_CREATE, PTX_BI_STREAM_DESTROY, PTX_BI_GET_LAST_ERROR,
       PTX_BI_PEEK_LAST_ERROR, PTX_BI_MEMCPY_ASYNC, PTX_BI_MEMSET_ASYNC,
       PTX_BI_ERROR_STRING, PTX_BI_ERROR_NAME, PTX_NBUILTINS };
/* The built-ins of dynamic parallelism: a kernel that calls one gets a
 * device-side launch queue (ptx_cdp.h). */
#define PTX_BI_CDP_MASK (((1u << PTX_NBUILTINS) - 1) & ~((1u << PTX_BI_PARAM_BUFFER) - 1))

/* Where a thread is in its grid (for the assertion's message). */
typedef struct {
    uint32_t ctaid[3], tid[3];
} ptx_thread_pos;

ptx_devrt *ptx_devrt_new(void);
void ptx_devrt_delete(ptx_devrt *rt);

/* ---- the built-ins: 0, or a PTX_E_* fault (ptx.h) with *fault its address */

/* vprintf(fmt, args): *ret is CUDA's result (arguments read, -1, -2). */
int ptx_devrt_vprintf(ptx_devrt *rt, const ptx_devmem *m, uint64_t fmt, uint64_t args,
                      int32_t *ret, uint64_t *fault);
/* __assertfail: queues CUDA's message for the program's stderr and returns
 * PTX_E_ASSERT (the kernel stops), or a fault reading its strings. */
int ptx_devrt_assertfail(ptx_devrt *rt, const ptx_devmem *m, const ptx_thread_pos *t,
                         uint64_t msg, uint64_t file, uint32_t line, uint64_t func,
                         uint64_t *fault);
/* malloc(size): *ptr, 0 when the heap has no room (or there is none). */
int ptx_devrt_malloc(ptx_devrt *rt, uint64_t size, uint64_t *ptr, uint64_t *fault);
/* free(ptr): free(NULL) does nothing; a pointer malloc did not return (or
 * freed already) is PTX_E_ILLEGAL_ADDRESS. */
int ptx_devrt_free(ptx_devrt *rt, uint64_t ptr, uint64_t *fault);
/* cudaGraphSetConditional(handle, value): the launching graph's value for
 * the handle becomes value; a handle that graph does not own (or a kernel
 * launched outside a graph) is PTX_E_LAUNCH_FAILED with a reason. */
int ptx_devrt_set_conditional(ptx_devrt *rt, uint64_t handle, uint32_t value);
/* Why the last fault of an entry point on this thread happened, for the
 * kernel's note ("" when it was a plain bad address). */
const char *ptx_devrt_why(void);
/* Records REASON as this thread's fault's and returns CODE (for the device
 * runtime's other entry points, ptx_cdp.c). */
int ptx_devrt_fault(int code, const char *reason);

/* ---- the session's side (the executor thread) */

/* The conditional handles of the graph whose nodes run now (exec_graphs.c):
 * n handles as the program holds them and, parallel, their values in the
 * launch under way. */
typedef struct {
    const uint64_t *keys;
    uint64_t *values;
    uint32_t n;
} ptx_cond_scope;
/* Kernels launched from now on set values in scope (NULL: none, outside a
 * graph); the scope stays the caller's. */
void ptx_devrt_set_cond_scope(ptx_devrt *rt, const ptx_cond_scope *scope);

/* cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE): 0, or -1 once a kernel that
 * prints has been launched (CUDA's rule: then it is CUDA_ERROR_INVALID_VALUE). */
int ptx_devrt_set_fifo(ptx_devrt *rt, uint64_t bytes);
/* glDeviceHeap: [base, base + size) (host addresses) becomes the heap; 0, or
 * -1 when the current heap has been used (it stays). */
int ptx_devrt_set_heap(ptx_devrt *rt, uint8_t *base, uint64_t size);
/* Where the heap in use starts (NULL: none). */
uint8_t *ptx_devrt_heap_base(ptx_devrt *rt);
/* cuCtxSetLimit(CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT): the device-side
 * launches that may wait at once (ptx_cdp.h); 0 is refused (-1). */
int ptx_devrt_set_pending_launches(ptx_devrt *rt, uint64_t count);
/* The limit in force: PTX_DEVRT_PENDING_DEFAULT unless set (also for NULL). */
uint32_t ptx_devrt_pending_launches(const ptx_devrt *rt);
/* A launch of a kernel that calls the built-ins in USES (a mask) begins. */
void ptx_devrt_launch(ptx_devrt *rt, uint32_t uses);
/* Records the FIFO dropped since the last call (for the launch's note). */
uint64_t ptx_devrt_take_dropped(ptx_devrt *rt);
/* A flush point: the FIFO's records join the output queue. */
void ptx_devrt_flush(ptx_devrt *rt);
/* Writes queued output as reply sections (gl_session.h) into out, at most cap
 * bytes, and returns how many; *more is set when output still waits. */
size_t ptx_devrt_take(ptx_devrt *rt, uint8_t *out, size_t cap, int *more);
/* Bytes of output waiting in the queue. */
size_t ptx_devrt_pending(const ptx_devrt *rt);

#endif /* GLEAM_PTX_DEVRT_H */
