"""The wire headers Python reads are the ones C declares (gl_session.h, records.h).

Python takes each header's layout from the C struct through cffi
(gleam.peer.native_layout); these tests pin the bytes the documents promise, so
a change on the C side that would move the wire fails here, not between peers.
"""

from __future__ import annotations

import cffi
import pytest

from gleam.peer.cuda.client import checkpoint
from gleam.peer.cuda.wire import envelope, trailer
from gleam.peer.native_layout import LayoutError, wire_struct
from gleam.peer.nativelib import ffi, lib


def test_the_envelope_header_is_the_documented_sixteen_bytes():
    head = envelope.pack_header(envelope.BLOB, 0x1122334455667788, 0x01020304)
    assert head == bytes.fromhex("04030201" "05" "00" "0000" "8877665544332211")
    assert envelope.HEADER_SIZE == len(head) == ffi.sizeof("gl_env_head")
    assert envelope.parse_header(head) == (envelope.BLOB, 0x1122334455667788, 0x01020304)
    buf = bytearray(head)
    envelope.stamp_session(buf, 9)
    assert envelope.session_of(buf) == 9 and envelope.kind_of(buf) == envelope.BLOB


def test_envelope_types_are_the_c_enum_blob_ring_and_claimed_included():
    assert envelope.TYPE_NAMES == {1: "BATCH", 2: "REPLY", 3: "HELLO", 4: "FAIL", 5: "BLOB",
                                   6: "RING", 7: "CLAIMED"}
    assert (envelope.BATCH, envelope.REPLY, envelope.HELLO, envelope.FAIL, envelope.BLOB,
            envelope.CLAIMED) == (
        lib.GL_ENV_BATCH, lib.GL_ENV_REPLY, lib.GL_ENV_HELLO, lib.GL_ENV_FAIL, lib.GL_ENV_BLOB,
        lib.GL_ENV_CLAIMED)


def test_a_claimed_body_round_trips_and_a_short_one_is_refused():
    claims = [envelope.Claim(0, 70_000, bytes(range(32))), envelope.Claim(3, 9, b"\xee" * 32)]
    body = envelope.claimed_body(claims, b"batch")
    assert len(body) == lib.GL_CLAIMS_HEAD_SIZE + 2 * lib.GL_CLAIM_SIZE + 5
    got, batch = envelope.split_claimed(body)
    assert got == claims and bytes(batch) == b"batch"
    with pytest.raises(envelope.EnvelopeError):
        envelope.split_claimed(body[:lib.GL_CLAIMS_HEAD_SIZE + lib.GL_CLAIM_SIZE])


def test_the_reply_header_is_c_s_gl_reply_head():
    assert checkpoint.REPLY_HEAD.format == "<iiII8Q"
    assert checkpoint.REPLY_HEAD.size == lib.GL_REPLY_HEADER_SIZE
    assert lib.GL_REPLY_MAX_VALUES == 8


def test_a_trailer_section_header_is_c_s_gl_section_head():
    assert trailer.HEADER.format == "<BBHI"
    assert trailer.HEADER.size == lib.GL_SECTION_HEADER_SIZE


def test_the_batch_record_count_is_where_records_h_puts_it():
    batch = bytearray(lib.GL_BATCH_HEADER_SIZE)
    batch[16:20] = (3).to_bytes(4, "little")
    assert envelope.record_count(batch) == 3
    assert envelope.record_count(batch[:-1]) == 0


@pytest.mark.parametrize(
    ("decl", "message"),
    [
        ("typedef struct { uint8_t a; uint32_t b; } t;", "padding before it"),
        ("typedef struct { uint64_t a; uint8_t b; } t;", "padding at its end"),
        ("typedef struct { void *p; } t;", "not a fixed-width integer"),
    ],
)
def test_a_struct_the_wire_cannot_carry_is_refused(decl, message):
    other = cffi.FFI()
    other.cdef(decl)
    with pytest.raises(LayoutError, match=message):
        wire_struct("t", other)
