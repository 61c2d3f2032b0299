/*
 * export_tables.c — cuGetExportTable: the driver's private tables that
 * libcudart (static and shared) asks for by UUID before its first runtime
 * call, answered here in the interposer so that cudart runs unchanged above
 * it (docs/cuda-forwarding.md, "Runtime API (libcudart)").
 *
 * A table is an array of pointers; in most, slot 0 holds the table's size in
 * bytes and the others are functions. NVIDIA documents none of them: what a
 * slot does was learnt by running cudart 12.9 and 13.0 against this file with
 * GLEAM_TRACE=1 (every table asked for and every slot called is logged) and
 * from public notes on these tables (ZLUDA's dark_api, other remoting
 * projects' write-ups); the code is gleam's own. Each table below says which
 * of its slots cudart was seen to call ("traced") and which come from the
 * notes only.
 *
 * Every slot of a listed table that gleam does not implement is a trampoline
 * that says once on stderr which table and slot was called and returns
 * CUDA_ERROR_NOT_SUPPORTED, so a new cudart that needs a new slot fails with
 * a line naming it. A table that is not listed is CUDA_ERROR_NOT_SUPPORTED
 * with one line naming its UUID.
 *
 * Ownership: the tables are static and never freed. Context-local storage
 * (the CLS table) is a small list under a mutex; its values belong to cudart,
 * which also supplies the destructor that gleam calls when the context goes.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gl_client_gen.h"
#include "internal.h"

#define ET_SLOTS 32

/* ------------------------------------------------------------ tracing */

static void et_trace(const char *table, int slot)
{
    if (gl_trace_on)
        fprintf(stderr, "gleam: trace: export table %s slot %d\n", table, slot);
}

/* ------------------------------------------ cudart interface (module loads) */

/* cudart's registration wrapper around the fatbin it embeds (what
 * __cudaRegisterFatBinary receives; nvcc emits it in .nvFatBinSegment). */
typedef struct {
    uint32_t magic; /* 0x466243b1 */
    uint32_t version;
    const void *data; /* the fatbin container */
    const void *filename_or_fatbins;
} et_fatbin_wrapper;

#define ET_FATBIN_WRAPPER_MAGIC 0x466243b1u

static CUresult load_fatbin(CUmodule *module, const void *fatbin)
{
    if (module == NULL || fatbin == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return gli_cuModuleLoadData(module, fatbin, 0);
}

static CUresult load_wrapped(CUmodule *module, const et_fatbin_wrapper *w)
{
    if (w == NULL || w->magic != ET_FATBIN_WRAPPER_MAGIC)
        return CUDA_ERROR_INVALID_IMAGE;
    return load_fatbin(module, w->data);
}

/* Slot 1: load the module of a registered fatbin (eager loading, old cudart). */
static CUresult cudart_get_module(CUmodule *module, const et_fatbin_wrapper *w)
{
    et_trace("cudart_interface", 1);
    return load_wrapped(module, w);
}

/* Slot 2: the primary context of a device, retained, for cudart's device init. */
static CUresult cudart_primary_ctx(CUcontext *pctx, CUdevice dev)
{
    et_trace("cudart_interface", 2);
    return gli_cuDevicePrimaryCtxRetain(pctx, dev, 0);
}

/* Slot 6: as slot 1 with extra arguments (host variables; ignored). */
static CUresult cudart_get_module_ext(CUmodule *module, const et_fatbin_wrapper *w, void *a3,
                                      void *a4, unsigned int a5)
{
    (void)a3, (void)a4, (void)a5;
    et_trace("cudart_interface", 6);
    return load_wrapped(module, w);
}

/* Slot 7: a notification with one word; nothing to do. */
static CUresult cudart_notify(uintptr_t arg)
{
    (void)arg;
    et_trace("cudart_interface", 7);
    return CUDA_SUCCESS;
}

/* Slot 8: as slot 6, given the fatbin container itself. */
static CUresult cudart_get_module_fatbin(const void *fatbin, CUmodule *module, void *a3,
                                         void *a4, unsigned int a5)
{
    (void)a3, (void)a4, (void)a5;
    et_trace("cudart_interface", 8);
    return load_fatbin(module, fatbin);
}

/* ------------------------------------------------------ tools hooks */

/* The tools-callback table hands cudart two buffers it may write into
 * (profiler hook state), each with its size in bytes. cudart checks the
 * sizes: with 512 for the first (older notes count it in words) or 8 bytes
 * for the second, cudart 13 stops with cudaErrorInsufficientDriver; found by
 * tracing (slot 6 is called only once slot 2's buffer is large enough). */
static uintptr_t g_hook_buf1[4096];
static uint8_t g_hook_buf2[4096];

static void tools_buffer1(void **ptr, size_t *size)
{
    et_trace("tools_runtime_callbacks", 2);
    if (ptr)
        *ptr = g_hook_buf1;
    if (size)
        *size = sizeof g_hook_buf1;
}

static void tools_buffer2(void **ptr, size_t *size)
{
    et_trace("tools_runtime_callbacks", 6);
    if (ptr)
        *ptr = g_hook_buf2;
    if (size)
        *size = sizeof g_hook_buf2;
}

/* ---------------------------------------------- context-local storage */

typedef void (*et_cls_dtor)(CUcontext ctx, void *key, void *value);

typedef struct et_cls {
    struct et_cls *next;
    CUcontext ctx;
    void *key;
    void *value;
    et_cls_dtor dtor;
} et_cls;

static pthread_mutex_t g_cls_lock = PTHREAD_MUTEX_INITIALIZER;
static et_cls *g_cls;

static CUcontext cls_ctx(CUcontext ctx)
{
    return ctx != NULL ? ctx : (CUcontext)(uintptr_t)gl_ctx_current();
}

/* Slot 0: store value under (context, key), with the destructor cudart wants
 * called when the context is destroyed or reset. */
static CUresult cls_put(CUcontext ctx, void *key, void *value, et_cls_dtor dtor)
{
    et_trace("context_local_storage", 0);
    ctx = cls_ctx(ctx);
    if (ctx == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&g_cls_lock);
    et_cls *e = g_cls;
    while (e != NULL && !(e->ctx == ctx && e->key == key))
        e = e->next;
    if (e == NULL && (e = calloc(1, sizeof *e)) != NULL) {
        e->next = g_cls;
        g_cls = e;
    }
    if (e != NULL) {
        e->ctx = ctx;
        e->key = key;
        e->value = value;
        e->dtor = dtor;
    }
    pthread_mutex_unlock(&g_cls_lock);
    return e != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* Slot 1: drop (context, key) without calling its destructor (cudart calls
 * it for its own state when it unloads; seen as (primary context, key)). */
static CUresult cls_delete(CUcontext ctx, void *key)
{
    et_trace("context_local_storage", 1);
    ctx = cls_ctx(ctx);
    pthread_mutex_lock(&g_cls_lock);
    for (et_cls **p = &g_cls; *p != NULL; p = &(*p)->next) {
        et_cls *e = *p;
        if (e->ctx == ctx && e->key == key) {
            *p = e->next;
            free(e);
            break;
        }
    }
    pthread_mutex_unlock(&g_cls_lock);
    return CUDA_SUCCESS;
}

/* Slot 2: the value stored under (context, key); CUDA_ERROR_INVALID_HANDLE
 * when none (cudart then creates its per-context state and puts it). */
static CUresult cls_get(void **value, CUcontext ctx, void *key)
{
    CUresult r = CUDA_ERROR_INVALID_HANDLE;

    et_trace("context_local_storage", 2);
    ctx = cls_ctx(ctx);
    if (value == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_cls_lock);
    for (et_cls *e = g_cls; e != NULL; e = e->next) {
        if (e->ctx == ctx && e->key == key) {
            *value = e->value;
            r = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&g_cls_lock);
    return r;
}

void gl_cls_context_gone(uint64_t handle)
{
    CUcontext ctx = (CUcontext)(uintptr_t)handle;
    et_cls *gone = NULL;

    if (ctx == NULL)
        return;
    pthread_mutex_lock(&g_cls_lock);
    for (et_cls **p = &g_cls; *p != NULL;) {
        et_cls *e = *p;
        if (e->ctx == ctx) {
            *p = e->next;
            e->next = gone;
            gone = e;
        } else {
            p = &e->next;
        }
    }
    pthread_mutex_unlock(&g_cls_lock);
    while (gone != NULL) {
        et_cls *e = gone;
        gone = e->next;
        if (e->dtor != NULL)
            e->dtor(ctx, e->key, e->value);
        free(e);
    }
}

/* ------------------------------------------------ context create bypass */

/* Slot 1: cuCtxCreate_v2 without the tools' callbacks. */
static CUresult bypass_ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    et_trace("ctx_create_bypass", 1);
    return gli_cuCtxCreate(pctx, flags, dev, 0);
}

/* ------------------------------------------------------ context checks */

/* Slot 2: cudart asks about a context before using it; gleam's contexts have
 * nothing to report (0, no extra data). */
static CUresult checks_context(CUcontext ctx, uint32_t *flags, const void **extra)
{
    (void)ctx;
    et_trace("context_checks", 2);
    if (flags)
        *flags = 0;
    if (extra)
        *extra = NULL;
    return CUDA_SUCCESS;
}

/* Slot 3: a yes/no query without arguments; no. */
static uint32_t checks_flag(void)
{
    et_trace("context_checks", 3);
    return 0;
}

/* ------------------------------------------------------------ integrity */

static void *g_live_any(const char *name);

/* Slot 1: cudart's check that it talks to a genuine driver (integrity.c). */
static CUresult integrity_check(uint32_t version, uint64_t seconds, uint64_t *result)
{
    et_trace("integrity", 1);
    return gl_integrity_answer(version, seconds, g_live_any("cudart_interface"),
                               g_live_any("integrity"), (const void *)integrity_check, result);
}

/* ------------------------------------------------------- the tables */

typedef struct {
    const char *name;
    uint8_t uuid[16];
    int sized;  /* slot 0 holds the table's size in bytes */
    int nslots; /* including slot 0 */
    void *slots[ET_SLOTS];
} et_table;

/* One table per UUID. A NULL slot (other than a sized table's slot 0)
 * becomes a trampoline that names the slot when called. */
static const et_table g_tables[] = {
    /* Traced: slot 2 (once per device at init). Notes only: 1, 6, 8 (cudart
     * 12.9/13.0 load through cuLibraryLoadData instead), 7. Sized 32 slots
     * so that a newer cudart reaching further gets a trampoline's line. */
    {"cudart_interface",
     {0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d,
      0xf9},
     1, 32,
     {[1] = (void *)cudart_get_module, [2] = (void *)cudart_primary_ctx,
      [6] = (void *)cudart_get_module_ext, [7] = (void *)cudart_notify,
      [8] = (void *)cudart_get_module_fatbin}},
    /* Traced: asked for, no slot called. */
    {"tools_tls",
     {0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec,
      0xdc},
     1, 4, {0}},
    /* Traced: slots 2 then 6; their sizes were found by tracing (above). */
    {"tools_runtime_callbacks",
     {0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a,
      0x66},
     1, 32, {[2] = (void *)tools_buffer1, [6] = (void *)tools_buffer2}},
    /* Traced: 0, 1, 2 (2 on almost every runtime call); no size slot. */
    {"context_local_storage",
     {0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95,
      0x93},
     0, 4, {[0] = (void *)cls_put, [1] = (void *)cls_delete, [2] = (void *)cls_get}},
    /* Traced: 3 at init, 2 before context use; required by cudart 13. */
    {"context_checks",
     {0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa,
      0x7e},
     1, 4, {[2] = (void *)checks_context, [3] = (void *)checks_flag}},
    /* Traced: 1, three times at init; required (integrity.c). */
    {"integrity",
     {0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2},
     1, 3, {[1] = (void *)integrity_check}},
    /* Asked for by cudart 13.2+ (cuda.bindings 13.5's static cudart) after
     * tools TLS; public notes call it a tools context table. */
    {"tools_context",
     {0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8,
      0xf2},
     1, 32, {0}},
    /* Notes only: not asked for by cudart 12.9/13.0. */
    {"ctx_create_bypass",
     {0x0c, 0xa5, 0x0b, 0x8c, 0x10, 0x04, 0x92, 0x9a, 0x89, 0xa7, 0xd0, 0xdf, 0x10, 0xe7, 0x72,
      0x86},
     1, 2, {[1] = (void *)bypass_ctx_create}},
};

#define ET_NTABLES ((int)(sizeof g_tables / sizeof g_tables[0]))

/* Trampolines for the slots gleam does not implement: one per (table, slot). */
static atomic_int g_unimpl_warned[ET_NTABLES][ET_SLOTS];

static CUresult et_unimplemented(int t, int s)
{
    if (t >= ET_NTABLES) /* rows beyond the tables are never handed out */
        return CUDA_ERROR_NOT_SUPPORTED;
    if (atomic_exchange(&g_unimpl_warned[t][s], 1) == 0 || gl_trace_on)
        fprintf(stderr,
                "gleam: export table %s slot %d is not implemented; returning "
                "CUDA_ERROR_NOT_SUPPORTED\n",
                g_tables[t].name, s);
    return CUDA_ERROR_NOT_SUPPORTED;
}

#define ET_T(t, s) \
    static CUresult et_##t##_##s(void) { return et_unimplemented(t, s); }
#define ET_ROW(t)                                                                                 \
    ET_T(t, 0) ET_T(t, 1) ET_T(t, 2) ET_T(t, 3) ET_T(t, 4) ET_T(t, 5) ET_T(t, 6) ET_T(t, 7)       \
    ET_T(t, 8) ET_T(t, 9) ET_T(t, 10) ET_T(t, 11) ET_T(t, 12) ET_T(t, 13) ET_T(t, 14)            \
    ET_T(t, 15) ET_T(t, 16) ET_T(t, 17) ET_T(t, 18) ET_T(t, 19) ET_T(t, 20) ET_T(t, 21)          \
    ET_T(t, 22) ET_T(t, 23) ET_T(t, 24) ET_T(t, 25) ET_T(t, 26) ET_T(t, 27) ET_T(t, 28)          \
    ET_T(t, 29) ET_T(t, 30) ET_T(t, 31)
#define ET_REF(t)                                                                                 \
    {(void *)et_##t##_0, (void *)et_##t##_1, (void *)et_##t##_2, (void *)et_##t##_3,              \
     (void *)et_##t##_4, (void *)et_##t##_5, (void *)et_##t##_6, (void *)et_##t##_7,              \
     (void *)et_##t##_8, (void *)et_##t##_9, (void *)et_##t##_10, (void *)et_##t##_11,            \
     (void *)et_##t##_12, (void *)et_##t##_13, (void *)et_##t##_14, (void *)et_##t##_15,          \
     (void *)et_##t##_16, (void *)et_##t##_17, (void *)et_##t##_18, (void *)et_##t##_19,          \
     (void *)et_##t##_20, (void *)et_##t##_21, (void *)et_##t##_22, (void *)et_##t##_23,          \
     (void *)et_##t##_24, (void *)et_##t##_25, (void *)et_##t##_26, (void *)et_##t##_27,          \
     (void *)et_##t##_28, (void *)et_##t##_29, (void *)et_##t##_30, (void *)et_##t##_31}

/* Enough rows for every table above (checked at start-up). */
ET_ROW(0) ET_ROW(1) ET_ROW(2) ET_ROW(3) ET_ROW(4) ET_ROW(5) ET_ROW(6) ET_ROW(7)
static void *const g_trampolines[8][ET_SLOTS] = {ET_REF(0), ET_REF(1), ET_REF(2), ET_REF(3),
                                                 ET_REF(4), ET_REF(5), ET_REF(6), ET_REF(7)};

_Static_assert(sizeof g_tables / sizeof g_tables[0] <= 8, "add trampoline rows");

/* The tables as handed out: implemented slots, trampolines elsewhere. */
static void *g_live[ET_NTABLES][ET_SLOTS];
static pthread_once_t g_live_once = PTHREAD_ONCE_INIT;

static void build_live(void)
{
    for (int t = 0; t < ET_NTABLES; t++) {
        const et_table *tab = &g_tables[t];
        for (int s = 0; s < tab->nslots; s++)
            g_live[t][s] = tab->slots[s] != NULL ? tab->slots[s] : g_trampolines[t][s];
        if (tab->sized)
            g_live[t][0] = (void *)(uintptr_t)(tab->nslots * sizeof(void *));
    }
}

/* Tables answered CUDA_ERROR_NOT_FOUND (the answer of a driver without them),
 * after which cudart's ordinary initialisation goes on. f8cff951: cudart 13
 * asks for it before cuInit. 21318c60: cudart 13.2+ (cuda.bindings 13.5's)
 * asks for it after tools TLS, and NOT_SUPPORTED there stops cudaSetDevice.
 * da9151d3: the cudart 12 inside CuPy 14 asks for it once it has a context
 * and goes on without it. */
static const struct {
    const char *name;
    uint8_t uuid[16];
} g_refused[] = {
    {"f8cff951", {0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e, 0xb9, 0xe2, 0xfb, 0x46, 0x9e,
                  0x7c, 0x0d, 0xd9}},
    {"da9151d3", {0xda, 0x91, 0x51, 0xd3, 0x3a, 0xe6, 0xcc, 0x41, 0xa5, 0xc0, 0x4f, 0x26, 0xd5,
                  0x33, 0xe3, 0x28}},
};

/* The table handed out under a name (its address enters the integrity answer). */
static void *g_live_any(const char *name)
{
    pthread_once(&g_live_once, build_live);
    for (int t = 0; t < ET_NTABLES; t++)
        if (strcmp(g_tables[t].name, name) == 0)
            return g_live[t];
    return NULL;
}

/* Unknown UUIDs already named on stderr (one line each; a library may ask
 * on every call). Beyond 32 distinct ones every request is named. */
static pthread_mutex_t g_unknown_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t g_unknown[32][16];
static int g_nunknown;

static int first_time_unknown(const uint8_t *uuid)
{
    int first = 1;

    pthread_mutex_lock(&g_unknown_lock);
    for (int i = 0; i < g_nunknown && first; i++)
        first = memcmp(g_unknown[i], uuid, 16) != 0;
    if (first && g_nunknown < 32)
        memcpy(g_unknown[g_nunknown++], uuid, 16);
    pthread_mutex_unlock(&g_unknown_lock);
    return first;
}

static void uuid_text(const uint8_t *u, char out[37])
{
    static const int dash[16] = {0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0};
    char *p = out;

    for (int i = 0; i < 16; i++) {
        p += sprintf(p, "%02x", u[i]);
        if (dash[i])
            *p++ = '-';
    }
    *p = '\0';
}

CUresult gli_cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId, int ptds)
{
    char text[37];

    (void)ptds;
    if (ppExportTable == NULL || pExportTableId == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_once(&g_live_once, build_live);
    for (int t = 0; t < ET_NTABLES; t++) {
        if (memcmp(g_tables[t].uuid, pExportTableId->bytes, 16) == 0) {
            if (gl_trace_on)
                fprintf(stderr, "gleam: trace: export table %s\n", g_tables[t].name);
            /* Only cudart asks for its interface: the caller is a copy of it. */
            if (strcmp(g_tables[t].name, "cudart_interface") == 0)
                gl_caller_mark_cudart();
            *ppExportTable = g_live[t];
            return CUDA_SUCCESS;
        }
    }
    for (size_t k = 0; k < sizeof g_refused / sizeof g_refused[0]; k++) {
        if (memcmp(g_refused[k].uuid, pExportTableId->bytes, 16) == 0) {
            if (gl_trace_on)
                fprintf(stderr, "gleam: trace: export table %s refused (not found)\n",
                        g_refused[k].name);
            gl_trace_as_driver();
            *ppExportTable = NULL;
            return CUDA_ERROR_NOT_FOUND;
        }
    }
    if (first_time_unknown((const uint8_t *)pExportTableId->bytes) || gl_trace_on) {
        uuid_text((const uint8_t *)pExportTableId->bytes, text);
        fprintf(stderr,
                "gleam: export table %s is not provided; returning CUDA_ERROR_NOT_SUPPORTED\n",
                text);
    }
    *ppExportTable = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}
