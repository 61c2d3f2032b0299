"""A kernel's malloc, free and assert on the host device, and the alignment of its
local and shared arrays. The heap is a range of the session's memory that the
interposer names with glDeviceHeap (CU_LIMIT_MALLOC_HEAP_SIZE bytes), its blocks
kept in its own bytes (src/ptx/ptx_heap.h); a failed assertion stops the kernel,
loses the context with CUDA_ERROR_ASSERT and tells the program's stderr where, in
NVIDIA's words. Driven in-process, straight into the executor."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gleam.peer.cuda.server import native

from .cuda_session import Session, ptx_only_session, rec
from .device_runtime import (
    ASSERT,
    HEAD,
    ILLEGAL_ADDRESS,
    INVALID_PTX,
    KERNELS,
    heap,
    heap_base,
    kernels,
)

THREADS = 64


def grab(s, fn, size: int, threads: int = THREADS) -> tuple[int, list[int]]:
    """Each thread mallocs ``size`` bytes: (sync's deferred error, the pointers)."""
    out = s.alloc(8 * threads)
    s.launch(fn["grab"], (1, 1, 1), (threads, 1, 1), struct.pack("<QQ", out, size))
    err = s.sync()[1]
    return err, list(struct.unpack(f"<{threads}Q", s.dtoh(out, 8 * threads))) if not err else []


def test_malloc_gives_each_thread_its_own_aligned_block_inside_the_heap():
    with ptx_only_session() as s:
        fn = kernels(s)
        base = heap(s, 1 << 20)
        err, ptrs = grab(s, fn, 100)
        assert err == 0 and all(base < p < base + (1 << 20) for p in ptrs)
        assert all(p % 16 == 0 for p in ptrs) and len(set(ptrs)) == THREADS
        spans = sorted(ptrs)
        assert all(b - a >= 100 for a, b in itertools.pairwise(spans)), "blocks do not overlap"
        for tid, p in enumerate(ptrs):  # each thread wrote its index into its own block
            assert struct.unpack("<I", s.dtoh(p, 4))[0] == tid


def test_a_full_heap_answers_null_and_freed_blocks_come_back():
    with ptx_only_session() as s:
        fn = kernels(s)
        heap(s, 64 * 1024)
        err, ptrs = grab(s, fn, 4000)  # 64 blocks of 4 KiB do not fit 64 KiB
        assert err == 0
        got = [p for p in ptrs if p]
        assert 0 < len(got) < THREADS and len(got) == 64 * 1024 // 4016
        table = s.alloc(8 * THREADS)
        s.htod(table, struct.pack(f"<{THREADS}Q", *ptrs))
        s.launch(fn["drop"], (1, 1, 1), (THREADS, 1, 1), struct.pack("<Q", table))  # free(NULL) too
        assert s.sync() == (0, 0)
        err, again = grab(s, fn, 4000)
        assert err == 0 and len([p for p in again if p]) == len(got)


def test_without_a_heap_malloc_answers_null():
    with ptx_only_session() as s:
        fn = kernels(s)
        err, ptrs = grab(s, fn, 16, threads=4)
        assert err == 0 and ptrs == [0, 0, 0, 0]


@pytest.mark.parametrize("where", ["inside a block", "the heap's start", "freed already"])
def test_freeing_what_malloc_did_not_return_is_an_illegal_address(where):
    with ptx_only_session() as s:
        fn = kernels(s)
        base = heap(s, 1 << 16)
        _, [p] = grab(s, fn, 64, threads=1)
        bad = {"inside a block": p + 16, "the heap's start": base + 8, "freed already": p}[where]
        table = s.alloc(8)
        if where == "freed already":
            s.htod(table, struct.pack("<Q", p))
            s.launch(fn["drop"], (1, 1, 1), (1, 1, 1), struct.pack("<Q", table))
            assert s.sync() == (0, 0)
        s.htod(table, struct.pack("<Q", bad))
        s.launch(fn["drop"], (1, 1, 1), (1, 1, 1), struct.pack("<Q", table))
        assert s.sync() == (0, ILLEGAL_ADDRESS)
        assert "free of a pointer that malloc did not return, or freed already" in s.notes[0]


def test_a_kernel_that_overwrites_a_block_header_makes_malloc_fault_not_read_astray():
    with ptx_only_session() as s:
        fn = kernels(s)
        heap(s, 1 << 16)
        _, ptrs = grab(s, fn, 32, threads=2)
        first = min(ptrs)
        s.htod(first + 32, b"\xff" * 16)  # past its 32 bytes: the next block's header
        # more than the rest of the heap: the search wraps and walks over that header
        err, _ = grab(s, fn, 65500, threads=1)
        assert err == ILLEGAL_ADDRESS
        assert "device heap corrupted" in s.notes[0]


@settings(max_examples=40, deadline=None)
@given(st.binary(min_size=1, max_size=512), st.integers(0, 4000))
def test_any_bytes_in_the_heap_never_take_malloc_outside_it(junk, size):
    """Whatever kernels wrote into the heap: malloc answers a block inside it, NULL,
    or reports the heap corrupted; it never answers memory outside."""
    with ptx_only_session() as s:
        fn = kernels(s)
        base = heap(s, 8192)
        s.htod(base, junk)
        err, ptrs = grab(s, fn, size, threads=4)
        assert err in (0, ILLEGAL_ADDRESS)
        assert all(p == 0 or base + 16 <= p < base + 8192 for p in ptrs)


def test_a_used_heap_stays_and_an_unused_one_is_replaced():
    """CUDA refuses a new heap size once a kernel allocated from the heap: the
    interposer names a new range and asks which heap the server uses."""
    with ptx_only_session() as s:
        fn = kernels(s)
        first = heap(s, 1 << 16)
        assert heap_base(s) == first
        second = heap(s, 1 << 17)
        assert heap_base(s) == second  # nothing allocated yet: replaced
        grab(s, fn, 16, threads=1)
        third = heap(s, 1 << 18)
        assert heap_base(s) == second != third


def test_a_heap_outside_the_session_memory_is_refused():
    with ptx_only_session() as s:
        p = s.alloc(4096)
        s.run(rec("glDeviceHeap", p, 8192))
        assert s.sync() == (0, 1)
        assert heap_base(s) == 0


def test_a_failed_assertion_stops_the_kernel_and_loses_the_context():
    with ptx_only_session() as s:
        fn = kernels(s)
        s.launch(fn["check"], (2, 1, 1), (4, 1, 1), struct.pack("<I", 2))
        assert s.sync() == (0, ASSERT)
        lines = s.stderr.decode().splitlines()
        assert lines[0] == ("k.cu:12: void check(int): block: [0,0,0], thread: [2,0,0] "
                            "Assertion `threadIdx.x <` failed.")
        assert lines[1].endswith("thread: [3,0,0] Assertion `threadIdx.x <` failed.")
        line = KERNELS[:KERNELS.index(b"call.uni __assertfail")].count(b"\n") + 1
        assert s.notes == [f"kernel check: device assertion failed (PTX line {line}, address "
                           "0x0, block 0)"]
        s.launch(fn["check"], (1, 1, 1), (1, 1, 1), struct.pack("<I", 2))
        assert s.sync() == (0, ASSERT), "the context stays lost"
    with ptx_only_session() as s:
        fn = kernels(s)
        s.launch(fn["check"], (4, 1, 1), (32, 1, 1), struct.pack("<I", 32))
        assert s.sync() == (0, 0) and s.stderr == b""


def test_local_and_shared_arrays_lie_at_their_declared_alignment():
    """numba checks local and shared arrays' addresses modulo 64 and 256."""
    with ptx_only_session() as s:
        fn = kernels(s)
        out = s.alloc(16 * 96)
        s.launch(fn["aligned"], (3, 1, 1), (96, 1, 1), struct.pack("<Q", out))
        assert s.sync() == (0, 0)
        addrs = struct.unpack("<192Q", s.dtoh(out, 16 * 96))
        assert all(a % 256 == 0 for a in addrs)
        assert len(set(addrs[0::2])) == 96, "each thread has its own local array"


def test_a_built_in_called_with_the_wrong_signature_is_refused_by_name():
    ptx = HEAD + b"""
.visible .entry k()
{
    .reg .b64 %rd<2>;
    {
    .param .b32 param0;
    st.param.b32 [param0+0], 16;
    .param .b64 retval0;
    call.uni (retval0), malloc, (param0);
    }
    ret;
}
"""
    with ptx_only_session() as s:
        s.load(ptx)
        assert s.sync() == (0, INVALID_PTX)
        assert "call does not match the device runtime's malloc" in s.notes[0]


def test_a_heap_moves_with_its_bytes():
    """A moving session's snapshot is its memory's bytes, the heap's among them: on
    the new server the old blocks stay taken and free takes them (docs/consistency.md)."""
    be = native.HostBackend({}, memory_limit=1 << 26)
    try:
        old = Session(be, 1 << 24)
        old.context()
        fn = kernels(old)
        base = heap(old, 1 << 16)
        _, live = grab(old, fn, 100, threads=4)
        snapshot, va = old.dtoh(base, 1 << 16), old.x.va_base
        old.close()
        new = Session(be, 1 << 24, va_base=va)  # the same range, as a move asks
        new.context()
        fn = kernels(new)
        assert heap(new, 1 << 16) == base
        new.htod(base, snapshot)
        err, more = grab(new, fn, 100, threads=4)
        assert err == 0 and all(p != 0 for p in more)
        assert all(abs(p - q) >= 112 for p in more for q in live), "no block handed out twice"
        table = new.alloc(8 * 4)
        new.htod(table, struct.pack("<4Q", *live))
        new.launch(fn["drop"], (1, 1, 1), (4, 1, 1), struct.pack("<Q", table))
        assert new.sync() == (0, 0)
        new.close()
    finally:
        be.close()
