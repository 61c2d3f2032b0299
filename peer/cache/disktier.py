"""The blob store's disk tier: protected blobs in files named by their content
digest, first sightings appended to probation logs.

``<root>/ab/abcd…`` are *protected* blobs (seen at least twice, or module
images). First sightings are records in a few large files,
``<root>/probation/<seq>.log`` (``probation_log.py``: one file per blob cost
more than writing its bytes). A second sighting copies the blob into a
protected file (the store's writer writes the bytes it holds) and lets its
record go. As in the RAM tier, protected keeps to its share of the cap;
probation has the rest and borrows what protected does not use, and is trimmed
only from itself, oldest first: one-off payloads never evict a protected blob.
Both segments survive a restart.

A protected file is written to ``<root>/tmp/``, fsynced, then renamed into place,
so a crash leaves either the whole file or none. Every read, file or record, is
served only after its length and digest are checked again.

``<root>/FORMAT`` names the digest the files are named by (``FORMAT``). A tier
without it, or with another, was written by an older gleam (SHA-256 names): no
reference can ever name those files again, so they are deleted at start rather
than left to hold the cap until evicted.

Protected files the cap evicts are not deleted at once: up to ``SPARE_FILES``
wait in ``tmp/`` and the next writes overwrite them. A full protected segment
would otherwise delete one file and create another for every blob it takes in:
on ext4 without a journal (the project's VM), creating a file searches the inode
bitmap past every inode deleted in the last half minute, and perf showed half
the writer's time in ``open`` (the reason probation is logs). An overwrite in
place allocates no inode and, with O_DIRECT and a file of the same size, no
blocks either. A spare's old bytes are never read: the write covers
them and cuts the file to its new length before it is renamed into place, and
a restart deletes whatever ``tmp/`` holds.

Not thread-safe: the owning store calls the ``*_locked`` methods and the index
under its own lock, and ``read`` / ``write_temp`` / ``append`` (file I/O) outside it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import OrderedDict
from pathlib import Path

from gleam.peer.cache.blobs import content_digest
from gleam.peer.cache.probation_log import Placement, ProbationLogs, log_bytes_for
from gleam.peer.cache.shelf import ShelfBlob

log = logging.getLogger("gleam.cache")

PROTECTED = "disk"
PROBATION = "disk_probation"
SEGMENTS = (PROBATION, PROTECTED)
PROBATION_DIR = "probation"
TMP_DIR = "tmp"
SPARE_FILES = 32
FORMAT_FILE = "FORMAT"
FORMAT = "gleam blob cache: files named by BLAKE3, version 2\n"


class DiskTier:
    def __init__(self, root: Path, cap: int, probation_share: float) -> None:
        self.root = root
        self.cap = cap
        self.protected_cap = cap - int(cap * probation_share)
        self.index: dict[str, OrderedDict[bytes, int]] = {s: OrderedDict() for s in SEGMENTS}
        self.bytes = dict.fromkeys(SEGMENTS, 0)
        self.tmp = root / TMP_DIR
        self.logs = ProbationLogs(root / PROBATION_DIR, log_bytes_for(cap))
        self._records: dict[bytes, Placement] = {}  # probation's digests: where each is
        self._spares: list[Path] = []  # evicted files in tmp/, to be overwritten
        self._spare_lock = threading.Lock()  # write_temp takes one without the store's lock
        self._spare_seq = 0

    # ------------------------------------------------------------ the index

    def segment_of(self, digest: bytes) -> str | None:
        for segment in SEGMENTS:
            if digest in self.index[segment]:
                return segment
        return None

    def size(self, digest: bytes) -> int | None:
        for segment in SEGMENTS:
            size = self.index[segment].get(digest)
            if size is not None:
                return size
        return None

    def touch_locked(self, digest: bytes) -> None:
        for segment in SEGMENTS:
            if digest in self.index[segment]:
                self.index[segment].move_to_end(digest)

    def room(self, segment: str) -> int:
        """What a segment may hold now: protected keeps to its share; probation
        has its own share and borrows what protected does not use (as in RAM)."""
        if segment == PROTECTED:
            return self.protected_cap
        return self.cap - min(self.bytes[PROTECTED], self.protected_cap)

    def fits(self, segment: str, length: int) -> bool:
        return length <= self.room(segment)

    def path(self, digest: bytes) -> Path:
        """A protected blob's file."""
        h = digest.hex()
        return self.root / h[:2] / h

    # ------------------------------------------------------------ start

    def _blob_files(self, base: Path) -> list[tuple[Path, bytes]]:
        """(path, digest) of every file under ``base`` named as a blob."""
        files = []
        for sub in base.iterdir() if base.is_dir() else ():
            if len(sub.name) != 2 or not sub.is_dir():
                continue
            for f in sub.iterdir():
                try:
                    digest = bytes.fromhex(f.name)
                except ValueError:
                    continue
                if len(digest) == 32 and f.name[:2] == sub.name:
                    files.append((f, digest))
        return files

    def _clear_probation_files(self) -> None:
        """Deletes disk probation as gleam kept it before the logs: a file per
        first sighting, under ``probation/ab/``. First sightings only: nothing
        a later run would miss much."""
        base = self.root / PROBATION_DIR
        old = self._blob_files(base)
        for f, _digest in old:
            f.unlink(missing_ok=True)
        for sub in base.iterdir() if base.is_dir() else ():
            if len(sub.name) == 2 and sub.is_dir():
                with contextlib.suppress(OSError):  # not empty: not ours to delete
                    sub.rmdir()
        if old:
            log.info("deleted %d disk probation files of an older gleam (now logs)", len(old))

    def _clear_other_format(self) -> None:
        """Deletes the blobs of another format (see the module's doc) and marks the tier."""
        marker = self.root / FORMAT_FILE
        with contextlib.suppress(OSError):  # bytes: a marker of junk is another format
            if marker.read_bytes() == FORMAT.encode():
                return
        old = self._blob_files(self.root)
        for f, _digest in old:
            f.unlink(missing_ok=True)
        for path in self.logs.files_on_disk():
            path.unlink(missing_ok=True)
        if old:
            log.warning("the blob cache's disk tier %s held %d blobs of an older gleam "
                        "(named by another digest): deleted", self.root, len(old))
        tmp = self.tmp / FORMAT_FILE
        tmp.write_text(FORMAT)
        os.replace(tmp, marker)

    def load(self) -> list[bytes]:
        """Index the files a previous run left (oldest first); the digests evicted."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.tmp.mkdir(exist_ok=True)
        for stale in self.tmp.iterdir():  # a write a crash interrupted
            stale.unlink(missing_ok=True)
        self._clear_other_format()
        self._clear_probation_files()
        found = []
        for f, digest in self._blob_files(self.root):
            st = f.stat()
            found.append((st.st_mtime, digest, st.st_size))
        for _mtime, digest, size in sorted(found):
            self._index_locked(PROTECTED, digest, size)
        for digest, length, where in self.logs.load():
            if self.segment_of(digest) is None:  # else a record written again, or copied out
                self._index_locked(PROBATION, digest, length)
                self._records[digest] = where
                self.logs.keep(where, digest)
        self.logs.settle()
        return self._trim_locked()

    # ------------------------------------------------------------ file I/O (no lock)

    def read(self, digest: bytes, segment: str, length: int) -> bytes | None:
        """The blob's bytes if they match ``digest`` and ``length``; None if absent or bad."""
        if segment == PROBATION:
            where = self._records.get(digest)
            data = None if where is None else self.logs.read(where, length)
        else:
            path = self.path(digest)
            try:
                data = path.read_bytes()
            except OSError:
                return None
            with contextlib.suppress(OSError):  # the order a restart reads them in
                os.utime(path)
        if data is None or len(data) != length or content_digest(data) != digest:
            return None
        return data

    def locator(self, digest: bytes) -> object | None:
        """What names ``digest``'s copy on disk now (its record, or its segment),
        compared by identity: a record appended again is another one."""
        where = self._records.get(digest)
        if where is not None:
            return where
        return PROTECTED if digest in self.index[PROTECTED] else None

    def claimed(self, digest: bytes) -> bool:
        """Whether ``digest``'s probation record was written from a client's unchecked claim."""
        where = self._records.get(digest)
        return where is not None and where.claimed

    def append(self, digest: bytes, blob: ShelfBlob) -> Placement:
        """``blob`` as a probation record (the writer thread); ``index_record_locked`` keeps it."""
        return self.logs.append(digest, blob)

    def write_temp(self, digest: bytes, blob: ShelfBlob) -> Path:
        """``blob`` in a temporary file, on stable storage; ``install_locked`` names it."""
        tmp = self.tmp / f"{digest.hex()}.{threading.get_ident()}"
        with self._spare_lock:
            spare = self._spares.pop() if self._spares else None
        if spare is not None:
            with contextlib.suppress(OSError):  # gone: a new file then
                os.replace(spare, tmp)
        try:
            blob.write_file(tmp)
        except OSError:
            tmp.unlink(missing_ok=True)  # not left behind until the next start
            raise
        return tmp

    # ------------------------------------------------------------ under the store's lock

    def install_locked(self, tmp: Path, digest: bytes, length: int) -> list[bytes]:
        """Renames a written temporary file into the protected segment (a probation
        record of it is let go: copied out); the digests evicted."""
        final = self.path(digest)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, final)
        self._unindex_locked(PROBATION, digest)
        if digest not in self.index[PROTECTED]:
            self._index_locked(PROTECTED, digest, length)
        return self._trim_locked()

    def index_record_locked(self, where: Placement, digest: bytes, length: int) -> list[bytes]:
        """Indexes a record ``append`` wrote, unless the digest is held already or a
        clear let go of its log meanwhile; the digests evicted."""
        if self.segment_of(digest) is None and self.logs.owns(where):
            self._index_locked(PROBATION, digest, length)
            self._records[digest] = where
            self.logs.keep(where, digest)
        return self._trim_locked()

    def drop_locked(self, digest: bytes) -> None:
        """Forgets a blob that is torn or changed: its protected file is deleted, its
        probation record let go (its log is reused once it holds no other)."""
        if self._unindex_locked(PROTECTED, digest):
            self.path(digest).unlink(missing_ok=True)
        self._unindex_locked(PROBATION, digest)

    def _index_locked(self, segment: str, digest: bytes, length: int) -> None:
        self.index[segment][digest] = length
        self.bytes[segment] += length

    def _unindex_locked(self, segment: str, digest: bytes) -> bool:
        """Whether ``segment`` held ``digest``; a probation record's log is told."""
        size = self.index[segment].pop(digest, None)
        if size is None:
            return False
        self.bytes[segment] -= size
        if segment == PROBATION:
            self.logs.let_go(self._records.pop(digest), digest)
        return True

    def _trim_locked(self) -> list[bytes]:
        """Evicts what is over a segment's room; the digests evicted. Protected: the
        least recently used files. Probation, last and only from itself (a first
        sighting never pushes out a protected file): the oldest logs' records, a
        log at a time, until the logs' disk space is within its room."""
        evicted = []
        tier = self.index[PROTECTED]
        while self.bytes[PROTECTED] > self.room(PROTECTED) and tier:
            digest = next(iter(tier))
            self._unindex_locked(PROTECTED, digest)
            evicted.append(digest)
            self._retire(self.path(digest))
        while self.logs.space() > self.room(PROBATION):
            oldest = self.logs.oldest()
            if not oldest:
                break
            for digest in oldest:
                self._unindex_locked(PROBATION, digest)
            evicted += oldest
        return evicted

    def spare_count(self) -> int:
        with self._spare_lock:
            return len(self._spares)

    def close(self, files: bool = True) -> None:
        """The store is closing: spare files go, and with ``files`` (the writer has
        stopped) the logs' open files close."""
        if files:
            self.logs.close()
        self.drop_spares()

    def drop_spares(self) -> None:
        """Deletes the evicted files kept for overwriting (the store is closing)."""
        with self._spare_lock:
            spares, self._spares = self._spares, []
        for spare in spares:
            with contextlib.suppress(OSError):
                spare.unlink()

    def _retire(self, path: Path) -> None:
        """An evicted file: kept in tmp/ for a later write to overwrite, or deleted."""
        with self._spare_lock:
            if len(self._spares) < SPARE_FILES:
                self._spare_seq += 1
                spare = self.tmp / f"spare.{self._spare_seq}"
                try:
                    os.replace(path, spare)
                except OSError:
                    return  # already gone
                self._spares.append(spare)
                return
        with contextlib.suppress(OSError):
            path.unlink()

    def clear_locked(self) -> list[Path]:
        """Forgets every blob; the paths to delete (outside the lock)."""
        paths = [self.path(d) for d in self.index[PROTECTED]] + self.logs.clear()
        for segment in SEGMENTS:
            self.index[segment].clear()
            self.bytes[segment] = 0
        self._records.clear()
        return paths
