/*
 * harness.c — drives the interposer's pure parts and its session code for
 * tests/test_interposer_units.py. Built from the interposer's sources (not
 * the shared library) so that internal functions can be called directly.
 * Each subcommand prints what the Python test checks; CHECK failures print
 * the line and exit 1.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gl_calls.h"
#include "gl_client_gen.h"
#include "internal.h"
#include "wire/records.h"

CUresult cuInit(unsigned int);
CUresult cuDeviceGetCount(int *);
CUresult cuDeviceGetName(char *, int, CUdevice);
CUresult cuDeviceGetAttribute(int *, CUdevice_attribute, CUdevice);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemsetD32_v2(CUdeviceptr, unsigned int, size_t);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
CUresult cuCtxSynchronize(void);
CUresult cuGetProcAddress_v2(const char *, void **, int, cuuint64_t,
                             CUdriverProcAddressQueryResult *);
CUresult cuLinkCreate_v2(unsigned int, CUjit_option *, void **, CUlinkState *);
CUresult cuLinkAddData_v2(CUlinkState, CUjitInputType, void *, size_t, const char *,
                          unsigned int, CUjit_option *, void **);
CUresult cuLinkAddFile_v2(CUlinkState, CUjitInputType, const char *, unsigned int,
                          CUjit_option *, void **);
CUresult cuLinkComplete(CUlinkState, void **, size_t *);
CUresult cuLinkDestroy(CUlinkState);
CUresult cuLaunchKernelEx(const CUlaunchConfig *, CUfunction, void **, void **);
CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);
CUresult cuCtxDestroy_v2(CUcontext);
CUresult cuCtxGetDevice(CUdevice *);

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            printf("CHECK failed at line %d: %s\n", __LINE__, #cond);        \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = calloc(1, (size_t)n + 1);
    CHECK(buf != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static int cmd_ptx(const char *path)
{
    size_t len;
    char *text = slurp(path, &len);
    gl_entries e;

    CHECK(gl_ptx_entries(text, &e) == 0);
    for (uint32_t i = 0; i < e.count; i++) {
        printf("%s %u", e.entries[i].name, e.entries[i].layout.total);
        for (uint32_t k = 0; k < e.entries[i].layout.count; k++)
            printf(" %u:%u", e.entries[i].layout.offset[k], e.entries[i].layout.size[k]);
        printf("\n");
    }
    gl_entries_free(&e);
    free(text);
    return 0;
}

static int cmd_image(const char *path)
{
    size_t len, size = 0;
    char *image = slurp(path, &len);
    int is_ptx = 0;
    CUresult r = gl_image_size(image, &size, &is_ptx);

    printf("%d %zu %d\n", r, size, is_ptx);
    free(image);
    return 0;
}

static int cmd_alloc(void)
{
    const uint64_t base = 0x7f0000000000ull;
    uint64_t a, b, c, d, x;

    gl_va_init(base, 4096);
    CHECK(gl_va_alloc(0, &a) == CUDA_ERROR_INVALID_VALUE);
    CHECK(gl_va_alloc(100, &a) == CUDA_SUCCESS && a == base);
    CHECK(gl_va_alloc(1, &b) == CUDA_SUCCESS && b == base + 256);
    CHECK(gl_va_alloc(1000, &c) == CUDA_SUCCESS && c == base + 512);
    CHECK(c % 256 == 0);
    /* 4096 - 1536 = 2560 left at the end. */
    CHECK(gl_va_alloc(2561, &x) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(gl_va_alloc(2560, &d) == CUDA_SUCCESS && d == base + 1536);
    CHECK(gl_va_alloc(1, &x) == CUDA_ERROR_OUT_OF_MEMORY);
    /* First fit: the hole left by b takes the next small allocation. */
    CHECK(gl_va_free(b) == CUDA_SUCCESS);
    CHECK(gl_va_free(b) == CUDA_ERROR_INVALID_VALUE);
    CHECK(gl_va_free(a + 8) == CUDA_ERROR_INVALID_VALUE);
    CHECK(gl_va_alloc(257, &x) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(gl_va_alloc(200, &x) == CUDA_SUCCESS && x == b);
    /* check_dptr edges. */
    CHECK(gl_check_dptr(0, 0) == CUDA_SUCCESS);
    CHECK(gl_check_dptr(0, 1) == CUDA_ERROR_INVALID_VALUE);
    CHECK(gl_check_dptr(a, 100) == CUDA_SUCCESS);
    CHECK(gl_check_dptr(a, 101) == CUDA_ERROR_INVALID_VALUE);
    CHECK(gl_check_dptr(a + 99, 1) == CUDA_SUCCESS);
    CHECK(gl_check_dptr(a + 99, 0) == CUDA_SUCCESS);
    CHECK(gl_check_dptr(a + 100, 0) == CUDA_ERROR_INVALID_VALUE);
    CHECK(gl_check_dptr(a + 100, 1) == CUDA_ERROR_INVALID_VALUE); /* the gap */
    CHECK(gl_check_dptr(a, UINT64_MAX) == CUDA_ERROR_INVALID_VALUE);
    CHECK(gl_check_dptr(c, 1000) == CUDA_SUCCESS);
    /* A range spanning two allocations is in neither. */
    CHECK(gl_check_dptr(c + 900, 700) == CUDA_ERROR_INVALID_VALUE);
    CHECK(gl_check_dptr(base - 1, 2) == CUDA_ERROR_INVALID_VALUE);
    /* Globals pass the checks but cannot be freed. */
    gl_va_register(0x1000, 64);
    CHECK(gl_check_dptr(0x1010, 48) == CUDA_SUCCESS);
    CHECK(gl_va_free(0x1000) == CUDA_ERROR_INVALID_VALUE);
    /* Handles. */
    uint64_t h = gl_mint(GL_H_STREAM);
    CHECK(h >> 56 == 0x67 && ((h >> 48) & 0xff) == GL_H_STREAM);
    CHECK(gl_check_handle(GL_H_STREAM, h) == CUDA_SUCCESS);
    CHECK(gl_check_handle(GL_H_EVENT, h) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(gl_check_handle(GL_H_STREAM, 2) == CUDA_SUCCESS);
    CHECK(gl_check_handle(GL_H_EVENT, 0) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(gl_stream_arg(0, 1) == 2 && gl_stream_arg(0, 0) == 0 && gl_stream_arg(h, 1) == h);
    printf("ok\n");
    return 0;
}

static const char *name_of(void *fn)
{
    for (int i = 0; i < gl_symbol_count; i++)
        if (gl_symbols[i].fn == fn)
            return gl_symbols[i].name;
    return "?";
}

static int cmd_procaddr(void)
{
    void *fn, *again;
    CUdriverProcAddressQueryResult st = -1;
    typedef CUresult (*unsup)(void);

    CHECK(cuGetProcAddress_v2("cuMemcpyHtoD", &fn, 12000, 0, &st) == CUDA_SUCCESS && st == 0);
    printf("default %s\n", name_of(fn));
    CHECK(cuGetProcAddress_v2("cuMemcpyHtoD", &fn, 12000, 2, &st) == CUDA_SUCCESS);
    printf("ptds %s\n", name_of(fn));
    CHECK(cuGetProcAddress_v2("cuMemcpyHtoDAsync", &fn, 12000, 2, &st) == CUDA_SUCCESS);
    printf("ptsz %s\n", name_of(fn));
    CHECK(cuGetProcAddress_v2("cuEventDestroy", &fn, 3000, 0, &st) == CUDA_SUCCESS);
    printf("old %s\n", name_of(fn));
    CHECK(cuGetProcAddress_v2("cuEventDestroy", &fn, 12000, 2, &st) == CUDA_SUCCESS);
    printf("new %s\n", name_of(fn));
    CHECK(cuGetProcAddress_v2("cuGetProcAddress", &fn, 12000, 0, &st) == CUDA_SUCCESS);
    printf("v2 %s\n", name_of(fn));
    CHECK(cuGetProcAddress_v2("cuLibraryLoadData", &fn, 11080, 0, &st) == CUDA_ERROR_NOT_FOUND);
    printf("too-old %d %s\n", st, fn == NULL ? "null" : "set");
    CHECK(cuGetProcAddress_v2("cuArrayGetPlane", &fn, 12000, 0, &st) == CUDA_SUCCESS && st == 0);
    CHECK(cuGetProcAddress_v2("cuArrayGetPlane", &again, 12000, 0, &st) == CUDA_SUCCESS);
    CHECK(fn == again && fn != NULL);
    CHECK(cuGetProcAddress_v2("cuArrayDestroy", &again, 12000, 0, &st) == CUDA_SUCCESS);
    CHECK(fn != again);
    printf("unsupported %d\n", ((unsup)fn)());
    printf("unsupported %d\n", ((unsup)fn)());
    CHECK(cuGetProcAddress_v2(NULL, &fn, 12000, 0, &st) == CUDA_ERROR_INVALID_VALUE);
    /* Exhausting the trampolines. */
    char name[32];
    CUresult r = CUDA_SUCCESS;
    for (int i = 0; i < 600 && r == CUDA_SUCCESS; i++) {
        snprintf(name, sizeof name, "cuMadeUp%d", i);
        r = cuGetProcAddress_v2(name, &fn, 12000, 0, &st);
    }
    printf("exhausted %d %d\n", r, st);
    return 0;
}

static int cmd_prefix(void)
{
    static uint8_t a[1 << 20], b[1 << 20];
    const uint64_t args[5] = {1, 2, 0x6700000000000001ull, 4, UINT64_MAX};
    const uint32_t lens[] = {0, 1, 7, 8, 9, 65537, 100003};
    gl_batch_writer w;

    for (uint8_t nargs = 0; nargs <= 5; nargs++) {
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
            uint32_t n = lens[k];
            uint8_t payload[100003];
            size_t prefix, pad;
            for (uint32_t i = 0; i < n; i++)
                payload[i] = (uint8_t)(i * 7 + 1);
            CHECK(gl_batch_writer_init(&w, a, sizeof a, 42) == GL_OK);
            CHECK(gl_batch_append_inline(&w, 11, GL_REC_ONEWAY, args, nargs, payload, n) ==
                  GL_OK);
            CHECK(gl_batch_writer_finish(&w) == GL_OK);
            memset(b, 0xAA, sizeof b);
            CHECK(gl_batch_external_prefix(b, 200, 42, 11, GL_REC_ONEWAY, args, nargs, n,
                                           &prefix, &pad) == GL_OK);
            memcpy(b + prefix, payload, n);
            memset(b + prefix + n, 0, pad);
            CHECK(prefix + n + pad == w.len);
            CHECK(memcmp(a, b, w.len) == 0);
            CHECK(gl_batch_validate(b, w.len) == GL_OK);
        }
    }
    size_t prefix, pad;
    CHECK(gl_batch_external_prefix(b, 10, 0, 1, 0, args, 1, 1, &prefix, &pad) == GL_E_FULL);
    CHECK(gl_batch_external_prefix(b, 200, 0, 1, GL_REC_REF, args, 1, 1, &prefix, &pad) ==
          GL_E_INVALID);
    printf("ok\n");
    return 0;
}

static int cmd_init(void)
{
    int n = -1;
    printf("init %d\n", cuInit(0));
    printf("again %d\n", cuInit(0));
    printf("count %d\n", cuDeviceGetCount(&n));
    return 0;
}

static void *destroy_on_another_thread(void *ctx)
{
    CHECK(cuCtxDestroy_v2((CUcontext)ctx) == CUDA_SUCCESS);
    return NULL;
}

static int cmd_session(void)
{
    int n = -1, cc = -1;
    char name[64];
    CUcontext ctx;
    CUdeviceptr d;
    uint8_t out[16];

    printf("init %d\n", cuInit(0));
    CUresult r = cuDeviceGetCount(&n); /* before printing n: argument order is unspecified */
    printf("count %d %d\n", r, n);
    r = cuDeviceGetName(name, sizeof name, 0);
    printf("name %d %s\n", r, name);
    r = cuDeviceGetAttribute(&cc, 75, 0);
    printf("cc %d %d\n", r, cc);
    printf("badattr %d\n", cuDeviceGetAttribute(&cc, 256, 0));
    printf("baddev %d\n", cuDeviceGetName(name, sizeof name, 1));
    printf("noctx %d\n", cuMemAlloc_v2(&d, 4096));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    printf("ctx %llu\n", (unsigned long long)(uintptr_t)ctx);
    CHECK(cuMemAlloc_v2(&d, 4096) == CUDA_SUCCESS);
    printf("dptr %llu\n", (unsigned long long)d);
    CHECK(cuMemsetD32_v2(d, 0xdeadbeef, 1024) == CUDA_SUCCESS);
    printf("outside %d\n", cuMemsetD32_v2(d, 0, 1025));
    /* Above GL_INLINE_MAX: its own envelope, written from this buffer. */
    static uint8_t big[100001];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)(i % 251);
    printf("outside-big %d\n", cuMemcpyHtoD_v2(d, big, sizeof big));
    CUdeviceptr d2;
    CHECK(cuMemAlloc_v2(&d2, sizeof big) == CUDA_SUCCESS);
    CHECK(cuMemcpyHtoD_v2(d2, big, sizeof big) == CUDA_SUCCESS);
    /* cuCtxGetDevice answers from a per-thread cache (asked on every launch);
     * a context another thread destroys must not be answered from it. */
    CUcontext other;
    CUdevice dev = -1;
    CHECK(cuCtxCreate_v2(&other, 0, 0) == CUDA_SUCCESS);
    r = cuCtxGetDevice(&dev);
    printf("ctxdev %d %d", r, dev);
    r = cuCtxGetDevice(&dev);
    printf(" %d %d\n", r, dev);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, destroy_on_another_thread, other) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    printf("destroyed %d\n", cuCtxGetDevice(&dev));
    CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    memset(out, 0, sizeof out);
    printf("dtoh %d", cuMemcpyDtoH_v2(out, d, sizeof out));
    for (size_t i = 0; i < sizeof out; i++)
        printf(" %02x", out[i]);
    printf("\n");
    printf("sync %d\n", cuCtxSynchronize());
    fflush(stdout);
    printf("lost %d\n", cuCtxSynchronize());
    printf("after %d\n", cuMemsetD32_v2(d, 0, 1));
    return 0;
}

/* Eight host-to-device copies large enough for the hand-over ring (gl_ring.h),
 * each printed with its result, then a synchronisation. */
static int cmd_copies(void)
{
    CUcontext ctx;
    CUdeviceptr d;
    static uint8_t big[100001];
    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    CHECK(cuMemAlloc_v2(&d, sizeof big) == CUDA_SUCCESS);
    for (int i = 0; i < 8; i++) {
        for (size_t j = 0; j < sizeof big; j++)
            big[j] = (uint8_t)((j + (size_t)i) % 251);
        printf("copy %d %d\n", i, cuMemcpyHtoD_v2(d, big, sizeof big));
        fflush(stdout);
    }
    printf("sync %d\n", cuCtxSynchronize());
    return 0;
}

/* Three synchronisations, whose replies the test's fake agent fills with the
 * trailer's sections (device output, notes, malformed ones). */
static int cmd_output(void)
{
    CUcontext ctx;
    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    for (int i = 0; i < 3; i++)
        printf("sync %d\n", cuCtxSynchronize());
    return 0;
}

/* cuLink*: one image links to itself; the logs come back empty. */
static int cmd_link(const char *ptx_path)
{
    static const char ptx[] = ".version 8.0\n.target sm_80\n.address_size 64\n"
                              ".visible .entry k()\n{\n\tret;\n}\n";
    char info[64] = "stale", errlog[64] = "stale";
    CUjit_option opts[5] = {GL_CU_JIT_INFO_LOG_BUFFER, GL_CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                            GL_CU_JIT_ERROR_LOG_BUFFER, GL_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                            GL_CU_JIT_WALL_TIME};
    void *vals[5] = {info, (void *)(uintptr_t)sizeof info, errlog,
                     (void *)(uintptr_t)sizeof errlog, NULL};
    CUlinkState st;
    void *out;
    size_t size;

    CHECK(cuLinkCreate_v2(5, opts, vals, &st) == CUDA_SUCCESS);
    CHECK(info[0] == 0 && errlog[0] == 0 && vals[1] == NULL && vals[3] == NULL);
    printf("empty %d\n", cuLinkComplete(st, &out, &size));
    /* a size without the NUL, as cuda.core passes it */
    CHECK(cuLinkAddData_v2(st, GL_CU_JIT_INPUT_PTX, (void *)ptx, sizeof ptx - 1, "k.ptx", 0,
                           NULL, NULL) == CUDA_SUCCESS);
    CHECK(cuLinkComplete(st, &out, &size) == CUDA_SUCCESS);
    printf("one %zu %d\n", size, size == sizeof ptx && memcmp(out, ptx, sizeof ptx) == 0);
    printf("nvvm %d\n", cuLinkAddData_v2(st, GL_CU_JIT_INPUT_NVVM, (void *)ptx, sizeof ptx,
                                         "k.ltoir", 0, NULL, NULL));
    printf("after %d\n", cuLinkAddData_v2(st, GL_CU_JIT_INPUT_PTX, (void *)ptx, sizeof ptx,
                                          "after", 0, NULL, NULL));
    CHECK(cuLinkDestroy(st) == CUDA_SUCCESS);

    /* two inputs: a link image the serving device links when it is loaded */
    CHECK(cuLinkCreate_v2(0, NULL, NULL, &st) == CUDA_SUCCESS);
    CHECK(cuLinkAddData_v2(st, GL_CU_JIT_INPUT_PTX, (void *)ptx, sizeof ptx, "a", 0, NULL,
                           NULL) == CUDA_SUCCESS);
    CHECK(cuLinkAddData_v2(st, GL_CU_JIT_INPUT_PTX, (void *)ptx, sizeof ptx, "b", 0, NULL,
                           NULL) == CUDA_SUCCESS);
    printf("two %d %d\n", cuLinkComplete(st, &out, &size), size > 0);
    CHECK(cuLinkDestroy(st) == CUDA_SUCCESS);

    CHECK(cuLinkCreate_v2(0, NULL, NULL, &st) == CUDA_SUCCESS);
    printf("nofile %d\n", cuLinkAddFile_v2(st, GL_CU_JIT_INPUT_PTX, "/nonexistent/k.ptx", 0,
                                           NULL, NULL));
    CHECK(cuLinkAddFile_v2(st, GL_CU_JIT_INPUT_PTX, ptx_path, 0, NULL, NULL) == CUDA_SUCCESS);
    CHECK(cuLinkComplete(st, &out, &size) == CUDA_SUCCESS);
    printf("file %zu %d\n", size, memcmp(out, ptx, sizeof ptx) == 0);
    CHECK(cuLinkDestroy(st) == CUDA_SUCCESS);

    /* launch attributes: hints and COOPERATIVE pass (to the session check) */
    CUlaunchAttribute attr = {.id = GL_CU_LAUNCH_ATTRIBUTE_PRIORITY};
    CUlaunchConfig cfg = {1, 1, 1, 1, 1, 1, 0, NULL, &attr, 1};
    printf("priority %d\n", cuLaunchKernelEx(&cfg, NULL, NULL, NULL));
    attr.id = GL_CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attr.value.cooperative = 1;
    printf("cooperative %d\n", cuLaunchKernelEx(&cfg, NULL, NULL, NULL));
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 3 && strcmp(argv[1], "ptx") == 0)
        return cmd_ptx(argv[2]);
    if (argc == 3 && strcmp(argv[1], "image") == 0)
        return cmd_image(argv[2]);
    if (argc == 2 && strcmp(argv[1], "alloc") == 0)
        return cmd_alloc();
    if (argc == 2 && strcmp(argv[1], "procaddr") == 0)
        return cmd_procaddr();
    if (argc == 2 && strcmp(argv[1], "prefix") == 0)
        return cmd_prefix();
    if (argc == 2 && strcmp(argv[1], "init") == 0)
        return cmd_init();
    if (argc == 2 && strcmp(argv[1], "session") == 0)
        return cmd_session();
    if (argc == 3 && strcmp(argv[1], "link") == 0)
        return cmd_link(argv[2]);
    if (argc == 2 && strcmp(argv[1], "copies") == 0)
        return cmd_copies();
    if (argc == 2 && strcmp(argv[1], "output") == 0)
        return cmd_output();
    fprintf(stderr,
            "usage: harness ptx|image|link FILE | alloc|procaddr|prefix|init|session|output\n");
    return 2;
}
