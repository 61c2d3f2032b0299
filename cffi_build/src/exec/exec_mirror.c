/*
 * exec_mirror.c — the server half of mapped and managed memory. A *mirror* is
 * a device allocation whose contents the program also holds in its own memory
 * (interposer/mirror.c). The server keeps, beside it, a *twin*: a second
 * allocation of the same size holding what the program was last known to
 * have. glMirrorPush applies the bytes the program changed to both;
 * glMirrorPull, after all earlier work, sends the bytes the device changed
 * (memory against twin) and copies them into the twin. The encoding is
 * include/gl_mirror_diff.h.
 *
 * State: none of its own. A mirror is the allocation's range in x->allocs with
 * its tag set to the twin's base address (plain allocations have tag 0), so it
 * goes away with the allocation; a managed module variable's mirror is its
 * range in x->managed_vars (glManagedVarMirror), gone with its module, and both halves are ordinary session memory:
 * a checkpoint's snapshot keeps them and a replay rebuilds them
 * (docs/consistency.md). Everything the client sends is checked against the
 * session's own allocations before anything is written.
 *
 * The host device's memory is this process's mapping and is read in place;
 * the cuda backend's goes through its copy slots, a stage at a time.
 */
#include <stdlib.h>
#include <string.h>

#include "executor.h"
#include "gl_calls.h"
#include "gl_mirror_diff.h"

/* Bytes the cuda backend stages per step (a multiple of GL_DIFF_BLOCK). */
#define GL_MIRROR_STAGE ((size_t)64 << 10)

static int in_place(gl_exec *x)
{
    return x->be->kind == GL_BACKEND_HOST;
}

/* The twin of the mirror r, or 0 when r is not a mirror or its twin is no
 * longer an allocation of at least r's size. */
static uint64_t twin_of(gl_exec *x, const gl_range *r)
{
    if (r->tag == 0)
        return 0;
    long t = gl_ranges_index_of_base(&x->allocs, (uint64_t)r->tag);
    if (t < 0 || x->allocs.r[t].size < r->size || x->allocs.r[t].tag != 0)
        return 0;
    return (uint64_t)r->tag;
}

static CUresult dev_read(gl_exec *x, uint64_t src, void *dst, size_t n)
{
    return ((gl_fn_glMemcpyDtoH)gl_exec_slot(x, GL_CALL_glMemcpyDtoH))(dst, src, n, NULL);
}

static CUresult dev_write(gl_exec *x, uint64_t dst, const void *src, size_t n)
{
    return ((gl_fn_glMemcpyHtoD)gl_exec_slot(x, GL_CALL_glMemcpyHtoD))(dst, src, n, NULL);
}

/* Both halves start as zeros, which is what the program's fresh view holds. */
static CUresult zero(gl_exec *x, uint64_t p, uint64_t size)
{
    if (in_place(x))
        return x->be->ops->unmap(x, p, size); /* the host's unmap zeroes, cheaply */
    return ((gl_fn_cuMemsetD8)gl_exec_slot(x, GL_CALL_cuMemsetD8))(p, 0, size);
}

/* Is TWIN some mirror's twin already? */
static int is_a_twin(const gl_exec *x, uint64_t twin)
{
    for (size_t i = 0; i < x->allocs.n; i++)
        if (x->allocs.r[i].tag == twin)
            return 1;
    for (size_t i = 0; i < x->managed_vars.n; i++)
        if (x->managed_vars.r[i].tag == twin)
            return 1;
    return 0;
}

CUresult gx_glMirrorAdd(gl_exec *x, CUdeviceptr dptr, CUdeviceptr twin, size_t size)
{
    long d = gl_ranges_index_of_base(&x->allocs, dptr);
    long t = gl_ranges_index_of_base(&x->allocs, twin);
    if (d < 0 || t < 0 || d == t || x->allocs.r[d].size != size || x->allocs.r[t].size != size
        || x->allocs.r[d].tag != 0 || x->allocs.r[t].tag != 0)
        goto refused;
    /* Neither half may be some other mirror's twin already. */
    if (is_a_twin(x, twin) || is_a_twin(x, dptr))
        goto refused;
    CUresult r = zero(x, dptr, size);
    if (r == CUDA_SUCCESS)
        r = zero(x, twin, size);
    if (r != CUDA_SUCCESS)
        return r;
    x->allocs.r[d].tag = (uintptr_t)twin;
    return CUDA_SUCCESS;
refused:
    gl_exec_note(x, "glMirrorAdd: 0x%llx and its twin 0x%llx are not two fresh allocations of "
                 "%zu bytes", (unsigned long long)dptr, (unsigned long long)twin, size);
    return CUDA_ERROR_INVALID_VALUE;
}

/* The mirror holding [addr, addr + len) and its twin's base, or NULL. */
static const gl_range *mirror_of(gl_exec *x, uint64_t addr, uint64_t len, uint64_t *twin)
{
    const gl_range *r = gl_ranges_find(&x->allocs, addr, len);
    if (r == NULL || (*twin = twin_of(x, r)) == 0)
        r = gl_ranges_find(&x->managed_vars, addr, len);
    if (r == NULL)
        return NULL;
    *twin = twin_of(x, r);
    return *twin != 0 ? r : NULL;
}

/* A managed module variable (.attribute(.managed)): its pages of the module's
 * storage become a mirror whose twin starts as a copy of them, since the
 * program's view is filled from the variable, not zeroed. Checked: the range
 * lies in a module global of this session and is no mirror yet, the twin is a
 * fresh allocation of its size that no mirror uses. */
CUresult gx_glManagedVarMirror(gl_exec *x, CUdeviceptr var, CUdeviceptr twin, size_t size)
{
    long t = gl_ranges_index_of_base(&x->allocs, twin);
    int in_global = 0;
    for (size_t g = 0; g < x->globals.n && !in_global; g++)
        in_global = gl_range_holds(&x->globals.r[g], var, size);
    size_t at = gl_ranges_upper(&x->managed_vars, var);
    const gl_range *prev = at > 0 ? &x->managed_vars.r[at - 1] : NULL;
    const gl_range *next = at < x->managed_vars.n ? &x->managed_vars.r[at] : NULL;
    if (size == 0 || t < 0 || x->allocs.r[t].size != size || x->allocs.r[t].tag != 0
        || !in_global || is_a_twin(x, twin) || (prev && prev->base + prev->size > var)
        || (next && next->base < var + size)) {
        gl_exec_note(x, "glManagedVarMirror: 0x%llx (%zu bytes) is no unmirrored module "
                     "variable, or its twin 0x%llx no fresh allocation of that size",
                     (unsigned long long)var, size, (unsigned long long)twin);
        return CUDA_ERROR_INVALID_VALUE;
    }
    uint8_t buf[GL_DIFF_BLOCK];
    for (size_t off = 0; off < size; off += sizeof buf) {
        size_t step = size - off < sizeof buf ? size - off : sizeof buf;
        CUresult r = dev_read(x, var + off, buf, step);
        if (r == CUDA_SUCCESS)
            r = dev_write(x, twin + off, buf, step);
        if (r != CUDA_SUCCESS)
            return r;
    }
    if (gl_ranges_insert(&x->managed_vars, at, (gl_range){var, size, (uintptr_t)twin}) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return CUDA_SUCCESS;
}

static CUresult apply_staged(gl_exec *x, const gl_diff_entry *e, uint64_t twin_addr,
                             size_t *both)
{
    uint8_t mem[GL_DIFF_BLOCK], tw[GL_DIFF_BLOCK];
    CUresult r = dev_read(x, e->addr, mem, e->len);
    if (r == CUDA_SUCCESS)
        r = dev_read(x, twin_addr, tw, e->len);
    if (r != CUDA_SUCCESS)
        return r;
    *both += gl_diff_conflicts(e, mem, tw);
    gl_diff_apply(e, mem, tw);
    r = dev_write(x, e->addr, mem, e->len);
    return r == CUDA_SUCCESS ? dev_write(x, twin_addr, tw, e->len) : r;
}

CUresult gx_glMirrorPush(gl_exec *x, const void *diff, size_t n)
{
    const uint8_t *buf = diff;
    gl_diff_entry e;
    uint64_t twin;
    size_t pos = 0;
    int rc;

    /* Every entry is checked before any is applied: a bad push changes nothing. */
    while ((rc = gl_diff_next(buf, n, &pos, &e)) == 1)
        if (mirror_of(x, e.addr, e.len, &twin) == NULL)
            break;
    if (rc != 0) {
        gl_exec_note(x, "glMirrorPush: %s at byte %zu", rc < 0 ? "a malformed entry"
                     : "an entry outside the session's mapped and managed memory", pos);
        return CUDA_ERROR_INVALID_VALUE;
    }
    pos = 0;
    size_t both = 0;
    while (gl_diff_next(buf, n, &pos, &e) == 1) {
        const gl_range *m = mirror_of(x, e.addr, e.len, &twin);
        uint64_t twin_addr = twin + (e.addr - m->base);
        if (in_place(x)) {
            uint8_t *mem = (uint8_t *)(uintptr_t)e.addr, *tw = (uint8_t *)(uintptr_t)twin_addr;
            both += gl_diff_conflicts(&e, mem, tw);
            gl_diff_apply(&e, mem, tw);
            continue;
        }
        CUresult r = apply_staged(x, &e, twin_addr, &both);
        if (r != CUDA_SUCCESS)
            return r;
    }
    if (both == 0)
        return CUDA_SUCCESS;
    /* The device wrote these bytes since the program last had them, and the
     * program wrote them too: its values were kept, the device's lost. */
    gl_exec_note(x, "glMirrorPush: %zu bytes of mapped or managed memory were written by both "
                 "the program and the device between two synchronizations; the program's "
                 "bytes were kept there (no concurrent managed access: synchronize before the CPU "
                 "writes memory a kernel writes)", both);
    return CUDA_ERROR_ILLEGAL_STATE;
}

/* Encodes mirror bytes [base + off, base + end) into out; *off moves past what
 * was scanned. The cuda backend stages memory and twin, and writes the twin
 * back where the encoder changed it. */
static CUresult encode_range(gl_exec *x, uint64_t base, uint64_t twin, uint64_t *off,
                             uint64_t end, uint8_t *out, size_t cap, size_t *used)
{
    if (in_place(x)) {
        size_t scanned = 0;
        *used += gl_diff_encode(base + *off, (const uint8_t *)(uintptr_t)(base + *off),
                                (uint8_t *)(uintptr_t)(twin + *off), end - *off,
                                out + *used, cap - *used, &scanned);
        *off += scanned;
        return CUDA_SUCCESS;
    }
    uint8_t *stage = malloc(2 * GL_MIRROR_STAGE);
    if (stage == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = CUDA_SUCCESS;
    while (r == CUDA_SUCCESS && *off < end) {
        size_t step = end - *off < GL_MIRROR_STAGE ? (size_t)(end - *off) : GL_MIRROR_STAGE;
        size_t scanned = 0, wrote;
        r = dev_read(x, base + *off, stage, step);
        if (r == CUDA_SUCCESS)
            r = dev_read(x, twin + *off, stage + GL_MIRROR_STAGE, step);
        if (r != CUDA_SUCCESS)
            break;
        wrote = gl_diff_encode(base + *off, stage, stage + GL_MIRROR_STAGE, step, out + *used,
                               cap - *used, &scanned);
        if (wrote > 0)
            r = dev_write(x, twin + *off, stage + GL_MIRROR_STAGE, scanned);
        *used += wrote;
        *off += scanned;
        if (scanned < step)
            break; /* out is full */
    }
    free(stage);
    return r;
}

CUresult gx_glMirrorPull(gl_exec *x, void *diff, size_t n, CUdeviceptr from, size_t *used,
                         CUdeviceptr *next)
{
    /* After all earlier work: the host device has run it already (one ordered
     * stream); a GPU's streams may still be running. */
    CUresult r = ((gl_fn_cuCtxSynchronize)gl_exec_slot(x, GL_CALL_cuCtxSynchronize))();
    *used = 0;
    *next = 0;
    if (r != CUDA_SUCCESS)
        return r;
    /* both tables in address order, so `from` goes on where a full reply stopped */
    for (size_t i = 0, j = 0; i < x->allocs.n || j < x->managed_vars.n;) {
        int take_var = j < x->managed_vars.n
                       && (i == x->allocs.n || x->managed_vars.r[j].base < x->allocs.r[i].base);
        const gl_range *m = take_var ? &x->managed_vars.r[j++] : &x->allocs.r[i++];
        uint64_t twin = twin_of(x, m);
        if (twin == 0 || m->base + m->size <= from)
            continue;
        uint64_t off = from > m->base ? from - m->base : 0;
        r = encode_range(x, m->base, twin, &off, m->size, diff, n, used);
        if (r != CUDA_SUCCESS)
            return r;
        if (off < m->size) {
            *next = m->base + off; /* the reply is full: the client asks again */
            return CUDA_SUCCESS;
        }
    }
    return CUDA_SUCCESS;
}
