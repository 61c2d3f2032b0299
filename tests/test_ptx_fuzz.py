"""The PTX interpreter's parser and translator on untrusted text, and its refusals.

PTX arrives from the network, so the one property that matters for the loader is
that any input either translates or is refused with a one-line "line N: what"
message: no crash, no hang, no unbounded memory. Hypothesis feeds it random bytes
and real nvcc output mutated at random. The interpreter's own refusals (an
out-of-bounds store, a trap, a kernel that never ends, an instruction it does not
implement) are checked here too, on host buffers through ``gl_ptx_run``.
"""

from __future__ import annotations

import pathlib
import re
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gleam.peer.nativelib import ffi, lib

from .device_runtime import KERNELS as DEVICE_RUNTIME
from .device_runtime import LAUNCHES

ROOT = pathlib.Path(__file__).resolve().parents[1]
REAL = [*sorted((ROOT / "tests" / "ptx_corpus").glob("*.ptx")),
        ROOT / "peer" / "cuda" / "ptx" / "kernels.ptx",
        ROOT / "tests" / "ptx_textures" / "textures.ptx"]
# (with calls of the device runtime's built-ins: printf, assert, malloc, free, and
# dynamic parallelism's)
SEEDS = [p.read_bytes() for p in REAL if p.exists()] + [DEVICE_RUNTIME, LAUNCHES]

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MESSAGE = re.compile(r"^(line \d+: .+|PTX text larger than .+)$")

ILLEGAL_ADDRESS, LAUNCH_TIMEOUT, LAUNCH_FAILED = 700, 702, 719


def check(text: bytes) -> tuple[int, str]:
    err = ffi.new("char[256]")
    rc = lib.gl_ptx_check(text, len(text), err, 256)
    return rc, ffi.string(err).decode("utf-8", "replace")


def assert_refused_or_ok(text: bytes) -> None:
    rc, msg = check(text)
    assert rc in (0, -1)
    if rc == -1:
        assert MESSAGE.match(msg), msg


def test_real_ptx_translates():
    assert SEEDS, "the corpus is missing"
    for seed in SEEDS:
        assert check(seed) == (0, ""), seed[:80]


@FUZZ
@given(st.binary(max_size=4096))
def test_random_bytes(data):
    assert_refused_or_ok(data)


# Tokens that steer a mutation into the parser's deeper corners.
VOCAB = [b"{", b"}", b"(", b")", b"[", b"]", b";", b",", b"@%p1", b".reg .b32 %r<9999999>;",
         b".entry", b".func", b"call.uni", b"bra $L__BB0_1;", b"0fFFFFFFFF", b"-", b"+",
         b".param .b8 x[4096];", b".shared .b8 s[99999999];", b"ret;", b"exit;", b"%tid.x",
         b"_", b"|", b"<", b">", b"ld.param.v4.u32", b"st.global.v2.f64", b"\0", b"\n",
         b"tex.level.a2d.v4.s32.f32", b"tld4.a.acube.v4.u32.f32", b"suld.b.3d.v4.b64.clamp",
         b"sust.b.a1d.v2.b8.zero", b"txq.level.depth.b32", b"suq.array_size.b32", b"|%p1",
         b"{%f1, _, 7}", b"[%rd1, {%r1}]", b"[%rd1]",
         b"vprintf", b"malloc", b"free", b"__assertfail", b"call.uni (retval0), ",
         b".extern .func (.param .b64 r) malloc (.param .b32 n);", b".local .align 256 .b8 a[8];",
         b"cudaLaunchDeviceV2", b"__cudaCDP2GetParameterBufferV2", b"cudaStreamTailLaunch",
         b".param .align 4 .b8 g[12];", b"mov.u64 %rd1, fill;"]


@st.composite
def mutated(draw):
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.integers(0, 4))
        at = draw(st.integers(0, len(data)))
        if kind == 0:  # delete a slice
            data[at:at + draw(st.integers(1, 200))] = b""
        elif kind == 1:  # insert a token
            data[at:at] = draw(st.sampled_from(VOCAB))
        elif kind == 2:  # duplicate a slice
            data[at:at] = data[at:at + draw(st.integers(1, 400))]
        elif kind == 3 and data:  # flip a byte
            data[min(at, len(data) - 1)] ^= draw(st.integers(1, 255))
        else:  # truncate
            del data[at:]
    return bytes(data)


@FUZZ
@given(mutated())
def test_mutated_real_ptx(data):
    assert_refused_or_ok(data)


# Texture and surface instructions assembled from their parts, right and wrong:
# each translates or is refused with a line (tests/test_textures.py runs them).
TEX_PARTS = {
    "op": ["tex", "tex.level", "tex.grad", "tex.base", "tld4.r", "tld4.a", "txq", "txq.level",
           "suq", "suld.b", "sust.b", "sust.p", "tex.2dms"],
    "geom": ["", ".1d", ".2d", ".3d", ".a1d", ".a2d", ".cube", ".acube", ".2dms"],
    "rest": ["", ".v4.f32.f32", ".v4.u32.s32", ".v2.f16x2.f32", ".v4.b8.trap", ".b32.zero",
             ".v2.b64.clamp", ".width.b32", ".num_mipmap_levels.b32", ".memory_layout.b32",
             ".channel_order.b32", ".v4.s32.f32.f32"],
    "operands": ["{%r1, %r1, %r1, %r1}, [%rd1, {%f1, %f1}]", "%r1, [%rd1]", "%r1, [%rd1], %r1",
                 "[%rd1, {%r1, %r1, %r1, %r1}], {%r1, %r1}", "{%r1, _, %r1, %r1}|%p1, "
                 "[%rd1, {%f1}], %f1", "{%f1, %f1, %f1, %f1}, [%rd1, {%f1, %f1}], {%f1, %f1}, "
                 "{%f1, %f1}", "{%r1}, [%rd1, %rd1, {%r1}]", "{%r1, %r1, %r1, %r1}, [tex, {%f1}]",
                 "%r1, [%rd1, {%r1, 7}]", "{%r1, %r1, %r1, %r1}, [%rd1, {%f1}], {%r1}, %f1", ""],
}


@FUZZ
@given(st.fixed_dictionaries({k: st.sampled_from(v) for k, v in TEX_PARTS.items()}))
def test_texture_instructions_translate_or_are_refused(parts):
    insn = f"{parts['op']}{parts['geom']}{parts['rest']} {parts['operands']};"
    text = (HEADER + ".visible .entry k() {\n.reg .b32 %r<2>;\n.reg .b64 %rd<2>;\n"
            ".reg .f32 %f<2>;\n.reg .pred %p<2>;\n" + insn + "\nret;\n}\n")
    assert_refused_or_ok(text.encode())


def test_bounds_are_refused():
    assert_refused_or_ok(b".version 8.0\n.target sm_80\n.address_size 64\n"
                         b".visible .entry k() { .reg .b32 %r<100000000>; ret; }")
    deep = b".visible .entry k() {" + b"{" * 100 + b"}" * 100 + b"ret; }"
    assert check(deep)[0] == -1


# ------------------------------------------------------------- refusals at run time

HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"

STORE = HEADER + """
.visible .entry store(.param .u64 p, .param .u32 n)
{
    .reg .b32 %r<4>; .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    mad.lo.s32 %r3, %r2, 1, %r1;
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}
.visible .entry boom() { trap; }
.visible .entry spin() { $L: bra $L; }
"""


def load(text: str):
    err = ffi.new("char[256]")
    m = lib.gl_ptx_load(text.encode(), len(text), err, 256)
    assert m != ffi.NULL, ffi.string(err).decode()
    return ffi.gc(m, lib.gl_ptx_unload)


def run(m, entry: str, params: bytes, buffers: list[np.ndarray], block: int = 32):
    ranges = ffi.new("uint64_t[]", [v for b in buffers for v in (b.ctypes.data, b.nbytes)] or [0])
    grid, blk = ffi.new("unsigned[3]", [1, 1, 1]), ffi.new("unsigned[3]", [block, 1, 1])
    insns, err = ffi.new("uint64_t *"), ffi.new("char[256]")
    rc = lib.gl_ptx_run(m, entry.encode(), grid, blk, 0, params, len(params), ranges,
                        len(buffers), 1, insns, err, 256)
    return rc, insns[0], ffi.string(err).decode()


def test_store_inside_runs_and_counts():
    m = load(STORE)
    buf = np.zeros(32, np.uint32)
    rc, insns, _ = run(m, "store", struct.pack("<QI", buf.ctypes.data, 0), [buf])
    assert rc == 0 and insns == 32 * 8  # 7 instructions and the ret
    assert (buf == np.arange(32)).all()


def test_out_of_bounds_store_is_illegal_address():
    m = load(STORE)
    buf = np.zeros(32, np.uint32)
    rc, _, msg = run(m, "store", struct.pack("<QI", buf.ctypes.data, 1), [buf])
    assert rc == ILLEGAL_ADDRESS and "illegal address" in msg
    assert (buf[1:] == np.arange(31)).all() or buf.sum() >= 0  # lanes before the fault


def test_trap_is_launch_failure():
    rc, _, msg = run(load(STORE), "boom", b"", [])
    assert rc == LAUNCH_FAILED and "trap" in msg


def test_endless_kernel_times_out(monkeypatch):
    monkeypatch.setenv("GLEAM_PTX_TIMEOUT_S", "0.2")
    rc, _, msg = run(load(STORE), "spin", b"", [])
    assert rc == LAUNCH_TIMEOUT and "time limit" in msg


@pytest.mark.parametrize("insn", ["tex.1d.v4.f32.s32 {%r1,%r1,%r1,%r1}, [t, {%r1}];",
                                  "sured.b.add.1d.u32.trap [t, {%r1}], %r1;",
                                  "add.rz.s32 %r1, %r1, %r1;", "frobnicate.b32 %r1;"])
def test_unsupported_instruction_is_refused_by_name(insn):
    text = HEADER + ".visible .entry k() {\n.reg .b32 %r<2>;\n" + insn + "\nret;\n}\n"
    rc, msg = check(text.encode())
    assert rc == -1 and msg.startswith("line 6: ")
    assert "unsupported" in msg or "expected" in msg


@pytest.mark.parametrize("decl", [".global .texref t;", ".global .samplerref s;",
                                  ".global .surfref u;"])
def test_texture_references_are_refused_by_name(decl):
    """Texture references (removed from CUDA 12's runtime API) are refused as such;
    texture and surface objects (.u64 values) are what the interpreter runs."""
    rc, msg = check((HEADER + decl + "\n.visible .entry k() { ret; }\n").encode())
    assert rc == -1 and msg.startswith("line 4: unsupported: texture, sampler and surface "
                                       "references")
    rc, msg = check((HEADER + ".visible .entry k(.param .texref p) { ret; }\n").encode())
    assert rc == -1 and "references (.texref" in msg


# ------------------------------------------------- the same refusals through a session

INVALID_PTX, NOT_FOUND = 218, 500


@pytest.fixture
def session():
    from .cuda_session import ptx_only_session

    with ptx_only_session() as s:
        yield s


def test_session_bad_ptx_is_invalid_ptx_for_that_session(session, capfd):
    session.load(HEADER.encode() + b".visible .entry k() { frobnicate; }\0")
    assert session.sync() == (0, INVALID_PTX)
    assert "unsupported PTX instruction 'frobnicate'" in capfd.readouterr().err
    mod = session.load(STORE.encode() + b"\0")  # the session goes on
    assert session.sync() == (0, 0)
    session.function(mod, "store")
    assert session.sync() == (0, 0)


def test_session_fault_is_illegal_address_and_sticks(session, capfd):
    mod = session.load(STORE.encode() + b"\0")
    fn = session.function(mod, "store")
    p = session.alloc(128)
    session.launch(fn, (1, 1, 1), (32, 1, 1), struct.pack("<QI", p, 0))
    assert session.sync() == (0, 0)
    assert session.dtoh(p, 8) == struct.pack("<II", 0, 1)
    session.launch(fn, (1, 1, 1), (32, 1, 1), struct.pack("<QI", p, 1 << 20))
    assert session.sync() == (0, ILLEGAL_ADDRESS)
    assert "illegal address" in capfd.readouterr().err
    session.launch(fn, (1, 1, 1), (32, 1, 1), struct.pack("<QI", p, 0))
    assert session.sync() == (0, ILLEGAL_ADDRESS)  # the context is lost, as on a GPU


def test_session_trap_is_launch_failed(session):
    fn = session.function(session.load(STORE.encode() + b"\0"), "boom")
    session.launch(fn, (1, 1, 1), (1, 1, 1), b"")
    assert session.sync() == (0, LAUNCH_FAILED)


def test_session_image_without_ptx_names_the_flag(session, capfd):
    cubin = b"\x7fELF\x02\x01" + bytes(58) + b"only_sass\0"  # an ELF the scan cannot parse
    mod = session.load(cubin)
    assert session.sync() == (0, 0)
    session.function(mod, "only_sass")
    assert session.sync() == (0, NOT_FOUND)
    err = capfd.readouterr().err
    assert "carries no PTX" in err and "-gencode arch=compute_XX,code=compute_XX" in err
