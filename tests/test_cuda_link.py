"""The cuda backend links with the real driver's linker and launches cooperative grids with
its cuLaunchKernelEx: checked against a stand-in driver (tests/stand_in_driver.py) that
keeps what it was given, through real batches. The host device's side of the same images
is tests/test_ptx_link.py.
"""

from __future__ import annotations

import struct

from .cuda_session import FATBIN, FUNC, LIB, LIBRARY, MOD, PTX, link_image, mint, rec
from .stand_in_driver import build_stand_in, needs_gcc, stand_in_session

INVALID_PTX = 218

# A stand-in linker: it records the options and inputs it got, and "links" by
# concatenating them; the loads record the image they were handed.
LINK_DRIVER = r"""
#include <stdio.h>
static char seen[8192];
static size_t used;
static int fail_at = -1, adds;
static void note(const char *fmt, const char *s, long v) {
    used += (size_t)snprintf(seen + used, sizeof seen - used, fmt, s, v);
}
CUresult cuLinkCreate_v2(unsigned n, int *opts, void **vals, void **state) {
    for (unsigned i = 0; i < n; i++)
        if (opts[i] != 5 && opts[i] != 6) note("opt%s%ld ", "", opts[i] * 1000 + (long)vals[i]);
        else if (opts[i] == 5) *state = vals[i]; /* the error log buffer */
    adds = 0;
    return 0;
}
CUresult cuLinkAddData_v2(void *state, int type, void *data, size_t size, const char *name,
                          unsigned n, int *o, void **v) {
    if (adds++ == fail_at) {
        snprintf((char *)state, 64, "nvlink error: Undefined reference to 'twice'");
        return 218;
    }
    note("add:%s:%ld ", name, type * 100000L + (long)size);
    if (type == 1) note("text[%s]%ld ", ((const char *)data)[size - 1] == 0 ? "nul" : "no-nul", 0);
    return 0;
}
static const char linked[] = "LINKED-CUBIN";
CUresult cuLinkComplete(void *state, void **cubin, size_t *size) {
    *cubin = (void *)linked; *size = sizeof linked; return 0;
}
CUresult cuLinkDestroy(void *state) { note("destroy%s%ld ", "", 0); return 0; }
CUresult cuModuleLoadData(void **m, const void *image) {
    note("module:%s%ld ", (const char *)image, 0); *m = (void *)0x2000; return 0;
}
typedef struct { int magic, version; const unsigned char *data; void **objects; } W;
CUresult cuLibraryLoadData(void **l, const void *code, void *a, void *b, unsigned c, void *d,
                           void *e, unsigned f) {
    const W *w = code;
    if ((unsigned)w->magic == 0x466243b1u) {
        note("registration v%s%ld ", "", w->version);
        note("main:%s%ld ", (const char *)w->data + 16, 0);
        for (int i = 0; w->objects[i]; i++)
            note("object:%s%ld ", (const char *)w->objects[i] + 16, i);
    } else
        note("library:%s%ld ", (const char *)code, 0);
    *l = (void *)0x4000;
    return 0;
}
typedef struct { int id; char pad[4]; union { char b[64]; int coop; } v; } A;
typedef struct { unsigned g[3], b[3], shared; void *stream; A *attrs; unsigned n; } C;
CUresult cuLaunchKernelEx(const C *c, void *f, void **params, void **extra) {
    note("launch-ex%s%ld ", "", c->g[0] * 1000L + c->b[0]);
    for (unsigned i = 0; i < c->n; i++)
        note("attr%s%ld ", "", c->attrs[i].id * 10L + c->attrs[i].v.coop);
    return 0;
}
CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
    *f = (void *)0x3000; return 0;
}
const char *fake_seen(void) { return seen; }
void fake_reset(int fail) { used = 0; seen[0] = 0; fail_at = fail; }
"""
CDEF = "const char *fake_seen(void); void fake_reset(int);"


def fatbin_named(label: bytes) -> bytes:
    """A fatbin container's header and a label the stand-in prints: not a real fatbin."""
    body = label + b"\0" * (8 - len(label) % 8)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def seen_by(fake) -> str:
    from gleam.peer.nativelib import ffi

    return ffi.string(fake.fake_seen()).decode()


@needs_gcc
def test_the_drivers_linker_links_the_inputs_in_order(tmp_path):
    so, fake = build_stand_in(tmp_path, LINK_DRIVER, CDEF)
    image = link_image([(PTX, b".version 8.0\n.entry k() { ret; }\n", "numba.ptx"),
                        (LIBRARY, b"!<arch>\n" + bytes(60), "libcudadevrt.a")],
                       options=((0, 32), (7, 4)))
    with stand_in_session(so) as s:
        fake.fake_reset(-1)
        s.run(rec("glModuleLoad", mint(MOD), len(image), payload=image))
        assert s.sync() == (0, 0)
        seen = seen_by(fake).split()
        ptx_size = len(b".version 8.0\n.entry k() { ret; }\n") + 1  # with its NUL
        assert seen == ["opt32", "opt7004", f"add:numba.ptx:{100000 + ptx_size}", "text[nul]0",
                        "add:libcudadevrt.a:400068", "module:LINKED-CUBIN0", "destroy0"]
        fake.fake_reset(-1)
        s.run(rec("glLibraryLoad", mint(LIB), len(image), payload=image))
        assert s.sync() == (0, 0)
        assert "library:LINKED-CUBIN0" in seen_by(fake).split()


@needs_gcc
def test_a_failed_link_returns_the_drivers_error_and_log(tmp_path):
    so, fake = build_stand_in(tmp_path, LINK_DRIVER, CDEF)
    image = link_image([(PTX, b".version 8.0\n", "a.ptx"), (PTX, b".version 8.0\n", "b.ptx")])
    with stand_in_session(so) as s:
        fake.fake_reset(1)
        s.run(rec("glModuleLoad", mint(MOD), len(image), payload=image))
        assert s.sync()[1] == INVALID_PTX
        assert any("Undefined reference to 'twice'" in n for n in s.notes), s.notes
        assert "destroy0" in seen_by(fake).split()


@needs_gcc
def test_an_rdc_registration_is_given_to_the_driver_as_cudart_registers_it(tmp_path):
    so, fake = build_stand_in(tmp_path, LINK_DRIVER, CDEF)
    image = link_image([(FATBIN, fatbin_named(b"dlink"), "the linked fatbin"),
                        (FATBIN, fatbin_named(b"objA"), "object 1"),
                        (FATBIN, fatbin_named(b"objB"), "object 2")], origin=2)
    with stand_in_session(so) as s:
        fake.fake_reset(-1)
        s.run(rec("glLibraryLoad", mint(LIB), len(image), payload=image))
        assert s.sync() == (0, 0)
        assert seen_by(fake).split() == [
            "registration", "v2", "main:dlink0", "object:objA0", "object:objB1"]


@needs_gcc
def test_a_cooperative_launch_is_launch_ex_with_the_cooperative_attribute(tmp_path):
    so, fake = build_stand_in(tmp_path, LINK_DRIVER, CDEF)
    with stand_in_session(so) as s:
        mod, fn = mint(MOD), mint(FUNC)
        s.run(rec("glModuleLoad", mod, 4, payload=b"abcd"),
              rec("cuModuleGetFunction", fn, mod, payload=b"k\0"))
        assert s.sync() == (0, 0)
        fake.fake_reset(-1)
        s.run(rec("glLaunchCooperative", fn, 6, 1, 1, 128, 1, 1, 0, 0, 8,
                  payload=struct.pack("<Q", 1)))
        assert s.sync() == (0, 0)
        assert seen_by(fake).split() == ["launch-ex6128", "attr21"]  # COOPERATIVE=2
