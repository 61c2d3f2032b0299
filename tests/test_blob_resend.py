"""A blob the server missed is resent on the session's data connection
(peer/cuda/server/resends.py, docs/cache.md): the executor reads it there, keeps the
batches that came first and runs them, in order, after the batch that waited;
and a wait that cannot end ends the session with the reason."""

from __future__ import annotations

import contextlib
import os
import struct
import threading
from collections.abc import Iterator

import pytest

from gleam.peer.cache.blobs import content_digest
from gleam.peer.cache.client import blob_envelope
from gleam.peer.cache.store import BlobStore
from gleam.peer.cuda.server import resends
from gleam.peer.cuda.wire import dataconn, envelope
from gleam.peer.localmesh import wait_for
from gleam.peer.records import encode_batch
from tests.cuda_session import Session, rec
from tests.served_lane import SESSION, Served, host_session, read_back, ref_batch

SIZE = 1 << 17
STAMP = 8
# The batches behind the miss: more than the local pair holds in flight
# (dataconn.LOCAL_QUEUED), so they can all be sent only if the executor reads
# them while it waits for the blob.
FILLER = 512 << 10
BEHIND = dataconn.LOCAL_QUEUED // FILLER + 8
_FILL = os.urandom(FILLER)


@pytest.fixture
def session() -> Iterator[Session]:
    with host_session() as s:
        yield s


def _stamp(ptr: int, i: int) -> bytes:
    """Batch ``i`` behind the reference: it writes ``i`` over the copy's first bytes,
    after a copy that makes such batches fill the connection, and waits."""
    return encode_batch([rec("glMemcpyHtoD", ptr + SIZE, FILLER, 0, payload=_FILL),
                         rec("glMemcpyHtoD", ptr, STAMP, 0, payload=struct.pack("<Q", i)),
                         rec("cuCtxSynchronize")])


def _send_all(lane: Served, batches: list[bytes], within: float = 20.0) -> None:
    """Sends ``batches`` from a thread of their own: a send that blocks for good (the
    executor no longer reads) fails the test instead of hanging it."""
    def send() -> None:
        for batch in batches:
            lane.send(batch)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    sender.join(within)
    assert not sender.is_alive(), "the executor stopped reading its data connection"




def test_a_miss_resent_behind_queued_batches_runs_them_after_it_in_order(session):
    p = session.alloc(SIZE + FILLER)
    data = os.urandom(SIZE)
    lane = Served(session)
    try:
        lane.send(ref_batch(p, data))
        want = wait_for(lambda: lane.wants() or None, 10, "the server to ask for the blob")[0]
        assert want.digests == (content_digest(data),) and want.session == SESSION
        # Every later batch goes out before the blob: more than the connection
        # holds, so they fit only because the waiting executor reads and keeps them.
        _send_all(lane, [_stamp(p, i) for i in range(BEHIND)])
        assert not lane.replies  # nothing ran before the batch that waits
        lane.client.send(blob_envelope(SESSION, content_digest(data), data))
        wait_for(lambda: len(lane.replies) == BEHIND + 1 or None, 20, "every reply")
        assert all(envelope.parse_header(r)[0] == envelope.REPLY for r in lane.replies)
        # The copy ran first, then each stamp in order: the last one is on top.
        assert struct.pack("<Q", BEHIND - 1) + data[STAMP:] in read_back(lane, p, SIZE)
        assert lane.served.blob_misses == 1 and not lane.closes()
        # The lane serves on: a reference the store now holds runs without a want.
        lane.send(ref_batch(p, data))
        wait_for(lambda: len(lane.replies) == BEHIND + 3 or None, 20, "the next reply")
        assert len(lane.wants()) == 1 and not lane.closes()
    finally:
        lane.end()


def test_a_miss_the_store_holds_off_the_shelf_is_provided_without_asking_the_client(session):
    p = session.alloc(SIZE)
    data = os.urandom(SIZE)
    store = BlobStore(None)
    store.put_verified(content_digest(data), data)
    store.shelf.drop(content_digest(data))  # (as if only the store's other tier had it)
    lane = Served(session, store)
    try:
        lane.send(ref_batch(p, data))
        wait_for(lambda: lane.replies or None, 10, "the reply")
        assert data in read_back(lane, p, SIZE)
        assert not lane.wants() and lane.served.blob_misses == 0 and not lane.closes()
        assert lane.served.row()["blob_refs"] == 1
    finally:
        lane.end()


def test_a_bad_resend_is_asked_again_and_then_accepted(session):
    p = session.alloc(SIZE)
    data = os.urandom(SIZE)
    lane = Served(session)
    try:
        lane.send(ref_batch(p, data))
        wait_for(lambda: lane.wants() or None, 10, "the want")
        lane.client.send(blob_envelope(SESSION, content_digest(data), b"\xff" + data[1:]))
        wait_for(lambda: len(lane.wants()) == 2 or None, 10, "the second want")
        lane.client.send(blob_envelope(SESSION, content_digest(data), data))
        wait_for(lambda: lane.replies or None, 10, "the reply")
        assert data in read_back(lane, p, SIZE)
        assert lane.served.row()["blob_refused"] == 1 and not lane.closes()
    finally:
        lane.end()


def test_batches_past_the_bound_while_waiting_end_the_session_with_the_reason(
        session, monkeypatch):
    monkeypatch.setattr(resends, "KEEP_AT_MOST", 2 * FILLER)
    p = session.alloc(SIZE + FILLER)
    lane = Served(session)
    try:
        lane.send(ref_batch(p, os.urandom(SIZE)))
        wait_for(lambda: lane.wants() or None, 10, "the want")

        def send() -> None:
            with contextlib.suppress(OSError):  # the session ends under the sends
                for i in range(4):
                    lane.send(_stamp(p, i))

        threading.Thread(target=send, daemon=True).start()
        assert lane.ended.wait(20)
        reason = ("the client sent more than 1 MiB of batches while the server waited "
                  "for a resent blob")
        assert [c.reason for c in lane.closes()] == [reason]
        assert lane.served.end_reason == reason and not lane.replies
    finally:
        lane.end()


def test_a_resend_that_never_comes_ends_the_session_after_the_wait(session, monkeypatch):
    monkeypatch.setattr(resends, "RESEND_WAIT", 0.3)
    p = session.alloc(SIZE)
    lane = Served(session)
    try:
        lane.send(ref_batch(p, os.urandom(SIZE)))
        assert lane.ended.wait(20)
        reason = "the client did not resend 1 blob(s) the server missed within 0.3 s"
        assert [c.reason for c in lane.closes()] == [reason] and not lane.replies
    finally:
        lane.end()
