"""Mapped and managed memory on the server and in the diff they travel as
(docs/cuda-forwarding.md, "Mapped and managed memory"): the codec both sides
share (include/gl_mirror_diff.h), and glMirrorAdd, glMirrorPush and
glMirrorPull in-process through the executor (tests/cuda_session.py), with
hostile pushes refused whole."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gleam.peer.cuda.server import native
from gleam.peer.nativelib import ffi, lib

from .cuda_session import Session, rec
from .stand_in_driver import build_stand_in, needs_gcc, stand_in_session

INVALID_VALUE = 1
BLOCK = lib.GL_DIFF_BLOCK


def encode(addr: int, cur: bytes, twin: bytearray, cap: int = 1 << 20) -> tuple[bytes, int]:
    """gl_diff_encode: (the entries, bytes scanned); twin takes what was sent."""
    out = bytearray(cap)
    scanned = ffi.new("size_t *")
    t = ffi.from_buffer("uint8_t[]", twin, require_writable=True)
    n = lib.gl_diff_encode(addr, ffi.from_buffer("uint8_t[]", cur), t, len(cur),
                           ffi.from_buffer("uint8_t[]", out, require_writable=True), cap,
                           scanned)
    return bytes(out[:n]), scanned[0]


def entries(diff: bytes) -> list[tuple[int, int, int]] | None:
    """(addr, len, form) of each entry, or None when the bytes are malformed."""
    pos = ffi.new("size_t *")
    e = ffi.new("gl_diff_entry *")
    buf = ffi.from_buffer("uint8_t[]", diff)
    got = []
    while (rc := lib.gl_diff_next(buf, len(diff), pos, e)) == 1:
        got.append((e.addr, e.len, e.form))
    return got if rc == 0 else None


def apply(diff: bytes, base: int, mem: bytearray, twin: bytearray) -> None:
    """Applies every entry to mem and twin, which hold the bytes from base on."""
    pos = ffi.new("size_t *")
    e = ffi.new("gl_diff_entry *")
    buf = ffi.from_buffer("uint8_t[]", diff)
    m = ffi.from_buffer("uint8_t[]", mem, require_writable=True)
    t = ffi.from_buffer("uint8_t[]", twin, require_writable=True)
    while lib.gl_diff_next(buf, len(diff), pos, e) == 1:
        off = e.addr - base
        lib.gl_diff_apply(e, m + off, t + off)


# ---------------------------------------------------------------------- codec


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_the_receiver_gets_the_senders_bytes_and_keeps_its_own(data):
    """Both sides change different bytes of one range; after a diff each way both
    hold every change (the rule that lets the CPU and a kernel share a page)."""
    n = data.draw(st.integers(1, 3 * BLOCK + 17))
    agreed = bytearray(data.draw(st.binary(min_size=n, max_size=n)))
    owner = data.draw(st.lists(st.sampled_from("sr-"), min_size=n, max_size=n))
    sender, receiver = bytearray(agreed), bytearray(agreed)
    for i, who in enumerate(owner):  # each byte changed by one side at most
        if who == "s":
            sender[i] = (agreed[i] + 1 + data.draw(st.integers(0, 254))) % 256
        elif who == "r":
            receiver[i] ^= 0xFF
    s_twin, r_twin = bytearray(agreed), bytearray(agreed)
    diff, scanned = encode(0x1000, bytes(sender), s_twin)
    assert scanned == n and s_twin == sender
    assert entries(diff) is not None
    apply(diff, 0x1000, receiver, r_twin)
    merged = bytes(sender[i] if owner[i] == "s" else receiver[i] for i in range(n))
    assert receiver == merged and r_twin == sender
    back, _ = encode(0x1000, bytes(receiver), r_twin)  # and the receiver's own, back
    apply(back, 0x1000, sender, s_twin)
    assert sender == receiver == bytearray(merged) and s_twin == r_twin


def conflicts(diff: bytes, base: int, mem: bytes, twin: bytes) -> int:
    pos = ffi.new("size_t *")
    e = ffi.new("gl_diff_entry *")
    buf = ffi.from_buffer("uint8_t[]", diff)
    m, t = ffi.from_buffer("uint8_t[]", mem), ffi.from_buffer("uint8_t[]", twin)
    n = 0
    while lib.gl_diff_next(buf, len(diff), pos, e) == 1:
        n += lib.gl_diff_conflicts(e, m + (e.addr - base), t + (e.addr - base))
    return n


def test_bytes_both_sides_wrote_are_counted():
    agreed = bytes(64)
    sender = bytearray(agreed)
    sender[0:8] = b"\x01" * 8  # a run
    sender[20:64:2] = b"\x02" * 22  # scattered: masked
    diff, _ = encode(0, bytes(sender), bytearray(agreed))
    receiver = bytearray(agreed)
    receiver[1] = 9  # both wrote: a conflict
    receiver[2] = 1  # both wrote, the same value (two adds may end equal): a conflict too
    receiver[21] = 7  # only the receiver wrote (the sender left odd bytes): none
    receiver[22] = 3  # both wrote, masked: a conflict
    assert conflicts(diff, 0, bytes(receiver), agreed) == 3
    assert conflicts(diff, 0, agreed, agreed) == 0


def test_scattered_changes_travel_masked_and_few_as_runs():
    twin = bytearray(BLOCK)
    cur = bytearray(BLOCK)
    cur[0::4] = b"\x01" * (BLOCK // 4)  # a kernel that rewrote every float's low byte
    diff, _ = encode(0, bytes(cur), bytearray(twin))
    assert [form for _, _, form in entries(diff)] == [lib.GL_DIFF_MASKED]
    assert len(diff) < BLOCK + BLOCK // 8 + 64
    cur = bytearray(BLOCK)
    cur[10:20] = b"x" * 10
    cur[3000] = 1
    diff, _ = encode(0, bytes(cur), bytearray(twin))
    assert entries(diff) == [(10, 10, lib.GL_DIFF_RUN), (3000, 1, lib.GL_DIFF_RUN)]


def test_a_full_buffer_stops_at_a_block_and_says_where_to_go_on():
    cur = bytes(range(256)) * (3 * BLOCK // 256)
    twin = bytearray(len(cur))
    diff, scanned = encode(0, cur, twin, cap=lib.GL_DIFF_BLOCK_MAX)
    assert scanned == BLOCK and twin[:BLOCK] == cur[:BLOCK] and not any(twin[BLOCK:])
    rest, scanned2 = encode(BLOCK, cur[BLOCK:], bytearray(2 * BLOCK))
    assert scanned2 == 2 * BLOCK and entries(diff) and entries(rest)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_the_reader_refuses_what_is_not_an_entry(raw):
    got = entries(raw)
    if got is not None:
        assert all(1 <= n <= BLOCK and form in (0, 1) for _, n, form in got)


def test_the_reader_checks_every_field():
    head = struct.Struct("<QII")
    good = head.pack(64, 3, 0) + b"abc\0\0\0\0\0"
    assert entries(good) == [(64, 3, 0)]
    assert entries(head.pack(64, 0, 0)) is None  # empty
    assert entries(head.pack(64, BLOCK + 1, 0) + bytes(BLOCK + 8)) is None  # too long
    assert entries(head.pack(64, 3, 2) + bytes(8)) is None  # unknown form
    assert entries(head.pack(2**64 - 2, 3, 0) + bytes(8)) is None  # wraps
    assert entries(good[:-1]) is None  # short
    assert entries(head.pack(64, 9, 1) + bytes(8)) is None  # mask without data


# ------------------------------------------------------------------- executor


@pytest.fixture
def session():
    be = native.HostBackend({}, memory_limit=1 << 26)
    s = Session(be, 1 << 24)
    s.context()
    yield s
    s.close()
    be.close()


def mirror(s: Session, size: int) -> tuple[int, int]:
    data, twin = s.alloc(size), s.alloc(size)
    assert s.run(rec("glMirrorAdd", data, twin, size)) is None
    assert s.sync() == (0, 0)
    return data, twin


def push(s: Session, diff: bytes) -> tuple[int, int]:
    assert s.run(rec("glMirrorPush", len(diff), payload=diff)) is None
    return s.sync()


def pull(s: Session, n: int = 1 << 20, start: int = 0) -> tuple[int, bytes, int]:
    """(result, the diff, where to go on)."""
    r = s.run(rec("glMirrorPull", n, start))
    assert r is not None
    used, nxt = (r[2] + [0, 0])[:2]
    assert len(r[3]) == used
    return r[0], r[3], nxt


def test_pushed_bytes_land_and_a_pull_brings_only_what_the_device_changed(session):
    s = session
    data, _ = mirror(s, 10000)
    view, twin = bytearray(10000), bytearray(10000)
    view[100:110] = b"0123456789"
    view[9000] = 7
    diff, _ = encode(data, bytes(view), twin)
    assert push(s, diff) == (0, 0)
    assert s.dtoh(data, 10000) == view
    assert pull(s) == (0, b"", 0)  # the device changed nothing: nothing comes back
    s.htod(data + 104, b"ABCD")  # the device writes: plain device memory, not the twin
    result, back, nxt = pull(s)
    assert (result, nxt) == (0, 0)
    assert entries(back) == [(data + 104, 4, lib.GL_DIFF_RUN)]
    apply(back, data, view, twin)
    assert view[100:110] == b"0123ABCD89" and pull(s) == (0, b"", 0)


def test_a_pull_goes_on_from_where_a_full_reply_stopped(session):
    s = session
    first, _ = mirror(s, 3 * BLOCK)
    plain = s.alloc(BLOCK)
    second, _ = mirror(s, 5 * BLOCK)
    s.htod(first, bytes([1]) * (3 * BLOCK))
    s.htod(plain, bytes([2]) * BLOCK)  # no mirror: never sent
    s.htod(second, bytes(range(256)) * (5 * BLOCK // 256))
    got, start, rounds = [], 0, 0
    while True:
        result, diff, start = pull(s, n=2 * lib.GL_DIFF_BLOCK_MAX, start=start)
        assert result == 0
        got += entries(diff)
        rounds += 1
        if start == 0:
            break
    assert rounds >= 4
    covered = sum(n for _, n, _ in got)
    assert covered == 3 * BLOCK + 5 * BLOCK - 5 * BLOCK // 256  # (zeros were zeros)
    assert all(first <= a < first + 3 * BLOCK or second <= a < second + 5 * BLOCK
               for a, _, _ in got)


def test_a_mirror_is_two_fresh_allocations_of_one_size(session):
    s = session
    a, b, c = s.alloc(4096), s.alloc(4096), s.alloc(8192)
    for args in [(a, a, 4096), (a, c, 4096), (a, b + 256, 4096), (a, b, 100),
                 (s.x.va_base + (1 << 23), b, 4096)]:
        assert s.run(rec("glMirrorAdd", *args)) is None
        assert s.sync() == (0, INVALID_VALUE), args
    assert s.run(rec("glMirrorAdd", a, b, 4096)) is None
    assert s.sync() == (0, 0)
    d = s.alloc(4096)
    for args in [(d, b, 4096), (b, d, 4096), (a, d, 4096)]:  # a twin, or a mirror, again
        assert s.run(rec("glMirrorAdd", *args)) is None
        assert s.sync() == (0, INVALID_VALUE), args


def test_a_push_outside_the_mirrors_changes_nothing(session):
    s = session
    data, twin = mirror(s, 4096)
    plain = s.alloc(4096)
    good = encode(data, b"\x05" * 16, bytearray(16))[0]
    outside = encode(plain, b"\x05" * 16, bytearray(16))[0]
    past_end = encode(data + 4090, b"\x05" * 16, bytearray(16))[0]
    for bad in (good + outside, good + past_end, good + b"\x01" * 24, good[:-1]):
        assert push(s, bad) == (0, INVALID_VALUE)
        assert s.dtoh(data, 4096) == bytes(4096) and s.dtoh(plain, 4096) == bytes(4096)
    assert s.run(rec("glMemFree", twin)) is None  # a mirror whose twin is gone
    assert push(s, good) == (0, INVALID_VALUE)
    assert s.dtoh(data, 16) == bytes(16)


@settings(max_examples=100, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_any_push_is_applied_inside_the_mirror_or_refused(session, data):
    s = session
    if not hasattr(session, "fuzz"):
        session.fuzz = (*mirror(s, 2 * BLOCK), s.alloc(BLOCK))
    m, _, plain = session.fuzz
    before = s.dtoh(plain, BLOCK)
    pieces = data.draw(st.lists(st.tuples(
        st.integers(-64, 3 * BLOCK), st.binary(min_size=1, max_size=64),
        st.sampled_from([0, 1, 2])), max_size=4))
    raw = b"".join(struct.pack("<QII", m + off, len(body), form) + body
                   + bytes(-len(body) % 8) for off, body, form in pieces)
    raw += data.draw(st.binary(max_size=8))
    result, deferred = push(s, raw)
    assert result == 0 and deferred in (0, INVALID_VALUE)
    assert s.dtoh(plain, BLOCK) == before  # never past the mirror


# The copies the cuda backend stages mirrors through (the stand-in's device memory is
# host memory that cuMemMap made accessible).
STAGED_COPIES = r"""
CUresult cuMemcpyHtoDAsync_v2(P d, const void *s, size_t n, void *st) {
    memcpy((void *)(uintptr_t)d, s, n);
    return 0;
}
CUresult cuMemsetD8_v2(P p, unsigned char v, size_t n) {
    memset((void *)(uintptr_t)p, v, n);
    return 0;
}
"""


@needs_gcc
def test_the_cuda_backend_stages_mirrors_through_the_drivers_copies(tmp_path):
    so, _ = build_stand_in(tmp_path, STAGED_COPIES, "")
    with stand_in_session(so) as s:
        size = 3 * BLOCK + 100
        data, twin = s.alloc(size), s.alloc(size)
        s.htod(data, b"\x09" * size)  # what the GPU held before: glMirrorAdd zeroes both
        assert s.run(rec("glMirrorAdd", data, twin, size)) is None
        assert s.sync() == (0, 0) and s.dtoh(data, size) == bytes(size)
        view, mine = bytearray(size), bytearray(size)
        view[5000:5010] = b"abcdefghij"
        assert push(s, encode(data, bytes(view), mine)[0]) == (0, 0)
        assert s.dtoh(data + 5000, 10) == b"abcdefghij"
        s.htod(data + size - 3, b"xyz")
        got, start = b"", 0
        while True:  # a small reply: the pull goes on where it stopped
            result, diff, start = pull(s, n=lib.GL_DIFF_BLOCK_MAX, start=start)
            assert result == 0
            got += diff
            if start == 0:
                break
        assert entries(got) == [(data + size - 3, 3, lib.GL_DIFF_RUN)]
        apply(got, data, view, mine)
        assert view[-3:] == b"xyz" and pull(s) == (0, b"", 0)
