"""A served session over an in-process data connection, on a real executor and
blob store: the server's side of the blob cache as tests drive it
(tests/test_blob_resend.py, tests/test_blob_claims.py)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from gleam.peer.cache.blobs import BatchBlobs, CachePolicy
from gleam.peer.cache.store import BlobStore
from gleam.peer.cuda.server import native
from gleam.peer.cuda.server.sessions import ServedSession
from gleam.peer.cuda.wire import dataconn, envelope
from gleam.peer.cuda.wire.messages import CudaBlobWant, CudaClose
from gleam.peer.localmesh import wait_for
from gleam.peer.records import encode_batch
from tests.cuda_session import Session, rec

SESSION = 0xB10B


class Channel:
    """The served session's control path: what it asks of the client."""

    node_id = "n" * 64
    name = "client"

    def __init__(self) -> None:
        self.controls: list[Any] = []

    def submit_control(self, message: Any) -> None:
        self.controls.append(message)

    def queued_bytes(self) -> int:
        return 0


class Served:
    """A served session with the blob store over an in-process data connection,
    on a real executor; ``client`` is the client agent's end."""

    def __init__(self, s: Session, store: BlobStore | None = None) -> None:
        self.channel = Channel()
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


@contextlib.contextmanager
def host_session() -> Iterator[Session]:
    """A session on a host backend with its context made (for a fixture)."""
    backend = native.HostBackend({})
    s = Session(backend)
    s.context()
    try:
        yield s
    finally:
        s.close()  # (the served session closed it already: a second close does nothing)
        backend.close()


@contextlib.contextmanager
def serving(s: Session, store: BlobStore | None = None) -> Iterator[Served]:
    """A served session on ``s`` for the length of a with block."""
    lane = Served(s, store)
    try:
        yield lane
    finally:
        lane.end()


def ref_batch(ptr: int, data: bytes) -> bytes:
    """A copy of ``data`` to ``ptr`` as a reference to its digest, and a synchronize."""
    scan = BatchBlobs(encode_batch([rec("glMemcpyHtoD", ptr, len(data), 0, payload=data),
                                    rec("cuCtxSynchronize")]), CachePolicy(), hash_inline=True)
    return bytes(scan.rewrite([0]))


def read_back(lane: Served, ptr: int, n: int) -> bytes:
    """The session's device bytes at ``ptr``, read by a batch on the connection."""
    before = len(lane.replies)
    lane.send(encode_batch([rec("glMemcpyDtoH", ptr, n, 0)]))
    wait_for(lambda: len(lane.replies) > before or None, 20, "the read's reply")
    return lane.replies[-1]
