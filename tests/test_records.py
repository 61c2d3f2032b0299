"""Data-plane batch format: round trips, every rejection rule, writer limits.

Malformed batches are built here with ``struct``, independently of the C
encoder, so these tests also pin the byte layout of
docs/wire-format-data-plane.md. Each rejection test asserts the exact error
code, so removing the check it covers makes it fail (another check would
either let the bytes through or report a different code).
"""

from __future__ import annotations

import struct

import pytest

from gleam.peer.nativelib import ffi, lib
from gleam.peer.records import (
    BATCH_HEADER_SIZE,
    MAX_ARGS,
    BatchWriter,
    BlobRef,
    CallRecord,
    DecodedBatch,
    RecordError,
    RecordFlag,
    decode_batch,
    encode_batch,
    record_size,
)

U64_MAX = (1 << 64) - 1
DIGEST = bytes(range(32))
INLINE = int(RecordFlag.INLINE)
REF = int(RecordFlag.REF)
ONEWAY = int(RecordFlag.ONEWAY)
QUIET = int(RecordFlag.QUIET)


# ----------------------------------------------------------- byte builders


def header(
    count: int,
    length: int,
    *,
    seq: int = 0,
    magic: bytes = b"GLB1",
    version: int = 1,
    flags: int = 0,
) -> bytes:
    return magic + struct.pack("<HHQII", version, flags, seq, count, length)


def record(
    call_id: int = 1,
    flags: int = 0,
    args: tuple[int, ...] = (),
    payload: bytes = b"",
    *,
    nargs: int | None = None,
    payload_len: int | None = None,
    reserved: int = 0,
    length: int | None = None,
    padding: bytes | None = None,
) -> bytes:
    """A record as the spec lays it out; keyword overrides break one field."""
    body = struct.pack(f"<{len(args)}Q", *args) + payload
    if padding is None:
        padding = bytes(-(16 + len(body)) % 8)
    if length is None:
        length = 16 + len(body) + len(padding)
    head = struct.pack(
        "<IHBBII",
        length,
        call_id,
        flags,
        len(args) if nargs is None else nargs,
        len(payload) if payload_len is None else payload_len,
        reserved,
    )
    return head + body + padding


def batch(*records: bytes, count: int | None = None, seq: int = 0, **hdr: int) -> bytes:
    body = b"".join(records)
    n = len(records) if count is None else count
    return header(n, BATCH_HEADER_SIZE + len(body), seq=seq, **hdr) + body  # type: ignore[arg-type]


def code_of(data: bytes) -> int:
    with pytest.raises(RecordError) as info:
        decode_batch(data)
    # The Python wrapper and the C validator must agree.
    assert lib.gl_batch_validate(data, len(data)) == info.value.code
    return info.value.code


# ----------------------------------------------------------------- round trips


def test_layout_matches_spec_bytes() -> None:
    recs = [
        CallRecord(7, (1, U64_MAX), b"abc", oneway=True),
        CallRecord(8, ref=BlobRef(DIGEST, 1 << 40)),
        CallRecord(9),
    ]
    expected = batch(
        record(7, ONEWAY | INLINE, (1, U64_MAX), b"abc"),
        record(8, REF, (), DIGEST + struct.pack("<Q", 1 << 40)),
        record(9),
        seq=0x0102030405060708,
    )
    assert encode_batch(recs, seq=0x0102030405060708) == expected
    assert decode_batch(expected) == DecodedBatch(0x0102030405060708, tuple(recs))


@pytest.mark.parametrize(
    "rec",
    [
        CallRecord(1, (5,), b"hello world"),
        CallRecord(2, ref=BlobRef(DIGEST, 12345)),
        CallRecord(3, (1, 2, 3)),
        CallRecord(4, payload=b""),
        CallRecord(5, tuple(range(MAX_ARGS)), b"x" * 9, oneway=True),
        CallRecord(0xFFFF, (U64_MAX,) * MAX_ARGS, ref=BlobRef(b"\xff" * 32, U64_MAX)),
    ],
    ids=["inline", "ref", "no-payload", "empty-inline", "max-args-oneway", "max-values"],
)
def test_round_trip(rec: CallRecord) -> None:
    data = encode_batch([rec, rec], seq=U64_MAX)
    assert decode_batch(data) == DecodedBatch(U64_MAX, (rec, rec))


def test_empty_and_none_payload_stay_distinct() -> None:
    decoded = decode_batch(encode_batch([CallRecord(1, payload=b""), CallRecord(1)])).records
    assert decoded[0].payload == b"" and decoded[0].flags == RecordFlag.INLINE
    assert decoded[1].payload is None and decoded[1].flags == RecordFlag(0)


def test_empty_batch() -> None:
    data = encode_batch([], seq=3)
    assert data == header(0, 24, seq=3)
    assert decode_batch(data) == DecodedBatch(3, ())


def test_decode_accepts_bytearray_and_unaligned_memoryview() -> None:
    data = encode_batch([CallRecord(1, (2,), b"abcdefg")])
    shifted = memoryview(bytearray(b"\x00" + data))[1:]  # starts at an odd address
    assert decode_batch(shifted) == decode_batch(bytearray(data)) == decode_batch(data)


# ------------------------------------------------------- alignment and padding


@pytest.mark.parametrize("payload_len", range(18))
def test_records_are_padded_to_8_with_zeros(payload_len: int) -> None:
    rec = CallRecord(1, (1,), b"\xaa" * payload_len)
    data = encode_batch([rec, rec])
    size = record_size(rec)
    assert size % 8 == 0 and size - 8 < 16 + 8 + payload_len <= size
    assert len(data) == BATCH_HEADER_SIZE + 2 * size
    first = data[BATCH_HEADER_SIZE : BATCH_HEADER_SIZE + size]
    assert first[16 + 8 + payload_len :] == bytes(size - 16 - 8 - payload_len)
    assert struct.unpack_from("<I", data, BATCH_HEADER_SIZE + size)[0] == size


def test_writer_zeroes_padding_in_a_dirty_buffer() -> None:
    # Callers reuse batch buffers; stale bytes must not leak into padding.
    buf = ffi.new("uint8_t[]", b"\xff" * 64)
    w = ffi.new("gl_batch_writer *")
    assert lib.gl_batch_writer_init(w, buf, 64, 0) == lib.GL_OK
    assert lib.gl_batch_append_inline(w, 1, 0, ffi.NULL, 0, b"abc", 3) == lib.GL_OK
    assert lib.gl_batch_writer_finish(w) == lib.GL_OK
    data = ffi.buffer(buf, w.len)[:]
    assert data == batch(record(1, INLINE, payload=b"abc"))


def test_record_size_native_limits() -> None:
    assert lib.gl_batch_record_size(0, 0) == 16
    assert lib.gl_batch_record_size(MAX_ARGS, 40) == 16 + 8 * MAX_ARGS + 40
    assert lib.gl_batch_record_size(MAX_ARGS + 1, 0) == 0
    # 16 + (2^32 - 1) does not fit the u32 record length field.
    assert lib.gl_batch_record_size(0, 0xFFFFFFFF) == 0
    assert lib.gl_batch_record_size(0, 0xFFFFFFFF - 16 - 7) == 0xFFFFFFF8


# ------------------------------------------------------------- header rules


def test_reject_short_buffer() -> None:
    assert code_of(header(0, 24)[:23]) == lib.GL_E_TRUNCATED
    assert code_of(b"") == lib.GL_E_TRUNCATED


def test_reject_bad_magic() -> None:
    assert code_of(header(0, 24, magic=b"GLB2")) == lib.GL_E_MAGIC


def test_reject_bad_version() -> None:
    assert code_of(header(0, 24, version=2)) == lib.GL_E_VERSION


@pytest.mark.parametrize("flags", [1, 0x8000])
def test_reject_batch_flags(flags: int) -> None:
    assert code_of(header(0, 24, flags=flags)) == lib.GL_E_BATCH_FLAGS


def test_reject_length_beyond_buffer() -> None:
    data = batch(record(1))
    assert code_of(data[:-8]) == lib.GL_E_TRUNCATED
    assert code_of(header(0, 0xFFFFFFFF)) == lib.GL_E_TRUNCATED


@pytest.mark.parametrize("length", [0, 16, 23, 24])
def test_reject_length_short_of_buffer(length: int) -> None:
    data = header(0, length) + bytes(8)
    assert code_of(data) == lib.GL_E_LENGTH


def test_reject_count_above_records_present() -> None:
    assert code_of(batch(record(1), count=2)) == lib.GL_E_COUNT
    assert code_of(batch(count=1)) == lib.GL_E_COUNT
    assert code_of(batch(record(1, args=(1, 2)), count=0xFFFFFFFF)) == lib.GL_E_COUNT


def test_reject_count_below_records_present() -> None:
    assert code_of(batch(record(1), record(2), count=1)) == lib.GL_E_TRAILING


def test_reject_trailing_bytes_inside_batch() -> None:
    data = batch(record(1), bytes(8), count=1)
    assert code_of(data) == lib.GL_E_TRAILING


# ------------------------------------------------------------- record rules


def test_reject_partial_record_header() -> None:
    assert code_of(batch(bytes(8), count=1)) == lib.GL_E_REC_OVERRUN


@pytest.mark.parametrize("length", [0, 8])
def test_reject_record_shorter_than_header(length: int) -> None:
    assert code_of(batch(record(1, length=length))) == lib.GL_E_REC_SHORT


def test_reject_record_length_not_multiple_of_8() -> None:
    data = batch(record(1, INLINE, payload=b"abcd", length=20, padding=bytes(4)))
    assert code_of(data) == lib.GL_E_REC_ALIGN


@pytest.mark.parametrize("length", [24, 0xFFFFFFF8])
def test_reject_record_overrunning_batch(length: int) -> None:
    with pytest.raises(RecordError, match="record overruns batch"):
        decode_batch(batch(record(1, length=length)))
    assert code_of(batch(record(1, length=length))) == lib.GL_E_REC_OVERRUN


def test_record_error_names_the_record() -> None:
    data = batch(record(1), record(2, reserved=1))
    with pytest.raises(RecordError, match=r"reserved field not zero \(record 1\)") as info:
        decode_batch(data)
    assert info.value.index == 1


@pytest.mark.parametrize("bit", [16, 32, 64, 128])
def test_reject_unknown_record_flags(bit: int) -> None:
    assert code_of(batch(record(1, bit))) == lib.GL_E_REC_FLAGS


def test_a_quiet_record_waits_and_round_trips() -> None:
    """QUIET (a checkpoint's read) is a waiting record's flag: never with ONEWAY."""
    assert code_of(batch(record(1, QUIET | ONEWAY))) == lib.GL_E_REC_FLAGS
    quiet = CallRecord(1, (5,), quiet=True)
    assert decode_batch(encode_batch([quiet])).records == (quiet,)


def test_reject_inline_and_ref_together() -> None:
    payload = DIGEST + struct.pack("<Q", 1)
    assert code_of(batch(record(1, INLINE | REF, payload=payload))) == lib.GL_E_REC_BOTH


def test_reject_too_many_args() -> None:
    data = batch(record(1, args=tuple(range(MAX_ARGS + 1))))
    assert code_of(data) == lib.GL_E_NARGS
    assert decode_batch(batch(record(1, args=tuple(range(MAX_ARGS))))).records[0].args == tuple(
        range(MAX_ARGS)
    )


@pytest.mark.parametrize("reserved", [1, 0x80000000])
def test_reject_nonzero_reserved(reserved: int) -> None:
    assert code_of(batch(record(1, reserved=reserved))) == lib.GL_E_RESERVED


@pytest.mark.parametrize("payload_len", [0, 32, 48])
def test_reject_ref_payload_len_not_40(payload_len: int) -> None:
    # The record's own length is consistent with payload_len, so only the
    # REF rule can reject it (otherwise the reader would read a short ref).
    data = batch(record(1, REF, payload=bytes(payload_len)))
    assert code_of(data) == lib.GL_E_REF_LEN


def test_reject_payload_len_without_payload_flag() -> None:
    data = batch(record(1, 0, payload=bytes(8)))
    assert code_of(data) == lib.GL_E_PAYLOAD_LEN


@pytest.mark.parametrize(
    "raw",
    [
        record(1, INLINE, payload_len=100, length=24, padding=bytes(8)),
        record(1, INLINE, payload_len=0xFFFFFFF8, length=24, padding=bytes(8)),  # wraps in u32
        record(1, 0, nargs=2, length=16),
        record(1, REF, nargs=1, payload_len=40, length=56, padding=bytes(40)),
    ],
    ids=["inline", "u32-wrap", "args", "ref-plus-args"],
)
def test_reject_payload_overrunning_record(raw: bytes) -> None:
    assert code_of(batch(raw)) == lib.GL_E_PAYLOAD_OVERRUN


def test_reject_excess_padding() -> None:
    data = batch(record(1, INLINE, payload=b"abc", padding=bytes(13)))
    assert code_of(data) == lib.GL_E_REC_PADDING


@pytest.mark.parametrize("where", range(5))
def test_reject_nonzero_padding(where: int) -> None:
    pad = bytearray(5)
    pad[where] = 1
    assert code_of(batch(record(1, INLINE, payload=b"abc", padding=bytes(pad)))) == (
        lib.GL_E_PAD_NONZERO
    )


# ------------------------------------------------------------- native reader


def test_reader_walks_then_ends_and_errors_are_sticky() -> None:
    good = encode_batch([CallRecord(1), CallRecord(2, (9,))], seq=5)
    buf = ffi.from_buffer(good)
    r = ffi.new("gl_batch_reader *")
    out = ffi.new("gl_record *")
    assert lib.gl_batch_reader_open(r, buf, len(good)) == lib.GL_OK
    assert (r.count, r.seq) == (2, 5)
    assert lib.gl_batch_reader_next(r, out) == 1 and out.call_id == 1
    assert lib.gl_batch_reader_next(r, out) == 1 and (out.call_id, out.args[0]) == (2, 9)
    assert lib.gl_batch_reader_next(r, out) == 0
    assert lib.gl_batch_reader_next(r, out) == 0

    bad = batch(record(1), record(2, reserved=1))
    bbuf = ffi.from_buffer(bad)
    assert lib.gl_batch_reader_open(r, bbuf, len(bad)) == lib.GL_OK
    assert lib.gl_batch_reader_next(r, out) == 1
    assert lib.gl_batch_reader_next(r, out) == lib.GL_E_RESERVED
    assert lib.gl_batch_reader_next(r, out) == lib.GL_E_RESERVED


def test_reader_refuses_use_after_failed_open() -> None:
    r = ffi.new("gl_batch_reader *")
    out = ffi.new("gl_record *")
    assert lib.gl_batch_reader_open(r, ffi.NULL, 0) == lib.GL_E_TRUNCATED
    assert lib.gl_batch_reader_next(r, out) == lib.GL_E_TRUNCATED
    assert lib.gl_batch_reader_open(ffi.NULL, ffi.NULL, 0) == lib.GL_E_INVALID


def test_strerror_covers_every_code() -> None:
    codes = [getattr(lib, name) for name in dir(lib) if name.startswith("GL_E_")]
    assert len(codes) == 21
    messages = {ffi.string(lib.gl_strerror(c)) for c in codes}
    assert len(messages) == len(codes)
    assert ffi.string(lib.gl_strerror(-999)) == b"unknown error"


# -------------------------------------------------------------------- writer


def test_writer_full_leaves_batch_unchanged() -> None:
    rec = CallRecord(1, (1,), b"abc")  # 32 bytes
    writer = BatchWriter(BATCH_HEADER_SIZE + 32 + 24, seq=1)
    assert writer.append(rec)
    before = writer.finish()
    assert not writer.append(rec)
    assert not writer.append(CallRecord(2, ref=BlobRef(DIGEST, 1)))
    assert writer.count == 1 and writer.size == len(before)
    assert writer.finish() == before
    assert writer.append(CallRecord(3, (4,)))  # 24 bytes still fit
    assert writer.count == 2


def test_writer_fills_exactly_and_can_continue_after_finish() -> None:
    rec = CallRecord(1, (1,))  # 24 bytes
    writer = BatchWriter(BATCH_HEADER_SIZE + 2 * 24)
    assert writer.append(rec)
    first = writer.finish()
    assert decode_batch(first).records == (rec,)
    assert writer.append(rec)
    assert not writer.append(CallRecord(1))
    assert decode_batch(writer.finish()).records == (rec, rec)


def test_writer_capacity_must_hold_header() -> None:
    with pytest.raises(ValueError, match="capacity"):
        BatchWriter(BATCH_HEADER_SIZE - 1)
    assert BatchWriter(BATCH_HEADER_SIZE).finish() == header(0, 24)


def _native_writer(cap: int) -> tuple[object, object]:
    buf = ffi.new("uint8_t[]", cap)
    w = ffi.new("gl_batch_writer *")
    assert lib.gl_batch_writer_init(w, buf, cap, 0) == lib.GL_OK
    return w, buf


def test_native_writer_rejects_bad_arguments() -> None:
    w, _buf = _native_writer(256)
    args = ffi.new("uint64_t[]", MAX_ARGS + 1)
    assert lib.gl_batch_append(w, 1, INLINE, ffi.NULL, 0) == lib.GL_E_INVALID
    assert lib.gl_batch_append_inline(w, 1, REF, ffi.NULL, 0, b"a", 1) == lib.GL_E_INVALID
    assert lib.gl_batch_append_ref(w, 1, 16, ffi.NULL, 0, DIGEST, 1) == lib.GL_E_INVALID
    assert lib.gl_batch_append(w, 1, QUIET | ONEWAY, ffi.NULL, 0) == lib.GL_E_INVALID
    assert lib.gl_batch_append(w, 1, 0, args, MAX_ARGS + 1) == lib.GL_E_INVALID
    assert lib.gl_batch_append(w, 1, 0, ffi.NULL, 1) == lib.GL_E_INVALID
    assert lib.gl_batch_append_inline(w, 1, 0, ffi.NULL, 0, ffi.NULL, 1) == lib.GL_E_INVALID
    assert lib.gl_batch_append_ref(w, 1, 0, ffi.NULL, 0, ffi.NULL, 1) == lib.GL_E_INVALID
    assert lib.gl_batch_writer_init(w, ffi.NULL, 64, 0) == lib.GL_E_INVALID
    assert lib.gl_batch_writer_init(w, _buf, 23, 0) == lib.GL_E_FULL
    # Explicit payload flags are accepted, and nothing above was written.
    assert lib.gl_batch_append_inline(w, 1, ONEWAY | INLINE, ffi.NULL, 0, ffi.NULL, 0) == 0
    assert w.count == 1 and w.len == 24 + 16


def test_native_writer_stops_at_u32_batch_length_and_count() -> None:
    w, _buf = _native_writer(64)
    # Pretend a huge buffer is almost full: the u32 length limit must refuse
    # the append before anything is written past the real buffer.
    w.cap = 1 << 40
    w.len = 0xFFFFFFF8
    assert lib.gl_batch_append(w, 1, 0, ffi.NULL, 0) == lib.GL_E_FULL
    assert w.len == 0xFFFFFFF8
    w.cap, w.len = 64, 24
    w.count = 0xFFFFFFFF
    assert lib.gl_batch_append(w, 1, 0, ffi.NULL, 0) == lib.GL_E_FULL
    assert w.len == 24


def test_native_writer_refuses_damaged_state() -> None:
    w, _buf = _native_writer(64)
    w.len = 65  # beyond cap
    assert lib.gl_batch_append(w, 1, 0, ffi.NULL, 0) == lib.GL_E_INVALID
    assert lib.gl_batch_writer_finish(w) == lib.GL_E_INVALID


# ------------------------------------------------------- Python-side checks


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"call_id": 1 << 16}, "call_id"),
        ({"call_id": 1, "args": (0,) * (MAX_ARGS + 1)}, "at most 16"),
        ({"call_id": 1, "args": (-1,)}, "unsigned 64"),
        ({"call_id": 1, "payload": b"", "ref": BlobRef(DIGEST, 0)}, "not both"),
    ],
)
def test_call_record_validates(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CallRecord(**kwargs)  # type: ignore[arg-type]


def test_blob_ref_validates() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        BlobRef(b"short", 1)
    with pytest.raises(ValueError, match="64-bit"):
        BlobRef(DIGEST, -1)


def test_record_error_is_value_error_with_code() -> None:
    with pytest.raises(ValueError, match="bad magic") as info:
        decode_batch(b"XXXX" + bytes(20))
    assert isinstance(info.value, RecordError) and info.value.code == lib.GL_E_MAGIC
