"""The serving lane's cache work (cffi_build/src/lanes/serve.c over shelf.c): a batch's
references resolved from the shelf, its inline payloads offered to the store, with
no Python per batch; a shelf miss is a request that provided bytes answer, the batch
kept in the lane; and hostile batches on the lane never crash the agent."""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gleam.peer.cache.blobs import BatchBlobs, CachePolicy, content_digest
from gleam.peer.cache.client import blob_envelope
from gleam.peer.cache.shelf import Shelf, ShelfBlob
from gleam.peer.cuda.server.native import HostBackend
from gleam.peer.cuda.server.resends import lane_limits
from gleam.peer.cuda.wire import dataconn, envelope
from gleam.peer.localmesh import wait_for
from gleam.peer.nativelib import ffi, lib
from gleam.peer.records import encode_batch
from tests.cuda_session import Session, rec

SESSION = 0x5E55
SIZE = 1 << 17


Want = tuple[bytes, int]


class Lane:
    """A serving lane over an in-process data connection, run on its own thread.

    ``answer`` plays the store: given a miss's wants, the bytes of each it has
    (the lane then waits for the rest)."""

    def __init__(self, s: Session, shelf: Shelf,
                 answer: Callable[[list[Want]], dict[bytes, bytes]] = lambda _w: {},
                 limits: Any = None) -> None:
        self.client, self._server = dataconn.local_pair()
        pol = ffi.new("gl_cache_policy *", (CachePolicy().h2d_min, CachePolicy().image_min))
        self.serve = ffi.gc(lib.gl_serve_new(s.x.native, self._server.stream, SESSION,
                                             shelf.native, pol, 1 << 20,
                                             limits if limits is not None else lane_limits()),
                            lib.gl_serve_free)
        self._shelf = shelf  # (the lane's pointer to it must not outlive it)
        self._answer = answer
        self.returns: list[tuple[int, list[Want]]] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            rc = lib.gl_serve_next(self.serve)
            wants = [(bytes(w.digest), int(w.len)) for w in self.serve.wants[0:self.serve.nwants]
                     if not w.provided] if rc == lib.GL_SERVE_MISS else []
            self.returns.append((rc, wants))
            for digest, data in self._answer(wants).items():
                assert lib.gl_serve_provide(self.serve, digest, data, len(data)) == 0
            if rc in (lib.GL_SERVE_END, lib.GL_SERVE_E_STREAM):
                return

    def send(self, batch: bytes | bytearray) -> None:
        self.client.send(envelope.pack_header(envelope.BATCH, SESSION, len(batch)) + batch)

    def processed(self) -> int:
        """Envelopes the lane has taken: each one ran, or made gl_serve_next end it."""
        asked = sum(1 for rc, _ in self.returns if rc == lib.GL_SERVE_MISS)
        return int(self.serve.batches) + len(self.returns) - asked

    def end(self) -> list[tuple[int, list[Want]]]:
        self.client.close()
        self._thread.join(30)
        assert not self._thread.is_alive()
        self._server.close()
        return self.returns


@pytest.fixture
def session() -> Iterator[Session]:
    backend = HostBackend({})
    s = Session(backend)
    s.context()
    try:
        yield s
    finally:
        s.close()
        backend.close()


def _ref_batch(ptr: int, data: bytes) -> bytes:
    scan = BatchBlobs(encode_batch([rec("glMemcpyHtoD", ptr, len(data), 0, payload=data),
                                    rec("cuCtxSynchronize")]), CachePolicy(), hash_inline=True)
    return bytes(scan.rewrite([0]))


def test_a_reference_on_the_shelf_runs_in_the_lane_and_counts_a_hit(session):
    shelf = Shelf()
    p = session.alloc(SIZE)
    data = os.urandom(SIZE)
    shelf.put(ShelfBlob.copy_of(content_digest(data), data))
    lane = Lane(session, shelf)
    lane.send(_ref_batch(p, data))
    reply = lane.client.recv()  # the synchronize's reply: the copy ran
    assert envelope.parse_header(reply)[0] == envelope.REPLY
    returns = lane.end()
    assert [rc for rc, _ in returns] == [lib.GL_SERVE_END]  # nothing went to Python
    assert lane.serve.refs == 1 and lane.serve.replies == 1
    assert session.dtoh(p, SIZE) == data
    events = list(shelf.events())
    assert [(e.kind, e.digest) for e in events] == [("hit", content_digest(data))]


def test_a_reference_the_shelf_misses_is_a_request_naming_it_with_nothing_run(session):
    shelf = Shelf()
    p = session.alloc(SIZE)
    data = os.urandom(SIZE)
    lane = Lane(session, shelf)
    lane.send(_ref_batch(p, data))
    returns = lane.end()
    # The request names the blob, not the envelope; the client's close ends the wait.
    assert returns == [(lib.GL_SERVE_MISS, [(content_digest(data), SIZE)]), (lib.GL_SERVE_END, [])]
    assert lane.serve.batches == 0 and list(shelf.events()) == []


def test_a_reference_longer_than_a_resend_carries_is_refused_not_awaited(session):
    p = session.alloc(SIZE)
    shelf = Shelf()
    lane = Lane(session, shelf, limits=ffi.new("gl_serve_limits *", (1 << 20, SIZE - 1)))
    lane.send(_ref_batch(p, os.urandom(SIZE)))
    returns = lane.end()
    assert [rc for rc, _ in returns] == [lib.GL_SERVE_E_BATCH, lib.GL_SERVE_END]
    assert lane.serve.error == lib.GL_EXEC_E_REF and lane.serve.nwants == 0


def test_a_miss_answered_with_provided_bytes_runs_the_kept_batch_then_those_behind(session):
    shelf = Shelf()
    p = session.alloc(2 * SIZE)
    data, other = os.urandom(SIZE), os.urandom(SIZE)
    lane = Lane(session, shelf, answer=lambda wants: {d: data for d, _ in wants})
    lane.send(_ref_batch(p, data))
    lane.send(encode_batch([rec("glMemcpyHtoD", p + SIZE, SIZE, 0, payload=other),
                            rec("cuCtxSynchronize")]))
    replies = [lane.client.recv(), lane.client.recv()]  # both ran, in order
    assert all(envelope.parse_header(r)[0] == envelope.REPLY for r in replies)
    returns = lane.end()
    assert [rc for rc, _ in returns] == [lib.GL_SERVE_MISS, lib.GL_SERVE_END]
    assert lane.serve.batches == 2 and lane.serve.refs == 1 and lane.serve.kept_bytes == 0
    assert session.dtoh(p, 2 * SIZE) == data + other
    # A provided blob is the store's to count: the lane posts no hit for it.
    assert [e.kind for e in shelf.events()] == ["offer"]


def test_a_resent_blob_is_handed_up_with_its_digest_and_unwanted_ones_are_dropped(session):
    shelf = Shelf()
    p = session.alloc(SIZE)
    data = os.urandom(SIZE)
    seen: list[tuple[bytes, bytes]] = []
    lane = Lane(session, shelf)
    lane.send(_ref_batch(p, data))
    wait_for(lambda: lane.returns or None, 10, "the miss")
    lane.client.send(blob_envelope(SESSION, b"\x01" * 32, b"not wanted"))
    lane.client.send(blob_envelope(SESSION, content_digest(data), data))
    wait_for(lambda: len(lane.returns) == 2 or None, 10, "the resent blob")
    assert lane.returns[1][0] == lib.GL_SERVE_RESENT
    seen.append((bytes(lane.serve.resent_digest),
                 bytes(ffi.buffer(lane.serve.resent, lane.serve.resent_len))))
    assert seen == [(content_digest(data), data)]
    lane.end()


def test_inline_payloads_are_offered_hashed_before_the_reply(session):
    shelf = Shelf()
    p = session.alloc(SIZE)
    data = os.urandom(SIZE)
    small = b"s" * 100  # under the copy threshold: not cacheable
    lane = Lane(session, shelf)
    lane.send(encode_batch([rec("glMemcpyHtoD", p, len(data), 0, payload=data),
                            rec("glMemcpyHtoD", p, len(small), 0, payload=small),
                            rec("cuCtxSynchronize")]))
    lane.client.recv()
    offers = list(shelf.events())  # queued before the reply went
    lane.end()
    assert [(e.kind, e.digest, e.length) for e in offers] == [("offer", content_digest(data), SIZE)]
    assert offers[0].blob is not None and bytes(offers[0].blob.view()) == data
    assert lane.serve.offered == 1


def test_hostile_batches_on_the_lane_end_cleanly(session):
    """Mutated reference batches: each runs, is refused, or asks for its blobs
    (answered with bytes of the wanted length); the lane never crashes and still
    ends at the client's close."""
    rng = random.Random(12)
    shelf = Shelf()
    p = session.alloc(SIZE)
    data = os.urandom(SIZE)
    shelf.put(ShelfBlob.copy_of(content_digest(data), data))
    good = _ref_batch(p, data)
    lane = Lane(session, shelf, answer=lambda wants: {d: bytes(n) for d, n in wants})
    for _ in range(300):
        bad = bytearray(good)
        for _ in range(rng.randrange(1, 6)):
            bad[rng.randrange(len(bad))] = rng.randrange(256)
        if rng.random() < 0.2:
            bad = bad[:rng.randrange(len(bad))]
        lane.send(bytes(bad))
    wait_for(lambda: lane.processed() >= 300, 60, "the lane to take every batch")
    returns = lane.end()
    allowed = {lib.GL_SERVE_MISS, lib.GL_SERVE_E_BATCH, lib.GL_SERVE_E_ENVELOPE,
               lib.GL_SERVE_END, lib.GL_SERVE_E_STREAM}
    assert {rc for rc, _ in returns} <= allowed
    assert returns[-1][0] == lib.GL_SERVE_END and lane.processed() == 301
    assert lane.serve.batches > 0 and len(returns) > 1  # both kinds were exercised
