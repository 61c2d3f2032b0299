"""Envelopes arrive from programs (the interposer) and from peers: whatever the
bytes, parsing them either succeeds or raises EnvelopeError, and a data-plane
payload that is not a session's envelope is never mistaken for one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gleam.peer.cuda.wire import envelope


@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_parse_or_raise_envelope_error(data):
    try:
        kind, _session, body_len = envelope.parse_header(data)
    except envelope.EnvelopeError:
        pass
    else:
        assert kind in envelope.TYPE_NAMES and 0 <= body_len < 2**32
    assert envelope.record_count(data) >= 0
    assert envelope.is_session_envelope(data, (envelope.REPLY,)) in (True, False)


@settings(max_examples=500, deadline=None)
@given(st.integers(1, 4), st.integers(0, 2**64 - 1), st.binary(max_size=256))
def test_headers_round_trip(kind, session, body):
    packed = envelope.pack_header(kind, session, len(body)) + body
    assert envelope.parse_header(packed) == (kind, session, len(body))
    assert envelope.session_of(packed) == session
    assert envelope.is_session_envelope(packed, (kind,))
