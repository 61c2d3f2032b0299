/*
 * nvrtc_ptx.c — libgleam_nvrtc.so, which `gleam-peer run` preloads: NVRTC
 * compiles for a virtual architecture where the program asks for a real one,
 * and hands back PTX where the program asks for the cubin.
 *
 * Why: a program that compiles with NVRTC at run time asks for the machine
 * code of the device it was given (--gpu-architecture=sm_XX from the device's
 * compute capability), and loads that cubin. The device may be gleam's host
 * device, which runs PTX only, or a session may move to another GPU. PTX runs
 * on both: the host device interprets it, a GPU's driver JIT-compiles it at
 * load (docs/cuda-forwarding.md, "NVRTC").
 *
 * How: the wrappers below take the place of NVRTC's own entry points (the
 * program's references bind to the preloaded library first) and call NVRTC's
 * (dlsym RTLD_NEXT, or the loaded libnvrtc itself when the program reached it
 * from a library opened with RTLD_LOCAL). nvrtcCompileProgram compiles with
 * the options of nvrtc_arch.c; a program so compiled is *remembered*, and its
 * nvrtcGetCUBINSize/nvrtcGetCUBIN answer with nvrtcGetPTXSize/nvrtcGetPTX
 * (the size includes the PTX's NUL, and is what GetCUBIN writes). A compile
 * that fails with the rewritten options is run again with the program's own,
 * so that every error, and the log, is NVRTC's answer to what the program
 * asked. GLEAM_NVRTC_PTX=0 turns all of this off (every call goes to NVRTC
 * unchanged).
 *
 * Ownership: the remembered programs are a global set (g_rewritten), guarded
 * by g_lock; an entry leaves at nvrtcDestroyProgram or at a later compile of
 * the same program that is not rewritten. The wrappers never keep NVRTC's
 * function pointers: each call looks them up.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvrtc_arch.h"

/* NVRTC's ABI as nvrtc.h declares it (CUDA 11-13); its header is not needed to build. */
typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;
#define NVRTC_SUCCESS 0
#define NVRTC_ERROR_INTERNAL_ERROR 11

#define EXPORT __attribute__((visibility("default")))

typedef nvrtcResult (*compile_fn)(nvrtcProgram, int, const char *const *);
typedef nvrtcResult (*size_fn)(nvrtcProgram, size_t *);
typedef nvrtcResult (*code_fn)(nvrtcProgram, char *);
typedef nvrtcResult (*destroy_fn)(nvrtcProgram *);

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static nvrtcProgram *g_rewritten; /* the programs whose "cubin" is their PTX */
static size_t g_count, g_cap;

/* ---- NVRTC's own entry points ---- */

typedef struct {
    const char *name;
    void *found;
} lookup;

static int is_libnvrtc(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base != NULL ? base + 1 : path;
    return strncmp(base, "libnvrtc.so", 11) == 0;
}

static int find_in_loaded(struct dl_phdr_info *info, size_t size, void *arg)
{
    lookup *l = arg;
    (void)size;
    if (info->dlpi_name == NULL || !is_libnvrtc(info->dlpi_name))
        return 0;
    void *handle = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == NULL)
        return 0;
    l->found = dlsym(handle, l->name);
    /* Only drops the reference RTLD_NOLOAD took: the program's own keeps it loaded. */
    dlclose(handle);
    return l->found != NULL;
}

/* NVRTC's name, or NULL (with a line) where no NVRTC is loaded. */
static void *nvrtc(const char *name)
{
    lookup l = {name, dlsym(RTLD_NEXT, name)};
    if (l.found == NULL)
        dl_iterate_phdr(find_in_loaded, &l);
    if (l.found == NULL)
        fprintf(stderr, "gleam: nvrtc: %s: no libnvrtc is loaded in this process\n", name);
    return l.found;
}

/* ---- the remembered programs ---- */

static int find_locked(nvrtcProgram prog, size_t *at)
{
    for (size_t i = 0; i < g_count; i++)
        if (g_rewritten[i] == prog) {
            *at = i;
            return 1;
        }
    return 0;
}

static int is_rewritten(nvrtcProgram prog)
{
    size_t at;
    pthread_mutex_lock(&g_lock);
    int found = find_locked(prog, &at);
    pthread_mutex_unlock(&g_lock);
    return found;
}

/* Returns 0, or -1 when out of memory. */
static int remember(nvrtcProgram prog)
{
    size_t at;
    int r = 0;
    pthread_mutex_lock(&g_lock);
    if (!find_locked(prog, &at)) {
        if (g_count == g_cap) {
            size_t cap = g_cap ? g_cap * 2 : 16;
            nvrtcProgram *grown = realloc(g_rewritten, cap * sizeof *grown);
            if (grown != NULL) {
                g_rewritten = grown;
                g_cap = cap;
            }
        }
        if (g_count < g_cap)
            g_rewritten[g_count++] = prog;
        else
            r = -1;
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

static void forget(nvrtcProgram prog)
{
    size_t at;
    pthread_mutex_lock(&g_lock);
    if (find_locked(prog, &at))
        g_rewritten[at] = g_rewritten[--g_count];
    pthread_mutex_unlock(&g_lock);
}

/* ---- the wrappers ---- */

static int turned_off(void)
{
    const char *env = getenv("GLEAM_NVRTC_PTX");
    return env != NULL && strcmp(env, "0") == 0;
}

static void trace(const gl_nvrtc_options *o)
{
    const char *env = getenv("GLEAM_TRACE"); /* on as the interposer reads it (trace.c) */
    if (env == NULL || env[0] == '\0' || env[0] == '0' || strcmp(env, "errors") == 0)
        return;
    for (int i = 0; i < o->n; i++)
        if (o->owned[i] != NULL)
            fprintf(stderr, "gleam: nvrtc: compiling with %s (PTX where the program asks for "
                    "a cubin; GLEAM_NVRTC_PTX=0 turns this off)\n", o->owned[i]);
}

EXPORT nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int numOptions,
                                       const char *const *options)
{
    compile_fn compile = (compile_fn)nvrtc("nvrtcCompileProgram");
    gl_nvrtc_options o;

    if (compile == NULL)
        return NVRTC_ERROR_INTERNAL_ERROR;
    forget(prog);
    if (turned_off() || gl_nvrtc_options_make(&o, numOptions, options) != 0)
        return compile(prog, numOptions, options);
    if (o.rewritten == 0) {
        gl_nvrtc_options_free(&o);
        return compile(prog, numOptions, options);
    }
    trace(&o);
    nvrtcResult r = compile(prog, o.n, o.opts);
    gl_nvrtc_options_free(&o);
    /* A failure, or no room to remember the program (its cubin would be
     * empty): the compile the program asked for, with NVRTC's own answer. */
    if (r != NVRTC_SUCCESS || remember(prog) != 0)
        r = compile(prog, numOptions, options);
    return r;
}

EXPORT nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t *cubinSizeRet)
{
    size_fn size = (size_fn)nvrtc(is_rewritten(prog) ? "nvrtcGetPTXSize" : "nvrtcGetCUBINSize");
    return size != NULL ? size(prog, cubinSizeRet) : NVRTC_ERROR_INTERNAL_ERROR;
}

EXPORT nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char *cubin)
{
    code_fn code = (code_fn)nvrtc(is_rewritten(prog) ? "nvrtcGetPTX" : "nvrtcGetCUBIN");
    return code != NULL ? code(prog, cubin) : NVRTC_ERROR_INTERNAL_ERROR;
}

EXPORT nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog)
{
    destroy_fn destroy = (destroy_fn)nvrtc("nvrtcDestroyProgram");
    if (prog != NULL)
        forget(*prog);
    return destroy != NULL ? destroy(prog) : NVRTC_ERROR_INTERNAL_ERROR;
}
