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
from typing import Any

import pytest

from gleam.peer.cache.blobs import BatchBlobs, CachePolicy, content_digest
from gleam.peer.cache.client import blob_envelope
from gleam.peer.cache.store import BlobStore
from gleam.peer.cuda.server import native, resends
from gleam.peer.cuda.server.sessions import ServedSession
from gleam.peer.cuda.wire import dataconn, envelope
from gleam.peer.cuda.wire.messages import CudaBlobWant, CudaClose
from gleam.peer.localmesh import wait_for
from gleam.peer.records import encode_batch
from tests.cuda_session import Session, rec

SESSION = 0xB10B
SIZE = 1 << 17
STAMP = 8
# The batches behind the miss: more than the local pair holds in flight
# (dataconn.LOCAL_QUEUED), so they can all be sent only if the executor reads
# them while it waits for the blob.
FILLER = 512 << 10
BEHIND = dataconn.LOCAL_QUEUED // FILLER + 8
_FILL = os.urandom(FILLER)


class _Channel:
    """The served session's control path: what it asks of the client."""

    node_id = "n" * 64
    name = "client"

    def __init__(self) -> None:
        self.controls: list[Any] = []

    def submit_control(self, message: Any) -> None:
        self.controls.append(message)

    def queued_bytes(self) -> int:
        return 0


class _Served:
    """A served session with the blob store over an in-process data connection,
    on a real executor; ``client`` is the client agent's end."""

    def __init__(self, s: Session, store: BlobStore | None = None) -> None:
        self.channel = _Channel()
        self.ended = threading.Event()
        self.client, server_end = dataconn.local_pair()
        self.served = ServedSession(
            session=SESSION, channel=self.channel, program="p", client="c", exec=s.x,
            reply_capacity=native.REPLY_CAPACITY, batch_error=native.BatchError,
            on_end=lambda _s, _r: self.ended.set(),
            store=store if store is not None else BlobStore(None),
            policy=CachePolicy())
        self.served.attach_data(server_end)
        self.served.start()
        self.replies: list[bytes] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            while reply := self.client.recv():
                self.replies.append(reply)
        except OSError:
            pass

    def send(self, batch: bytes) -> None:
        self.client.send(envelope.pack_header(envelope.BATCH, SESSION, len(batch)) + batch)

    def wants(self) -> list[CudaBlobWant]:
        return [m for m in self.channel.controls if isinstance(m, CudaBlobWant)]

    def closes(self) -> list[CudaClose]:
        return [m for m in self.channel.controls if isinstance(m, CudaClose)]

    def end(self) -> None:
        self.client.shutdown()
        self.served.stop("the test ended")
        self.served.join(10)
        self._reader.join(10)
        self.client.close()


@pytest.fixture
def session() -> Iterator[Session]:
    backend = native.HostBackend({})
    s = Session(backend)
    s.context()
    try:
        yield s
    finally:
        s.close()  # (the served session closed it already: a second close does nothing)
        backend.close()


def _ref_batch(ptr: int, data: bytes) -> bytes:
    """A copy of ``data`` to ``ptr`` as a reference to its digest, and a synchronize."""
    scan = BatchBlobs(encode_batch([rec("glMemcpyHtoD", ptr, len(data), 0, payload=data),
                                    rec("cuCtxSynchronize")]), CachePolicy(), hash_inline=True)
    return bytes(scan.rewrite([0]))


def _stamp(ptr: int, i: int) -> bytes:
    """Batch ``i`` behind the reference: it writes ``i`` over the copy's first bytes,
    after a copy that makes such batches fill the connection, and waits."""
    return encode_batch([rec("glMemcpyHtoD", ptr + SIZE, FILLER, 0, payload=_FILL),
                         rec("glMemcpyHtoD", ptr, STAMP, 0, payload=struct.pack("<Q", i)),
                         rec("cuCtxSynchronize")])


def _send_all(lane: _Served, batches: list[bytes], within: float = 20.0) -> None:
    """Sends ``batches`` from a thread of their own: a send that blocks for good (the
    executor no longer reads) fails the test instead of hanging it."""
    def send() -> None:
        for batch in batches:
            lane.send(batch)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    sender.join(within)
    assert not sender.is_alive(), "the executor stopped reading its data connection"


def _read_back(lane: _Served, ptr: int, n: int) -> bytes:
    """The session's device bytes at ``ptr``, read by a batch on the connection."""
    before = len(lane.replies)
    lane.send(encode_batch([rec("glMemcpyDtoH", ptr, n, 0)]))
    wait_for(lambda: len(lane.replies) > before or None, 20, "the read's reply")
    return lane.replies[-1]


def test_a_miss_resent_behind_queued_batches_runs_them_after_it_in_order(session):
    p = session.alloc(SIZE + FILLER)
    data = os.urandom(SIZE)
    lane = _Served(session)
    try:
        lane.send(_ref_batch(p, data))
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
        assert struct.pack("<Q", BEHIND - 1) + data[STAMP:] in _read_back(lane, p, SIZE)
        assert lane.served.blob_misses == 1 and not lane.closes()
        # The lane serves on: a reference the store now holds runs without a want.
        lane.send(_ref_batch(p, data))
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
    lane = _Served(session, store)
    try:
        lane.send(_ref_batch(p, data))
        wait_for(lambda: lane.replies or None, 10, "the reply")
        assert data in _read_back(lane, p, SIZE)
        assert not lane.wants() and lane.served.blob_misses == 0 and not lane.closes()
        assert lane.served.row()["blob_refs"] == 1
    finally:
        lane.end()


def test_a_bad_resend_is_asked_again_and_then_accepted(session):
    p = session.alloc(SIZE)
    data = os.urandom(SIZE)
    lane = _Served(session)
    try:
        lane.send(_ref_batch(p, data))
        wait_for(lambda: lane.wants() or None, 10, "the want")
        lane.client.send(blob_envelope(SESSION, content_digest(data), b"\xff" + data[1:]))
        wait_for(lambda: len(lane.wants()) == 2 or None, 10, "the second want")
        lane.client.send(blob_envelope(SESSION, content_digest(data), data))
        wait_for(lambda: lane.replies or None, 10, "the reply")
        assert data in _read_back(lane, p, SIZE)
        assert lane.served.row()["blob_refused"] == 1 and not lane.closes()
    finally:
        lane.end()


def test_batches_past_the_bound_while_waiting_end_the_session_with_the_reason(
        session, monkeypatch):
    monkeypatch.setattr(resends, "KEEP_AT_MOST", 2 * FILLER)
    p = session.alloc(SIZE + FILLER)
    lane = _Served(session)
    try:
        lane.send(_ref_batch(p, os.urandom(SIZE)))
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
    lane = _Served(session)
    try:
        lane.send(_ref_batch(p, os.urandom(SIZE)))
        assert lane.ended.wait(20)
        reason = "the client did not resend 1 blob(s) the server missed within 0.3 s"
        assert [c.reason for c in lane.closes()] == [reason] and not lane.replies
    finally:
        lane.end()
