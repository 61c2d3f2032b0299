"""The native shelf (cffi_build/src/cache/shelf.c): the blob store's RAM bytes as the
serving lanes see them, and the queue of what the lanes saw."""

from __future__ import annotations

import gc
import random
import threading

from gleam.peer.cache.blobs import content_digest, h2d_call_id
from gleam.peer.cache.shelf import Shelf, ShelfBlob
from gleam.peer.cache.store import BlobStore
from gleam.peer.nativelib import ffi, lib


def _blob(data: bytes) -> tuple[bytes, ShelfBlob]:
    digest = content_digest(data)
    return digest, ShelfBlob.copy_of(digest, data)


def _take(shelf: Shelf, digest: bytes, length: int) -> bytes | None:
    ptr = lib.gl_shelf_take(shelf.native, digest, length)
    if ptr == ffi.NULL:
        return None
    try:
        return bytes(ffi.buffer(lib.gl_shelf_blob_data(ptr), lib.gl_shelf_blob_len(ptr)))
    finally:
        lib.gl_shelf_blob_unref(ptr)


def test_a_lane_finds_exactly_what_the_table_holds():
    shelf = Shelf()
    digest, blob = _blob(b"weights" * 1000)
    assert _take(shelf, digest, len(blob)) is None
    shelf.put(blob)
    assert _take(shelf, digest, len(blob)) == b"weights" * 1000
    assert _take(shelf, digest, len(blob) - 1) is None  # a reference of another length
    assert _take(shelf, bytes(32), len(blob)) is None
    shelf.drop(digest)
    assert _take(shelf, digest, len(blob)) is None
    assert shelf.counts()["shelf_entries"] == 0


def test_bytes_a_lane_holds_outlive_their_eviction():
    shelf = Shelf()
    digest, blob = _blob(b"x" * 4096)
    shelf.put(blob)
    held = lib.gl_shelf_take(shelf.native, digest, 4096)  # a lane running on it
    view = blob.view()
    del blob
    shelf.drop(digest)
    gc.collect()
    assert bytes(ffi.buffer(lib.gl_shelf_blob_data(held), 4096)) == b"x" * 4096
    lib.gl_shelf_blob_unref(held)
    assert bytes(view) == b"x" * 4096  # the store's view keeps its own reference


def test_events_come_in_order_and_a_full_queue_drops_offers_not_hits():
    shelf = Shelf(queue_cap=10_000)
    d1, b1 = _blob(b"a" * 6000)
    d2, b2 = _blob(b"b" * 6000)
    lib.gl_shelf_post_hit(shelf.native, d1, 6000, 7)
    assert lib.gl_shelf_post_offer(shelf.native, lib.gl_shelf_blob_ref(b1.ptr), 3) == 0
    assert lib.gl_shelf_post_offer(shelf.native, lib.gl_shelf_blob_ref(b2.ptr), 3) == -1
    lib.gl_shelf_post_hit(shelf.native, d2, 6000, 7)
    assert shelf.wait(0.0) == 1
    got = list(shelf.events())
    assert [(e.kind, e.digest, e.call_id) for e in got] == [
        ("hit", d1, 7), ("offer", d1, 3), ("hit", d2, 7)]
    assert got[1].blob is not None and bytes(got[1].blob.view()) == b"a" * 6000
    counts = shelf.counts()
    assert counts["shelf_offers_dropped"] == 1 and counts["shelf_queued"] == 0
    assert shelf.wait(0.01) == 0
    shelf.close()
    assert shelf.wait(1.0) == -1


def test_the_store_keeps_the_shelf_equal_to_its_ram_tiers():
    """Random offers and lookups against a small RAM cap: after each step the
    shelf holds exactly the digests the RAM tiers hold, with their bytes."""
    rng = random.Random(5)
    store = BlobStore(None, ram_cap=64 << 10, probation_share=0.25)
    try:
        payloads = [bytes([i]) * rng.randrange(1000, 20_000) for i in range(40)]
        for _ in range(400):
            data = rng.choice(payloads)
            if rng.random() < 0.6:
                store.offer(content_digest(data), data, image=rng.random() < 0.2)
            else:
                got = store.get(content_digest(data), len(data))
                assert got is None or bytes(got) == data
            ram = {bytes.fromhex(e["digest"]) for e in store.entries()}
            for data in payloads:
                digest = content_digest(data)
                assert (_take(store.shelf, digest, len(data)) == data) == (digest in ram)
        assert store.stats()["shelf_entries"] == len(ram)
    finally:
        store.close()


def test_a_lanes_offer_is_in_the_next_summary_and_its_hit_promotes():
    store = BlobStore(None, ram_cap=1 << 20)
    try:
        data = b"w" * 100_000
        digest = content_digest(data)
        blob = ShelfBlob.copy_of(digest, data)
        # What serve.c does after a batch ran: the offer goes on the queue, and
        # the reply follows at once; a summary right after must announce it.
        lib.gl_shelf_post_offer(store.shelf.native, lib.gl_shelf_blob_ref(blob.ptr), h2d_call_id())
        assert digest[:8] in store.summary()
        assert store.stats()["entries"]["probation"] == 1
        lib.gl_shelf_post_hit(store.shelf.native, digest, len(data), h2d_call_id())
        store.drain()
        stats = store.stats()
        assert stats["entries"] == {"probation": 0, "protected": 1, "disk": 0,
                                    "disk_probation": 0}
        assert stats["hits_ram"] == 1
    finally:
        store.close()


def test_the_drainer_applies_events_while_lanes_post_them():
    store = BlobStore(None, ram_cap=8 << 20)
    try:
        blobs = [_blob(bytes([i]) * 50_000) for i in range(64)]

        def lane(part: list[tuple[bytes, ShelfBlob]]) -> None:
            for _digest, blob in part:
                lib.gl_shelf_post_offer(store.shelf.native, lib.gl_shelf_blob_ref(blob.ptr),
                                        h2d_call_id())

        threads = [threading.Thread(target=lane, args=(blobs[i::4],)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        summary = store.summary()
        assert all(d[:8] in summary for d, _ in blobs)
        assert store.stats()["shelf_entries"] == 64
    finally:
        store.close()
