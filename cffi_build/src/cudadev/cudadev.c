/*
 * cudadev.c — the cuda backend: forwarded calls go to the real driver through
 * the function pointers Python resolved (gl_cuda_driver_symbols); the calls
 * the driver has no exact twin for are the cb_* here. A session owns a
 * reserved virtual range; device memory is mapped into it granule by granule
 * with the VMM API, with a use count per granule because the client's 256-byte
 * sub-allocations share granules.
 */
#include <stdlib.h>
#include <string.h>

#include "cudadev_link.h"
#include "cudadev_graphs.h"
#include "cudadev_arrays.h"
#include "exec/executor.h"
#include "gl_linkimage.h"
#include "gl_tensormap.h"
#include "image/imagevars.h"
#include "mem/vaband.h"
#include "cudadev_vmm.h"

/* The VMM structures: gl_cuda.h's, as in NVIDIA's cuda.h. */
typedef CUmemLocation gl_cu_location;
typedef CUmemAllocationProp gl_cu_alloc_prop;
typedef CUmemAccessDesc gl_cu_access_desc;
typedef uint64_t gl_cu_mem_handle;

typedef CUresult (*fn_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*fn_addr_free)(CUdeviceptr, size_t);
typedef CUresult (*fn_create)(gl_cu_mem_handle *, size_t, const gl_cu_alloc_prop *,
                              unsigned long long);
typedef CUresult (*fn_release)(gl_cu_mem_handle);
typedef CUresult (*fn_map)(CUdeviceptr, size_t, size_t, gl_cu_mem_handle, unsigned long long);
typedef CUresult (*fn_unmap)(CUdeviceptr, size_t);
typedef CUresult (*fn_access)(CUdeviceptr, size_t, const gl_cu_access_desc *, size_t);
typedef CUresult (*fn_gran)(size_t *, const gl_cu_alloc_prop *, int);
typedef CUresult (*fn_retain)(CUcontext *, CUdevice);
typedef CUresult (*fn_dev)(CUdevice);
typedef CUresult (*fn_ctx)(CUcontext);
typedef CUresult (*fn_void)(void);
typedef CUresult (*fn_dtoh)(void *, CUdeviceptr, size_t, CUstream);
typedef CUresult (*fn_stream)(CUstream);
typedef CUresult (*fn_copy2d)(const CUDA_MEMCPY2D *, CUstream);
typedef CUresult (*fn_modload)(CUmodule *, const void *);
typedef CUresult (*fn_libload)(CUlibrary *, const void *, void *, void **, unsigned int, void *,
                               void **, unsigned int);
typedef CUresult (*fn_launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);
typedef CUresult (*fn_global)(CUdeviceptr *, size_t *, CUmodule, const char *);
typedef CUresult (*fn_handle)(void *);

typedef struct {
    gl_cuda_extra fn;
    void *driver[GL_CALL_COUNT];
    int device;
    size_t gran;
} gl_cuda;

typedef struct {
    CUcontext primary, current;
    int retains; /* the client's primary retains not yet released */
    uint32_t *uses;          /* per granule */
    gl_cu_mem_handle *mem;   /* per granule; 0 when unmapped */
    uint64_t ngran;
    void **varcode; /* modules and libraries whose image may have variables */
    size_t nvarcode, capvarcode;
    void **kept;    /* what loaded registrations point to (cudadev_link.c) */
    size_t nkept;
    void *arrays; /* the session's arrays and texture objects (cudadev_arrays.c) */
} gl_csess;

static gl_cuda *cuda_of(gl_exec *x)
{
    return x->be->priv;
}

const gl_cuda_extra *gl_cuda_fns(gl_exec *x)
{
    return &cuda_of(x)->fn;
}

int gl_cuda_device(gl_exec *x)
{
    return cuda_of(x)->device;
}

size_t gl_cuda_granule(gl_exec *x)
{
    return cuda_of(x)->gran;
}

void **gl_cuda_arrays(gl_exec *x)
{
    return &((gl_csess *)x->priv)->arrays;
}

static gl_cu_alloc_prop device_prop(int device)
{
    gl_cu_alloc_prop p;
    memset(&p, 0, sizeof p);
    p.type = 1;
    p.location.type = 1;
    p.location.id = device;
    return p;
}

/* A driver call whose symbol this driver lacks: the call is not supported.
 * Declared without a prototype so that one stub stands in for every slot type. */
static CUresult cb_missing()
{
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* ------------------------------------------------------------ granules */

static void unmap_granule(gl_exec *x, uint64_t g)
{
    gl_cuda *c = cuda_of(x);
    gl_csess *s = x->priv;
    if (s->mem[g] == 0)
        return;
    ((fn_unmap)c->fn.cuMemUnmap)(x->va_base + g * c->gran, c->gran);
    ((fn_release)c->fn.cuMemRelease)(s->mem[g]);
    s->mem[g] = 0;
}

static CUresult map_granule(gl_exec *x, uint64_t g)
{
    gl_cuda *c = cuda_of(x);
    gl_csess *s = x->priv;
    gl_cu_alloc_prop prop = device_prop(c->device);
    gl_cu_mem_handle h = 0;
    CUdeviceptr at = x->va_base + g * c->gran;
    CUresult r = ((fn_create)c->fn.cuMemCreate)(&h, c->gran, &prop, 0);
    if (r != CUDA_SUCCESS)
        return r;
    r = ((fn_map)c->fn.cuMemMap)(at, c->gran, 0, h, 0);
    if (r != CUDA_SUCCESS) {
        ((fn_release)c->fn.cuMemRelease)(h);
        return r;
    }
    s->mem[g] = h;
    gl_cu_access_desc acc = {{1, c->device}, 3};
    r = ((fn_access)c->fn.cuMemSetAccess)(at, c->gran, &acc, 1);
    if (r != CUDA_SUCCESS)
        unmap_granule(x, g);
    return r;
}

static void granules(gl_exec *x, uint64_t p, uint64_t size, uint64_t *first, uint64_t *last)
{
    size_t gran = cuda_of(x)->gran;
    *first = (p - x->va_base) / gran;
    *last = (p - x->va_base + size - 1) / gran;
}

static CUresult release_range(gl_exec *x, uint64_t p, uint64_t size)
{
    gl_csess *s = x->priv;
    uint64_t g0, g1;
    granules(x, p, size, &g0, &g1);
    for (uint64_t g = g0; g <= g1; g++)
        if (s->uses[g] > 0 && --s->uses[g] == 0)
            unmap_granule(x, g);
    return CUDA_SUCCESS;
}

CUresult cb_glMemAlloc(CUdeviceptr dptr, size_t bytesize)
{
    gl_exec *x = gl_exec_current();
    gl_csess *s = x->priv;
    uint64_t g0, g1;
    granules(x, dptr, bytesize, &g0, &g1);
    for (uint64_t g = g0; g <= g1; g++) {
        if (s->uses[g] == 0) {
            CUresult r = map_granule(x, g);
            if (r != CUDA_SUCCESS) {
                if (g > g0)
                    release_range(x, x->va_base + g0 * cuda_of(x)->gran,
                                  (g - g0) * cuda_of(x)->gran);
                return r;
            }
        }
        s->uses[g]++;
    }
    return CUDA_SUCCESS;
}

CUresult cb_glMemFree(CUdeviceptr dptr)
{
    gl_exec *x = gl_exec_current();
    uint64_t size = gl_exec_alloc_size(x, dptr);
    return size ? release_range(x, dptr, size) : CUDA_ERROR_INVALID_VALUE;
}

/* -------------------------------------------------------- custom calls */

/* The host device's heap is a range of session memory (hostdev_devrt.c); a
 * GPU's driver keeps its own, sized by cuCtxSetLimit, which glCtxSetLimit
 * reaches. The interposer names no range to a cuda backend. */
CUresult cb_glDeviceHeap(CUdeviceptr base, size_t size)
{
    (void)base, (void)size;
    return CUDA_SUCCESS;
}

CUresult cb_glDeviceHeapBase(CUdeviceptr *base)
{
    *base = 0;
    return CUDA_SUCCESS;
}

CUresult cb_glFuncDevrt(unsigned int *uses, CUfunction func)
{
    (void)func;
    *uses = 0; /* the driver's own runtime: nothing for the interposer to make */
    return CUDA_SUCCESS;
}

CUresult cb_glMemcpyDtoH(void *dst, CUdeviceptr src, size_t n, CUstream stream)
{
    gl_cuda *c = cuda_of(gl_exec_current());
    CUresult r = ((fn_dtoh)c->fn.cuMemcpyDtoHAsync_v2)(dst, src, n, stream);
    if (r != CUDA_SUCCESS)
        return r;
    return ((fn_stream)c->fn.cuStreamSynchronize)(stream);
}

/* Pitched copies through the driver's own 2D copy; the host side is the
 * record's packed rows (its pitch is the width). */
static CUresult copy2d(CUDA_MEMCPY2D *p, CUstream stream, int wait)
{
    gl_cuda *c = cuda_of(gl_exec_current());
    if (c->fn.cuMemcpy2DAsync_v2 == NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult r = ((fn_copy2d)c->fn.cuMemcpy2DAsync_v2)(p, stream);
    if (r != CUDA_SUCCESS || !wait)
        return r;
    return ((fn_stream)c->fn.cuStreamSynchronize)(stream);
}

CUresult cb_glMemcpy2DHtoD(CUdeviceptr dst, size_t dpitch, const void *src, size_t width,
                           size_t height, CUstream stream)
{
    CUDA_MEMCPY2D p = {.srcMemoryType = GL_CU_MEMORYTYPE_HOST, .srcHost = src,
                       .srcPitch = width, .dstMemoryType = GL_CU_MEMORYTYPE_DEVICE,
                       .dstDevice = dst, .dstPitch = dpitch, .WidthInBytes = width,
                       .Height = height};
    return copy2d(&p, stream, 0);
}

CUresult cb_glMemcpy2DDtoH(void *dst, CUdeviceptr src, size_t spitch, size_t width,
                           size_t height, CUstream stream)
{
    CUDA_MEMCPY2D p = {.srcMemoryType = GL_CU_MEMORYTYPE_DEVICE, .srcDevice = src,
                       .srcPitch = spitch, .dstMemoryType = GL_CU_MEMORYTYPE_HOST,
                       .dstHost = dst, .dstPitch = width, .WidthInBytes = width,
                       .Height = height};
    return copy2d(&p, stream, 1); /* the reply's bytes must be there */
}

CUresult cb_glMemcpy2DDtoD(CUdeviceptr dst, size_t dpitch, CUdeviceptr src, size_t spitch,
                           size_t width, size_t height, CUstream stream)
{
    CUDA_MEMCPY2D p = {.srcMemoryType = GL_CU_MEMORYTYPE_DEVICE, .srcDevice = src,
                       .srcPitch = spitch, .dstMemoryType = GL_CU_MEMORYTYPE_DEVICE,
                       .dstDevice = dst, .dstPitch = dpitch, .WidthInBytes = width,
                       .Height = height};
    return copy2d(&p, stream, 0);
}

/* Remembers a loaded module or library whose image may have variables. A
 * handle value the driver hands out again stays listed: the error is on the
 * side of "not movable", never of a wrong result. */
static CUresult remember_varcode(void *handle)
{
    gl_csess *s = gl_exec_current()->priv;
    if (s->nvarcode == s->capvarcode) {
        size_t cap = s->capvarcode ? s->capvarcode * 2 : 8;
        void **grown = realloc(s->varcode, cap * sizeof *grown);
        if (grown == NULL)
            return CUDA_ERROR_OUT_OF_MEMORY;
        s->varcode = grown;
        s->capvarcode = cap;
    }
    s->varcode[s->nvarcode++] = handle;
    return CUDA_SUCCESS;
}

static CUresult note_vars(void *handle, const void *image, size_t size)
{
    return gl_image_may_have_vars(image, size) ? remember_varcode(handle) : CUDA_SUCCESS;
}

static CUresult load_module(void *arg, void **handle, const void *image)
{
    return ((fn_modload)arg)((CUmodule *)handle, image);
}

static CUresult load_library(void *arg, void **handle, const void *image)
{
    return ((fn_libload)arg)((CUlibrary *)handle, image, NULL, NULL, 0, NULL, NULL, 0);
}

/* A link image: the real driver links its inputs (cudadev_link.c). What a
 * registration points to stays until the session ends; a linked image may
 * have variables, as far as a checkpoint can tell. */
static CUresult load_linked(void **handle, const void *image, size_t size, gl_cuda_load load,
                            void *fp)
{
    gl_csess *s = gl_exec_current()->priv;
    void **kept;
    size_t nkept;
    CUresult r = gl_cuda_load_linked(&cuda_of(gl_exec_current())->fn, image, size, load, fp,
                                     handle, &kept, &nkept);
    if (kept != NULL) {
        void **grown = realloc(s->kept, (s->nkept + nkept) * sizeof *grown);
        if (grown == NULL) { /* the driver has it: leak it rather than free it under it */
            free(kept);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        memcpy(grown + s->nkept, kept, nkept * sizeof *kept);
        s->kept = grown;
        s->nkept += nkept;
        free(kept);
    }
    return r == CUDA_SUCCESS ? remember_varcode(*handle) : r;
}

CUresult cb_glModuleLoad(CUmodule *module, const void *image, size_t size)
{
    gl_cuda *c = cuda_of(gl_exec_current());
    uint64_t linked;
    if (c->fn.cuModuleLoadData == NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (gl_link_image_sniff(image, size, &linked))
        return load_linked((void **)module, image, size, load_module, c->fn.cuModuleLoadData);
    void *copy = gl_cuda_image_copy(image, size);
    if (copy == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = ((fn_modload)c->fn.cuModuleLoadData)(module, copy);
    free(copy);
    return r == CUDA_SUCCESS ? note_vars(*module, image, size) : r;
}

CUresult cb_glLibraryLoad(CUlibrary *library, const void *image, size_t size)
{
    gl_cuda *c = cuda_of(gl_exec_current());
    uint64_t linked;
    if (c->fn.cuLibraryLoadData == NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (gl_link_image_sniff(image, size, &linked))
        return load_linked((void **)library, image, size, load_library,
                           c->fn.cuLibraryLoadData);
    void *copy = gl_cuda_image_copy(image, size);
    if (copy == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = ((fn_libload)c->fn.cuLibraryLoadData)(library, copy, NULL, NULL, 0, NULL, NULL,
                                                       0);
    free(copy);
    return r == CUDA_SUCCESS ? note_vars(*library, image, size) : r;
}

/* A checkpoint cannot keep this backend's variables yet (they lie in GPU memory
 * at the driver's addresses): a module or library that may have some is
 * NOT_SUPPORTED, which makes the client mark the session not movable; one
 * without has nothing to keep (docs/consistency.md). */
CUresult cb_glModuleVarsRead(cuuint64_t handle, size_t offset, void *dst, size_t n, size_t *size)
{
    gl_csess *s = gl_exec_current()->priv;
    for (size_t i = 0; i < s->nvarcode; i++)
        if (s->varcode[i] == (void *)(uintptr_t)handle)
            return CUDA_ERROR_NOT_SUPPORTED;
    if (offset > 0)
        return CUDA_ERROR_INVALID_VALUE;
    memset(dst, 0, n);
    *size = 0;
    return CUDA_SUCCESS;
}

CUresult cb_glModuleVarsWrite(cuuint64_t handle, size_t offset, const void *src, size_t n)
{
    (void)handle, (void)offset, (void)src, (void)n;
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cb_cuModuleGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
    gl_cuda *c = cuda_of(gl_exec_current());
    if (c->fn.cuModuleGetGlobal_v2 == NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    return ((fn_global)c->fn.cuModuleGetGlobal_v2)(dptr, bytes, hmod, name);
}

/* A tensor map is the driver's to encode: the request's fields become the
 * call's arguments (the executor bounded them, exec_tensormap.c). */
typedef CUresult (*fn_tmap_tiled)(void *, int, cuuint32_t, void *, const cuuint64_t *,
                                  const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, int,
                                  int, int, int);
typedef CUresult (*fn_tmap_im2col)(void *, int, cuuint32_t, void *, const cuuint64_t *,
                                   const cuuint64_t *, const int *, const int *, cuuint32_t,
                                   cuuint32_t, const cuuint32_t *, int, int, int, int);
typedef CUresult (*fn_tmap_wide)(void *, int, cuuint32_t, void *, const cuuint64_t *,
                                 const cuuint64_t *, int, int, cuuint32_t, cuuint32_t,
                                 const cuuint32_t *, int, int, int, int, int);
typedef CUresult (*fn_tmap_replace)(void *, void *);

/* The driver wants the map 64-byte aligned, which the reply's bytes need not
 * be: it writes an aligned copy. */
static CUresult tmap_encode(void *fp, const gl_tmap_request *q, void *map)
{
    void *addr = (void *)(uintptr_t)q->address;
    int dt = (int)q->dtype, il = (int)q->interleave, sw = (int)q->swizzle;
    int l2 = (int)q->l2promotion, oob = (int)q->oobfill;

    switch (q->kind) {
    case GL_TMAP_TILED:
        return ((fn_tmap_tiled)fp)(map, dt, q->rank, addr, q->dim, q->stride, q->box,
                                   q->estride, il, sw, l2, oob);
    case GL_TMAP_IM2COL:
        return ((fn_tmap_im2col)fp)(map, dt, q->rank, addr, q->dim, q->stride, q->lower,
                                    q->upper, q->channels, q->pixels, q->estride, il, sw, l2,
                                    oob);
    case GL_TMAP_IM2COL_WIDE:
        return ((fn_tmap_wide)fp)(map, dt, q->rank, addr, q->dim, q->stride, q->lower[0],
                                  q->upper[0], q->channels, q->pixels, q->estride, il,
                                  (int)q->mode, sw, l2, oob);
    default:
        memcpy(map, q->map, sizeof q->map);
        return ((fn_tmap_replace)fp)(map, addr);
    }
}

CUresult cb_glTensorMapEncode(void *tensorMap, const void *request, size_t n)
{
    const gl_cuda_extra *fn = &cuda_of(gl_exec_current())->fn;
    const gl_tmap_request *q = request;
    void *fp = q->kind == GL_TMAP_TILED    ? fn->cuTensorMapEncodeTiled
               : q->kind == GL_TMAP_IM2COL ? fn->cuTensorMapEncodeIm2col
               : q->kind == GL_TMAP_REPLACE ? fn->cuTensorMapReplaceAddress
                                            : fn->cuTensorMapEncodeIm2colWide;
    _Alignas(GL_TMAP_ALIGN) unsigned char map[GL_TMAP_BYTES];

    (void)n;
    if (fp == NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult r = tmap_encode(fp, q, map);
    if (r == CUDA_SUCCESS)
        memcpy(tensorMap, map, sizeof map);
    return r;
}

CUresult cb_glLaunch(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                     const void *params, size_t size)
{
    gl_cuda *c = cuda_of(gl_exec_current());
    if (c->fn.cuLaunchKernel == NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    void *extra[] = {GL_CU_LAUNCH_PARAM_BUFFER_POINTER, (void *)params,
                     GL_CU_LAUNCH_PARAM_BUFFER_SIZE, &size, GL_CU_LAUNCH_PARAM_END};
    return ((fn_launch)c->fn.cuLaunchKernel)(f, gridDimX, gridDimY, gridDimZ, blockDimX,
                                             blockDimY, blockDimZ, sharedMemBytes, hStream, NULL,
                                             extra);
}

/* A cluster launch is the driver's cuLaunchKernelEx with one attribute, the
 * cluster's shape (the client kept no other: the rest are hints, launch.c). */
typedef CUresult (*fn_launch_ex)(const CUlaunchConfig *, CUfunction, void **, void **);
typedef CUresult (*fn_clusters)(int *, CUfunction, const CUlaunchConfig *);

static CUlaunchConfig cluster_config(CUlaunchAttribute *attr, const unsigned grid[3],
                                     const unsigned block[3], unsigned shared, CUstream stream,
                                     const unsigned cluster[3])
{
    memset(attr, 0, sizeof *attr);
    attr->id = GL_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    memcpy(attr->value.clusterDim, cluster, sizeof attr->value.clusterDim);
    return (CUlaunchConfig){grid[0], grid[1], grid[2], block[0], block[1], block[2],
                            shared,  stream,  attr,    1};
}

CUresult cb_glLaunchCluster(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                            unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                            unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                            unsigned int clusterDimX, unsigned int clusterDimY,
                            unsigned int clusterDimZ, const void *params, size_t size)
{
    gl_cuda *c = cuda_of(gl_exec_current());
    const unsigned grid[3] = {gridDimX, gridDimY, gridDimZ};
    const unsigned block[3] = {blockDimX, blockDimY, blockDimZ};
    const unsigned cluster[3] = {clusterDimX, clusterDimY, clusterDimZ};
    CUlaunchAttribute attr;

    if (c->fn.cuLaunchKernelEx == NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUlaunchConfig config = cluster_config(&attr, grid, block, sharedMemBytes, hStream, cluster);
    void *extra[] = {GL_CU_LAUNCH_PARAM_BUFFER_POINTER, (void *)params,
                     GL_CU_LAUNCH_PARAM_BUFFER_SIZE, &size, GL_CU_LAUNCH_PARAM_END};
    return ((fn_launch_ex)c->fn.cuLaunchKernelEx)(&config, f, NULL, extra);
}

/* A cooperative launch is the driver's cuLaunchKernelEx with the COOPERATIVE
 * attribute: cuLaunchCooperativeKernel takes no `extra`, and the packed
 * parameter buffer is what the record carries. The driver checks the size. */
CUresult cb_glLaunchCooperative(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                unsigned int gridDimZ, unsigned int blockDimX,
                                unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream,
                                const void *params, size_t size)
{
    gl_cuda *c = cuda_of(gl_exec_current());
    CUlaunchAttribute attr;

    if (c->fn.cuLaunchKernelEx == NULL)
        return CUDA_ERROR_NOT_SUPPORTED;
    memset(&attr, 0, sizeof attr);
    attr.id = GL_CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attr.value.cooperative = 1;
    CUlaunchConfig config = {gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                             sharedMemBytes, hStream, &attr, 1};
    void *extra[] = {GL_CU_LAUNCH_PARAM_BUFFER_POINTER, (void *)params,
                     GL_CU_LAUNCH_PARAM_BUFFER_SIZE, &size, GL_CU_LAUNCH_PARAM_END};
    return ((fn_launch_ex)c->fn.cuLaunchKernelEx)(&config, f, NULL, extra);
}

CUresult cb_glClusterOccupancy(int *value, CUfunction func, unsigned int query,
                               unsigned int gridDimX, unsigned int gridDimY,
                               unsigned int gridDimZ, unsigned int blockDimX,
                               unsigned int blockDimY, unsigned int blockDimZ,
                               unsigned int sharedMemBytes, unsigned int clusterDimX,
                               unsigned int clusterDimY, unsigned int clusterDimZ)
{
    const gl_cuda_extra *fn = &cuda_of(gl_exec_current())->fn;
    const unsigned grid[3] = {gridDimX, gridDimY, gridDimZ};
    const unsigned block[3] = {blockDimX, blockDimY, blockDimZ};
    const unsigned cluster[3] = {clusterDimX, clusterDimY, clusterDimZ};
    void *fp = query == GL_CLUSTER_ACTIVE           ? fn->cuOccupancyMaxActiveClusters
               : query == GL_CLUSTER_POTENTIAL_SIZE ? fn->cuOccupancyMaxPotentialClusterSize
                                                    : NULL;
    CUlaunchAttribute attr;

    if (fp == NULL)
        return query > GL_CLUSTER_POTENTIAL_SIZE ? CUDA_ERROR_INVALID_VALUE
                                                 : CUDA_ERROR_NOT_SUPPORTED;
    CUlaunchConfig config = cluster_config(&attr, grid, block, sharedMemBytes, NULL, cluster);
    /* {0, 0, 0}: the program gave no cluster dimension, so none is passed on. */
    if ((cluster[0] | cluster[1] | cluster[2]) == 0)
        config.numAttrs = 0;
    return ((fn_clusters)fp)(value, func, &config);
}

/* --------------------------------------------------- bookkeeping wrappers */

static CUresult cw_primary_retain(CUcontext *pctx, CUdevice dev)
{
    gl_exec *x = gl_exec_current();
    CUresult r = ((fn_retain)cuda_of(x)->driver[GL_CALL_cuDevicePrimaryCtxRetain])(pctx, dev);
    if (r == CUDA_SUCCESS)
        ((gl_csess *)x->priv)->retains++;
    return r;
}

static CUresult cw_primary_release(CUdevice dev)
{
    gl_exec *x = gl_exec_current();
    gl_csess *s = x->priv;
    if (s->retains == 0)
        return CUDA_ERROR_INVALID_CONTEXT; /* never release the session's own retain */
    CUresult r = ((fn_dev)cuda_of(x)->driver[GL_CALL_cuDevicePrimaryCtxRelease])(dev);
    if (r == CUDA_SUCCESS)
        s->retains--;
    return r;
}

static CUresult cw_set_current(CUcontext ctx)
{
    gl_exec *x = gl_exec_current();
    CUresult r = ((fn_ctx)cuda_of(x)->driver[GL_CALL_glCtxSetCurrent])(ctx);
    if (r == CUDA_SUCCESS)
        ((gl_csess *)x->priv)->current = ctx;
    return r;
}

static CUresult cw_ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    gl_exec *x = gl_exec_current();
    typedef CUresult (*fn)(CUcontext *, unsigned int, CUdevice);
    CUresult r = ((fn)cuda_of(x)->driver[GL_CALL_cuCtxCreate])(pctx, flags, dev);
    if (r == CUDA_SUCCESS)
        ((gl_csess *)x->priv)->current = *pctx; /* cuCtxCreate makes it current */
    return r;
}

static CUresult cw_ctx_destroy(CUcontext ctx)
{
    gl_exec *x = gl_exec_current();
    gl_csess *s = x->priv;
    if (ctx == s->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult r = ((fn_ctx)cuda_of(x)->driver[GL_CALL_cuCtxDestroy])(ctx);
    if (r == CUDA_SUCCESS && s->current == ctx) {
        s->current = s->primary;
        ((fn_ctx)cuda_of(x)->fn.cuCtxSetCurrent)(s->primary);
    }
    return r;
}

static CUresult cw_module_unload(CUmodule hmod)
{
    gl_exec *x = gl_exec_current();
    CUresult r = ((fn_handle)cuda_of(x)->driver[GL_CALL_cuModuleUnload])(hmod);
    if (r == CUDA_SUCCESS)
        gl_exec_drop_globals(x, hmod);
    return r;
}

/* ------------------------------------------------------------ sessions */

static void fail(gl_exec *x, char *err, size_t err_len, const char *what, CUresult r)
{
    (void)x;
    gl_set_err(err, err_len, "cuda backend: %s failed (CUresult %d)", what, r);
}

/* A new session's range at a place in the band (vaband.h): CUDA_SUCCESS with
 * *base set, or CUDA_ERROR_NOT_FOUND when the driver gave none of the places. */
static CUresult reserve_in_band(gl_cuda *c, uint64_t size, CUdeviceptr *base)
{
    for (int i = 0; i < GL_VA_BAND_TRIES; i++) {
        CUdeviceptr want = (CUdeviceptr)gl_va_band_pick(size), got = 0;
        if (want == 0 || want % c->gran != 0)
            break;
        if (((fn_reserve)c->fn.cuMemAddressReserve)(&got, size, c->gran, want, 0) != CUDA_SUCCESS)
            continue;
        if (got == want) {
            *base = got;
            return CUDA_SUCCESS;
        }
        ((fn_addr_free)c->fn.cuMemAddressFree)(got, size);
    }
    return CUDA_ERROR_NOT_FOUND;
}

static int cuda_open(gl_exec *x, char *err, size_t err_len)
{
    gl_cuda *c = cuda_of(x);
    gl_csess *s = calloc(1, sizeof *s);
    if (s == NULL) {
        gl_set_err(err, err_len, "out of memory");
        return -1;
    }
    CUresult r = ((fn_retain)c->fn.cuDevicePrimaryCtxRetain)(&s->primary, c->device);
    if (r != CUDA_SUCCESS) {
        fail(x, err, err_len, "cuDevicePrimaryCtxRetain", r);
        free(s);
        return -1;
    }
    s->current = s->primary;
    ((fn_ctx)c->fn.cuCtxSetCurrent)(s->primary);
    if (c->gran == 0) {
        gl_cu_alloc_prop prop = device_prop(c->device);
        r = ((fn_gran)c->fn.cuMemGetAllocationGranularity)(&c->gran, &prop, 0);
        if (r != CUDA_SUCCESS || c->gran == 0) {
            fail(x, err, err_len, "cuMemGetAllocationGranularity", r);
            goto release;
        }
    }
    if (x->va_size == 0) {
        size_t free_b = 0, total = 0;
        typedef CUresult (*fn_info)(size_t *, size_t *);
        ((fn_info)c->driver[GL_CALL_cuMemGetInfo])(&free_b, &total);
        x->va_size = total ? total : (uint64_t)16 << 30;
    }
    uint64_t asked = x->va_size;
    x->va_size = (x->va_size + c->gran - 1) / c->gran * c->gran;
    if (x->va_base != 0 && (x->va_base % c->gran != 0 || x->va_size != asked)) {
        gl_set_err(err, err_len, "the requested range is not a multiple of this GPU's "
                   "granularity (%llu bytes)", (unsigned long long)c->gran);
        goto release;
    }
    s->ngran = x->va_size / c->gran;
    s->uses = calloc(s->ngran, sizeof *s->uses);
    s->mem = calloc(s->ngran, sizeof *s->mem);
    if (s->uses == NULL || s->mem == NULL) {
        gl_set_err(err, err_len, "out of memory");
        goto release;
    }
    CUdeviceptr base = 0;
    /* A requested base is only a hint to the driver: another address is refused. A
     * new session asks for places in the band first (vaband.h). */
    r = x->va_base == 0 ? reserve_in_band(c, x->va_size, &base) : CUDA_ERROR_NOT_FOUND;
    if (r != CUDA_SUCCESS)
        r = ((fn_reserve)c->fn.cuMemAddressReserve)(&base, x->va_size, c->gran,
                                                    (CUdeviceptr)x->va_base, 0);
    if (r != CUDA_SUCCESS) {
        fail(x, err, err_len, "cuMemAddressReserve", r);
        goto release;
    }
    if (x->va_base != 0 && base != x->va_base) {
        ((fn_addr_free)c->fn.cuMemAddressFree)(base, x->va_size);
        gl_set_err(err, err_len, "the GPU's driver cannot reserve the requested address range "
                   "0x%llx (it offered 0x%llx)", (unsigned long long)x->va_base,
                   (unsigned long long)base);
        goto release;
    }
    x->va_base = base;
    x->priv = s;
    return 0;
release:
    free(s->uses);
    free(s->mem);
    ((fn_dev)c->fn.cuDevicePrimaryCtxRelease_v2)(c->device);
    free(s);
    return -1;
}

/* Destroys what a handle stands for; functions and kernels die with their module. */
static void release_handle(gl_exec *x, uint64_t key, void *val)
{
    gl_cuda *c = cuda_of(x);
    gl_csess *s = x->priv;
    int kind = (int)((key >> 48) & 0xff);
    int call = kind == GL_H_MOD      ? GL_CALL_cuModuleUnload
               : kind == GL_H_LIB    ? GL_CALL_cuLibraryUnload
               : kind == GL_H_STREAM ? GL_CALL_cuStreamDestroy
               : kind == GL_H_EVENT  ? GL_CALL_cuEventDestroy
               : kind == GL_H_CTX && val != s->primary ? GL_CALL_cuCtxDestroy
                                                       : -1;
    if (call >= 0 && c->driver[call] != NULL)
        ((fn_handle)c->driver[call])(val);
}

static void each_kind(gl_exec *x, uint64_t key, void *val, int want)
{
    if ((int)((key >> 48) & 0xff) == want)
        release_handle(x, key, val);
}

static void release_streams(gl_exec *x, uint64_t k, void *v)
{
    each_kind(x, k, v, GL_H_STREAM);
    each_kind(x, k, v, GL_H_EVENT);
}

static void release_code(gl_exec *x, uint64_t k, void *v)
{
    each_kind(x, k, v, GL_H_MOD);
    each_kind(x, k, v, GL_H_LIB);
}

static void release_ctxs(gl_exec *x, uint64_t k, void *v)
{
    each_kind(x, k, v, GL_H_CTX);
}

static void cuda_close(gl_exec *x)
{
    gl_cuda *c = cuda_of(x);
    gl_csess *s = x->priv;
    ((fn_ctx)c->fn.cuCtxSetCurrent)(s->primary);
    ((fn_void)c->fn.cuCtxSynchronize)();
    /* Texture objects and arrays, streams and events before the code they
     * ran, contexts last. */
    gl_cuda_arrays_close(x);
    gl_exec_each_handle(x, release_streams);
    gl_exec_each_handle(x, release_code);
    gl_exec_each_handle(x, release_ctxs);
    ((fn_ctx)c->fn.cuCtxSetCurrent)(s->primary);
    for (uint64_t g = 0; g < s->ngran; g++)
        unmap_granule(x, g);
    ((fn_addr_free)c->fn.cuMemAddressFree)(x->va_base, x->va_size);
    for (; s->retains > 0; s->retains--)
        ((fn_dev)c->fn.cuDevicePrimaryCtxRelease_v2)(c->device);
    ((fn_dev)c->fn.cuDevicePrimaryCtxRelease_v2)(c->device);
    ((fn_ctx)c->fn.cuCtxSetCurrent)(NULL);
    free(s->uses);
    free(s->mem);
    free(s->varcode);
    for (size_t i = 0; i < s->nkept; i++)
        free(s->kept[i]);
    free(s->kept);
    free(s);
}

static CUresult cuda_unmap(gl_exec *x, uint64_t p, uint64_t size)
{
    return release_range(x, p, size);
}

static void cuda_run_begin(gl_exec *x)
{
    /* The executor thread may serve several sessions in turn. */
    ((fn_ctx)cuda_of(x)->fn.cuCtxSetCurrent)(((gl_csess *)x->priv)->current);
}

const gl_backend_ops gl_cuda_ops = {cuda_open, cuda_close, cuda_unmap, cuda_run_begin,
                                    &gl_cuda_graph_ops};

/* For cudadev_graphs.c: a forwarded call's driver entry point and the
 * session's context (gl_cuda_fns, above, the driver's other entry points). */
void *gl_cuda_call(gl_exec *x, int call)
{
    return cuda_of(x)->driver[call];
}

CUcontext gl_cuda_context(gl_exec *x)
{
    return ((gl_csess *)x->priv)->current;
}

gl_backend *gl_backend_cuda_new(void *const *driver_fns, const gl_cuda_extra *extra, int device)
{
    /* Without the entries cuda_extra.py marks required a session cannot even
     * open; code loading and launches answer CUDA_ERROR_NOT_SUPPORTED when
     * their entry point is missing. */
#define GL_NEED(symbol) extra->symbol,
    const void *need[] = {GL_CUDA_EXTRA_REQUIRED(GL_NEED)};
#undef GL_NEED
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (need[i] == NULL)
            return NULL;
    gl_backend *be = calloc(1, sizeof *be);
    gl_cuda *c = calloc(1, sizeof *c);
    if (be == NULL || c == NULL) {
        free(be);
        free(c);
        return NULL;
    }
    c->fn = *extra;
    c->device = device;
    be->kind = GL_BACKEND_CUDA;
    be->ops = &gl_cuda_ops;
    be->priv = c;
    for (int i = 0; i < GL_CALL_COUNT; i++) {
        c->driver[i] = gl_cuda_driver_symbols[i] ? driver_fns[i] : NULL;
        void *slot = gl_cuda_driver_symbols[i] ? driver_fns[i] : gl_cuda_custom_fns[i];
        be->fns[i] = slot ? slot : (void *)cb_missing;
    }
    /* Calls whose effects the session must remember to undo at close. */
    static const struct {
        int call;
        void *fn;
    } wraps[] = {
        {GL_CALL_cuDevicePrimaryCtxRetain, (void *)cw_primary_retain},
        {GL_CALL_cuDevicePrimaryCtxRelease, (void *)cw_primary_release},
        {GL_CALL_glCtxSetCurrent, (void *)cw_set_current},
        {GL_CALL_cuCtxCreate, (void *)cw_ctx_create},
        {GL_CALL_cuCtxDestroy, (void *)cw_ctx_destroy},
        {GL_CALL_cuModuleUnload, (void *)cw_module_unload},
    };
    for (size_t i = 0; i < sizeof wraps / sizeof wraps[0]; i++)
        if (c->driver[wraps[i].call] != NULL)
            be->fns[wraps[i].call] = wraps[i].fn;
    return be;
}
