"""A stand-in for NVIDIA's driver, for the cuda backend's tests without a GPU.

It stands in for the driver, not for the code under test: its "device memory" is host
memory that ``cuMemMap`` makes accessible (an unmapped granule would fault), and each test
adds the entry points it needs, which keep what they were given for the test to read back.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gleam.peer.cuda.server import native

from .cuda_session import CTX, Session, mint, rec

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="builds a stand-in driver")

# The entry points every cuda backend needs (VMM granules, retains, releases, copies).
FAKE_DRIVER = r"""
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <stdlib.h>
typedef int CUresult; typedef uint64_t P;
#define G (1u << 16)
static int maps, creates, releases, retains;
CUresult cuInit(unsigned f) { return 0; }
CUresult cuDriverGetVersion(int *v) { *v = 12080; return 0; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
CUresult cuDeviceGet(int *d, int o) { *d = o; return 0; }
CUresult cuDeviceGetName(char *s, int n, int d) { strncpy(s, "fake gpu", n); return 0; }
CUresult cuDeviceGetAttribute(int *v, int a, int d) { if (a > 100) return 1; *v = a; return 0; }
CUresult cuDeviceTotalMem_v2(size_t *b, int d) { *b = 1 << 24; return 0; }
CUresult cuDeviceGetUuid(unsigned char *u, int d) { memset(u, 7, 16); return 0; }
CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { *f = *t = 1 << 24; return 0; }
CUresult cuMemGetAllocationGranularity(size_t *g, const void *p, int o) { *g = G; return 0; }
CUresult cuMemAddressReserve(P *p, size_t n, size_t a, P h, unsigned long long f) {
    /* As NVIDIA's driver: the hint h is honoured when that range is free. */
    void *m = mmap((void *)(uintptr_t)h, n, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (h ? 0x100000 : 0), -1, 0);
    if (m == MAP_FAILED)
        m = mmap(0, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    *p = (P)(uintptr_t)m;
    return 0;
}
CUresult cuMemAddressFree(P p, size_t n) { munmap((void *)(uintptr_t)p, n); return 0; }
CUresult cuMemCreate(uint64_t *h, size_t n, const void *p, unsigned long long f) {
    *h = ++creates;
    return 0;
}
CUresult cuMemRelease(uint64_t h) { releases++; return 0; }
CUresult cuMemMap(P p, size_t n, size_t o, uint64_t h, unsigned long long f) {
    maps++;
    return mprotect((void *)(uintptr_t)p, n, PROT_READ | PROT_WRITE);
}
CUresult cuMemUnmap(P p, size_t n) {
    maps--;
    madvise((void *)(uintptr_t)p, n, MADV_DONTNEED);
    return mprotect((void *)(uintptr_t)p, n, PROT_NONE);
}
CUresult cuMemSetAccess(P p, size_t n, const void *d, size_t c) { return 0; }
CUresult cuDevicePrimaryCtxRetain(void **c, int d) { retains++; *c = (void *)0x1000; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(int d) { retains--; return 0; }
CUresult cuCtxSetCurrent(void *c) { return 0; }
CUresult cuCtxSynchronize(void) { return 0; }
CUresult cuStreamSynchronize(void *s) { return 0; }
CUresult cuMemsetD32_v2(P p, unsigned v, size_t n) {
    for (size_t i = 0; i < n; i++)
        ((unsigned *)(uintptr_t)p)[i] = v;
    return 0;
}
CUresult cuMemcpyDtoHAsync_v2(void *d, P s, size_t n, void *st) {
    memcpy(d, (void *)(uintptr_t)s, n);
    return 0;
}
/* CUDA_MEMCPY2D_v2 as in NVIDIA's cuda.h; host and device memory only. */
typedef struct {
    size_t sx, sy; int stype; const void *shost; P sdev; void *sarr; size_t spitch;
    size_t dx, dy; int dtype; void *dhost; P ddev; void *darr; size_t dpitch;
    size_t w, h;
} M2;
CUresult cuMemcpy2DAsync_v2(const M2 *c, void *st) {
    const char *s = c->stype == 1 ? c->shost : (const char *)(uintptr_t)c->sdev;
    char *d = c->dtype == 1 ? c->dhost : (char *)(uintptr_t)c->ddev;
    if (c->sx || c->sy || c->dx || c->dy || c->sarr || c->darr)
        return 1; /* the backend passes origins in the addresses */
    for (size_t y = 0; y < c->h; y++)
        memcpy(d + y * c->dpitch, s + y * c->spitch, c->w);
    return 0;
}
int fake_state(int w) { return w == 0 ? maps : w == 1 ? creates - releases : retains; }
"""




def build_stand_in(tmp_path: Path, extra: str, cdef: str) -> tuple[Path, Any]:
    """FAKE_DRIVER plus ``extra`` as a shared library, and a cffi handle for ``cdef``."""
    import cffi

    (tmp_path / "fake.c").write_text(FAKE_DRIVER + extra)
    so = tmp_path / "libfakecuda.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(so), str(tmp_path / "fake.c")],
                   check=True)
    probe = cffi.FFI()
    probe.cdef(cdef)
    return so, probe.dlopen(str(so))


@contextlib.contextmanager
def stand_in_session(so: Path) -> Iterator[Session]:
    """A session with its primary context current, on a cuda backend over the stand-in."""
    be = native.CudaBackend(str(so))
    s = Session(be)
    ctx = mint(CTX)
    s.run(rec("cuDevicePrimaryCtxRetain", ctx, 0), rec("glCtxSetCurrent", ctx))
    try:
        yield s
    finally:
        s.x.close()
        be.close()
