/*
 * devheap.c — the limits of CUDA's device runtime that the serving device
 * holds, and the host device's malloc heap.
 *
 * cuCtxSetLimit of the stack size, the printf FIFO or the malloc heap waits
 * for the server (glCtxSetLimit): a GPU's driver refuses a FIFO or heap size
 * once a kernel that prints or allocates ran, and the program must hear that
 * from the call itself.
 *
 * The host device's heap is device memory of the session like any other: at
 * the first launch the interposer allocates CU_LIMIT_MALLOC_HEAP_SIZE bytes
 * (8 MiB unless the program set it) from the session's range and names them
 * with glDeviceHeap, so the heap is in the server's allocation table (kernels'
 * accesses are checked against it), in cuMemGetInfo's count (a GPU's driver
 * reserves its heap too), and in a moving session's snapshot (its blocks live
 * in its own bytes: src/ptx/ptx_heap.h). A new size after that allocates a new
 * range and asks the server which heap it uses (glDeviceHeapBase): the old
 * one stays when a kernel allocated from it, as CUDA refuses the change then,
 * and the range the server does not use is freed. A GPU server keeps its
 * driver's own heap: nothing is allocated for it.
 *
 * Locks: g_lock guards the heap's range (taken before the emit lock).
 */
#include <pthread.h>
#include <string.h>

#include "gl_client_gen.h"
#include "internal.h"

#define LIMIT_STACK_SIZE 0
#define LIMIT_PRINTF_FIFO_SIZE 1
#define LIMIT_MALLOC_HEAP_SIZE 2
#define HEAP_MIN 256 /* a heap of 0 bytes still names a range: malloc finds it full */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_heap;  /* the range the server uses as its heap (0: none yet) */
static int g_tried;      /* a launch tried to make one (or the device keeps its own) */

static int host_device(void)
{
    const gl_session_hello *h = gl_session();
    return h != NULL && strcmp(h->backend, "host") == 0;
}

/* A new range of SIZE bytes, allocated on the server: 0 when the device has
 * no room for it (its cuMemAlloc would fail: the heap must not make a later
 * call fail with an error the program did not cause). */
static uint64_t heap_range(uint64_t size, int ptds)
{
    const gl_session_hello *h = gl_session();
    uint64_t base;
    if (h == NULL || gl_va_live() + size > h->devices[0].total_mem
        || gl_va_alloc(size, &base) != CUDA_SUCCESS)
        return 0;
    if (glw_glMemAlloc(base, size, ptds) != CUDA_SUCCESS) {
        gl_va_free(base);
        return 0;
    }
    gl_va_hold(base); /* cuMemFree of it is the program's error, as on a GPU */
    return base;
}

static void drop_range(uint64_t base, int ptds)
{
    if (glw_glMemFree(base, ptds) == CUDA_SUCCESS)
        gl_va_free(base);
}

static uint64_t heap_size(void)
{
    size_t v = gl_limit_value(LIMIT_MALLOC_HEAP_SIZE);
    return v < HEAP_MIN ? HEAP_MIN : v;
}

CUresult gl_devheap_before_launch(int ptds)
{
    CUresult r = CUDA_SUCCESS;
    if (__atomic_load_n(&g_tried, __ATOMIC_ACQUIRE)) /* every later launch: no lock */
        return r;
    pthread_mutex_lock(&g_lock);
    if (!g_tried && host_device()) {
        uint64_t size = heap_size(), base = heap_range(size, ptds);
        if (base != 0 && (r = glw_glDeviceHeap(base, size, ptds)) == CUDA_SUCCESS)
            g_heap = base;
        else if (base == 0)
            gl_log(GL_LOG_WARNING, "cuLaunchKernel", "no room for the device's malloc heap "
                   "(%llu bytes): malloc in kernels returns NULL",
                   (unsigned long long)size);
    }
    __atomic_store_n(&g_tried, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_lock);
    return r;
}

/* A heap of the new size on the host device, once one exists: 0, or the
 * error cuCtxSetLimit answers. */
static CUresult resize_heap(size_t value, int ptds)
{
    uint64_t size = value < HEAP_MIN ? HEAP_MIN : value, base = heap_range(size, ptds);
    CUdeviceptr used = 0;
    if (base == 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = glw_glDeviceHeap(base, size, ptds);
    if (r == CUDA_SUCCESS)
        r = glw_glDeviceHeapBase(&used, ptds);
    if (used == base) { /* the server took it */
        drop_range(g_heap, ptds);
        g_heap = base;
        return r;
    }
    drop_range(base, ptds);
    return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE;
}

CUresult gl_limit_send(CUlimit limit, size_t value, int ptds)
{
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_lock);
    if ((int)limit == LIMIT_MALLOC_HEAP_SIZE && g_heap != 0)
        r = resize_heap(value, ptds);
    if (r == CUDA_SUCCESS)
        r = glw_glCtxSetLimit(limit, value, ptds);
    pthread_mutex_unlock(&g_lock);
    return r;
}
