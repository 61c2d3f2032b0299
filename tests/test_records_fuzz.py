"""Property tests of the batch decoder on untrusted bytes.

The one property that matters for a decoder facing the network: any input
either raises RecordError or decodes to records that re-encode to exactly
the input. It rules out crashes, silent acceptance of junk, and two
encodings of one batch. The libFuzzer harness (scripts/fuzz-native.sh)
checks the same property on the C side with sanitizers.
"""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gleam.peer.nativelib import lib
from gleam.peer.records import (
    BATCH_HEADER_SIZE,
    MAX_ARGS,
    BlobRef,
    CallRecord,
    RecordError,
    decode_batch,
    encode_batch,
)

FUZZ = settings(
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

u64 = st.integers(min_value=0, max_value=(1 << 64) - 1)
# Small values and the edges are where size arithmetic goes wrong.
edge_u64 = st.one_of(u64, st.sampled_from([0, 1, 7, 8, 40, 0xFFFFFFFF, (1 << 64) - 1]))

blob_refs = st.builds(BlobRef, st.binary(min_size=32, max_size=32), edge_u64)


@st.composite
def call_records(draw: st.DrawFn) -> CallRecord:
    kind = draw(st.sampled_from(["none", "inline", "ref"]))
    return CallRecord(
        call_id=draw(st.integers(0, 0xFFFF)),
        args=tuple(draw(st.lists(edge_u64, max_size=MAX_ARGS))),
        payload=draw(st.binary(max_size=64)) if kind == "inline" else None,
        ref=draw(blob_refs) if kind == "ref" else None,
        oneway=draw(st.booleans()),
    )


batches = st.builds(
    lambda recs, seq: encode_batch(recs, seq=seq),
    st.lists(call_records(), max_size=8),
    edge_u64,
)


def assert_rejected_or_canonical(data: bytes) -> None:
    try:
        decoded = decode_batch(data)
    except RecordError as exc:
        # GL_E_INVALID means API misuse or a reader that lost its place;
        # no input bytes may cause it.
        assert exc.code != lib.GL_E_INVALID
        # Shown by --hypothesis-show-statistics: which rules the inputs reach.
        event(f"rejected: {exc.args[0].split(' (record')[0]}")
        return
    event("accepted")
    assert encode_batch(decoded.records, seq=decoded.seq) == data


@st.composite
def plausible_batches(draw: st.DrawFn) -> bytes:
    """Random bodies behind a header that passes the first checks, so the
    fuzzing reaches the record walk instead of stopping at the magic."""
    body = draw(st.binary(max_size=256))
    count = draw(st.one_of(st.integers(0, 4), st.integers(0, 0xFFFFFFFF)))
    seq = draw(u64)
    return b"GLB1" + struct.pack("<HHQII", 1, 0, seq, count, BATCH_HEADER_SIZE + len(body)) + body


@FUZZ
@given(st.one_of(st.binary(max_size=128), plausible_batches()))
def test_arbitrary_bytes_are_rejected_or_canonical(data: bytes) -> None:
    assert_rejected_or_canonical(data)


@FUZZ
@given(st.lists(call_records(), max_size=8), edge_u64)
def test_valid_batches_round_trip(records: list[CallRecord], seq: int) -> None:
    data = encode_batch(records, seq=seq)
    assert len(data) % 8 == 0
    decoded = decode_batch(data)
    assert decoded.seq == seq
    assert decoded.records == tuple(records)


@st.composite
def mutated_batches(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(batches))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "truncate", "splice", "insert", "delete", "set"]))
        if op == "flip" and data:
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del data[draw(st.integers(0, len(data))) :]
        elif op == "splice":
            other = draw(batches)
            cut_a = draw(st.integers(0, len(data)))
            cut_b = draw(st.integers(0, len(other)))
            data = data[:cut_a] + other[cut_b:]
        elif op == "insert":
            at = draw(st.integers(0, len(data)))
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete" and data:
            at = draw(st.integers(0, len(data) - 1))
            del data[at : at + draw(st.integers(1, 16))]
        elif op == "set" and len(data) >= 4:
            # Overwrite an aligned u32 (a length, count or payload_len field
            # on most offsets) with an edge value.
            at = draw(st.integers(0, len(data) // 4 - 1)) * 4
            value = draw(st.sampled_from([0, 8, 16, 40, 0x7FFFFFFF, 0xFFFFFFF8, 0xFFFFFFFF]))
            data[at : at + 4] = struct.pack("<I", value)
    if len(data) >= BATCH_HEADER_SIZE and draw(st.booleans()):
        # Repair the header length so that the record rules get exercised,
        # not only the header check that most mutations trip first.
        data[20:24] = struct.pack("<I", len(data))
    return bytes(data)


@FUZZ
@given(mutated_batches())
def test_mutated_batches_are_rejected_or_canonical(data: bytes) -> None:
    assert_rejected_or_canonical(data)
