"""Managed module variables (``.attribute(.managed)``, ``__managed__``) on the host
device: one address the program's CPU and its kernels share (docs/cuda-forwarding.md,
"Managed variables").

- examples/cuda/managed_vars.py through two real agents: the pointer attributes, the
  initial values on the CPU, CPU writes that kernels read and kernel writes the CPU
  reads (by pointer and by name), cuMemFree refused, a module loaded again;
- the server's row (glManagedVarMirror) in-process: the variable's pages become a mirror
  whose twin starts as the variable, and every request that names anything but a fresh
  twin and the pages of this session's module variable is refused (fuzzed);
- the parser: each managed variable alone in 64 KiB pages of a storage in the band, and
  the misuses refused by name.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .cuda_mesh import ptx_mesh, run_through  # noqa: F401 (a fixture)
from .cuda_session import ptx_only_session, rec
from .test_ptx_fuzz import check

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "cuda"
PAGES = 64 << 10
BAND = (16 << 40, 80 << 40)
HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"
MODULE = (HEADER + ".global .u32 plain = 7;\n"
          ".global .attribute(.managed) .align 4 .u32 xxx = 10;\n"
          ".global .attribute(.managed) .align 8 .u64 big[9000] = {5};\n"
          ".visible .entry k() { .reg .b32 %r<3>; ld.global.u32 %r1, [xxx]; "
          "add.s32 %r2, %r1, 30; st.global.u32 [xxx], %r2; ret; }\n").encode()


def test_the_driver_api_program_through_two_agents(ptx_mesh):  # noqa: F811 (the fixture)
    pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings (the test extra) is missing")
    client, server = ptx_mesh
    done, verdict = run_through(client, sys.executable, EXAMPLES / "managed_vars.py",
                                timeout=300)
    detail = f"{done.stdout}\n{done.stderr[-3000:]}\n{server.log_text()[-2000:]}"
    assert done.returncode == 0 and verdict.get("ok"), detail
    assert len(verdict["checks"]) == 24, detail


def test_each_managed_variable_lies_alone_in_pages_in_the_band():
    with ptx_only_session() as s:
        mod = s.load(MODULE)
        got = {name: s.global_(mod, name) for name in ("plain", "xxx", "big")}
        assert all(r == 0 for r, _, _ in got.values())
        (_, plain, _), (_, x, xs), (_, big, bs) = got["plain"], got["xxx"], got["big"]
        assert (xs, bs) == (4, 72000)
        assert x % PAGES == 0 and big % PAGES == 0 and big - x == PAGES
        assert all(BAND[0] <= p < BAND[1] for p in (plain, x, big))
        assert not x <= plain < big + 2 * PAGES  # the plain variable shares no page
        assert s.dtoh(x, 4) == struct.pack("<I", 10) and s.dtoh(big, 8) == struct.pack("<Q", 5)


def test_the_row_pairs_the_pages_with_a_twin_that_starts_as_the_variable():
    with ptx_only_session() as s:
        mod = s.load(MODULE)
        _, x, _ = s.global_(mod, "xxx")
        twin = s.alloc(PAGES)
        r = s.run(rec("glManagedVarMirror", x, twin, PAGES))
        assert r is not None and r[0] == 0, s.notes
        assert s.dtoh(twin, 4) == struct.pack("<I", 10)
        # what the kernel writes comes back in a pull: 40 against the twin's 10
        fn = s.function(mod, "k")
        s.launch(fn, (1, 1, 1), (1, 1, 1), b"")
        r = s.run(rec("glMirrorPull", 4096, 0, payload=None))
        assert r is not None and r[0] == 0 and struct.pack("<I", 40) in r[3]
        # a second pairing of the same pages, or the twin reused, is refused
        other = s.alloc(PAGES)
        assert s.run(rec("glManagedVarMirror", x, other, PAGES))[0] == 1
        _, big, _ = s.global_(mod, "big")
        assert s.run(rec("glManagedVarMirror", big, twin, 2 * PAGES))[0] == 1


@settings(max_examples=60, deadline=None)
@given(var_off=st.integers(-2 * PAGES, 4 * PAGES), twin_off=st.integers(-512, 512),
       size=st.sampled_from([0, 1, 4096, PAGES, 2 * PAGES, 1 << 40]))
def test_a_request_outside_the_sessions_variables_is_refused(var_off, twin_off, size):
    with ptx_only_session() as s:
        mod = s.load(MODULE)
        _, x, _ = s.global_(mod, "xxx")
        twin = s.alloc(PAGES)
        # the module's storage: plain's page, xxx's, big's two (only these may pair)
        ok_var = var_off >= -PAGES and var_off + size <= 3 * PAGES
        good = ok_var and twin_off == 0 and size == PAGES and size > 0
        r = s.run(rec("glManagedVarMirror", x + var_off, twin + twin_off, size))
        if not good:
            assert r is not None and r[0] == 1, (var_off, twin_off, size)


def test_a_mirror_goes_with_its_module():
    with ptx_only_session() as s:
        mod = s.load(MODULE)
        _, x, _ = s.global_(mod, "xxx")
        twin = s.alloc(PAGES)
        s.run(rec("glManagedVarMirror", x, twin, PAGES))
        assert s.run(rec("cuModuleUnload", mod)) is None
        r = s.run(rec("glMirrorPull", 4096, 0, payload=None))
        assert r is not None and r[0] == 0 and r[3] == b""  # nothing left to read there


@pytest.mark.parametrize(("decl", "why"), [
    (".const .attribute(.managed) .u32 c;", "not a module's .global"),
    (".global .attribute(.unified) .u32 u;", "unsupported variable attribute"),
    (".global .attribute(.managed .u32 v;", "expected"),
])
def test_misused_attributes_are_refused_by_name(decl, why):
    rc, msg = check((HEADER + decl + "\n.visible .entry k() { ret; }\n").encode())
    assert rc == -1 and why in msg, msg
