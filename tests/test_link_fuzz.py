"""The linker's inputs are untrusted: link images and the PTX of several inputs.

A link image arrives from the network (the client's cuLinkComplete or an -rdc
registration, cffi_build/include/gl_linkimage.h), and so does every PTX input of it. The
property that matters: any image is parsed or refused with a reason, any set of inputs is
linked or refused with a one-line message naming an input, never a crash, a hang or a
read outside the bytes. Hypothesis feeds random bytes, mutated images and inputs whose
declarations disagree, clash or call each other in cycles.
"""

from __future__ import annotations

import re
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gleam.peer.nativelib import ffi, lib
from tests.cuda_session import CUBIN, FATBIN, LIBRARY, OBJECT, PTX, link_image
from tests.test_ptx_link import HEAD, LIB, MAIN, OTHER, ROWS

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MESSAGE = re.compile(r"^(input '.+?' )?line \d+: .+$|^(undefined reference|an "
                     r"initialised|an \.extern|more than|PTX text larger).+$")


def parse(image: bytes) -> tuple[int, str, object]:
    out = ffi.new("gl_link_image *")
    err = ffi.new("char[256]")
    rc = lib.gl_link_image_parse(image, len(image), out, err, 256)
    return rc, ffi.string(err).decode(), out


def link(texts: list[bytes], devrt: bool = False) -> tuple[int, str]:
    keep = [ffi.new("char[]", t) for t in texts]
    arr = ffi.new("const char *[]", keep or [ffi.NULL])
    lens = ffi.new("size_t[]", [len(t) for t in texts] or [0])
    err = ffi.new("char[512]")
    m = lib.gl_ptx_link_load(arr, lens, len(texts), int(devrt), err, 512)
    if m != ffi.NULL:
        lib.gl_ptx_unload(m)
        return 0, ""
    return -1, ffi.string(err).decode("utf-8", "replace")


def test_an_image_round_trips():
    inputs = [(PTX, MAIN.encode(), "main.ptx"), (LIBRARY, b"!<arch>\n" + bytes(61), "lib.a"),
              (CUBIN, b"\x7fELF" + bytes(60), "k.cubin")]
    image = link_image(inputs, options=((0, 32), (7, 3)))
    rc, err, out = parse(image)
    assert rc == 0, err
    assert (out.origin, out.ninputs, out.nopts) == (1, 3, 2)
    for k, (kind, data, name) in enumerate(inputs):
        got = out.inputs[k]
        assert got.type == kind
        assert bytes(ffi.buffer(got.data, got.size)) == data
        assert bytes(ffi.buffer(got.name, got.name_len)).decode() == name
    assert [tuple(out.opts[k]) for k in range(2)] == [(0, 32), (7, 3)]
    # a binary input lies first, right after the header: a library keeps its offset
    assert image[16:24] == b"!<arch>\n"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048))
def test_random_bytes_are_refused(data):
    rc, err, _ = parse(data)
    assert rc == -1 and err.startswith("malformed link image")
    rc, err, _ = parse(b"GLEAMLNK" + data)
    assert rc in (0, -1)


@st.composite
def mutated_image(draw):
    kinds = draw(st.lists(st.sampled_from([CUBIN, PTX, FATBIN, OBJECT, LIBRARY]), min_size=1,
                          max_size=5))
    inputs = [(k, draw(st.binary(min_size=1, max_size=64)), draw(st.text(max_size=12)))
              for k in kinds]
    data = bytearray(link_image(inputs, origin=1))
    for _ in range(draw(st.integers(0, 6))):
        at = draw(st.integers(0, len(data) - 1))
        if draw(st.booleans()):
            data[at] ^= draw(st.integers(1, 255))
        else:
            struct.pack_into("<I", data, max(0, min(at, len(data) - 4)),
                             draw(st.sampled_from([0, 1, 0xFFFFFFFF, 0x7FFFFFFF, len(data)])))
    if draw(st.booleans()):
        data = data[:draw(st.integers(0, len(data)))]
    return bytes(data)


@FUZZ
@given(mutated_image())
def test_mutated_images_parse_within_their_bytes_or_are_refused(image):
    rc, err, out = parse(image)
    assert rc in (0, -1)
    if rc == -1:
        assert err.startswith("malformed link image"), err
        return
    base = ffi.cast("uintptr_t", ffi.from_buffer(image))
    end = int(base) + len(image)
    for k in range(out.ninputs):
        got = out.inputs[k]
        start = int(ffi.cast("uintptr_t", got.data))
        assert int(base) + 16 <= start and start + got.size <= end
        assert got.name_len <= 4096




def parity(name: str, other: str, at_zero: int, entry: str = "") -> str:
    """name(x) = at_zero when x == 0, else other(x - 1): even and odd call each other."""
    return HEAD + f"""
.extern .func (.param .b32 r) {other}(.param .b32 x);
.visible .func (.param .b32 r) {name}(.param .b32 x) {{ .reg .b32 %r<4>; .reg .pred %p<2>;
  ld.param.u32 %r1, [x]; setp.eq.u32 %p1, %r1, 0; mov.u32 %r2, {at_zero}; @%p1 bra Z;
  sub.u32 %r3, %r1, 1;
  {{ .param .b32 y; st.param.b32 [y], %r3; .param .b32 rv; call.uni (rv), {other}, (y);
    ld.param.b32 %r2, [rv]; }}
Z: st.param.b32 [r], %r2; ret; }}
""" + entry


PARITY_ENTRY = """
.visible .entry parity(.param .u64 out) { .reg .b32 %r<3>; .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out]; mov.u32 %r1, %tid.x;
  { .param .b32 y; st.param.b32 [y], %r1; .param .b32 rv; call.uni (rv), even, (y);
    ld.param.b32 %r2, [rv]; }
  st.global.u32 [%rd1], %r2; ret; }
"""
# a cycle across inputs: even() and odd() call each other
PIECES = [MAIN, LIB, OTHER, ROWS, parity("even", "odd", 1), parity("odd", "even", 0, PARITY_ENTRY)]

# Edits that make declarations disagree or clash between inputs.
EDITS = [(".extern", ".visible"), (".visible", ".extern"), (".visible", ".weak"),
         (".weak", ".visible"), (".b32 x", ".b64 x"), (".param .b32 r", ".param .b64 r"),
         (".visible .global", ".common .global"), (".u32 bias", ".u32 bias[3]"),
         ("call.uni (rv), odd", "call.uni (rv), even"), (".func", ".entry"), ("ret;", ""),
         (".extern .global .u32 bias;", "")]


@st.composite
def inputs(draw):
    chosen = draw(st.lists(st.sampled_from(PIECES), min_size=1, max_size=4))
    out = []
    for text in chosen:
        for _ in range(draw(st.integers(0, 3))):
            old, new = draw(st.sampled_from(EDITS))
            if old in text:
                at = draw(st.integers(0, text.count(old) - 1))
                parts = text.split(old)
                text = old.join(parts[:at + 1]) + new + old.join(parts[at + 1:])
        out.append(text.encode())
    return out, draw(st.booleans())


@FUZZ
@given(inputs())
def test_linking_disagreeing_inputs_links_or_is_refused_with_a_message(case):
    texts, devrt = case
    rc, msg = link(texts, devrt)
    assert rc in (0, -1)
    if rc == -1:
        assert MESSAGE.match(msg), msg


def test_a_cycle_across_inputs_links_and_runs():
    even, odd = PIECES[4].encode(), PIECES[5].encode()
    assert link([even, odd]) == (0, "")
    keep = [ffi.new("char[]", t) for t in (even, odd)]
    m = lib.gl_ptx_link_load(ffi.new("const char *[]", keep), ffi.new("size_t[]", [len(even),
                             len(odd)]), 2, 0, ffi.NULL, 0)
    assert m != ffi.NULL
    try:
        out = ffi.new("uint32_t[1]")
        addr = int(ffi.cast("uintptr_t", out))
        ranges = ffi.new("uint64_t[]", [addr, 4])
        params = struct.pack("<Q", addr)
        err = ffi.new("char[256]")
        for tid, want in ((6, 1), (7, 0)):
            rc = lib.gl_ptx_run(m, b"parity", ffi.new("unsigned[3]", [1, 1, 1]),
                                ffi.new("unsigned[3]", [tid + 1, 1, 1]), 0, params, 8, ranges,
                                1, 1, ffi.NULL, err, 256)
            assert rc == 0, ffi.string(err)
            assert out[0] == want  # the last thread (tid) wrote even(tid)
    finally:
        lib.gl_ptx_unload(m)


def test_a_cooperative_grid_on_several_threads():
    """Blocks shared out over worker threads still meet at the grid barrier."""
    keep = [ffi.new("char[]", ROWS.encode())]
    err = ffi.new("char[256]")
    m = lib.gl_ptx_link_load(ffi.new("const char *[]", keep), ffi.new("size_t[]", [len(ROWS)]),
                             1, 1, err, 256)
    assert m != ffi.NULL, ffi.string(err)
    try:
        blocks, threads, steps = 12, 64, 9
        cols = blocks * threads
        buf = ffi.new("uint32_t[]", cols * (steps + 1))
        addr = int(ffi.cast("uintptr_t", buf))
        ranges = ffi.new("uint64_t[]", [addr, 4 * cols * (steps + 1)])
        params = struct.pack("<QI", addr, steps)
        for workers in (1, 3, 5):
            for k in range(cols * (steps + 1)):
                buf[k] = 0
            rc = lib.gl_ptx_run_cooperative(m, b"k", ffi.new("unsigned[3]", [blocks, 1, 1]),
                                            ffi.new("unsigned[3]", [threads, 1, 1]), 0, params,
                                            len(params), ranges, 1, workers, ffi.NULL, err, 256)
            assert rc == 0, ffi.string(err)
            got = list(buf)
            for row in range(steps + 1):
                assert got[row * cols:(row + 1) * cols] == [row] * cols, (workers, row)
    finally:
        lib.gl_ptx_unload(m)
