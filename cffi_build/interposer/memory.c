/*
 * memory.c — device memory calls answered or prepared locally: cuMemAlloc and
 * cuMemFree (sub-allocator + one-way record), address ranges, pointer
 * attributes, and module globals (registered so that they pass the
 * device-pointer checks).
 */
#include <stdbool.h>
#include <string.h>

#include "gl_client_gen.h"
#include "graph.h"
#include "internal.h"
#include "mem/vaband.h"

CUresult gls_cuMemAlloc(CUdeviceptr *dptr, size_t bytesize, int ptds)
{
    uint64_t d;
    CUresult r = CUDA_SUCCESS;

    if (dptr == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    r = gl_va_alloc(bytesize, &d);
    if (r != CUDA_SUCCESS)
        return r;
    r = glw_glMemAlloc(d, bytesize, ptds);
    if (r != CUDA_SUCCESS) {
        gl_va_free(d);
        return r;
    }
    *dptr = d;
    return CUDA_SUCCESS;
}

CUresult gls_cuMemFree(CUdeviceptr dptr, int ptds)
{
    CUresult r = CUDA_SUCCESS;

    /* Freeing 0 does nothing, as on NVIDIA's driver: libraries that link
     * cudart statically (cuBLAS) start it with cudaFree(0). */
    if (dptr == 0)
        return CUDA_SUCCESS;
    if (gl_graphmem_program_free(dptr))
        return CUDA_SUCCESS; /* a graph's memory: freed, its address kept for the graph */
    gl_mirror_info m;
    if (gl_mirror_by_dev(dptr, &m)) /* managed memory is freed here; mapped host memory not */
        return m.kind == GL_MIRROR_MANAGED && m.dev == dptr
                   ? gl_mirror_free(GL_MIRROR_MANAGED, m.view) : CUDA_ERROR_INVALID_VALUE;
    if (!gl_va_is_base(dptr))
        return CUDA_ERROR_INVALID_VALUE;
    /* The free record goes out before the range can be handed out again, so
     * a later mem_alloc of the same addresses follows it in the stream. */
    r = glw_glMemFree(dptr, ptds);
    if (r != CUDA_SUCCESS)
        return r;
    return gl_va_free(dptr);
}

CUresult gls_cuMemGetAddressRange(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr, int ptds)
{
    uint64_t base, size;

    (void)ptds;
    if (!gl_va_find(dptr, &base, &size))
        return CUDA_ERROR_NOT_FOUND;
    if (pbase)
        *pbase = base;
    if (psize)
        *psize = (size_t)size;
    return CUDA_SUCCESS;
}

CUresult gli_cuModuleGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name,
                               int ptds)
{
    CUdeviceptr d = 0;
    size_t n = 0;
    CUresult r = glw_cuModuleGetGlobal(&d, &n, hmod, name, ptds);

    if (r != CUDA_SUCCESS)
        return r;
    gl_va_register(d, n);
    /* A managed variable's pages lie in the band outside the session's range
     * (ptx.h, PTX_MANAGED_ALIGN): the program gets them mapped at that address. */
    if (gl_va_in_band(d) && !gl_va_in_session(d)
        && (r = gl_mirror_module_var(d, n, (uint64_t)(uintptr_t)hmod)) != CUDA_SUCCESS)
        return r;
    if (dptr)
        *dptr = d;
    if (bytes)
        *bytes = n;
    return CUDA_SUCCESS;
}

static CUresult device_attribute(void *data, CUpointer_attribute attribute, uint64_t ptr,
                                 uint64_t base, uint64_t size)
{
    switch (attribute) {
    case GL_CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = (CUcontext)(uintptr_t)gl_ctx_current();
        return CUDA_SUCCESS;
    case GL_CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = GL_CU_MEMORYTYPE_DEVICE;
        return CUDA_SUCCESS;
    case GL_CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = ptr;
        return CUDA_SUCCESS;
    case GL_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = 0;
        return CUDA_SUCCESS;
    case GL_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = base;
        return CUDA_SUCCESS;
    case GL_CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = (size_t)size;
        return CUDA_SUCCESS;
    /* CUDA documents both as a bool. */
    case GL_CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(bool *)data = false;
        return CUDA_SUCCESS;
    case GL_CU_POINTER_ATTRIBUTE_MAPPED:
        *(bool *)data = true;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* Pinned and registered host memory. Its device pointer is its own address,
 * as under unified addressing (cudaPointerGetAttributes asks for it); the
 * remote GPU reaches the memory only through copies. */
static CUresult host_attribute(void *data, CUpointer_attribute attribute, uint64_t ptr,
                               uintptr_t base, size_t size)
{
    switch (attribute) {
    case GL_CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = GL_CU_MEMORYTYPE_HOST;
        return CUDA_SUCCESS;
    case GL_CU_POINTER_ATTRIBUTE_HOST_POINTER:
        *(void **)data = (void *)(uintptr_t)ptr;
        return CUDA_SUCCESS;
    case GL_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = base;
        return CUDA_SUCCESS;
    case GL_CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = size;
        return CUDA_SUCCESS;
    case GL_CU_POINTER_ATTRIBUTE_CONTEXT:
    case GL_CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case GL_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    case GL_CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case GL_CU_POINTER_ATTRIBUTE_MAPPED:
        return device_attribute(data, attribute, ptr, base, size);
    default:
        /* cudart 13.2+ asks attribute 22 of host memory alone, newer than
         * CUDA 13.0's cuda.h; as for a driver that lacks an attribute. */
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* Mapped and managed memory (mirror.c). Registered memory has two
 * addresses, and which one was asked about says which range to answer; the
 * rest is what device or host memory answers. */
static CUresult mirror_attribute(void *data, CUpointer_attribute attribute, uint64_t ptr,
                                 const gl_mirror_info *m)
{
    int by_dev = ptr - m->dev < m->size;
    uint64_t base = by_dev ? m->dev : (uint64_t)(uintptr_t)m->view;

    switch (attribute) {
    case GL_CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = m->kind == GL_MIRROR_MANAGED ? GL_CU_MEMORYTYPE_DEVICE
                                                             : GL_CU_MEMORYTYPE_HOST;
        return CUDA_SUCCESS;
    case GL_CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = m->dev + (ptr - base);
        return CUDA_SUCCESS;
    case GL_CU_POINTER_ATTRIBUTE_HOST_POINTER:
        *(void **)data = m->view + (ptr - base);
        return CUDA_SUCCESS;
    case GL_CU_POINTER_ATTRIBUTE_IS_MANAGED: /* CUDA documents it as a bool */
        *(bool *)data = m->kind == GL_MIRROR_MANAGED;
        return CUDA_SUCCESS;
    default: {
        CUresult r = device_attribute(data, attribute, ptr, base, m->size);
        return r == CUDA_ERROR_NOT_SUPPORTED ? CUDA_ERROR_INVALID_VALUE : r;
    }
    }
}

CUresult gls_cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr,
                                   int ptds)
{
    uint64_t base, size;
    uintptr_t hbase;
    size_t hsize;

    if (data == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    gl_mirror_info m;
    const void *p = (const void *)(uintptr_t)ptr;
    unsigned int flags = 0;
    /* Mapped registered memory has its device address once asked for (pinned.c). */
    if (attribute == GL_CU_POINTER_ATTRIBUTE_DEVICE_POINTER && !gl_va_find(ptr, NULL, NULL)
        && !gl_mirror_by_view(p, &m)
        && gli_cuMemHostGetFlags(&flags, (void *)p, ptds) == CUDA_SUCCESS
        && (flags & GL_CU_MEMHOSTREGISTER_DEVICEMAP))
        gl_pinned_map(p);
    if (gl_mirror_by_dev(ptr, &m) || gl_mirror_by_view(p, &m))
        return mirror_attribute(data, attribute, ptr, &m);
    if (gl_va_find(ptr, &base, &size))
        return device_attribute(data, attribute, ptr, base, size);
    if (!gl_pinned_find(p, &hbase, &hsize))
        return CUDA_ERROR_INVALID_VALUE;
    return host_attribute(data, attribute, ptr, hbase, hsize);
}
