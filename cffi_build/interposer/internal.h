/*
 * internal.h — what the interposer's own files share beyond client.h. Each
 * block names the file that owns it. Nothing here is exported from the
 * library (it is built with -fvisibility=hidden).
 */
#ifndef GLEAM_INTERPOSER_INTERNAL_H
#define GLEAM_INTERPOSER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/uio.h>

#include "client.h"
#include "gl_array.h"
#include "gl_ring.h"

/* ---- a growable array's room for one more item (pinned.c, mirror.c, graphs) */

/* Room for element n of the array *arr (of *cap elements of elem bytes),
 * doubling from `first`: 0, or -1 when out of memory (*arr unchanged). */
static inline int gl_grow(void *arr, uint32_t *cap, size_t n, size_t elem, uint32_t first)
{
    void **a = arr;
    if (n < *cap)
        return 0;
    uint32_t want = *cap ? *cap * 2 : first;
    void *p = want > *cap ? realloc(*a, (size_t)want * elem) : NULL;
    if (p == NULL)
        return -1;
    *a = p;
    *cap = want;
    return 0;
}

/* ---- session.c: attaching, the socket, the session's fate */

/* Attaches once (cuInit); prints the one stderr line on failure. */
CUresult gl_attach(void);
/* The hello of the attached session; NULL before a successful attach. */
const gl_session_hello *gl_session(void);
/* Marks the session lost (first caller prints the one stderr line). */
void gl_lost(const char *why);
/* Socket I/O on the session; 0 on success, -1 (session lost) otherwise. */
int gl_io_sendv(struct iovec *iov, int n);
int gl_io_recv(void *buf, size_t n);

/* ---- ring.c: the hand-over ring (gl_ring.h) */

/* Maps the ring the agent passed with the HELLO (fd < 0: none) and closes fd. */
void gl_ring_adopt(int fd);
/* Under g_emit: when the ring takes the envelope iov[0 .. n), copies it there
 * and writes the RING envelope to send in its place into note: 1. 0: send the
 * envelope itself. -1: the agent went away while the ring was full (errno). */
int gl_ring_put(int sock, const struct iovec *iov, int n,
                uint8_t note[GL_ENV_HEADER_SIZE + GL_RING_NOTE_SIZE]);

/* ---- batch.c: the batch being filled and the flusher thread */

/* Starts the flusher thread (after a successful attach). */
void gl_batch_start(void);
/* Records appended so far (a counter: whether the program is still making calls). */
uint64_t gl_batch_appended(void);
/* The calling thread's waiting calls answer CUDA_ERROR_NOT_READY at once
 * while a host function holds the records behind it, instead of waiting for it
 * (mirror.c's refresher: it waits holding the lock a host function's graph
 * launch needs). */
void gl_batch_not_behind_hold(void);
/* A one-way record that also changes the executor's current context:
 * set_ctx != 0 makes it the context last sent; forget_ctx drops the memory
 * of it (the server's current context is unknown afterwards). Both happen
 * under the emit lock, in stream order. */
CUresult gl_emit_ctx(uint16_t call, int flags, const uint64_t *args, uint8_t nargs,
                     const void *payload, size_t len, uint64_t set_ctx, uint64_t forget_ctx);

/* ---- synccalls.c: GLEAM_CUDA_SYNC_CALLS (a benchmark knob) */

/* Whether every one-way call waits for the server. */
int gl_sync_calls(void);
/* With the knob on: waits until the calls sent so far have run. */
CUresult gl_sync_after_oneway(void);

/* ---- alloc.c: the session's device address space */

/* Resets the sub-allocator to [base, base + size). */
void gl_va_init(uint64_t base, uint64_t size);
/* 256-byte aligned first fit: INVALID_VALUE for size 0, OUT_OF_MEMORY. */
CUresult gl_va_alloc(uint64_t size, uint64_t *out);
/* The same at a larger power-of-two alignment (a page, for a mapped view). */
CUresult gl_va_alloc_aligned(uint64_t size, uint64_t align, uint64_t *out);
/* Drops the freeable allocation that starts at ptr (INVALID_VALUE if none). */
CUresult gl_va_free(uint64_t ptr);
/* Whether ptr starts a freeable allocation. */
int gl_va_is_base(uint64_t ptr);
/* Bytes of the freeable allocations (what the server counts as used). */
uint64_t gl_va_live(void);
/* The allocation at ptr is the interposer's own: the program cannot free it
 * (gl_va_is_base says no), gl_va_free still can. */
void gl_va_hold(uint64_t ptr);
/* Adds a range the server owns (a module global); it cannot be freed. */
void gl_va_register(uint64_t base, uint64_t size);
/* The live allocation holding ptr: 1 and its range, or 0. */
int gl_va_find(uint64_t ptr, uint64_t *base, uint64_t *size);

/* ---- devheap.c: the device runtime's limits and the host device's heap */

/* Before a launch of a kernel that may call malloc or free: the session's
 * device heap exists (host device). */
CUresult gl_devheap_before_launch(int ptds);
/* cuCtxSetLimit of a limit the serving device holds (0 stack, 1 printf FIFO,
 * 2 malloc heap): the server's answer; runtime.c keeps the value on success. */
CUresult gl_limit_send(CUlimit limit, size_t value, int ptds);
/* The value cuCtxGetLimit answers for limit (runtime.c). */
size_t gl_limit_value(CUlimit limit);

/* ---- pinned.c: page-locked host memory (local) */

/* The pinned allocation holding p: 1 and its range, or 0. */
int gl_pinned_find(const void *p, uintptr_t *base, size_t *size);
/* Mirrors the pinned or registered block holding p (once): its device
 * pointer was asked for. INVALID_VALUE when p is no such memory. */
CUresult gl_pinned_map(const void *p);

/* ---- mirror.c: mapped and managed memory, the program's view kept coherent
 * with the server's copy (docs/cuda-forwarding.md, "Mapped and managed memory") */

enum { GL_MIRROR_MANAGED = 1, GL_MIRROR_HOSTALLOC = 2, GL_MIRROR_REGISTERED = 3 };

/* What the interposer knows of one mirror (a copy: the table may change). */
typedef struct {
    uint64_t dev;   /* device address of its first byte (the server's memory) */
    uint8_t *view;  /* the program's address of its first byte */
    size_t size;    /* bytes, the same on both sides */
    int kind;       /* GL_MIRROR_* */
    unsigned flags; /* as given to cuMemAllocManaged, cuMemHostAlloc, cuMemHostRegister */
} gl_mirror_info;

/* A new mirror of size bytes. view NULL: its view is mapped here at its device
 * address, which the program then uses on both sides (managed memory, mapped
 * host allocations); else view is the program's own memory (cuMemHostRegister),
 * mirrored at a device address of its own. *dev: the device address. */
CUresult gl_mirror_new(int kind, void *view, size_t size, unsigned flags, uint64_t *dev);
/* Drops the mirror of that kind whose view starts at view; INVALID_VALUE if
 * there is none. */
CUresult gl_mirror_free(int kind, const void *view);
/* The mirror whose device range holds p, or whose view holds p: 1 and *m. */
int gl_mirror_by_dev(uint64_t p, gl_mirror_info *m);
/* A managed module variable (.attribute(.managed)) at dev, size bytes, of the
 * program's module handle MODULE: its view is mapped here at dev, filled from
 * the device, and paired with a twin on the server (glManagedVarMirror); once
 * per variable. gl_mirror_drop_module drops a module's before it is unloaded. */
CUresult gl_mirror_module_var(uint64_t dev, size_t size, uint64_t module);
void gl_mirror_drop_module(uint64_t module);
/* Is p in the session's own range (alloc.c)? */
int gl_va_in_session(uint64_t p);
int gl_mirror_by_view(const void *p, gl_mirror_info *m);
/* The device may have written mirrored memory since the program's views were
 * last brought up to date: brings them up to date (one waiting call and the
 * bytes that changed); CUDA_SUCCESS at once otherwise. */
CUresult gl_mirror_refresh(void);
/* Hooks of batch.c around every forwarded record (mirror.c's own excepted):
 * before, the program's changes that the record may read or overwrite go to
 * the server; after, work that may have written mirrored memory is noted (and
 * a synchronous memset of it refreshes the views at once); after a waiting
 * call, the views are refreshed when the device may have written them. */
void gl_mirror_before(uint16_t call, const uint64_t *args, uint8_t nargs);
CUresult gl_mirror_after_emit(uint16_t call, const uint64_t *args, uint8_t nargs);
CUresult gl_mirror_after_wait(uint16_t call, const uint64_t *args, uint8_t nargs, CUresult r);
/* Pushes the program's changes to every mirror that meets [lo, lo + len), or
 * to all of them. */
CUresult gl_mirror_push(int all, uint64_t lo, uint64_t len);
/* Work that may write mirrored memory was sent: the next refresh pulls. */
void gl_mirror_mark_dirty(void);
/* Whether [lo, lo + len) meets a mirror's device range, or its view. */
int gl_mirror_overlaps(uint64_t lo, uint64_t len);
int gl_mirror_view_overlaps(uint64_t lo, uint64_t len);
/* Whether any mirror exists (and this thread is not inside a coherence step,
 * whose own records need no hooks). */
int gl_mirror_any(void);
/* A copy whose sides are device (*dst_dev, *src_dev) or host memory, of
 * dst_n and src_n bytes: a device side inside a mirror becomes its view (host
 * memory, read or written here), and a side that meets a mirror refreshes the
 * views first. Returns 1 with *r when a side was mirrored (the caller copies
 * the rewritten sides unless *r is an error), 0 when none was. */
int gl_mirror_route(uint64_t *dst, int *dst_dev, size_t dst_n, uint64_t *src, int *src_dev,
                    size_t src_n, CUresult *r);

/* ---- managed.c: cuMemAdvise, cuMemPrefetchAsync and the range attributes */

/* A managed mirror went away: its advice goes too. */
void gl_managed_forget(uint64_t dev);
/* The device attributes gleam's coherence decides, whatever the device:
 * 1 and *value for those, 0 for the rest. */
int gl_managed_device_attribute(int attrib, int *value);

/* ---- arrays.c: CUDA arrays (their facts; the host device's storage) */

typedef struct {
    gl_array_desc d;  /* a level's array: that level's extents, levels 0 */
    uint64_t storage; /* the host device's bytes of it (0 when a GPU serves) */
    uint64_t parent;  /* a level's array: its mipmapped array */
    uint32_t level;
    int mipmap;       /* a mipmapped array */
} gl_array_info;
/* The live array (mipmap != 0: mipmapped array) of handle h: 1 and a copy
 * of its facts, or 0. */
int gl_array_find(uint64_t h, int mipmap, gl_array_info *out);
/* Whether the serving device is gleam's host device (arrays get storage). */
int gl_array_serves_host(void);

/* ---- arraycopy.c: copies with an array side (cuMemcpy2D/3D route them here) */
CUresult gl_array_copy3d(const CUDA_MEMCPY3D *p, CUstream stream, int ptds);

/* ---- copies.c: host <-> device copies in chunks of GL_COPY_CHUNK */

CUresult gl_copy_htod(CUdeviceptr dst, const void *src, size_t n, CUstream s, int ptds);
/* Waits for the bytes (also for an asynchronous copy: see copies.c). */
CUresult gl_copy_dtoh(void *dst, CUdeviceptr src, size_t n, CUstream s, int ptds);
/* Either direction, told by address (unified addressing), as cuMemcpy. */
CUresult gl_copy_routed(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, int async,
                        int ptds);

/* ---- context.c: per-thread context stack */

/* The calling thread's current context (0 when none). */
uint64_t gl_ctx_current(void);

/* ---- hmap.c: a map from minted handles to pointers (thread-safe) */

typedef struct gl_hmap gl_hmap;
gl_hmap *gl_hmap_new(void);
void *gl_hmap_get(gl_hmap *m, uint64_t key);
/* Replaces any previous value; returns 0, or -1 when out of memory (or key is 0). */
int gl_hmap_put(gl_hmap *m, uint64_t key, void *value);
/* Removes key and returns its value (NULL if absent). */
void *gl_hmap_take(gl_hmap *m, uint64_t key);

/* ---- ptx.c: images and kernel parameter layouts */

typedef struct {
    uint32_t count;  /* parameters */
    uint32_t total;  /* bytes of the packed parameter buffer */
    uint32_t *offset;
    uint32_t *size;
    uint32_t max_threads; /* threads a block may have (gl_launch_bounds.h); 0: unknown */
    int heap;        /* it may call malloc or free (a device heap must exist) */
} gl_layout;

typedef struct {
    char *name;
    gl_layout layout;
} gl_entry;

typedef struct {
    uint32_t count;
    gl_entry *entries;
} gl_entries;

/* The size of a module image: ELF64, fatbin or NUL-terminated PTX text;
 * CUDA_ERROR_INVALID_IMAGE for anything else. *is_ptx tells which. */
CUresult gl_image_size(const void *image, size_t *size, int *is_ptx);
/* The fatbin inside cudart's registration wrapper, or image itself. */
const void *gl_image_unwrap(const void *image);

/* ---- cooperative.c: cooperative launches */

/* Whether a cooperative grid of this shape fits the serving device at once
 * (occupancy times multiprocessors): CUDA_SUCCESS,
 * CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, or the error of asking. */
CUresult gl_cooperative_fits(CUfunction f, const unsigned grid[3], const unsigned block[3],
                             unsigned shared, int ptds);

/* ---- rdcimage.c: registrations of relocatable device code */

/* A link image (malloc'd) of a registration with objects to link: the
 * registered fatbin, then the objects'; CUDA_ERROR_NOT_FOUND when
 * REGISTRATION is no such thing. */
CUresult gl_rdc_image(const void *registration, uint8_t **image, size_t *size);
/* Parses every .entry's parameter list of PTX text, and whether the module
 * names malloc or free (each layout's heap). Returns 0, or -1 when out of
 * memory or the text is malformed (out is then empty). */
int gl_ptx_entries(const char *ptx, gl_entries *out);
void gl_entries_free(gl_entries *e);
/* The layout of entry name, or NULL. */
const gl_layout *gl_entries_find(const gl_entries *e, const char *name);
/* Deep copy; 0 or -1 when out of memory. */
int gl_layout_copy(gl_layout *dst, const gl_layout *src);
void gl_layout_free(gl_layout *l);

/* ---- module.c: function layouts, used by launch.c */

/* The one stage on the server: parts of one image or graph description at a
 * time (held from the first part to the staged record). */
void gl_stage_lock(void);
void gl_stage_unlock(void);

/* The parameter layout of function f (fetched from the server once when
 * the image did not tell). */
CUresult gl_func_layout(uint64_t f, const gl_layout **out);
/* The function a launch of h runs: h itself, or for a CUkernel its function
 * (made once). */
CUresult gl_launchable(uint64_t h, uint64_t *func);

/* ---- refusals.c: features refused on purpose (IPC, VMM, green contexts) */

/* Why NAME is refused (one clause), or NULL for a name that is simply not
 * forwarded. */
const char *gl_refusal_reason(const char *name);
/* Whether a device attribute announces a refused feature (it then reads 0). */
int gl_refused_attribute(int attrib);

/* ---- launch.c: kernel parameters, packed once for launches and graph kernel nodes */

/* The parameter buffer of a launch of function f: kernelParams packed with
 * the function's layout into *packed (the caller frees it), or the buffer of
 * `extra` as given. *buf and *size describe the result. */
CUresult gl_launch_params(uint64_t f, void **kernelParams, void **extra, uint8_t **packed,
                          const void **buf, size_t *size);
/* Before function f runs (a launch, or a graph's kernel node): the device
 * heap, when its layout says it calls malloc or free. */
CUresult gl_launch_heap(uint64_t f, int ptds);

/* ---- copies2d.c: a 3D copy's two ends (graph memcpy nodes) */

/* Resolves and checks p as cuMemcpy3D would (unified pointers by address):
 * dev[i] whether source (0) and destination (1) are device memory, addr[i]
 * where their first row starts. */
CUresult gl_copy3d_ends(const CUDA_MEMCPY3D *p, int dev[2], uint64_t addr[2]);

/* ---- export_tables.c: cudart's private tables */

/* A context is destroyed or reset: drops its context-local storage and calls
 * the destructors cudart gave (outside any lock; they may call back in). */
void gl_cls_context_gone(uint64_t ctx);

/* ---- caller.c: cudart's calls told from the program's */

/* The object that made the current exported call (gl_caller) is cudart. */
void gl_caller_mark_cudart(void);
/* Whether the current exported call came from an object marked cudart's. */
int gl_caller_is_cudart(void);
/* The undocumented CUresult cudart turns into cudaErrorInvalidConfiguration. */
#define GL_CUDA_ERROR_CUDART_INVALID_CONFIGURATION 9

/* ---- integrity.c: cudart's start-up check of the driver */

/* The 16 bytes cudart expects from the integrity table's slot 1. */
CUresult gl_integrity_answer(uint32_t version, uint64_t seconds, const void *cudart_table,
                             const void *integrity_table, const void *fn, uint64_t out[2]);
/* RFC 1319 MD2 (exported for the tests' check against the RFC's vectors). */
void gl_md2(const void *msg, size_t len, uint8_t out[16]);

/* ---- stream_attrs.c: access policy windows and the persisting L2 limit */
/* CUDA_ERROR_INVALID_VALUE (with a line naming entry) unless the window is
 * one CUDA accepts: hitRatio in [0, 1], known properties, num_bytes within
 * the device's MAX_ACCESS_POLICY_WINDOW_SIZE. */
CUresult gl_access_window_check(const CUaccessPolicyWindow *w, const char *entry);
/* Clamps a persisting L2 size to the device's MAX_PERSISTING_L2_CACHE_SIZE,
 * as NVIDIA's driver documents for cuCtxSetLimit. */
CUresult gl_persisting_l2_clamp(size_t *value, int ptds);

#endif /* GLEAM_INTERPOSER_INTERNAL_H */
