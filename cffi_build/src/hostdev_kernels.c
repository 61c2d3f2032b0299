/*
 * hostdev_kernels.c — modules, libraries, functions and launches on the host
 * device. An entry resolves to a host implementation (a C builtin or a
 * Python kernel from the backend's registry); the device does not execute
 * PTX, so an entry without one is CUDA_ERROR_NOT_FOUND.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostdev.h"

/* ------------------------------------------------------------- builtins */

typedef CUresult (*gl_builtin_fn)(const gl_launch *l);

static CUresult builtin_empty(const gl_launch *l)
{
    (void)l; /* measures the call rate of the whole path */
    return CUDA_SUCCESS;
}

static const struct {
    const char *name;
    gl_builtin_fn fn;
} builtins[] = {
    {"gleam_empty", builtin_empty},
};

#define NBUILTINS ((int)(sizeof builtins / sizeof builtins[0]))

int gl_host_builtin(const char *name)
{
    for (int i = 0; i < NBUILTINS; i++)
        if (strcmp(builtins[i].name, name) == 0)
            return i;
    return -1;
}

/* ------------------------------------------------------ modules, libraries */

static CUresult load(int kind, void **out, const void *image, size_t size)
{
    gl_hmod *m = gl_hobj_new(kind, sizeof *m);
    if (m == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->image = malloc(size + 1);
    if (m->image == NULL) {
        gl_hobj_free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memcpy(m->image, image, size);
    m->image[size] = 0;
    m->size = size;
    if (size == 0 || gl_himage_scan(m) != 0) {
        gl_hobj_free(m);
        return size == 0 ? CUDA_ERROR_INVALID_IMAGE : CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = m;
    return CUDA_SUCCESS;
}

CUresult hb_glModuleLoad(CUmodule *module, const void *image, size_t size)
{
    return load(GL_H_MOD, (void **)module, image, size);
}

CUresult hb_glLibraryLoad(CUlibrary *library, const void *image, size_t size)
{
    return load(GL_H_LIB, (void **)library, image, size);
}

CUresult hb_cuModuleUnload(CUmodule hmod)
{
    gl_hobj_free(hmod);
    return CUDA_SUCCESS;
}

CUresult hb_cuLibraryUnload(CUlibrary library)
{
    gl_hobj_free(library);
    return CUDA_SUCCESS;
}

CUresult hb_cuModuleGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
    (void)dptr, (void)bytes, (void)hmod, (void)name;
    return CUDA_ERROR_NOT_FOUND; /* no PTX execution, so no module globals */
}

/* --------------------------------------------------------------- functions */

static CUresult make_func(int kind, const char *name, const gl_kernel_impl *impl, void **out)
{
    size_t len = strlen(name);
    gl_hfunc *f = gl_hobj_new(kind, sizeof *f + len + 1);
    if (f == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(f->name, name, len + 1);
    f->impl = *impl;
    *out = f;
    return CUDA_SUCCESS;
}

static CUresult resolve(int kind, const gl_hmod *m, const char *name, void **out)
{
    if (!gl_himage_has(m, name))
        return CUDA_ERROR_NOT_FOUND;
    gl_kernel_impl impl = {.native = -1};
    gl_exec *x = gl_exec_current();
    if (gl_py_kernel_resolve(x->be->user, name, &impl) != 1 || impl.nparams > GL_KERNEL_MAX_PARAMS
        || impl.native >= NBUILTINS || (impl.native < 0 && impl.handle == NULL)) {
        fprintf(stderr, "gleam host device: no host implementation for kernel %s\n", name);
        return CUDA_ERROR_NOT_FOUND;
    }
    return make_func(kind, name, &impl, out);
}

CUresult hb_cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    return resolve(GL_H_FUNC, (const gl_hmod *)hmod, name, (void **)hfunc);
}

CUresult hb_cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    return resolve(GL_H_KERNEL, (const gl_hmod *)library, name, (void **)pKernel);
}

CUresult hb_cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    const gl_hfunc *k = (const gl_hfunc *)kernel;
    return make_func(GL_H_FUNC, k->name, &k->impl, (void **)pFunc);
}

CUresult hb_cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    (void)hfunc;
    *pi = attrib == GL_FUNC_ATTR_MAX_THREADS_PER_BLOCK ? 1024 : 0;
    return CUDA_SUCCESS;
}

CUresult hb_cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
                               size_t *paramSize)
{
    const gl_hfunc *f = (const gl_hfunc *)func;
    if (paramIndex >= f->impl.nparams)
        return CUDA_ERROR_INVALID_VALUE;
    *paramOffset = f->impl.offsets[paramIndex];
    *paramSize = f->impl.sizes[paramIndex];
    return CUDA_SUCCESS;
}

static uint64_t layout_size(const gl_kernel_impl *k)
{
    if (k->nparams == 0)
        return 0;
    return (uint64_t)k->offsets[k->nparams - 1] + k->sizes[k->nparams - 1];
}

CUresult hb_glLaunch(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                     const void *params, size_t size)
{
    (void)hStream;
    const gl_hfunc *fn = (const gl_hfunc *)f;
    uint64_t threads = (uint64_t)blockDimX * blockDimY * blockDimZ;
    if (size != layout_size(&fn->impl) || gridDimX == 0 || gridDimY == 0 || gridDimZ == 0
        || threads == 0 || threads > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    gl_launch l = {
        .x = gl_exec_current(),
        .grid = {gridDimX, gridDimY, gridDimZ},
        .block = {blockDimX, blockDimY, blockDimZ},
        .shared = sharedMemBytes,
        .params = params,
        .params_len = size,
    };
    if (fn->impl.native >= 0)
        return builtins[fn->impl.native].fn(&l);
    int r = gl_py_kernel_run(fn->impl.handle, &l);
    return r == 0 ? CUDA_SUCCESS : (CUresult)r;
}
