/*
 * hostdev_kernels.c — modules, libraries, functions and launches on the host
 * device. An entry resolves to a host implementation (a C builtin or a
 * Python kernel from the backend's registry: the fast path, unless
 * GLEAM_HOST_KERNELS=0), else to the module's PTX, run by the interpreter
 * (ptx.h). An image without PTX (a cubin, a SASS-only fatbin) serves only
 * entries with a host implementation; any other entry is CUDA_ERROR_NOT_FOUND
 * with a line on stderr naming the image's targets and the nvcc flag that
 * adds PTX. PTX that does not translate is CUDA_ERROR_INVALID_PTX: from the
 * load of a module, from the first use of a library (libraries load lazily). A kernel fault (illegal or misaligned address,
 * trap, time limit) is the launch's error and sticks to the session: later
 * launches return it too, as a lost CUDA context does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gl_launch_bounds.h"
#include "hostdev.h"
#include "hostdev_arrays.h"
#include "ptx/ptx_devrt.h"

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

/* Finds and translates the image's PTX and registers its variables, once:
 * a later use of a failed image gets the same error without a second line. */
static CUresult ensure_loaded(gl_hmod *m)
{
    if (m->loaded)
        return m->load_error;
    m->loaded = 1;
    char err[1024];
    CUresult r = gl_himage_load_ptx(m, err, sizeof err);
    if (r == CUDA_ERROR_INVALID_PTX)
        gl_exec_note(gl_exec_current(), "the module's PTX is refused: %s", err);
    else if (r != CUDA_SUCCESS && err[0]) /* a link image's input (hostdev_link.c) */
        gl_exec_note(gl_exec_current(), "the link is refused: %s", err);
    if (r == CUDA_SUCCESS && m->ptx != NULL) {
        /* module variables: copies to them (cudaMemcpyToSymbol) pass the
         * executor's pointer checks, and kernels may touch them */
        void *base;
        size_t bytes;
        ptx_module_storage(m->ptx, &base, &bytes);
        if (bytes > 0)
            r = gl_exec_add_global(gl_exec_current(), (uint64_t)(uintptr_t)base, bytes, m);
    }
    m->load_error = r;
    return r;
}

/* A module the program loads itself is translated at once, so a driver-API
 * program learns of bad PTX from its load. A library is loaded lazily:
 * cudart registers every image of a program as a library when it starts,
 * and most of them are never used, so its PTX is translated when a kernel
 * or a global is first asked of it (docs/cache.md, "Lazy loading"). */
static CUresult load(int kind, void **out, const void *image, size_t size)
{
    if (gl_hsess_of()->sticky != CUDA_SUCCESS)
        return gl_hsess_of()->sticky; /* a lost context loads nothing more */
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
    if (kind == GL_H_MOD) {
        CUresult r = ensure_loaded(m);
        if (r != CUDA_SUCCESS) {
            gl_hobj_free(m);
            return r;
        }
    }
    *out = m;
    return CUDA_SUCCESS;
}

/* Functions made from a module's PTX point into it: such a module stays
 * (without its image and variables' registration) until the session ends. */
static CUresult unload(gl_hmod *m)
{
    if (m->ptx == NULL || m->funcs == 0) {
        gl_hobj_free(m);
        return CUDA_SUCCESS;
    }
    gl_exec_drop_globals(gl_exec_current(), m);
    m->unloaded = 1;
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
    return unload((gl_hmod *)hmod);
}

CUresult hb_cuLibraryUnload(CUlibrary library)
{
    return unload((gl_hmod *)library);
}

CUresult hb_cuModuleGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
    gl_hmod *m = (gl_hmod *)hmod;
    void *addr;
    size_t size;
    if (m->unloaded)
        return CUDA_ERROR_NOT_FOUND;
    CUresult r = ensure_loaded(m);
    if (r != CUDA_SUCCESS)
        return r;
    if (m->ptx == NULL || m->unloaded || ptx_module_global(m->ptx, name, &addr, &size) != 0)
        return CUDA_ERROR_NOT_FOUND;
    *dptr = (CUdeviceptr)(uintptr_t)addr;
    *bytes = size;
    return CUDA_SUCCESS;
}

/* A checkpoint's copy of a module's variables (docs/consistency.md): the whole
 * storage, in pieces. A library not yet translated has none to keep (its first
 * use on the new server translates it from the image, as here). */
CUresult hb_glModuleVarsRead(cuuint64_t handle, size_t offset, void *dst, size_t n, size_t *size)
{
    gl_hmod *m = (gl_hmod *)(uintptr_t)handle;
    void *base = NULL;
    size_t bytes = 0;
    if (m->unloaded)
        return CUDA_ERROR_INVALID_HANDLE;
    if (m->loaded && m->load_error == CUDA_SUCCESS && m->ptx != NULL)
        ptx_module_storage(m->ptx, &base, &bytes);
    if (offset > bytes)
        return CUDA_ERROR_INVALID_VALUE;
    size_t got = bytes - offset < n ? bytes - offset : n;
    if (got > 0)
        memcpy(dst, (const uint8_t *)base + offset, got);
    memset((uint8_t *)dst + got, 0, n - got);
    *size = bytes;
    return CUDA_SUCCESS;
}

CUresult hb_glModuleVarsWrite(cuuint64_t handle, size_t offset, const void *src, size_t n)
{
    gl_hmod *m = (gl_hmod *)(uintptr_t)handle;
    void *base = NULL;
    size_t bytes = 0;
    if (m->unloaded)
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult r = ensure_loaded(m);
    if (r != CUDA_SUCCESS)
        return r;
    if (m->ptx != NULL)
        ptx_module_storage(m->ptx, &base, &bytes);
    if (offset > bytes || n > bytes - offset)
        return CUDA_ERROR_INVALID_VALUE;
    if (n > 0)
        memcpy((uint8_t *)base + offset, src, n);
    return CUDA_SUCCESS;
}

/* --------------------------------------------------------------- functions */

static CUresult make_func(int kind, const char *name, const gl_kernel_impl *impl,
                          const ptx_kernel *ptx, gl_hmod *mod, void **out)
{
    size_t len = strlen(name);
    gl_hfunc *f = gl_hobj_new(kind, sizeof *f + len + 1);
    if (f == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(f->name, name, len + 1);
    f->impl = *impl;
    f->ptx = ptx;
    f->mod = mod;
    if (ptx != NULL)
        mod->funcs++;
    *out = f;
    return CUDA_SUCCESS;
}

/* GLEAM_HOST_KERNELS=0 turns the registry off: every kernel runs from PTX. */
static int registry_enabled(void)
{
    const char *v = getenv("GLEAM_HOST_KERNELS");
    return v == NULL || strcmp(v, "0") != 0;
}

/* Why the host device cannot run kernel NAME of a machine-code-only image:
 * the targets it carries and the nvcc flag that adds PTX. */
static void note_machine_code_only(gl_exec *x, const gl_hmod *m, const char *name)
{
    /* Name the flag for the image's own architecture: "sm_80,..." -> 80. */
    const char *sm = strstr(m->targets, "sm_");
    int arch = sm != NULL ? atoi(sm + 3) : 0;
    char flag[64];
    if (arch > 0)
        snprintf(flag, sizeof flag, "-gencode arch=compute_%d,code=compute_%d", arch, arch);
    else
        snprintf(flag, sizeof flag, "-gencode arch=compute_XX,code=compute_XX");
    gl_exec_note(x, "no host implementation for kernel %s, and its image carries no PTX "
                 "(only %s); rebuild it with %s to add PTX", name, m->targets, flag);
}

static CUresult resolve(int kind, gl_hmod *m, const char *name, void **out)
{
    if (m->unloaded)
        return CUDA_ERROR_NOT_FOUND;
    CUresult r = ensure_loaded(m);
    if (r != CUDA_SUCCESS)
        return r;
    if (!gl_himage_has(m, name)) {
        /* Compressed machine code hides its names; the reason is the same. */
        if (m->ptx == NULL && m->targets[0] != 0)
            note_machine_code_only(gl_exec_current(), m, name);
        return CUDA_ERROR_NOT_FOUND;
    }
    gl_kernel_impl impl = {.native = -1};
    gl_exec *x = gl_exec_current();
    if (registry_enabled() && gl_py_kernel_resolve(x->be->user, name, &impl) == 1
        && impl.nparams <= GL_KERNEL_MAX_PARAMS && impl.native < NBUILTINS
        && (impl.native >= 0 || impl.handle != NULL))
        return make_func(kind, name, &impl, NULL, NULL, out);
    const ptx_kernel *k = m->ptx != NULL ? ptx_module_kernel(m->ptx, name) : NULL;
    if (k == NULL) {
        if (m->ptx == NULL && m->targets[0] != 0)
            note_machine_code_only(x, m, name);
        else
            gl_exec_note(x, "no host implementation for kernel %s", name);
        return CUDA_ERROR_NOT_FOUND;
    }
    ptx_kernel_info info;
    ptx_kernel_get_info(k, &info);
    impl = (gl_kernel_impl){.native = -1, .nparams = info.nparams};
    for (uint32_t p = 0; p < info.nparams && p < GL_KERNEL_MAX_PARAMS; p++) {
        impl.offsets[p] = info.param_offsets[p];
        impl.sizes[p] = info.param_sizes[p];
    }
    return make_func(kind, name, &impl, k, m, out);
}

CUresult hb_cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    return resolve(GL_H_FUNC, (gl_hmod *)hmod, name, (void **)hfunc);
}

CUresult hb_cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    return resolve(GL_H_KERNEL, (gl_hmod *)library, name, (void **)pKernel);
}

CUresult hb_cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    const gl_hfunc *k = (const gl_hfunc *)kernel;
    return make_func(GL_H_FUNC, k->name, &k->impl, k->ptx, k->mod, (void **)pFunc);
}

CUresult hb_cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    const gl_hfunc *f = (const gl_hfunc *)hfunc;
    ptx_kernel_info info = {0};
    if (f->ptx != NULL)
        ptx_kernel_get_info(f->ptx, &info);
    switch ((int)attrib) {
    /* From the PTX's launch bounds and declared registers (gl_launch_bounds.h). */
    case GL_FUNC_ATTR_MAX_THREADS_PER_BLOCK:
        *pi = (int)gl_kernel_max_threads(info.max_threads, info.maxnreg);
        break;
    case GL_FUNC_ATTR_SHARED_SIZE_BYTES: *pi = (int)info.static_shared; break;
    case 2: /* CONST_SIZE_BYTES: the module's .const variables, which the kernel can read */
        *pi = info.const_size > INT32_MAX ? INT32_MAX : (int)info.const_size;
        break;
    case 3: /* LOCAL_SIZE_BYTES */ *pi = (int)info.local_size; break;
    case GL_FUNC_ATTR_NUM_REGS:
        if (f->ptx == NULL) { /* a host implementation has no PTX registers */
            *pi = 0;
            break;
        }
        *pi = (int)gl_kernel_num_regs(ptx_kernel_live_registers(f->ptx), info.max_threads,
                                      info.maxnreg);
        /* the link's register limit, which a GPU's JIT honours by spilling */
        if (f->mod->max_registers != 0 && (uint32_t)*pi > f->mod->max_registers)
            *pi = (int)f->mod->max_registers;
        break;
    case GL_FUNC_ATTR_PTX_VERSION: { /* the PTX's own .target: CUB sizes its tiles by it */
        unsigned target = f->ptx != NULL ? ptx_module_target(f->mod->ptx) : 0;
        *pi = f->ptx == NULL ? 0 : target != 0 ? (int)target : 80;
        break;
    }
    case GL_FUNC_ATTR_BINARY_VERSION: *pi = f->ptx != NULL ? 80 : 0; break; /* the device's */
    case 8: /* MAX_DYNAMIC_SHARED_SIZE_BYTES: as set, else all the device has */
        *pi = f->dynamic_shared_set ? f->dynamic_shared
                                    : (int)(PTX_MAX_SHARED - info.dyn_base);
        break;
    default: *pi = 0; break;
    }
    return CUDA_SUCCESS;
}

/* 9: CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, a percentage or -1. */
#define FUNC_ATTR_CARVEOUT 9

/* The two attributes a program may set that matter on the host device: the
 * dynamic shared memory a launch may ask for (up to what the device has
 * beside the static shared memory; kept, so that reading it back gives what
 * was set, as on a GPU) and the carveout hint. Others (cluster shapes) are
 * refused as for a device without clusters. */
CUresult hb_cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    gl_hfunc *f = (gl_hfunc *)hfunc;
    ptx_kernel_info info = {0};

    if (attrib == FUNC_ATTR_CARVEOUT)
        return value >= -1 && value <= 100 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (attrib != 8) /* MAX_DYNAMIC_SHARED_SIZE_BYTES */
        return CUDA_ERROR_INVALID_VALUE;
    if (f->ptx != NULL)
        ptx_kernel_get_info(f->ptx, &info);
    if (value < 0 || (uint64_t)value > PTX_MAX_SHARED - info.dyn_base)
        return CUDA_ERROR_INVALID_VALUE;
    f->dynamic_shared_set = 1;
    f->dynamic_shared = value;
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

static CUresult launch_ptx(const gl_hfunc *fn, const gl_launch *l, gl_hsess *s, int cooperative)
{
    char err[1024];
    ptx_kernel_info info;
    ptx_kernel_get_info(fn->ptx, &info);
    ptx_devrt_launch(l->x->devrt, info.devrt_uses);
    ptx_launch_args a = {
        .cooperative = cooperative,
        .grid = {l->grid[0], l->grid[1], l->grid[2]},
        .block = {l->block[0], l->block[1], l->block[2]},
        .dynamic_shared = l->shared,
        .params = l->params,
        .params_len = l->params_len,
        .allocs = &l->x->allocs,
        .extra = &l->x->globals,
        .texture = gl_host_texture,
        .texture_ctx = l->x,
        .rt = l->x->devrt,
        .err = err,
        .err_len = sizeof err,
    };
    int rc = ptx_launch(fn->mod->ptx, fn->ptx, &a);
    uint64_t dropped = ptx_devrt_take_dropped(l->x->devrt);
    if (dropped > 0) /* as a GPU's full FIFO loses them; said in the log and, with an error, to the program */
        gl_exec_note(l->x, "kernel %s: device printf lost %llu record%s: they did not fit the "
                     "printf FIFO (CU_LIMIT_PRINTF_FIFO_SIZE; cudaDeviceSetLimit raises it)",
                     fn->name, (unsigned long long)dropped, dropped == 1 ? "" : "s");
    if (rc == PTX_OK)
        return CUDA_SUCCESS;
    gl_exec_note(l->x, "kernel %s: %s", fn->name, err);
    if (rc == PTX_E_INVALID_VALUE)
        return CUDA_ERROR_INVALID_VALUE;
    if (rc == PTX_E_OUT_OF_MEMORY)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == PTX_E_OUT_OF_RESOURCES) /* it did not start: the context is not lost */
        return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    s->sticky = (CUresult)rc;
    return (CUresult)rc;
}

/* A cooperative grid must fit at once: at most the active blocks of its
 * shape per multiprocessor (a core) times the cores, as on a GPU. */
static CUresult cooperative_fits(CUfunction f, const gl_launch *l)
{
    int per_sm = 0;
    uint64_t threads = (uint64_t)l->block[0] * l->block[1] * l->block[2];
    uint64_t blocks = (uint64_t)l->grid[0] * l->grid[1] * l->grid[2];
    long cores = sysconf(_SC_NPROCESSORS_ONLN); /* the multiprocessors it reports */
    CUresult r = hb_cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, (int)threads,
                                                                 l->shared);
    if (r != CUDA_SUCCESS)
        return r;
    if (blocks > (uint64_t)per_sm * (uint64_t)(cores > 0 ? cores : 1)) {
        gl_exec_note(l->x, "a cooperative grid of %llu blocks of %llu threads does not fit at "
                     "once (at most %d per multiprocessor, %ld multiprocessors)",
                     (unsigned long long)blocks, (unsigned long long)threads, per_sm, cores);
        return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    }
    return CUDA_SUCCESS;
}

static CUresult launch(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                       unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                       unsigned int blockDimZ, unsigned int sharedMemBytes, const void *params,
                       size_t size, int cooperative)
{
    const gl_hfunc *fn = (const gl_hfunc *)f;
    gl_hsess *s = gl_hsess_of();
    if (s->sticky != CUDA_SUCCESS)
        return s->sticky;
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
    CUresult r = cooperative ? cooperative_fits(f, &l) : CUDA_SUCCESS;
    if (r != CUDA_SUCCESS)
        return r;
    if (fn->ptx != NULL) {
        ptx_kernel_info info;
        ptx_kernel_get_info(fn->ptx, &info);
        uint32_t most = gl_kernel_max_threads(info.max_threads, info.maxnreg);
        if (threads > most) { /* the interposer refuses it first when it knows the bounds */
            gl_exec_note(l.x, "kernel %s: a block of %llu threads is over its launch bounds "
                         "(%u)", fn->name, (unsigned long long)threads, most);
            return CUDA_ERROR_INVALID_VALUE;
        }
        return launch_ptx(fn, &l, s, cooperative);
    }
    /* a host implementation computes the whole grid's result at once */
    if (fn->impl.native >= 0)
        return builtins[fn->impl.native].fn(&l);
    int rc = gl_py_kernel_run(fn->impl.handle, &l);
    return rc == 0 ? CUDA_SUCCESS : (CUresult)rc;
}

CUresult hb_glLaunch(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                     const void *params, size_t size)
{
    (void)hStream;
    return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                  sharedMemBytes, params, size, 0);
}

/* Every block of the grid resident at once, so that a grid-wide barrier
 * works (cooperative groups' grid.sync(), ptx_launch.c). */
CUresult hb_glLaunchCooperative(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                unsigned int gridDimZ, unsigned int blockDimX,
                                unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream,
                                const void *params, size_t size)
{
    (void)hStream;
    return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                  sharedMemBytes, params, size, 1);
}
