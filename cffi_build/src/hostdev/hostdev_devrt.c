/*
 * hostdev_devrt.c — the host device's answers about its device runtime
 * (ptx_devrt.h): the limits cuCtxSetLimit sends (the printf FIFO's size; the
 * heap's, whose range glDeviceHeap names; the pending device-side launches)
 * and the heap's range. Kernels reach
 * the runtime through their launch (hostdev_kernels.c).
 */
#include "hostdev.h"
#include "ptx/ptx_devrt.h"

#define LIMIT_STACK_SIZE 0
#define LIMIT_PRINTF_FIFO_SIZE 1
#define LIMIT_MALLOC_HEAP_SIZE 2
#define LIMIT_DEV_RUNTIME_SYNC_DEPTH 3
#define LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT 4
#define LIMIT_PERSISTING_L2_CACHE_SIZE 6

CUresult hb_glCtxSetLimit(CUlimit limit, size_t value)
{
    ptx_devrt *rt = gl_exec_current()->devrt;
    switch ((int)limit) {
    case LIMIT_PRINTF_FIFO_SIZE:
        /* CUDA: only before a kernel that prints was launched */
        return ptx_devrt_set_fifo(rt, value) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT: /* device-side launches (ptx_cdp.h) */
        return ptx_devrt_set_pending_launches(rt, value) == 0 ? CUDA_SUCCESS
                                                               : CUDA_ERROR_INVALID_VALUE;
    case LIMIT_DEV_RUNTIME_SYNC_DEPTH: /* CDP2 has no device-side synchronisation */
    case LIMIT_MALLOC_HEAP_SIZE: /* the heap's range travels in glDeviceHeap */
    case LIMIT_STACK_SIZE:       /* frames are sized per kernel at translation */
    case LIMIT_PERSISTING_L2_CACHE_SIZE: /* a hint; the CPU's caches take none */
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    }
}

CUresult hb_glDeviceHeap(CUdeviceptr base, size_t size)
{
    /* The dispatch checked that [base, base + size) is the session's memory.
     * CUDA refuses a new heap size once a kernel allocated from the heap, and
     * so does the host device: the heap in use stays, which
     * glDeviceHeapBase tells the interposer. */
    ptx_devrt_set_heap(gl_exec_current()->devrt, (uint8_t *)(uintptr_t)base, size);
    return CUDA_SUCCESS;
}

CUresult hb_glDeviceHeapBase(CUdeviceptr *base)
{
    *base = (CUdeviceptr)(uintptr_t)ptx_devrt_heap_base(gl_exec_current()->devrt);
    return CUDA_SUCCESS;
}

CUresult hb_glFuncDevrt(unsigned int *uses, CUfunction func)
{
    const gl_hfunc *f = (const gl_hfunc *)func;
    ptx_kernel_info info = {0};
    if (f->ptx != NULL)
        ptx_kernel_get_info(f->ptx, &info);
    *uses = info.devrt_uses;
    return CUDA_SUCCESS;
}
