"""Claims (docs/cache.md, "Claims"): a client agent sends its digests of the inline
payloads beside them (a CLAIMED envelope), and the serving agent keeps the payloads
under those digests without hashing them; a blob is hashed at its first use, and one
whose bytes do not match its claim is refused there, so a false claim costs a resend,
never a wrong result, whoever referenced it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gleam.peer.cache.blobs import content_digest
from gleam.peer.cache.client import blob_envelope
from gleam.peer.cache.shelf import ShelfBlob
from gleam.peer.cache.store import BlobStore
from gleam.peer.cuda.wire import envelope
from gleam.peer.cuda.wire.stream import StreamError
from gleam.peer.localmesh import wait_for
from gleam.peer.nativelib import ffi, lib
from gleam.peer.records import encode_batch
from tests.cuda_session import Session, rec
from tests.served_lane import SESSION, Served, host_session, read_back, ref_batch, serving

SIZE = 1 << 17


@pytest.fixture
def session() -> Iterator[Session]:
    with host_session() as s:
        yield s


def _claimed(ptr: int, data: bytes, claim: bytes | None = None, record: int = 0,
             length: int | None = None) -> bytes:
    """A CLAIMED envelope: ``data`` copied to ``ptr`` inline, then a synchronize, with
    the client's claim that the copy's bytes have digest ``claim`` (theirs by default)."""
    batch = encode_batch([rec("glMemcpyHtoD", ptr, len(data), 0, payload=data),
                          rec("cuCtxSynchronize")])
    c = envelope.Claim(record, len(data) if length is None else length,
                       content_digest(data) if claim is None else claim)
    body = envelope.claimed_body([c], batch)
    return envelope.pack_header(envelope.CLAIMED, SESSION, len(body)) + body


def _replies(lane: Served, n: int) -> None:
    wait_for(lambda: len(lane.replies) >= n or None, 20, f"{n} replies")


def _counts(store: BlobStore) -> dict[str, int]:
    store.drain()
    return store.shelf.counts()


def test_a_claimed_first_sighting_is_hashed_once_at_its_first_use(session):
    p = session.alloc(SIZE)
    data = os.urandom(SIZE)
    store = BlobStore(None)
    with serving(session, store) as lane:
        lane.client.send(_claimed(p, data))
        _replies(lane, 1)
        assert data in read_back(lane, p, SIZE)
        counts = _counts(store)
        # Kept under the claim, and not hashed: nothing has used it yet.
        assert counts["shelf_lane_offers"] == 1 and counts["claims_verified"] == 0
        assert store.has(content_digest(data))
        q = session.alloc(SIZE)
        for n in (3, 4):  # two references: the first hashes it, the second does not
            lane.send(ref_batch(q, data))
            _replies(lane, n)
        assert data in read_back(lane, q, SIZE)
        counts = _counts(store)
        assert counts["claims_verified"] == 1 and counts["claims_verified_bytes"] == SIZE
        assert counts["claims_refused"] == 0 and not lane.wants() and not lane.closes()


def test_a_false_claim_is_refused_at_its_first_use_and_the_true_bytes_resent(session):
    """A hostile client claims another program's weights' digest for junk: the
    program that references those weights gets its own bytes, after one resend."""
    p = session.alloc(SIZE)
    weights = os.urandom(SIZE)
    junk = os.urandom(SIZE)
    store = BlobStore(None)
    with serving(session, store) as lane:
        lane.client.send(_claimed(p, junk, claim=content_digest(weights)))
        _replies(lane, 1)
        assert store.has(content_digest(weights))  # (unchecked so far)
        q = session.alloc(SIZE)
        lane.send(ref_batch(q, weights))
        want = wait_for(lambda: lane.wants() or None, 10, "the server to ask for the bytes")[0]
        assert want.digests == (content_digest(weights),)
        lane.client.send(blob_envelope(SESSION, content_digest(weights), weights))
        _replies(lane, 2)
        assert weights in read_back(lane, q, SIZE)
        counts = _counts(store)
        assert counts["claims_refused"] == 1 and not lane.closes()
        view = store.get(content_digest(weights), SIZE)
        assert view is not None and bytes(view) == weights  # the junk is gone


def test_a_claim_that_names_no_payload_is_ignored_and_the_server_hashes(session):
    p = session.alloc(SIZE)
    data = os.urandom(SIZE)
    store = BlobStore(None)
    with serving(session, store) as lane:
        # The claim names record 1 (the synchronize) and then a wrong length: both
        # are ignored, and the payload is kept under the digest the server computes.
        lane.client.send(_claimed(p, data, claim=bytes(32), record=1))
        lane.client.send(_claimed(p, data, claim=bytes(32), length=SIZE - 1))
        _replies(lane, 2)
        assert not store.has(bytes(32)) and store.has(content_digest(data))
        assert _counts(store)["claims_verified"] == 0


@pytest.mark.parametrize("body, why", [
    (b"\x01\x00\x00", "shorter than its header"),
    ((65).to_bytes(4, "little") + bytes(4), "more claims than a batch may have"),
    ((1).to_bytes(4, "little") + (1).to_bytes(4, "little"), "a nonzero field"),
    ((2).to_bytes(4, "little") + bytes(4) + bytes(48), "more claims than bytes"),
])
def test_malformed_claims_end_the_session_and_nothing_runs(session, body, why):
    with serving(session) as lane:
        lane.client.send(envelope.pack_header(envelope.CLAIMED, SESSION, len(body)) + body)
        assert lane.ended.wait(20), why
        assert "claims are malformed" in lane.served.end_reason and not lane.replies


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200), st.integers(0, 3))
def test_garbage_claims_never_crash_the_lane(noise, count):
    """Random claims before a real batch: the lane runs it or ends the session."""
    with host_session() as session:
        p = session.alloc(SIZE)
        data = os.urandom(1 << 16)
        batch = encode_batch([rec("glMemcpyHtoD", p, len(data), 0, payload=data)])
        body = count.to_bytes(4, "little") + bytes(4) + noise + batch
        with serving(session) as lane:
            lane.client.send(envelope.pack_header(envelope.CLAIMED, SESSION, len(body)) + body)
            with contextlib.suppress(StreamError):  # ended by the garbage already
                lane.send(encode_batch([rec("cuCtxSynchronize")]))
            wait_for(lambda: lane.replies or lane.ended.is_set() or None, 20,
                     "a reply or the end")


def test_bytes_known_to_match_replace_an_unchecked_claim_in_the_store():
    store = BlobStore(None)
    data = os.urandom(SIZE)
    digest = content_digest(data)
    junk = ShelfBlob(lib.gl_shelf_blob_claimed(digest, ffi.from_buffer(os.urandom(SIZE)), SIZE))
    assert not junk.verified
    store.offer(digest, junk)
    store.offer(digest, data)  # a second sighting, hashed by this agent
    view = store.get(digest, SIZE)
    assert view is not None and bytes(view) == data
    assert store.shelf.counts()["claims_refused"] == 0


def test_the_store_refuses_an_unchecked_claim_it_is_asked_for():
    store = BlobStore(None)
    digest = content_digest(os.urandom(SIZE))
    junk = ShelfBlob(lib.gl_shelf_blob_claimed(digest, ffi.from_buffer(os.urandom(SIZE)), SIZE))
    store.offer(digest, junk)
    assert store.get(digest, SIZE) is None
    assert not store.has(digest) and store.shelf.counts()["claims_refused"] == 1


def test_an_unchecked_claim_is_checked_before_it_is_promoted_over_checked_blobs():
    """Refused before promotion: a false claim never pushes a checked blob out."""
    store = BlobStore(None, ram_cap=4 * SIZE, probation_share=0.25)
    weights = [os.urandom(SIZE) for _ in range(3)]
    for w in weights:  # protected, full
        store.put_verified(content_digest(w), w)
    digest = content_digest(os.urandom(SIZE))
    junk = ShelfBlob(lib.gl_shelf_blob_claimed(digest, ffi.from_buffer(os.urandom(SIZE)), SIZE))
    store.offer(digest, junk)
    assert store.get(digest, SIZE) is None
    for w in weights:
        view = store.get(content_digest(w), SIZE)
        assert view is not None and bytes(view) == w
