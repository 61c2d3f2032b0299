"""Property tests of the consistency code that faces untrusted input (docs/consistency.md).

* The journal's scan and a checkpoint's compaction read batches in C: any bytes
  either are refused or compact into a batch the record reader accepts, made of
  records of the input.
* A peer's range request (cuda_open's va_base, va_size) either opens a session at
  exactly that range or is refused with a reason; nothing is ever mapped over.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gleam.peer.cuda.client import checkpoint
from gleam.peer.cuda.client.journal import Entry, Journal
from gleam.peer.cuda.server import native
from gleam.peer.records import CallRecord, decode_batch, encode_batch

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
IDS = native.call_ids()

records = st.builds(
    CallRecord,
    st.sampled_from(sorted(IDS.values())),
    st.lists(st.integers(0, (1 << 64) - 1), max_size=4).map(tuple),
    st.one_of(st.none(), st.binary(max_size=64)),
    oneway=st.booleans(),
)


def _envelope(body: bytes) -> memoryview:
    return memoryview(bytearray(16) + body)


@FUZZ
@given(st.lists(records, min_size=1, max_size=8), st.binary(max_size=16), st.integers(0, 400))
def test_scan_and_compact_take_any_bytes(recs, junk, cut):
    batch = encode_batch(recs)
    for body in (batch, batch[:cut] + junk, junk):
        Journal(1 << 20).add(_envelope(body), 16)
        try:
            state = checkpoint.compact([Entry(_envelope(body), False)]).state
        except checkpoint.CheckpointError:
            continue
        for entry in state:
            kept = decode_batch(bytes(entry.envelope[16:])).records
            assert {r.call_id for r in kept} <= {r.call_id for r in decode_batch(body).records}
            assert not any(r.call_id in {IDS[n] for n in checkpoint.DATA_CALLS} for r in kept)


def test_a_garbage_batch_is_refused_by_the_compaction():
    with pytest.raises(checkpoint.CheckpointError, match=r"magic|batch"):
        checkpoint.compact([Entry(_envelope(b"\x00" * 40), False)])


_BACKEND = native.HostBackend({})
aligned = st.integers(0, (1 << 48) >> 16).map(lambda n: n << 16)
ranges = st.tuples(
    st.one_of(aligned, st.integers(0, (1 << 64) - 1)),
    st.one_of(aligned.filter(lambda n: n <= 1 << 41), st.integers(0, (1 << 64) - 1)),
)


@FUZZ
@given(ranges)
def test_a_range_request_opens_exactly_that_range_or_is_refused(va):
    base, size = va
    if base == 0:
        return  # no request: the backend chooses (every other session)
    try:
        x = native.ExecSession(_BACKEND, size, base)
    except (OSError, MemoryError) as exc:
        assert str(exc)
        return
    try:
        assert (x.va_base, x.va_size) == (base, size)
        # The range really is ours now: asking for it again is refused.
        try:
            native.ExecSession(_BACKEND, size, base)
        except OSError as exc:
            assert "requested address" in str(exc)
        else:
            raise AssertionError("a range in use was handed out twice")
    finally:
        x.close()
