"""Large buffers and files kept for reuse (cffi_build/src/mem/spares.c, the disk
tier's spare files): reuse happens, is bounded, and never shows a buffer's or
a file's earlier bytes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gleam.peer.cache.blobs import content_digest
from gleam.peer.cache.disktier import FORMAT_FILE, SPARE_FILES, TMP_DIR
from gleam.peer.cache.shelf import ShelfBlob, spare_counts
from gleam.peer.cache.store import BlobStore
from gleam.peer.nativelib import ffi, lib

MIB = 1 << 20


def _spares() -> tuple[int, int, int]:
    c = spare_counts()
    return c["spare_buffers"], c["spare_bytes"], c["spare_buffers_reused"]


def _blob(data: bytes) -> ShelfBlob:
    return ShelfBlob.copy_of(content_digest(data), data)


def _address(blob: ShelfBlob) -> int:
    return int(ffi.cast("uintptr_t", lib.gl_shelf_blob_data(blob.ptr)))


def test_a_freed_chunk_is_the_next_chunks_buffer_and_shows_none_of_its_bytes():
    # A size no other test's blobs come near: the spares are process-wide, and a
    # buffer an earlier test left that fits as well would be taken first.
    size = 5 * MIB + 12_345
    first = _blob(b"\xaa" * size)
    where = _address(first)
    assert where % 4096 == 0  # large blobs start on a page: O_DIRECT can write them
    reused = _spares()[2]
    del first
    second = _blob(b"\x55" * (size - 100))  # a little shorter: same buffer
    assert _spares()[2] == reused + 1
    assert _address(second) == where
    assert bytes(second.view()) == b"\x55" * (size - 100)  # its length ends its bytes


def _free_first(blobs: list[ShelfBlob]) -> str:
    """Drops the first of ``blobs`` (its last reference); the tier its buffer went to."""
    warm = spare_counts()["spare_buffers"]
    blobs.pop(0)
    return "warm" if spare_counts()["spare_buffers"] > warm else "lazy"


def test_of_equal_spares_the_one_freed_last_is_taken_first():
    """The warm tier first (its pages are resident), and in a tier the one freed
    last: the likeliest still in the CPU's caches. (The spares are process-wide:
    what earlier tests left decides which tier each of these two lands in.)"""
    size = 6 * MIB + 777
    blobs = [_blob(b"o" * size), _blob(b"n" * size)]
    older, newer = (_address(b) for b in blobs)
    tiers = [_free_first(blobs), _free_first(blobs)]
    first = older if tiers == ["warm", "lazy"] else newer
    again, after = _blob(b"a" * size), _blob(b"b" * size)
    assert _address(again) == first
    assert {_address(again), _address(after)} == {older, newer}


def test_a_small_request_never_pins_a_large_spare_and_small_buffers_are_not_kept():
    big = _blob(os.urandom(4 * MIB))
    where = _address(big)
    del big
    count = _spares()[0]
    small = _blob(os.urandom(MIB))  # a quarter of the spare: too small to take it
    assert _address(small) != where
    tiny = _blob(b"t" * 1000)
    del tiny
    assert _spares()[0] <= count  # the tiny one went back to malloc
    del small


def test_the_spares_stay_within_their_bound():
    blobs = [_blob(bytes([i]) * MIB) for i in range(lib.GL_SPARE_SLOTS + 8)]
    del blobs
    count, nbytes, _ = _spares()
    assert count <= lib.GL_SPARE_SLOTS
    assert nbytes <= lib.GL_SPARE_MIB * MIB


def test_past_the_warm_bound_buffers_are_kept_lazily_and_reused():
    """A journal's checkpoint frees hundreds of blocks at once: those past the warm
    bound are kept with their pages given back lazily (MADV_FREE), and the next
    blocks take them; a reused one shows only what its new owner wrote."""
    n = lib.GL_SPARE_SLOTS + 16
    blocks = [lib.gl_jblock_new(MIB) for _ in range(n)]
    for i, b in enumerate(blocks):
        ffi.memmove(b.data, bytes([i % 256]) * MIB, MIB)
    before = spare_counts()
    for b in blocks:
        lib.gl_jblock_unref(b)
    freed = spare_counts()
    assert freed["spare_lazy_buffers"] >= before["spare_lazy_buffers"] + 16
    assert freed["spare_lazy_bytes"] <= lib.GL_SPARE_LAZY_MIB * MIB
    again = [lib.gl_jblock_new(MIB) for _ in range(n)]
    after = spare_counts()
    assert after["spare_buffers_reused"] >= freed["spare_buffers_reused"] + n
    assert after["spare_lazy_buffers"] <= freed["spare_lazy_buffers"] - 16
    for b in again:
        ffi.memmove(b.data, b"\x77" * MIB, MIB)
        assert bytes(ffi.buffer(b.data, MIB)) == b"\x77" * MIB
        lib.gl_jblock_unref(b)


def test_journal_blocks_reuse_buffers_too():
    b = lib.gl_jblock_new(MIB)
    reused = _spares()[2]
    lib.gl_jblock_unref(b)
    again = lib.gl_jblock_new(MIB + 4096)
    assert _spares()[2] == reused + 1
    assert again.len == MIB + 4096
    lib.gl_jblock_unref(again)


@pytest.mark.parametrize("size", [10, 300_000, MIB, MIB + 5])
def test_a_blob_written_to_a_file_is_exactly_its_bytes(tmp_path, size):
    data = os.urandom(size)
    path = tmp_path / "blob"
    path.write_bytes(b"\xee" * (2 * MIB))  # an older, longer file: overwritten in place
    inode = path.stat().st_ino
    _blob(data).write_file(path)
    assert path.read_bytes() == data
    assert path.stat().st_ino == inode
    fresh = tmp_path / "new"
    _blob(data).write_file(fresh)
    assert fresh.read_bytes() == data and fresh.stat().st_mode & 0o777 == 0o600


def test_a_file_system_without_o_direct_still_gets_the_bytes():
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no /dev/shm (tmpfs) on this machine")
    data = os.urandom(MIB + 7)
    path = shm / f"gleam-spares-test-{os.getpid()}"
    try:
        _blob(data).write_file(path)
        assert path.read_bytes() == data
    finally:
        path.unlink(missing_ok=True)


def test_a_write_error_is_an_oserror_naming_the_path(tmp_path):
    with pytest.raises(OSError) as err:
        _blob(b"x" * MIB).write_file(tmp_path / "no-such-dir" / "blob")
    assert "no-such-dir" in str(err.value)


def test_the_disk_tier_overwrites_evicted_files_and_closing_removes_the_spares(tmp_path):
    root = tmp_path / "store"
    # Disk protected holds about three chunks: every later blob used twice evicts one.
    store = BlobStore(root, ram_cap=2 * MIB, disk_cap=4 * MIB + 4096, disk_probation_share=0.25)
    inodes_evicted: set[int] = set()
    inodes_written: list[int] = []
    try:
        chunks = [os.urandom(MIB) for _ in range(12)]
        for data in chunks:
            store.offer(content_digest(data), data)
            store.offer(content_digest(data), data)  # a second sighting: a protected file
            store.flush()
            spares = sorted((root / TMP_DIR).glob("spare.*"))
            inodes_evicted |= {p.stat().st_ino for p in spares}
            for row in store.entries():
                if "disk" in row["tiers"]:
                    f = root / row["digest"][:2] / row["digest"]
                    inodes_written.append(f.stat().st_ino)
        stats = store.stats()
        assert stats["evicted"] > 0
        assert 0 < stats["disk_spare_files"] <= SPARE_FILES
        # Later writes landed in files the cap had evicted: no new inode for them.
        assert inodes_evicted & set(inodes_written)
        for row in store.entries():  # and every file holds exactly its blob
            if "disk" in row["tiers"]:
                f = root / row["digest"][:2] / row["digest"]
                assert content_digest(f.read_bytes()).hex() == row["digest"]
    finally:
        store.close()
    assert not any((root / TMP_DIR).iterdir())


def test_threads_freeing_and_taking_spares_never_share_a_buffer():
    """Four threads make and drop chunk-sized blobs at once (cffi lets go of the
    GIL in C): every blob keeps exactly its own bytes while it lives."""
    import random
    import threading

    failures: list[str] = []

    def churn(seed: int) -> None:
        rng = random.Random(seed)
        held: list[tuple[bytes, ShelfBlob]] = []
        for step in range(300):
            size = rng.choice([MIB, MIB - 4096, MIB + 100, 300_000])
            data = bytes([seed, step & 0xFF]) * (size // 2)
            held.append((data, _blob(data)))
            if len(held) > 6 or rng.random() < 0.5:
                want, blob = held.pop(rng.randrange(len(held)))
                if bytes(blob.view()) != want:
                    failures.append(f"thread {seed}: a blob's bytes changed under it")
        for want, blob in held:
            if bytes(blob.view()) != want:
                failures.append(f"thread {seed}: a held blob's bytes changed")

    threads = [threading.Thread(target=churn, args=(i + 1,)) for i in range(4)]
    reused = _spares()[2]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures, failures[:3]
    assert _spares()[2] > reused  # the churn did go through the spares


def test_clearing_the_cache_deletes_the_spare_files_too(tmp_path):
    """Evicted files, and probation logs, hold old blobs' bytes: `gleam-peer cache
    --clear` removes them."""
    root = tmp_path / "store"
    store = BlobStore(root, ram_cap=2 * MIB, disk_cap=2 * MIB + 4096, disk_probation_share=0.25)
    try:
        for _ in range(5):
            data = os.urandom(MIB)
            store.offer(content_digest(data), data)
            store.offer(content_digest(data), data)  # used twice: a protected file
            store.offer(*_first_sighting())
            store.flush()
        assert store.stats()["disk_spare_files"] > 0
        assert list((root / "probation").glob("*.log"))
        store.clear()
        assert store.stats()["disk_spare_files"] == 0
        assert not [p for p in root.rglob("*") if p.is_file() and p.name != FORMAT_FILE]
    finally:
        store.close()


def _first_sighting() -> tuple[bytes, bytes]:
    data = os.urandom(MIB // 2)
    return content_digest(data), data
