"""Disk probation as log files (peer/cache/probation_log.py, docs/cache.md "Disk
probation logs"): first sightings are records in a few files that are reused, a
restart finds them again, and no bytes in a log, torn or hostile, are ever served
as a blob they are not.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gleam.peer.cache.blobs import content_digest
from gleam.peer.cache.probation_log import (
    FREE_LOGS,
    MAGIC,
    PAGE,
    RECORD_HEAD,
    VERSION,
    log_bytes_for,
    record_size,
)
from gleam.peer.cache.shelf import ShelfBlob
from gleam.peer.cache.store import BlobStore
from gleam.peer.nativelib import ffi, lib

MIB = 1 << 20


def _blob(n: int, seed: int) -> tuple[bytes, bytes]:
    data = random.Random(seed).randbytes(n)
    return content_digest(data), data


def _store(root: Path, disk_cap: int = 2 * MIB, ram_cap: int = 0) -> BlobStore:
    # No RAM tier: every read of a first sighting comes from its log.
    return BlobStore(root, ram_cap=ram_cap, disk_cap=disk_cap)


def _logs(root: Path) -> list[Path]:
    return sorted((root / "probation").glob("*.log"))


def _seq(log: Path) -> int:
    return int(log.stem, 16)


def test_first_sightings_share_a_few_log_files_and_read_back_true(tmp_path):
    store = _store(tmp_path / "b", disk_cap=8 * MIB)  # logs of 256 KiB
    blobs = [_blob(5_000 + 97 * i, i) for i in range(30)] + [_blob(8192, 50)]
    blobs += [_blob(300_000, 100)]  # large: written with O_DIRECT
    for d, b in blobs:
        store.offer(d, b)
    store.flush()
    assert store.stats()["entries"]["disk_probation"] == len(blobs)
    assert len(_logs(tmp_path / "b")) <= 3  # not a file each
    assert not [p for p in (tmp_path / "b").rglob("*") if p.is_file()
                and p.parent.name != "probation" and p.name != "FORMAT"]
    for d, b in blobs:
        assert store.get(d, len(b)) == b
    store.close()


def test_logs_are_reused_and_their_number_stays_bounded(tmp_path):
    root = tmp_path / "b"
    cap = 4 * MIB  # probation's room the whole cap (nothing protected)
    log_bytes = log_bytes_for(cap)  # 128 KiB: three 40 kB records each
    store = _store(root, disk_cap=cap)
    inodes: set[int] = set()
    for i in range(400):  # 16 MB of first sightings: four times the cap
        store.offer(*_blob(40_000, i))
        if i % 10 == 9:
            store.flush()
            inodes |= {p.stat().st_ino for p in _logs(root)}
    stats = store.stats()
    assert stats["disk_probation_space"] <= cap and stats["evicted"] > 0
    assert len(_logs(root)) <= cap // log_bytes + FREE_LOGS
    # Four caps went through about one cap's worth of inodes: emptied logs were
    # overwritten in place, not deleted and created again.
    assert len(inodes) <= cap // log_bytes + FREE_LOGS + 1
    for row in store.entries():
        d = bytes.fromhex(row["digest"])
        assert store.get(d, row["size"]) is not None
    store.close()


def test_a_small_record_after_a_large_one_keeps_its_bytes(tmp_path):
    """One log's file switches between O_DIRECT (large blobs) and the page cache
    (small ones, whose buffers are not page-aligned), in either order."""
    store = _store(tmp_path / "b", disk_cap=128 * MIB)  # logs of 4 MiB: all in one
    blobs = [_blob(n, i) for i, n in enumerate([MIB, 100_000, 100_000, MIB, 70_000, 5])]
    for d, b in blobs:
        store.offer(d, b)
    store.flush()
    assert len(_logs(tmp_path / "b")) == 1
    assert all(store.get(d, len(b)) == b for d, b in blobs)
    assert store.stats()["torn"] == 0
    store.close()


def test_logs_holding_a_few_records_each_are_trimmed_within_the_room(tmp_path):
    """Most first sightings seen again (copied out), a few not: the logs those few
    keep count at their whole size, so probation's files stay within its room."""
    root = tmp_path / "b"
    cap = 32 * MIB
    store = _store(root, disk_cap=cap)
    for r in range(120):
        for i in range(9):
            d, b = _blob(100_000, 10 * r + i)
            store.offer(d, b)
            store.offer(d, b)  # seen twice: copied out, its record let go
        store.offer(*_blob(100_000, 10 * r + 9))  # seen once: its log is kept
        store.flush()
    stats = store.stats()
    on_disk = sum(p.stat().st_size for p in _logs(root))
    assert stats["disk_probation_space"] <= stats["disk_probation_room"]
    assert on_disk <= stats["disk_probation_room"] + (FREE_LOGS + 1) * log_bytes_for(cap)
    store.close()


def test_a_restart_finds_the_records_in_order_and_stops_at_a_torn_header(tmp_path):
    root = tmp_path / "b"
    store = _store(root)
    blobs = [_blob(50_000, i) for i in range(6)]
    for d, b in blobs:
        store.offer(d, b)
    store.flush()
    last = store._disk._records[blobs[-1][0]]
    store.close()
    # The last record's header torn: the scan stops there; the others come back
    # oldest first (the order a trim takes them in).
    with open(last.log.path, "r+b") as f:
        f.seek(last.offset)
        f.write(b"\0" * 16)
    again = _store(root)
    assert list(again._disk.index["disk_probation"]) == [d for d, _ in blobs[:-1]]
    for d, b in blobs[:-1]:
        assert again.get(d, len(b)) == b
    assert again.get(blobs[-1][0], len(blobs[-1][1])) is None
    again.close()


def test_a_header_naming_bytes_it_does_not_hold_is_a_miss_never_a_wrong_blob(tmp_path):
    """A header a client could have written (record headers inside a payload, found
    past a reused log's end at a restart) names a digest its bytes do not hash to."""
    root = tmp_path / "b"
    store = _store(root)
    store.offer(*_blob(10_000, 1))
    store.flush()
    store.close()
    log = _logs(root)[0]
    victim_d, victim_b = _blob(10_000, 2)
    forged = RECORD_HEAD.pack(MAGIC, VERSION, 0, len(victim_b), victim_d, _seq(log))
    end = record_size(10_000)
    with open(log, "r+b") as f:
        f.seek(end)
        f.write(forged.ljust(PAGE, b"\0") + b"junk" * (len(victim_b) // 4))
    again = _store(root)
    assert again.stats()["entries"]["disk_probation"] == 2  # indexed: it parses
    assert again.get(victim_d, len(victim_b)) is None  # but never served
    assert again.stats()["torn"] == 1
    again.close()


def test_a_claim_seen_twice_never_displaces_a_true_record(tmp_path):
    """A second sighting copies a record out of its log from the bytes in hand;
    when those are a client's unchecked claim, they are checked first."""
    store = _store(tmp_path / "b")
    d, b = _blob(300_000, 7)
    store.offer(d, b)  # the true bytes, hashed by this agent
    store.flush()
    junk = ShelfBlob(lib.gl_shelf_blob_claimed(d, ffi.from_buffer(os.urandom(len(b))), len(b)))
    store.offer(d, junk)  # a false claim for the same digest: a second sighting
    store.flush()
    assert store.get(d, len(b)) == b
    store.flush()
    stats = store.stats()
    assert stats["entries"]["disk"] == 1  # promoted, with the true bytes
    assert (tmp_path / "b" / d.hex()[:2] / d.hex()).read_bytes() == b
    store.close()


def test_probation_files_of_an_older_gleam_are_deleted_at_start(tmp_path):
    root = tmp_path / "b"
    _store(root).close()
    d, b = _blob(10_000, 3)
    old = root / "probation" / d.hex()[:2] / d.hex()
    old.parent.mkdir(parents=True)
    old.write_bytes(b)
    again = _store(root)
    assert not old.exists() and not old.parent.exists()
    assert again.stats()["entries"]["disk_probation"] == 0
    again.close()


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(junk=st.lists(st.tuples(st.integers(0, 40 * PAGE), st.binary(min_size=1, max_size=200)),
                     max_size=8),
       head_at=st.integers(0, 8), length=st.integers(0, 1 << 62))
def test_any_bytes_in_a_log_never_crash_a_start_or_serve_a_wrong_blob(tmp_path, junk,
                                                                       head_at, length):
    root = Path(tempfile.mkdtemp(dir=tmp_path)) / "b"  # a new one for each example
    store = _store(root)
    blobs = [_blob(9_000, i) for i in range(4)]
    for d, b in blobs:
        store.offer(d, b)
    store.flush()
    store.close()
    log = _logs(root)[0]
    with open(log, "r+b") as f:
        for offset, data in junk:
            f.seek(offset)
            f.write(data)
        f.seek(head_at * PAGE)  # a header that parses, with any length
        f.write(RECORD_HEAD.pack(MAGIC, VERSION, 0, length, os.urandom(32), _seq(log)))
    again = _store(root)
    for row in again.entries():
        got = again.get(bytes.fromhex(row["digest"]), row["size"])
        assert got is None or content_digest(got).hex() == row["digest"]
    again.close()


def test_logs_on_a_file_system_without_direct_writes(tmp_path):
    """tmpfs: a file system other than the disk the other tests use (it refused
    O_DIRECT before Linux 6.6; gl_shelf_blob_write_record then falls back to the
    page cache)."""
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no /dev/shm on this machine")
    root = shm / f"gleam-probation-test-{os.getpid()}"
    try:
        store = _store(root)
        blobs = [_blob(300_000, 1), _blob(5_000, 2)]
        for d, b in blobs:
            store.offer(d, b)
        store.flush()
        assert all(store.get(d, len(b)) == b for d, b in blobs)
        store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_clearing_while_the_writer_appends_keeps_later_blobs_and_leaks_no_file(tmp_path):
    """`gleam-peer cache clear` while first sightings stream in: the tail's file is
    closed by the writer itself, never under a write, and nothing stays open."""
    import threading

    open_fds = len(os.listdir("/proc/self/fd"))
    store = _store(tmp_path / "b", disk_cap=8 * MIB)
    stream = [_blob(300_000, 1000 + i) for i in range(40)]

    def offer_all() -> None:
        for d, b in stream * 3:
            store.offer(d, b)

    streamer = threading.Thread(target=offer_all)
    streamer.start()
    for _ in range(5):
        store.clear()
    streamer.join(60)
    later = [_blob(300_000, i) for i in range(5)]
    for d, b in later:
        store.offer(d, b)
    store.flush()
    assert all(store.get(d, len(b)) == b for d, b in later)
    for row in store.entries():  # whatever survived the clears reads back true or not at all
        got = store.get(bytes.fromhex(row["digest"]), row["size"])
        assert got is None or content_digest(got).hex() == row["digest"]
    store.close()
    assert len(os.listdir("/proc/self/fd")) <= open_fds


def test_gleam_peer_cache_shows_the_space_of_the_logs(tmp_path):
    from gleam.peer.cache.command import render

    store = _store(tmp_path / "b", disk_cap=8 * MIB)  # logs of 256 KiB
    store.offer(*_blob(10_000, 1))
    store.flush()
    stats = store.stats()
    assert stats["disk_probation_space"] == log_bytes_for(8 * MIB)  # the tail, preallocated
    shown = render({"policy": {"h2d_min": 1, "image_min": 1}, "store": stats})
    assert "disk probation      1 blobs  0.0 MiB (logs 0.2 MiB) of 8.0 MiB" in shown
    store.close()


def test_a_false_claim_found_on_disk_is_counted_as_one_not_as_a_torn_record(tmp_path):
    """A first sighting kept under a client's claim reaches disk unchecked (its
    record says so); the read that finds it false counts a refused claim."""
    root = tmp_path / "b"
    store = _store(root)
    d, b = _blob(300_000, 9)
    junk = ShelfBlob(lib.gl_shelf_blob_claimed(d, ffi.from_buffer(os.urandom(len(b))), len(b)))
    store.offer(d, junk)
    store.flush()
    store.close()
    again = _store(root)  # the record's flag survives a restart
    assert again.get(d, len(b)) is None
    stats = again.stats()
    assert stats["disk_claims_refused"] == 1 and stats["torn"] == 0
    assert not again.has(d)
    again.close()


def test_a_log_a_large_record_stretched_is_not_kept_for_reuse(tmp_path):
    """Logs are reused at their own size: one a record larger than a log grew is
    deleted when it empties, so the files stay near probation's room."""
    root = tmp_path / "b"
    cap = 4 * MIB  # logs of 128 KiB
    store = _store(root, disk_cap=cap)
    for r in range(60):
        store.offer(*_blob(3 * MIB, r))
        for i in range(5):
            store.offer(*_blob(100_000, 1000 + 10 * r + i))
        store.flush()
    stats = store.stats()
    on_disk = sum(p.stat().st_size for p in _logs(root))
    largest = record_size(3 * MIB)
    assert on_disk <= stats["disk_probation_room"] + largest + FREE_LOGS * log_bytes_for(cap)
    store.close()


def _open_deleted_logs() -> list[str]:
    """The probation logs this process holds open although they were deleted."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.endswith(".log (deleted)") and "/probation/" in target:
                held.append(target)
    return held


def test_a_clear_closes_the_old_tails_file_without_waiting_for_a_new_blob(tmp_path):
    """The tail a clear lets go of is deleted; its file, open in the writer, would
    hold a log's blocks until the next first sighting if the clear did not wake it."""
    store = _store(tmp_path / "b", disk_cap=8 * MIB)
    store.offer(*_blob(10_000, 1))
    store.flush()
    store.clear()
    store.flush()  # the writer has seen the clear's request: no first sighting needed
    assert _open_deleted_logs() == []
    store.close()


def test_a_tail_that_cannot_be_opened_is_neither_listed_nor_left_on_disk(tmp_path, monkeypatch):
    """A new tail is a free log renamed, then opened: when the open fails, the
    renamed file goes too (it holds old records under a name no log has)."""
    from gleam.peer.cache import probation_log

    root = tmp_path / "b"
    store = _store(root, disk_cap=512 << 10)  # logs of 16 KiB: two small records each
    for i in range(40):
        store.offer(*_blob(1000, i))
    store.flush()
    logs = store._disk.logs
    with store._lock:  # the oldest log's records go (as a torn read drops one): a free log
        for digest in logs.oldest():
            store._disk.drop_locked(digest)
    assert logs._free  # it waits to be renamed into the next tail
    real_open = os.open

    def no_space(path, flags, *args):  # type: ignore[no-untyped-def]
        if flags & os.O_CREAT and str(path).endswith(".log"):
            raise OSError(28, "No space left on device", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(probation_log.os, "open", no_space)
    for i in range(3):  # the tail fills: a new one is needed, and cannot be opened
        store.offer(*_blob(1000, 100 + i))
    store.flush()  # the writer logs that it cannot write those blobs
    assert sorted(_logs(root)) == sorted(logs.paths())
    monkeypatch.setattr(probation_log.os, "open", real_open)
    kept = _blob(1000, 200)
    store.offer(*kept)
    store.flush()
    assert store.get(kept[0], len(kept[1])) == kept[1]
    assert sorted(_logs(root)) == sorted(logs.paths())
    for row in store.entries():
        got = store.get(bytes.fromhex(row["digest"]), row["size"])
        assert got is None or content_digest(got).hex() == row["digest"]
    store.close()


def _probation(store: BlobStore) -> set[str]:
    return {row["digest"] for row in store.entries() if "disk_probation" in row["tiers"]}


def test_a_restart_does_not_bring_back_the_records_past_a_reused_logs_end(tmp_path):
    """Logs of 16 KiB: two small records each, then reused for one small record (a
    large one does not fit after it). The earlier second record, past the new end,
    parses; its header names the log's earlier seq, so a restart stops there."""
    root = tmp_path / "b"
    store = _store(root, disk_cap=512 << 10)
    for i in range(40):
        store.offer(*_blob(1000, i))
    store.flush()
    for i in range(12):
        store.offer(*_blob(1000, 100 + i))
        store.offer(*_blob(9000, 200 + i))
    store.flush()
    before = _probation(store)
    store.close()
    again = _store(root, disk_cap=512 << 10)
    assert _probation(again) == before
    again.close()


def test_records_of_the_first_layout_are_dropped_at_start(tmp_path):
    """Version 1 headers had no log seq: such a log starts empty (a miss each) and
    is reused like any free log."""
    import struct

    root = tmp_path / "b"
    store = _store(root)
    d, b = _blob(10_000, 1)
    store.offer(d, b)
    store.flush()
    store.close()
    log = _logs(root)[0]
    with open(log, "r+b") as f:
        f.write(struct.pack("<8sIIQ32s", MAGIC, 1, 0, len(b), d))
    again = _store(root)
    assert again.get(d, len(b)) is None and _probation(again) == set()
    later = _blob(10_000, 2)
    again.offer(*later)
    again.flush()
    assert again.get(later[0], len(later[1])) == later[1]
    again.close()


def test_a_false_claim_sighted_again_after_probation_dropped_it_never_becomes_a_protected_file(
        tmp_path):
    """A ghost (a digest probation dropped) sighted again is promoted straight to a
    protected file; under a client's false claim, the writer's check refuses it."""
    root = tmp_path / "b"
    store = _store(root, disk_cap=512 << 10)  # probation: 128 KiB
    d, b = _blob(10_000, 1)

    def claim() -> ShelfBlob:
        return ShelfBlob(lib.gl_shelf_blob_claimed(d, ffi.from_buffer(os.urandom(len(b))),
                                                   len(b)))
    store.offer(d, claim())
    store.flush()
    for i in range(40):  # probation trims it: a ghost
        store.offer(*_blob(10_000, 100 + i))
    store.flush()
    assert _probation(store).isdisjoint({d.hex()})
    store.offer(d, claim())
    store.flush()
    assert not (root / d.hex()[:2] / d.hex()).exists()
    assert store.get(d, len(b)) is None
    assert store.stats()["torn"] == 0
    store.close()


def test_true_bytes_that_replace_a_claim_while_the_writer_checks_it_are_written(tmp_path):
    """The writer checks a claim outside the store's lock; a resend of the true
    bytes may replace it meanwhile. Those are written, not dropped with the claim."""
    root = tmp_path / "b"
    store = _store(root, disk_cap=512 << 10)
    d, b = _blob(10_000, 1)
    junk = os.urandom(len(b))

    def claim() -> ShelfBlob:
        return ShelfBlob(lib.gl_shelf_blob_claimed(d, ffi.from_buffer(junk), len(b)))

    store.offer(d, claim())
    store.flush()
    for i in range(40):  # probation trims it: a ghost, promoted when sighted again
        store.offer(*_blob(10_000, 100 + i))
    store.flush()
    real_check = store.shelf.check

    def check_while_the_true_bytes_arrive(blob: ShelfBlob) -> bool:
        store.offer(d, b)  # a resend: checked bytes replace the waiting claim
        return real_check(blob)

    store.shelf.check = check_while_the_true_bytes_arrive  # type: ignore[method-assign]
    store.offer(d, claim())
    store.flush()
    assert (root / d.hex()[:2] / d.hex()).read_bytes() == b
    store.close()
