"""The blob store's disk tier: two segments of files named by their content digest.

``<root>/ab/abcd…`` are *protected* blobs (seen at least twice, or module
images); ``<root>/probation/ab/abcd…`` are first sightings. A second sighting
renames a probation file into the protected segment (one ``rename``, no second
write). As in the RAM tier, protected keeps to its share of the cap; probation
has the rest and borrows what protected does not use, and is trimmed only from
itself: one-off payloads never evict a protected blob. The segment a file is in is its
directory, so it survives a restart.

A file is written to ``<root>/tmp/``, fsynced, then renamed into place, so a
crash leaves either the whole file or none; it is served only after its length
and digest are checked again.

``<root>/FORMAT`` names the digest the files are named by (``FORMAT``). A tier
without it, or with another, was written by an older gleam (SHA-256 names): no
reference can ever name those files again, so they are deleted at start rather
than left to hold the cap until evicted.

Files the cap evicts are not deleted at once: up to ``SPARE_FILES`` wait in
``tmp/`` and the next writes overwrite them. A serving agent's disk probation is
full most of its life, so every first sighting written would otherwise delete
one file and create another: on ext4 without a journal (the project's VM),
creating a file searches the inode bitmap past every inode deleted in the last
half minute, and perf showed half the writer's time in ``open``. An overwrite in
place allocates no inode and, with O_DIRECT and a file of the same size, no
blocks either. A spare's old bytes are never read: the write covers
them and cuts the file to its new length before it is renamed into place, and
a restart deletes whatever ``tmp/`` holds.

Not thread-safe: the owning store calls the ``*_locked`` methods and the index
under its own lock, and ``read`` / ``write_temp`` (file I/O) outside it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import OrderedDict
from pathlib import Path

from gleam.peer.cache.blobs import content_digest
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

    def path(self, digest: bytes, segment: str) -> Path:
        h = digest.hex()
        base = self.root / PROBATION_DIR if segment == PROBATION else self.root
        return base / h[:2] / h

    # ------------------------------------------------------------ start

    def _blob_files(self) -> list[tuple[str, Path, bytes]]:
        """(segment, path, digest) of every file named as a blob in its segment."""
        files = []
        for segment in (PROTECTED, PROBATION):
            base = self.root / PROBATION_DIR if segment == PROBATION else self.root
            for sub in base.iterdir() if base.is_dir() else ():
                if len(sub.name) != 2 or not sub.is_dir():
                    continue
                for f in sub.iterdir():
                    try:
                        digest = bytes.fromhex(f.name)
                    except ValueError:
                        continue
                    if len(digest) == 32 and f.name[:2] == sub.name:
                        files.append((segment, f, digest))
        return files

    def _clear_other_format(self) -> None:
        """Deletes the blobs of another format (see the module's doc) and marks the tier."""
        marker = self.root / FORMAT_FILE
        with contextlib.suppress(OSError):  # bytes: a marker of junk is another format
            if marker.read_bytes() == FORMAT.encode():
                return
        old = self._blob_files()
        for _segment, f, _digest in old:
            f.unlink(missing_ok=True)
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
        found: dict[str, list[tuple[float, bytes, int]]] = {s: [] for s in SEGMENTS}
        for segment, f, digest in self._blob_files():
            st = f.stat()
            found[segment].append((st.st_mtime, digest, st.st_size))
        for segment in (PROTECTED, PROBATION):
            for _mtime, digest, size in sorted(found[segment]):
                if segment == PROBATION and digest in self.index[PROTECTED]:
                    # Cannot happen through rename; a copy made by hand: keep one.
                    self.path(digest, PROBATION).unlink(missing_ok=True)
                    continue
                self.index[segment][digest] = size
                self.bytes[segment] += size
        return self._trim_locked()

    # ------------------------------------------------------------ file I/O (no lock)

    def read(self, digest: bytes, segment: str, length: int) -> bytes | None:
        """The file's bytes if they match ``digest`` and ``length``; None if absent or bad."""
        path = self.path(digest, segment)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if len(data) != length or content_digest(data) != digest:
            return None
        with contextlib.suppress(OSError):
            os.utime(path)
        return data

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

    def install_locked(self, tmp: Path, digest: bytes, length: int, segment: str) -> list[bytes]:
        """Renames a written temporary file into ``segment``; the digests evicted."""
        final = self.path(digest, segment)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, final)
        if self.segment_of(digest) is None:
            self.index[segment][digest] = length
            self.bytes[segment] += length
        return self._trim_locked()

    def promote_locked(self, digest: bytes) -> list[bytes]:
        """A second sighting of a probation file: into the protected segment."""
        size = self.index[PROBATION].pop(digest, None)
        if size is None:
            return []
        self.bytes[PROBATION] -= size
        final = self.path(digest, PROTECTED)
        try:
            final.parent.mkdir(exist_ok=True)
            os.replace(self.path(digest, PROBATION), final)
        except OSError as exc:  # gone under us (deleted by hand): nothing left to keep
            log.warning("cannot promote blob %s on disk: %s", digest.hex()[:16], exc)
            return []
        self.index[PROTECTED][digest] = size
        self.bytes[PROTECTED] += size
        return self._trim_locked()

    def drop_locked(self, digest: bytes) -> None:
        """Forgets a file that is torn or changed, and deletes it."""
        for segment in SEGMENTS:
            size = self.index[segment].pop(digest, None)
            if size is not None:
                self.bytes[segment] -= size
                self.path(digest, segment).unlink(missing_ok=True)

    def _trim_locked(self) -> list[bytes]:
        """Deletes the least recently used files over a segment's room; their digests.
        Probation is trimmed last and only from itself: a first sighting never
        pushes out a protected file."""
        evicted = []
        for segment in (PROTECTED, PROBATION):
            tier = self.index[segment]
            while self.bytes[segment] > self.room(segment) and tier:
                digest, size = tier.popitem(last=False)
                self.bytes[segment] -= size
                evicted.append(digest)
                self._retire(self.path(digest, segment))
        return evicted

    def spare_count(self) -> int:
        with self._spare_lock:
            return len(self._spares)

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
        """Forgets every file; the paths to delete (outside the lock)."""
        paths = [self.path(d, s) for s in SEGMENTS for d in self.index[s]]
        for segment in SEGMENTS:
            self.index[segment].clear()
            self.bytes[segment] = 0
        return paths
