"""Disk probation as a few large log files: first sightings appended, not a file each.

A serving agent writes every first sighting to disk probation, and most are never
used again. One file per blob cost more than the write itself on this project's
VM: creating a file on ext4 without a journal searches the inode bitmap past
every inode deleted in the last half minute, and the writer's ``openat`` and
``mkdir`` came to about 0.6 CPU-s per GiB of first sightings (docs/cache.md,
"Disk probation logs"). Appending to a file that exists allocates no inode.

``<root>/probation/<seq>.log`` (``seq`` 16 hex digits, increasing) holds records
one after another, each a page of header (``RECORD_HEAD``: magic, version,
flags, the blob's length and digest, the log's ``seq``) and then the blob's bytes
rounded up to whole pages,
so large blobs go with O_DIRECT straight from their buffer
(``gl_shelf_blob_write_record``). The writer appends to one log, the tail;
past ``log_bytes`` it takes a free log (one whose every record has left the
index), renamed to the next ``seq``, or makes a new one. Probation is trimmed
oldest first, so whole old logs empty in turn and come back as free ones; up to
``FREE_LOGS`` are kept to be overwritten in place, the rest deleted.

Records are not fsynced and a log is never cut short: a read checks the bytes
against their digest (``DiskTier.read``), so a torn record is only a miss. At
start the logs are read in ``seq`` order, record by record, until a header does
not parse or names another ``seq``: a reused log still holds its earlier records
past its end, and without the ``seq`` they would come back as the newest.

Thread-safety: one lock guards the logs' bookkeeping. ``append`` runs on the
store's one writer thread, which alone closes a tail's file (``clear`` leaves it
to the writer); ``read`` runs on any thread without the store's lock (a record
reused under it fails its digest check); the rest run under the store's lock or
before the store is shared.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path

from gleam.peer.cache.shelf import ShelfBlob
from gleam.peer.nativelib import lib

RECORD_HEAD = struct.Struct("<8sIIQ32sQ")  # magic, version, flags, length, digest, log seq
# The bytes were a client's claim, not checked when written: a read that finds
# them wrong counts a refused claim, not a torn record.
CLAIMED = 1
MAGIC = b"GLEAMREC"
VERSION = 2  # 1: no log seq (its records are dropped at start, a miss each)
PAGE = 4096
LOG_MAX = 64 << 20  # a log's size on a large tier
LOG_MIN = 16 << 10  # ... and on a small one (tests: a record or two each)
FREE_LOGS = 4
SUFFIX = ".log"


def page_up(n: int) -> int:
    return -(-n // PAGE) * PAGE


def record_size(length: int) -> int:
    """The bytes a record takes in its log: its header page and its bytes in pages."""
    return PAGE + page_up(length)


def log_bytes_for(cap: int) -> int:
    """A log's size for a tier of ``cap`` bytes: a thirty-second of it, within bounds.
    The free logs, which probation's room does not count, are then at most an
    eighth of the cap on top of it."""
    return max(LOG_MIN, min(LOG_MAX, page_up(cap // 32)))


@dataclass(eq=False)
class Log:
    seq: int
    path: Path
    end: int = 0  # where the next record goes
    digests: set[bytes] = field(default_factory=set)  # its records the index holds
    fd: int = -1  # open for writing while it is the tail


@dataclass(frozen=True)
class Placement:
    """Where one record is."""

    log: Log
    offset: int
    claimed: bool = False  # written from a client's unchecked claim


class ProbationLogs:
    def __init__(self, folder: Path, log_bytes: int) -> None:
        self.folder = folder
        self.log_bytes = log_bytes
        self._lock = threading.Lock()
        self._logs: dict[int, Log] = {}  # seq -> every log file this tier has
        self._free: list[Log] = []
        self._tail: Log | None = None
        # Tails a clear let go of, their files still open: only the writer thread
        # closes a tail's file (an fd closed under its write could be reused by
        # another open, and the write land in that file).
        self._retired: list[Log] = []
        self._next_seq = 1

    # ------------------------------------------------------------ start

    def load(self) -> list[tuple[bytes, int, Placement]]:
        """Every record the logs hold, oldest first: (digest, length, where).
        The caller ``keep``s those it indexes, then calls ``settle``."""
        self.folder.mkdir(parents=True, exist_ok=True)
        found = []
        for path in self.files_on_disk():
            seq = _seq_of(path)
            assert seq is not None
            log = Log(seq, path)
            self._logs[seq] = log
            self._next_seq = max(self._next_seq, seq + 1)
            found += self._scan(log)
        return found

    def _scan(self, log: Log) -> list[tuple[bytes, int, Placement]]:
        records = []
        with open(log.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            offset = 0
            while offset + PAGE <= size:
                head = os.pread(f.fileno(), RECORD_HEAD.size, offset)
                parsed = parse_head(head, log.seq)
                if parsed is None or offset + PAGE + parsed[1] > size:
                    break
                digest, length, flags = parsed
                records.append((digest, length, Placement(log, offset, bool(flags & CLAIMED))))
                offset += record_size(length)
        log.end = offset
        return records

    def files_on_disk(self) -> list[Path]:
        """Every log file in the folder, oldest first, whether loaded or not."""
        if not self.folder.is_dir():
            return []
        return [p for p in sorted(self.folder.iterdir()) if _seq_of(p) is not None
                and p.is_file()]

    def settle(self) -> None:
        """After load: logs none of whose records were kept are free."""
        with self._lock:
            for log in list(self._logs.values()):
                if not log.digests:
                    self._free_locked(log)

    def paths(self) -> list[Path]:
        with self._lock:
            return [log.path for log in self._logs.values()]

    # ------------------------------------------------------------ the writer thread

    def append(self, digest: bytes, blob: ShelfBlob) -> Placement:
        """Writes ``blob`` as the tail's next record (the store's writer thread only)."""
        size = record_size(len(blob))
        with self._lock:
            log = self._tail
            if log is None or (log.end > 0 and log.end + size > self.log_bytes):
                log = self._next_tail_locked()
            offset = log.end
            log.end += size
        claimed = not blob.verified
        head = RECORD_HEAD.pack(MAGIC, VERSION, CLAIMED if claimed else 0, len(blob), digest,
                                log.seq)
        rc = lib.gl_shelf_blob_write_record(blob.ptr, log.fd, offset, head, len(head))
        if rc != 0:
            raise OSError(-rc, os.strerror(-rc), os.fspath(log.path))
        return Placement(log, offset, claimed)

    def close_retired(self) -> None:
        """Closes the files of the tails a clear let go of (the writer thread only:
        the store queues this after every clear)."""
        with self._lock:
            for old in self._retired:
                _close(old)
            self._retired.clear()

    def _next_tail_locked(self) -> Log:
        old = self._tail
        self._tail = None
        if old is not None:
            _close(old)
            if not old.digests:
                self._free_locked(old)
        seq = self._next_seq
        self._next_seq += 1
        path = self.folder / f"{seq:016x}{SUFFIX}"
        log = Log(seq, path)
        while self._free:  # overwritten in place: no inode, no blocks to allocate
            free = self._free.pop()
            del self._logs[free.seq]
            try:
                os.replace(free.path, path)
                break
            except OSError:  # gone (deleted by hand): the next, or a new file
                continue
        try:
            log.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:  # no log, listed or on disk (it may be a free log renamed)
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        self._logs[seq] = log  # from here on a file this tier deletes when cleared
        if os.fstat(log.fd).st_size < self.log_bytes:
            with contextlib.suppress(OSError):  # a file system without it: blocks as written
                os.posix_fallocate(log.fd, 0, self.log_bytes)
        self._tail = log
        return log

    # ------------------------------------------------------------ the index's side

    def owns(self, where: Placement) -> bool:
        """Whether ``where`` is in a log of this tier still (not one a clear let go of)."""
        with self._lock:
            return self._logs.get(where.log.seq) is where.log

    def keep(self, where: Placement, digest: bytes) -> None:
        """The index holds ``digest``'s record at ``where``."""
        with self._lock:
            where.log.digests.add(digest)

    def let_go(self, where: Placement, digest: bytes) -> None:
        """The index no longer holds ``digest``'s record; an emptied log is free."""
        with self._lock:
            log = where.log
            log.digests.discard(digest)
            if not log.digests and log is not self._tail and self._logs.get(log.seq) is log:
                self._free_locked(log)

    def space(self) -> int:
        """The disk space of the logs that hold records, and of the tail: what
        probation takes (a record's header and page rounding, and the records
        copied out or evicted from a log still in use, included)."""
        with self._lock:
            return sum(max(log.end, self.log_bytes) for log in self._logs.values()
                       if log.digests or log is self._tail)

    def oldest(self) -> list[bytes]:
        """The digests of the oldest log's records (the tail's never): a trim takes
        them together, and the log becomes free."""
        with self._lock:
            for log in self._logs.values():  # in seq order: a reused log is re-added
                if log.digests and log is not self._tail:
                    return list(log.digests)
            return []

    def _free_locked(self, log: Log) -> None:
        if log in self._free:
            return
        # Kept to be overwritten only at the size logs have: one a large record
        # stretched would take its size again each time it is reused.
        if len(self._free) < FREE_LOGS and _size(log.path) <= self.log_bytes:
            self._free.append(log)
            return
        del self._logs[log.seq]
        with contextlib.suppress(OSError):
            log.path.unlink()

    @staticmethod
    def read(where: Placement, length: int) -> bytes | None:
        """The record's bytes as the file holds them now (the caller checks them), or None."""
        try:
            fd = os.open(where.log.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None  # renamed for reuse: the record is gone
        try:
            data = os.pread(fd, length, where.offset + PAGE)
        except OSError:
            return None
        finally:
            os.close(fd)
        return data if len(data) == length else None

    def clear(self) -> list[Path]:
        """Forgets every log; their paths, to delete (the tail's file is closed by
        the writer thread: ``close_retired``, or ``close``)."""
        with self._lock:
            paths = [log.path for log in self._logs.values()]
            if self._tail is not None:
                self._retired.append(self._tail)
            self._logs.clear()
            self._free.clear()
            self._tail = None
            return paths

    def close(self) -> None:
        """The writer thread has stopped: every file still open closes."""
        with self._lock:
            for log in [*self._retired, *([self._tail] if self._tail else [])]:
                _close(log)
            self._retired.clear()
            self._tail = None


def parse_head(head: bytes, seq: int) -> tuple[bytes, int, int] | None:
    """(digest, length, flags) of a header of a record written into log ``seq``,
    or None where it is not one."""
    if len(head) < RECORD_HEAD.size:
        return None
    magic, version, flags, length, digest, written_in = RECORD_HEAD.unpack_from(head)
    if magic != MAGIC or version != VERSION or flags & ~CLAIMED or written_in != seq:
        return None
    return digest, length, flags


def _seq_of(path: Path) -> int | None:
    name = path.name
    if not name.endswith(SUFFIX) or len(name) != 16 + len(SUFFIX):
        return None
    try:
        return int(name[:16], 16)
    except ValueError:
        return None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _close(log: Log) -> None:
    if log.fd >= 0:
        with contextlib.suppress(OSError):
            os.close(log.fd)
        log.fd = -1
