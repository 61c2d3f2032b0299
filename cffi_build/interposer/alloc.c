/*
 * alloc.c — the session's device address space. The server reserved
 * [va_base, va_base + va_size) for the session; the interposer hands out
 * 256-byte aligned ranges inside it (first fit) so that cuMemAlloc returns at
 * once, and keeps a sorted table of live ranges that every device-pointer
 * check, cuMemcpy's routing and the pointer queries use. Module globals the
 * server reports are in the table too, but cannot be freed.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "mem/ranges.h"

#define GL_ALLOC_ALIGN 256u

/* tag: 1 for a cuMemAlloc range (freeable), 2 for one the interposer holds
 * itself (the device heap: the program cannot free it), 0 for a module global. */
static pthread_rwlock_t g_lock = PTHREAD_RWLOCK_INITIALIZER;
static gl_ranges g_t;
static uint64_t g_base, g_end;

void gl_va_init(uint64_t base, uint64_t size)
{
    pthread_rwlock_wrlock(&g_lock);
    g_t.n = 0;
    g_base = base;
    g_end = size > UINT64_MAX - base ? UINT64_MAX : base + size;
    pthread_rwlock_unlock(&g_lock);
}

static uint64_t align_to(uint64_t v, uint64_t align)
{
    return (v + align - 1) & ~(align - 1);
}

CUresult gl_va_alloc(uint64_t size, uint64_t *out)
{
    return gl_va_alloc_aligned(size, GL_ALLOC_ALIGN, out);
}

CUresult gl_va_alloc_aligned(uint64_t size, uint64_t align, uint64_t *out)
{
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t cur;

    if (size == 0 || out == NULL || align < GL_ALLOC_ALIGN || (align & (align - 1)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (size > UINT64_MAX - align)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_rwlock_wrlock(&g_lock);
    cur = align_to(g_base, align);
    /* Walk the gaps in address order; globals outside the range are skipped
     * because they never bound a gap inside it. */
    for (size_t i = 0; i <= g_t.n; i++) {
        uint64_t next = i < g_t.n ? g_t.r[i].base : g_end;
        if (i < g_t.n && (g_t.r[i].base < g_base || g_t.r[i].base >= g_end))
            continue;
        if (next > g_end)
            next = g_end;
        if (cur >= g_base && cur <= next && next - cur >= size) {
            /* at cur's place in address order: i may be past a global that lies
             * above the range (skipped above), which must stay after it */
            size_t at = gl_ranges_upper(&g_t, cur);
            r = gl_ranges_insert(&g_t, at, (gl_range){cur, size, 1}) == 0
                    ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
            if (r == CUDA_SUCCESS)
                *out = cur;
            break;
        }
        if (i < g_t.n) {
            uint64_t end = g_t.r[i].base + g_t.r[i].size;
            if (end > UINT64_MAX - align)
                break;
            if (align_to(end, align) > cur)
                cur = align_to(end, align);
        }
    }
    pthread_rwlock_unlock(&g_lock);
    return r;
}

CUresult gl_va_free(uint64_t ptr)
{
    CUresult r = CUDA_ERROR_INVALID_VALUE;

    pthread_rwlock_wrlock(&g_lock);
    long i = gl_ranges_index_of_base(&g_t, ptr);
    if (i >= 0 && g_t.r[i].tag) {
        gl_ranges_remove(&g_t, (size_t)i);
        r = CUDA_SUCCESS;
    }
    pthread_rwlock_unlock(&g_lock);
    return r;
}

void gl_va_hold(uint64_t ptr)
{
    pthread_rwlock_wrlock(&g_lock);
    long i = gl_ranges_index_of_base(&g_t, ptr);
    if (i >= 0 && g_t.r[i].tag)
        g_t.r[i].tag = 2;
    pthread_rwlock_unlock(&g_lock);
}

uint64_t gl_va_live(void)
{
    uint64_t n = 0;
    pthread_rwlock_rdlock(&g_lock);
    for (size_t i = 0; i < g_t.n; i++)
        if (g_t.r[i].tag)
            n += g_t.r[i].size;
    pthread_rwlock_unlock(&g_lock);
    return n;
}

int gl_va_is_base(uint64_t ptr)
{
    pthread_rwlock_rdlock(&g_lock);
    long i = gl_ranges_index_of_base(&g_t, ptr);
    int yes = i >= 0 && g_t.r[i].tag == 1;
    pthread_rwlock_unlock(&g_lock);
    return yes;
}

void gl_va_register(uint64_t base, uint64_t size)
{
    if (size == 0 || size > UINT64_MAX - base)
        return;
    pthread_rwlock_wrlock(&g_lock);
    size_t i = gl_ranges_upper(&g_t, base);
    /* The same global asked for twice is one range. */
    if (!(i > 0 && g_t.r[i - 1].base == base && g_t.r[i - 1].size == size))
        gl_ranges_insert(&g_t, i, (gl_range){base, size, 0});
    pthread_rwlock_unlock(&g_lock);
}

int gl_va_find(uint64_t ptr, uint64_t *base, uint64_t *size)
{
    int found = 0;

    pthread_rwlock_rdlock(&g_lock);
    size_t i = gl_ranges_upper(&g_t, ptr);
    if (i > 0 && ptr - g_t.r[i - 1].base < g_t.r[i - 1].size) {
        found = 1;
        if (base)
            *base = g_t.r[i - 1].base;
        if (size)
            *size = g_t.r[i - 1].size;
    }
    pthread_rwlock_unlock(&g_lock);
    return found;
}

CUresult gl_check_dptr(uint64_t ptr, uint64_t size)
{
    uint64_t base, len;

    if (ptr == 0 && size == 0)
        return CUDA_SUCCESS;
    if (!gl_va_find(ptr, &base, &len))
        return CUDA_ERROR_INVALID_VALUE;
    /* ptr lies in [base, base + len), so len - (ptr - base) cannot wrap. */
    return size <= len - (ptr - base) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

int gl_va_in_session(uint64_t p)
{
    pthread_rwlock_rdlock(&g_lock);
    int in = p >= g_base && p < g_end;
    pthread_rwlock_unlock(&g_lock);
    return in;
}
