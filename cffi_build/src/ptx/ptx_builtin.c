/*
 * ptx_builtin.c — calls of CUDA's device runtime in the interpreter. PTX
 * declares vprintf, __assertfail, malloc and free (C++'s new and delete
 * become malloc and free; the mangled operators are taken too) and
 * cudaGraphSetConditional (conditional graph nodes) as `.extern
 * .func` without a body: the driver's JIT links them to its own. Here the
 * linker (ptx_link.c) turns each call into one PTX_OP_devcall instruction
 * whose handler reads the call's arguments from each active lane's frame,
 * calls the built-in's entry point (ptx_devrt.h: the same one a compiled
 * kernel calls) and writes its result back. Lanes call in lane order, so a
 * warp's printf lines come out in thread order.
 * No global state besides the read-only table of built-ins.
 */
#include <stdio.h>
#include <string.h>

#include "ptx_cdp.h"
#include "ptx_devrt.h"
#include "ptx_int.h"

/* Each built-in's signature as PTX declares it: the return's size (0: none)
 * and the arguments' sizes. */
static const struct {
    const char *name;
    uint8_t builtin;
    uint8_t ret, nargs;
    uint8_t args[PTX_DCALL_MAX_ARGS - 1];
} table[] = {
    {"vprintf", PTX_BI_VPRINTF, 4, 2, {8, 8}},
    /* message, file, line, function, the size of a character */
    {"__assertfail", PTX_BI_ASSERTFAIL, 0, 5, {8, 8, 4, 8, 8}},
    {"malloc", PTX_BI_MALLOC, 8, 1, {8}},
    {"free", PTX_BI_FREE, 0, 1, {8}},
    {"_Znwm", PTX_BI_MALLOC, 8, 1, {8}},  /* operator new(size_t) */
    {"_Znam", PTX_BI_MALLOC, 8, 1, {8}},  /* operator new[](size_t) */
    {"_ZdlPv", PTX_BI_FREE, 0, 1, {8}},   /* operator delete(void *) */
    {"_ZdaPv", PTX_BI_FREE, 0, 1, {8}},   /* operator delete[](void *) */
    {"_ZdlPvm", PTX_BI_FREE, 0, 2, {8, 8}}, /* sized delete: the size is not needed */
    {"_ZdaPvm", PTX_BI_FREE, 0, 2, {8, 8}},
    /* conditional graph nodes: a handle (64 bits) and the value (unsigned int) */
    {"cudaGraphSetConditional", PTX_BI_SET_CONDITIONAL, 0, 2, {8, 4}},
    /* dynamic parallelism (ptx_cdp.h): CUDA 12's __cudaCDP2 names, the
     * older ones (libNVVM's output uses them), the per-thread-stream ones;
     * a dim3 travels by value (12 bytes) */
    {"cudaGetParameterBuffer", PTX_BI_PARAM_BUFFER, 8, 2, {8, 8}},
    {"__cudaCDP2GetParameterBuffer", PTX_BI_PARAM_BUFFER, 8, 2, {8, 8}},
    {"cudaGetParameterBufferV2", PTX_BI_PARAM_BUFFER_V2, 8, 4, {8, 12, 12, 4}},
    {"__cudaCDP2GetParameterBufferV2", PTX_BI_PARAM_BUFFER_V2, 8, 4, {8, 12, 12, 4}},
    {"cudaLaunchDevice", PTX_BI_LAUNCH, 4, 6, {8, 8, 12, 12, 4, 8}},
    {"cudaLaunchDevice_ptsz", PTX_BI_LAUNCH, 4, 6, {8, 8, 12, 12, 4, 8}},
    {"__cudaCDP2LaunchDevice", PTX_BI_LAUNCH, 4, 6, {8, 8, 12, 12, 4, 8}},
    {"__cudaCDP2LaunchDevice_ptsz", PTX_BI_LAUNCH, 4, 6, {8, 8, 12, 12, 4, 8}},
    {"cudaLaunchDeviceV2", PTX_BI_LAUNCH_V2, 4, 2, {8, 8}},
    {"cudaLaunchDeviceV2_ptsz", PTX_BI_LAUNCH_V2, 4, 2, {8, 8}},
    {"__cudaCDP2LaunchDeviceV2", PTX_BI_LAUNCH_V2, 4, 2, {8, 8}},
    {"__cudaCDP2LaunchDeviceV2_ptsz", PTX_BI_LAUNCH_V2, 4, 2, {8, 8}},
    {"cudaStreamCreateWithFlags", PTX_BI_STREAM_CREATE, 4, 2, {8, 4}},
    {"__cudaCDP2StreamCreateWithFlags", PTX_BI_STREAM_CREATE, 4, 2, {8, 4}},
    {"cudaStreamDestroy", PTX_BI_STREAM_DESTROY, 4, 1, {8}},
    {"__cudaCDP2StreamDestroy", PTX_BI_STREAM_DESTROY, 4, 1, {8}},
    {"cudaGetLastError", PTX_BI_GET_LAST_ERROR, 4, 0, {0}},
    {"__cudaCDP2GetLastError", PTX_BI_GET_LAST_ERROR, 4, 0, {0}},
    {"cudaPeekAtLastError", PTX_BI_PEEK_LAST_ERROR, 4, 0, {0}},
    {"__cudaCDP2PeekAtLastError", PTX_BI_PEEK_LAST_ERROR, 4, 0, {0}},
    {"cudaMemcpyAsync", PTX_BI_MEMCPY_ASYNC, 4, 5, {8, 8, 8, 4, 8}},
    {"__cudaCDP2MemcpyAsync", PTX_BI_MEMCPY_ASYNC, 4, 5, {8, 8, 8, 4, 8}},
    {"__cudaCDP2MemcpyAsync_ptsz", PTX_BI_MEMCPY_ASYNC, 4, 5, {8, 8, 8, 4, 8}},
    {"cudaMemsetAsync", PTX_BI_MEMSET_ASYNC, 4, 4, {8, 4, 8, 8}},
    {"__cudaCDP2MemsetAsync", PTX_BI_MEMSET_ASYNC, 4, 4, {8, 4, 8, 8}},
    {"__cudaCDP2MemsetAsync_ptsz", PTX_BI_MEMSET_ASYNC, 4, 4, {8, 4, 8, 8}},
    {"cudaGetErrorString", PTX_BI_ERROR_STRING, 8, 1, {4}},
    {"__cudaCDP2GetErrorString", PTX_BI_ERROR_STRING, 8, 1, {4}},
    {"cudaGetErrorName", PTX_BI_ERROR_NAME, 8, 1, {4}},
    {"__cudaCDP2GetErrorName", PTX_BI_ERROR_NAME, 8, 1, {4}},
};

int ptx_builtin_resolve(const char *name, const ptx_callsite *cs, ptx_dcall *d, char *err,
                        size_t err_len)
{
    for (size_t t = 0; t < sizeof table / sizeof table[0]; t++) {
        if (strcmp(table[t].name, name) != 0)
            continue;
        /* a result may be left unread (no return slot), never one of another size */
        int ok = cs->nargs == table[t].nargs && cs->nret <= (table[t].ret ? 1u : 0u)
                 && (cs->nret == 0 || cs->size[0] == table[t].ret);
        for (uint32_t a = 0; ok && a < cs->nargs; a++)
            ok = cs->size[cs->nret + a] == table[t].args[a];
        if (!ok) {
            snprintf(err, err_len, "call does not match the device runtime's");
            return -1;
        }
        memset(d, 0, sizeof *d);
        d->builtin = table[t].builtin;
        d->nret = cs->nret;
        d->nargs = cs->nargs;
        for (uint32_t a = 0; a < cs->nret + cs->nargs; a++) {
            d->off[a] = cs->off[a];
            d->size[a] = cs->size[a];
        }
        return 0;
    }
    return -2;
}

/* Device memory as a thread of block B may read it (the checks of every
 * generic access). */
static const uint8_t *block_at(void *ctx, uint64_t addr, uint64_t size)
{
    return ptx_gaddr((ptx_block *)ctx, addr, size);
}

static int stop(ptx_warp *w, const ptx_insn *i, uint64_t addr, int code)
{
    return ptx_fault_why(w, i, addr, code, ptx_devrt_why());
}

int ptx_h_devcall(ptx_warp *w, const ptx_insn *i, uint32_t m)
{
    ptx_block *b = w->b;
    const ptx_dcall *d = &b->k->dcalls[i->aux];
    ptx_devmem mem = {block_at, b};
    int asserted = 0;
    for (uint32_t q = m; q; q &= q - 1) {
        int l = __builtin_ctz(q);
        uint8_t *frame = b->local + ((uint64_t)w->index * 32 + (uint64_t)l) * b->local_size;
        uint64_t fp = w->fp[l], a[PTX_DCALL_MAX_ARGS][2] = {{0}}, ret = 0, fault = 0;
        for (uint32_t k = 0; k < d->nargs; k++) {
            uint32_t off = d->off[d->nret + k], size = d->size[d->nret + k];
            if (size > sizeof a[k] || fp + off + size > b->local_size)
                return stop(w, i, fp + off, PTX_E_LAUNCH_FAILED);
            memcpy(a[k], frame + fp + off, size);
        }
        int rc = 0;
        switch (d->builtin) {
        case PTX_BI_VPRINTF: {
            int32_t r = 0;
            rc = ptx_devrt_vprintf(b->rt, &mem, a[0][0], a[1][0], &r, &fault);
            ret = (uint32_t)r;
            break;
        }
        case PTX_BI_ASSERTFAIL: {
            const uint64_t (*r)[PTX_LANES] = w->r;
            ptx_thread_pos pos = {
                {(uint32_t)r[PTX_R_CTAID_X][l], (uint32_t)r[PTX_R_CTAID_Y][l],
                 (uint32_t)r[PTX_R_CTAID_Z][l]},
                {(uint32_t)r[PTX_R_TID_X][l], (uint32_t)r[PTX_R_TID_Y][l],
                 (uint32_t)r[PTX_R_TID_Z][l]}};
            rc = ptx_devrt_assertfail(b->rt, &mem, &pos, a[0][0], a[1][0], (uint32_t)a[2][0],
                                      a[3][0], &fault);
            if (rc == PTX_E_ASSERT) { /* every lane that failed says so, then the kernel stops */
                asserted = 1;
                rc = 0;
            }
            break;
        }
        case PTX_BI_MALLOC:
            rc = ptx_devrt_malloc(b->rt, a[0][0], &ret, &fault);
            break;
        case PTX_BI_FREE:
            rc = ptx_devrt_free(b->rt, a[0][0], &fault);
            break;
        case PTX_BI_SET_CONDITIONAL:
            rc = ptx_devrt_set_conditional(b->rt, a[0][0], (uint32_t)a[1][0]);
            break;
        default: { /* dynamic parallelism: the grid has a queue (ptx_launch.c) */
            struct ptx_cdp_grid *g = ptx_block_cdp(b);
            const uint64_t (*r)[PTX_LANES] = w->r;
            uint32_t pos[6] = {(uint32_t)r[PTX_R_CTAID_X][l], (uint32_t)r[PTX_R_CTAID_Y][l],
                               (uint32_t)r[PTX_R_CTAID_Z][l], (uint32_t)r[PTX_R_TID_X][l],
                               (uint32_t)r[PTX_R_TID_Y][l], (uint32_t)r[PTX_R_TID_Z][l]};
            rc = g != NULL ? ptx_cdp_call(g, b, d->builtin, (const uint64_t(*)[2])a, pos, &ret,
                                          &fault)
                           : PTX_E_LAUNCH_FAILED;
        }
        }
        if (rc != 0)
            return stop(w, i, fault, rc);
        if (d->nret > 0) {
            if (fp + d->off[0] + d->size[0] > b->local_size)
                return stop(w, i, fp + d->off[0], PTX_E_LAUNCH_FAILED);
            memcpy(frame + fp + d->off[0], &ret, d->size[0]);
        }
    }
    if (asserted) {
        snprintf(b->why, sizeof b->why, "%s", "");
        b->err = PTX_E_ASSERT;
        b->err_line = i->line;
        b->err_addr = 0;
        return PTX_E_ASSERT;
    }
    return 0;
}
