"""The server's reasons reach the program: notes on the reply that reports an error.

A fault or refusal the executor records for a session is one line; it rides on the
next waiting reply that reports an error (after the reply's bytes, gl_session.h), a
session hands its program a bounded number of lines, and what does not fit is said
in one closing line. Driven in-process, straight into the executor.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gleam.peer.cuda.server import native
from gleam.peer.cuda.wire import trailer
from gleam.peer.records import CallRecord

from .cuda_session import ptx_only_session, quiet, rec

INVALID_VALUE, INVALID_PTX, ILLEGAL_ADDRESS, LAUNCH_FAILED = 1, 218, 700, 719
BUDGET = 32  # GL_NOTES_BUDGET (notes.h)

KERNELS = b""".version 8.0
.target sm_80
.address_size 64
.visible .entry store(.param .u64 p)
{
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [p];
    st.global.u32 [%rd1], 7;
    ret;
}
.visible .entry boom() { trap; }
"""


def bad_ptx(k: int, pad: int = 0) -> bytes:
    """A module the host device refuses, with a reason of its own (the instruction's
    name, ``pad`` bytes longer: the reason quotes 60 of them)."""
    return (b".version 8.0\n.target sm_80\n.address_size 64\n"
            b".visible .entry k() { frobnicate%d%s; }\n" % (k, b"x" * pad))


def test_a_pointer_outside_the_session_is_explained_once():
    with ptx_only_session() as s:
        p = s.alloc(256)
        s.run(rec("cuMemsetD8", p + 200, 1, 100))
        assert s.sync() == (0, INVALID_VALUE)
        assert s.notes == [f"cuMemsetD8: device memory {p + 200:#x} (100 bytes) is not "
                           "inside the session's allocations"]
        assert s.sync() == (0, 0) and s.notes == []


def test_a_kernel_fault_names_the_kernel_the_ptx_line_the_address_and_the_block():
    with ptx_only_session() as s:
        mod = s.load(KERNELS)
        store = s.function(mod, "store")
        bad = s.x.va_base + (1 << 20)  # no allocation there
        s.launch(store, (1, 1, 1), (1, 1, 1), struct.pack("<Q", bad))
        assert s.sync() == (0, ILLEGAL_ADDRESS)
        [line] = s.notes
        assert line.startswith("kernel store: illegal address (PTX line 8, ")
        assert f"address {bad:#x}, block 0)" in line


def test_a_trap_and_a_refused_module_say_why():
    with ptx_only_session() as s:
        boom = s.function(s.load(KERNELS), "boom")
        s.launch(boom, (1, 1, 1), (1, 1, 1), b"")
        assert s.sync() == (0, LAUNCH_FAILED)
        assert s.notes == ["kernel boom: trap (PTX line 11, address 0x0, block 0)"]
    with ptx_only_session() as s:
        s.load(bad_ptx(1))
        assert s.sync() == (0, INVALID_PTX)
        [line] = s.notes
        assert line.startswith("the module's PTX is refused: ") and "frobnicate" in line


def test_a_reply_without_an_error_carries_no_notes():
    with ptx_only_session() as s:
        p = s.alloc(64)
        s.run(rec("cuMemsetD8", p, 3, 64))
        assert s.dtoh(p, 4) == b"\3" * 4 and s.notes == []
        s.run(rec("cuMemsetD8", p + 60, 1, 100))  # the reason waits for the error it explains
        r = s.run(rec("glMemcpyDtoH", p, 4, 0))
        assert r is not None and r[:2] == (0, INVALID_VALUE) and r[3] == b"\3" * 4
        assert len(s.notes) == 1 and "is not inside the session's allocations" in s.notes[0]


def test_the_same_fault_in_a_loop_is_one_line_and_a_count():
    with ptx_only_session() as s:
        p = s.alloc(256)
        for _ in range(50):
            s.run(rec("cuMemsetD8", p + 255, 1, 2))
        assert s.sync() == (0, INVALID_VALUE)
        assert len(s.notes) == 2 and s.notes[1] == "(49 more messages in the serving agent's log)"


def test_a_session_hands_its_program_a_bounded_number_of_lines():
    """Distinct refusals: at most BUDGET lines in all, then one closing line, then none."""
    with ptx_only_session() as s:
        seen: list[str] = []
        for k in range(3 * BUDGET):
            s.load(bad_ptx(k))
            s.sync()
            seen += s.notes
        assert len(seen) == BUDGET + 1
        assert seen[-1] == ("further messages of this session are only in the serving "
                            "agent's log")
        assert all("frobnicate" in line for line in seen[:-1])


def test_many_reasons_before_one_waiting_call_fit_one_reply_as_whole_lines():
    with ptx_only_session() as s:
        for k in range(100):
            s.load(bad_ptx(k, pad=400))
        assert s.sync() == (0, INVALID_PTX)
        *lines, closing = s.notes
        assert len(lines) == BUDGET and closing.startswith("further messages")
        assert all(line.startswith("the module's PTX is refused: line 4: ") for line in lines)
        assert sum(len(line) + 1 for line in s.notes) <= native.lib.GL_REPLY_NOTES_MAX


def test_a_full_reply_keeps_its_notes_for_the_next_error():
    """A device-to-host reply whose bytes fill the buffer carries the error, not the notes."""
    with ptx_only_session() as s:
        n = native.REPLY_CAPACITY - 80
        p = s.alloc(n)
        s.run(rec("cuMemsetD8", p + n - 1, 1, 2))
        r = s.run(rec("glMemcpyDtoH", p, n, 0))
        assert r is not None and r[1] == INVALID_VALUE and s.notes == []
        s.run(rec("cuMemsetD8", p - 1, 1, 1))
        assert s.sync() == (0, INVALID_VALUE)
        assert len(s.notes) == 2 and all("is not inside" in line for line in s.notes)


def test_control_bytes_in_a_reason_cannot_reach_the_terminal():
    with ptx_only_session() as s:
        s.load(b".version 8.0\n.target sm_80\n.address_size 64\n"
               b".visible .entry k() { frob\x1b[2Jnicate; }\n")
        assert s.sync()[1] == INVALID_PTX
        assert s.notes and not any(ch < " " for line in s.notes for ch in line)


def test_a_quiet_read_leaves_the_deferred_error_and_the_notes_for_the_next_reply():
    """A checkpoint's snapshot read is quiet (records.h): its reply carries neither the
    program's deferred error nor the server's notes on it, nor notes of its own
    failure; the program's next waiting reply carries them as if no read had come."""
    with ptx_only_session() as s:
        p = s.alloc(64)
        s.htod(p, b"abcd" * 16)
        boom = s.function(s.load(KERNELS), "boom")
        s.launch(boom, (1, 1, 1), (1, 1, 1), b"")
        assert s.run(quiet(rec("glMemcpyDtoH", p, 4, 0))) == (0, 0, [], b"abcd")
        assert s.sections == []
        failed = s.run(quiet(rec("glMemcpyDtoH", p + (1 << 20), 4, 0)))
        assert failed is not None and failed[:2] == (INVALID_VALUE, 0) and s.sections == []
        assert s.sync() == (0, LAUNCH_FAILED)
        assert s.notes == ["kernel boom: trap (PTX line 11, address 0x0, block 0)"]


def test_only_a_waiting_record_is_quiet():
    with pytest.raises(ValueError, match="only a waiting record"):
        CallRecord(1, (), oneway=True, quiet=True)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_a_trailer_parses_to_sections_that_pack_back_or_is_refused(junk):
    try:
        sections = trailer.parse(junk)
    except trailer.TrailerError:
        return
    assert trailer.pack(sections) == junk
