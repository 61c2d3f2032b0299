/*
 * module.c — modules, libraries, kernels and functions: loading sends the
 * image one-way; PTX images leave their entries' parameter layouts here, and
 * every function handle carries a layout (or "unknown", for cubin/fatbin,
 * fetched from the server with cuFuncGetParamInfo once, then cached).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "internal.h"
#include "ptx/ptx_devrt.h"

typedef struct {
    pthread_mutex_t lock; /* guards known/layout while fetching */
    int known;
    gl_layout layout;
    char *name; /* the entry's (cuFuncGetName) */
} func;

typedef struct {
    int known;
    gl_layout layout;
    char *name; /* the entry's (cuKernelGetName) */
} kernel_entry;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static gl_hmap *g_images;  /* module/library -> gl_entries* (PTX only) */
static gl_hmap *g_kernels; /* CUkernel -> kernel_entry* */
static gl_hmap *g_funcs;   /* CUfunction -> func* */

static void make_maps(void)
{
    g_images = gl_hmap_new();
    g_kernels = gl_hmap_new();
    g_funcs = gl_hmap_new();
}

static int maps(void)
{
    pthread_once(&g_once, make_maps);
    return g_images && g_kernels && g_funcs ? 0 : -1;
}

/* Registers a new handle's layout (a copy; NULL: unknown) and entry name. */
static CUresult add_func(uint64_t h, const gl_layout *layout, const char *name)
{
    func *f = calloc(1, sizeof *f);

    if (f == NULL || maps() != 0 || (f->name = strdup(name)) == NULL)
        goto oom;
    pthread_mutex_init(&f->lock, NULL);
    if (layout != NULL) {
        if (gl_layout_copy(&f->layout, layout) != 0)
            goto oom;
        f->known = 1;
    }
    if (gl_hmap_put(g_funcs, h, f) != 0)
        goto oom;
    return CUDA_SUCCESS;
oom:
    if (f != NULL) {
        gl_layout_free(&f->layout);
        free(f->name);
    }
    free(f);
    return CUDA_ERROR_OUT_OF_MEMORY;
}


/* One image at a time may be in parts on the wire: the parts of two images
 * loaded by two threads must not interleave (exec_images.c keeps one stage). */
static pthread_mutex_t g_stage_lock = PTHREAD_MUTEX_INITIALIZER;

/* Graph descriptions are staged the same way (graph_exec.c). */
void gl_stage_lock(void)
{
    pthread_mutex_lock(&g_stage_lock);
}

void gl_stage_unlock(void)
{
    pthread_mutex_unlock(&g_stage_lock);
}

/* An image of more than one copy chunk goes as parts, then a staged load. */
static CUresult send_image(void **handle, const void *image, size_t size, int is_lib, int ptds)
{
    if (size <= GL_COPY_CHUNK)
        return is_lib ? glw_glLibraryLoad((CUlibrary *)handle, image, size, ptds)
                      : glw_glModuleLoad((CUmodule *)handle, image, size, ptds);
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_stage_lock);
    for (size_t off = 0; r == CUDA_SUCCESS && off < size; off += GL_COPY_CHUNK) {
        size_t n = size - off < GL_COPY_CHUNK ? size - off : GL_COPY_CHUNK;
        r = glw_glImagePart((const uint8_t *)image + off, n, ptds);
    }
    if (r == CUDA_SUCCESS)
        r = is_lib ? glw_glLibraryLoadStaged((CUlibrary *)handle, ptds)
                   : glw_glModuleLoadStaged((CUmodule *)handle, ptds);
    pthread_mutex_unlock(&g_stage_lock);
    return r;
}

static CUresult load(void **handle, const void *image, int is_lib, int ptds)
{
    size_t size;
    int is_ptx = 0;
    gl_entries *e = NULL;
    uint8_t *linked = NULL; /* a registration of relocatable code, as a link image */
    CUresult r = gl_ready();

    if (r != CUDA_SUCCESS)
        return r;
    if (handle == NULL || image == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    r = gl_rdc_image(image, &linked, &size);
    if (r == CUDA_SUCCESS)
        image = linked;
    else if (r != CUDA_ERROR_NOT_FOUND)
        return r;
    else if ((r = gl_image_size(image = gl_image_unwrap(image), &size, &is_ptx)) != CUDA_SUCCESS)
        return r;
    if (is_ptx && (e = calloc(1, sizeof *e)) != NULL && gl_ptx_entries(image, e) != 0) {
        free(e); /* unparsable PTX: the server will say what is wrong with it */
        e = NULL;
    }
    r = send_image(handle, image, size, is_lib, ptds);
    if (r == CUDA_SUCCESS && e != NULL && maps() == 0 &&
        gl_hmap_put(g_images, (uint64_t)(uintptr_t)*handle, e) == 0)
        e = NULL;
    if (e != NULL) {
        gl_entries_free(e);
        free(e);
    }
    free(linked);
    return r;
}

CUresult gli_cuModuleLoadData(CUmodule *module, const void *image, int ptds)
{
    return load((void **)module, image, 0, ptds);
}

/* JIT options change how the server compiles, not what the image is. */
CUresult gli_cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                CUjit_option *options, void **optionValues, int ptds)
{
    (void)numOptions;
    (void)options;
    (void)optionValues;
    return load((void **)module, image, 0, ptds);
}

CUresult gli_cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                               void **jitOptionsValues, unsigned int numJitOptions,
                               CUlibraryOption *libraryOptions, void **libraryOptionValues,
                               unsigned int numLibraryOptions, int ptds)
{
    (void)jitOptions;
    (void)jitOptionsValues;
    (void)numJitOptions;
    (void)libraryOptions;
    (void)libraryOptionValues;
    (void)numLibraryOptions;
    return load((void **)library, code, 1, ptds);
}

static const gl_layout *image_layout(uint64_t image, const char *name)
{
    return maps() == 0 ? gl_entries_find(gl_hmap_get(g_images, image), name) : NULL;
}

CUresult gli_cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name, int ptds)
{
    CUresult r = glw_cuModuleGetFunction(hfunc, hmod, name, ptds);

    if (r != CUDA_SUCCESS)
        return r;
    return add_func((uint64_t)(uintptr_t)*hfunc, image_layout((uint64_t)(uintptr_t)hmod, name),
                    name);
}

CUresult gli_cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name, int ptds)
{
    CUresult r = glw_cuLibraryGetKernel(pKernel, library, name, ptds);
    kernel_entry *k;

    if (r != CUDA_SUCCESS)
        return r;
    if (maps() != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    const gl_layout *l = image_layout((uint64_t)(uintptr_t)library, name);
    if ((k = calloc(1, sizeof *k)) == NULL || (k->name = strdup(name)) == NULL
        || (l != NULL && gl_layout_copy(&k->layout, l) != 0)
        || gl_hmap_put(g_kernels, (uint64_t)(uintptr_t)*pKernel, k) != 0) {
        if (k != NULL) {
            gl_layout_free(&k->layout);
            free(k->name);
        }
        free(k);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    k->known = l != NULL;
    return CUDA_SUCCESS;
}

CUresult gli_cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel, int ptds)
{
    CUresult r = glw_cuKernelGetFunction(pFunc, kernel, ptds);

    if (r != CUDA_SUCCESS)
        return r;
    const kernel_entry *k = maps() == 0 ? gl_hmap_get(g_kernels, (uint64_t)(uintptr_t)kernel) : NULL;
    if (k == NULL) /* the server minted it, so the client made it: cannot happen */
        return CUDA_ERROR_INVALID_HANDLE;
    return add_func((uint64_t)(uintptr_t)*pFunc, k->known ? &k->layout : NULL, k->name);
}

/* The entry names, kept when the handles were made (CUDA 12.3). A CUkernel
 * may stand for its function here too, as in launches. */
CUresult gls_cuKernelGetName(const char **name, CUkernel hfunc, int ptds)
{
    (void)ptds;
    CUresult r = gl_check_handle(GL_H_KERNEL, (uint64_t)(uintptr_t)hfunc);
    if (r != CUDA_SUCCESS)
        return r;
    if (name == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    const kernel_entry *k = maps() == 0 ? gl_hmap_get(g_kernels, (uint64_t)(uintptr_t)hfunc) : NULL;
    if (k == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = k->name;
    return CUDA_SUCCESS;
}

CUresult gls_cuFuncGetName(const char **name, CUfunction hfunc, int ptds)
{
    uint64_t h = (uint64_t)(uintptr_t)hfunc;

    if (gl_check_handle(GL_H_KERNEL, h) == CUDA_SUCCESS)
        return gls_cuKernelGetName(name, (CUkernel)hfunc, ptds);
    CUresult r = gl_check_handle(GL_H_FUNC, h);
    if (r != CUDA_SUCCESS)
        return r;
    if (name == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    const func *f = maps() == 0 ? gl_hmap_get(g_funcs, h) : NULL;
    if (f == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = f->name;
    return CUDA_SUCCESS;
}

/* CUDA 12 lets a CUkernel stand for the CUfunction of the current context in
 * launches (cuda.core launches this way). The interposer makes that function
 * once per kernel with cuKernelGetFunction and keeps it. The executor runs on
 * one context per session, so one function per kernel is the right one. */
static pthread_mutex_t g_kernel_funcs_lock = PTHREAD_MUTEX_INITIALIZER;
static gl_hmap *g_kernel_funcs; /* CUkernel -> CUfunction */

CUresult gl_launchable(uint64_t h, uint64_t *func)
{
    CUresult r = CUDA_SUCCESS;

    if (gl_check_handle(GL_H_KERNEL, h) != CUDA_SUCCESS) {
        *func = h; /* a function, or something the launch will refuse */
        return CUDA_SUCCESS;
    }
    pthread_mutex_lock(&g_kernel_funcs_lock);
    if (g_kernel_funcs == NULL && (g_kernel_funcs = gl_hmap_new()) == NULL)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    void *known = r == CUDA_SUCCESS ? gl_hmap_get(g_kernel_funcs, h) : NULL;
    if (known != NULL) {
        *func = (uint64_t)(uintptr_t)known;
    } else if (r == CUDA_SUCCESS) {
        CUfunction f;
        r = gli_cuKernelGetFunction(&f, (CUkernel)(uintptr_t)h, 0);
        if (r == CUDA_SUCCESS && gl_hmap_put(g_kernel_funcs, h, f) != 0)
            r = CUDA_ERROR_OUT_OF_MEMORY;
        if (r == CUDA_SUCCESS)
            *func = (uint64_t)(uintptr_t)f;
    }
    pthread_mutex_unlock(&g_kernel_funcs_lock);
    return r;
}

/* The bits of glFuncDevrt's answer that need the device heap. */
#define USES_HEAP ((1u << PTX_BI_MALLOC) | (1u << PTX_BI_FREE))

/* Asks the server for the function's threads per block (its launch bounds,
 * which launch.c checks), then for parameters 0, 1, 2 … until it answers
 * INVALID_VALUE (the end of the list), then which of the device runtime's
 * built-ins the function calls. Any other error is returned and nothing
 * cached, so a deferred error of earlier work surfaces here and the next call
 * retries. */
static CUresult fetch(uint64_t h, gl_layout *out)
{
    int max_threads = 0;
    memset(out, 0, sizeof *out);
    CUresult r = glw_cuFuncGetAttribute(&max_threads, GL_FUNC_ATTR_MAX_THREADS_PER_BLOCK,
                                        (CUfunction)(uintptr_t)h, 0);
    if (r != CUDA_SUCCESS)
        return r;
    for (size_t i = 0;; i++) {
        size_t off = 0, size = 0;
        r = glw_cuFuncGetParamInfo((CUfunction)(uintptr_t)h, i, &off, &size, 0);
        if (r == CUDA_ERROR_INVALID_VALUE) {
            unsigned uses = 0;
            r = glw_glFuncDevrt(&uses, (CUfunction)(uintptr_t)h, 0);
            if (r != CUDA_SUCCESS)
                gl_layout_free(out);
            out->max_threads = max_threads > 0 ? (uint32_t)max_threads : 0;
            out->heap = (uses & USES_HEAP) != 0;
            return r;
        }
        if (r != CUDA_SUCCESS || off > UINT32_MAX || size > UINT32_MAX) {
            gl_layout_free(out);
            return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE;
        }
        uint32_t *o = realloc(out->offset, (i + 1) * sizeof *o);
        if (o != NULL)
            out->offset = o;
        uint32_t *s = o ? realloc(out->size, (i + 1) * sizeof *s) : NULL;
        if (s == NULL) {
            gl_layout_free(out);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        out->size = s;
        out->offset[i] = (uint32_t)off;
        out->size[i] = (uint32_t)size;
        out->count = (uint32_t)(i + 1);
        if (off + size > out->total)
            out->total = (uint32_t)(off + size);
    }
}

/* The function this thread launched last. Every launch asks for its layout,
 * so the map's mutex would be taken per launch; a published function entry
 * lives as long as the process (add_func frees only one it never published),
 * so the cached pointer can never dangle. */
static __thread uint64_t t_last_h;
static __thread func *t_last_f;

CUresult gl_func_layout(uint64_t h, const gl_layout **out)
{
    CUresult r = gl_check_handle(GL_H_FUNC, h);
    func *f = t_last_f;

    if (r != CUDA_SUCCESS)
        return r;
    if (f == NULL || h != t_last_h) {
        if (maps() != 0 || (f = gl_hmap_get(g_funcs, h)) == NULL)
            return CUDA_ERROR_INVALID_HANDLE;
        t_last_h = h;
        t_last_f = f;
    }
    /* A known layout never changes again, so it may be read unlocked: only
     * the first launch of a function whose layout the server holds locks. */
    if (!__atomic_load_n(&f->known, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&f->lock);
        if (!f->known && (r = fetch(h, &f->layout)) == CUDA_SUCCESS)
            __atomic_store_n(&f->known, 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&f->lock);
    }
    *out = &f->layout;
    return r;
}

CUresult gls_cuFuncGetParamInfo(CUfunction func_h, size_t paramIndex, size_t *paramOffset,
                                size_t *paramSize, int ptds)
{
    const gl_layout *l;
    CUresult r = CUDA_SUCCESS;

    (void)ptds;
    if ((r = gl_func_layout((uint64_t)(uintptr_t)func_h, &l)) != CUDA_SUCCESS)
        return r;
    if (paramIndex >= l->count)
        return CUDA_ERROR_INVALID_VALUE;
    if (paramOffset)
        *paramOffset = l->offset[paramIndex];
    if (paramSize)
        *paramSize = l->size[paramIndex];
    return CUDA_SUCCESS;
}
