"""The serving agent's blob store: a RAM tier and a disk tier, keyed by content digest.

Admission (docs/cache.md) is a segmented LRU in both tiers. A copy chunk seen
for the first time enters *probation*: the RAM tier's (a small share of the
RAM cap) and the disk tier's (a share of the disk cap; the writer thread writes
it there). A second sighting (a reference that resolves to it, or the same
bytes again) promotes it to the *protected* segment of both tiers (on disk the
writer writes the bytes the store holds into a file of its own, and the
first sighting's record in its probation log is let go). Module
images are protected at once. First sightings only push out first sightings,
so one-off payloads (activations) never evict weights that
were used twice, in RAM or on disk; and weights larger than RAM probation are
still held after their first run (on disk), so their second run sends almost
nothing. Probation remembers the digests it drops (ghosts, as 2Q's A1out): a
ghost sighted again is promoted too.

The disk tier (``disktier.py``) appends first sightings to probation logs
(``probation_log.py``), and writes each protected file to a temporary name,
fsyncs and renames it, so a crash leaves either the whole file or none; a blob
on disk is served only after its length and BLAKE3 digest are checked again, and
one that fails is dropped. Disk writes run on one writer thread at nice 19, off the
executor's path; a blob waiting for it is served (and announced) from its queue.

The RAM tier's bytes live on the native shelf (``shelf.py``), where the
serving lanes resolve references without Python; what the lanes saw (the
references they resolved, the payloads they received inline) comes back on
the shelf's queue, which a drainer thread applies here as ``get`` and
``offer`` would have, and which every lookup and summary drains first.

Thread-safety: every public method may be called from any thread; one lock
guards every index (file reads, writes and hashing run outside it), and the
drain lock, taken before it, keeps the shelf's events in order.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from gleam.peer.cache.blobs import content_digest, h2d_call_id
from gleam.peer.cache.disktier import PROBATION, PROTECTED, DiskTier
from gleam.peer.cache.env import MIB, env_mib
from gleam.peer.cache.shelf import Shelf, ShelfBlob, ShelfEvent, spare_counts
from gleam.peer.failures import os_error_line
from gleam.peer.nativelib import lib

log = logging.getLogger("gleam.cache")

DEFAULT_RAM = 1024 * MIB
DEFAULT_DISK = 8192 * MIB
PROBATION_SHARE = 0.25
DISK_PROBATION_SHARE = 0.25
GHOSTS_MAX = 65536  # digests remembered after probation dropped their bytes (2Q's A1out)
SUMMARY_MAX = 16384  # digests announced at session open (8 bytes each)
# The digest prefix a summary announces and the server matches (blobref.h).
PREFIX: int = lib.GL_BLOB_PREFIX
# Disk writes waiting for the writer thread, in bytes: they mostly share their
# bytes with the RAM tier; beyond this a burst only loses the copy on disk.
WRITE_BACKLOG = 512 * MIB
DRAIN_WAIT = 0.5  # the drainer's wait between looks at a closing store
# Asks the writer thread, which alone closes a probation tail's file, to close
# the tails a clear let go of (no digest is empty).
_CLOSE_RETIRED = b""


class BlobMismatch(ValueError):
    """Bytes that do not hash to the digest they were sent under."""


class _Pending:
    """A disk write waiting for the writer: its bytes and the segment it goes to."""

    __slots__ = ("data", "segment")

    def __init__(self, data: ShelfBlob, segment: str) -> None:
        self.data = data
        self.segment = segment


class BlobStore:
    def __init__(self, root: Path | None, ram_cap: int | None = None,
                 disk_cap: int | None = None, probation_share: float = PROBATION_SHARE,
                 disk_probation_share: float = DISK_PROBATION_SHARE,
                 write_backlog: int = WRITE_BACKLOG) -> None:
        """``root`` None: RAM only. Caps default to GLEAM_CACHE_RAM_MB / GLEAM_CACHE_DISK_MB."""
        self.root = root
        self.write_backlog = write_backlog
        self.ram_cap = env_mib("GLEAM_CACHE_RAM_MB", DEFAULT_RAM) if ram_cap is None else ram_cap
        self.disk_cap = (env_mib("GLEAM_CACHE_DISK_MB", DEFAULT_DISK) if disk_cap is None
                         else disk_cap)
        if root is None:
            self.disk_cap = 0
        self.probation_cap = int(self.ram_cap * probation_share)
        # A fault knob for tests (docs/cache.md): keep no first sighting, so a
        # reference to one misses and is resent.
        self._forget_first = os.environ.get("GLEAM_FAULT_FORGET_FIRST_SIGHTINGS", "") == "1"
        self._probation: OrderedDict[bytes, ShelfBlob] = OrderedDict()
        self._protected: OrderedDict[bytes, ShelfBlob] = OrderedDict()
        self._ghosts: OrderedDict[bytes, None] = OrderedDict()
        self._bytes = {"probation": 0, "protected": 0}
        self.counts = {"hits_ram": 0, "hits_disk": 0, "misses": 0, "offered": 0,
                       "admitted": 0, "refused": 0, "evicted": 0, "torn": 0,
                       "disk_claims_refused": 0,
                       "writes_dropped": 0}
        self._lock = threading.Lock()
        self.shelf = Shelf()
        self._drain_lock = threading.Lock()
        self._drainer: threading.Thread | None = threading.Thread(
            target=self._drain_loop, name="blob-shelf", daemon=True)
        self._drainer.start()
        self._writes: queue.Queue[bytes | None] = queue.Queue()
        self._pending: dict[bytes, _Pending] = {}  # digest -> queued disk write
        self._backlog = 0
        self._writer: threading.Thread | None = None
        self._disk: DiskTier | None = None
        if root is not None and self.disk_cap > 0:
            self._disk = self._open_disk(root, disk_probation_share)
        if self._disk is not None:
            self._writer = threading.Thread(target=self._write_loop, name="blob-writer",
                                            daemon=True)
            self._writer.start()

    def _open_disk(self, root: Path, probation_share: float) -> DiskTier | None:
        """The disk tier, or None (RAM only, said once) when ``root`` cannot hold it:
        a read-only or full state directory must not stop the agent from serving."""
        disk = DiskTier(root, self.disk_cap, probation_share)
        try:
            self._forget(disk.load())
        except OSError as exc:
            log.warning("the blob cache keeps no copies on disk: %s",
                        os_error_line(exc, f"cannot use {root}") or exc)
            self.disk_cap, self.root = 0, None
            return None
        return disk

    # ------------------------------------------------------------ lookups

    def get(self, digest: bytes, length: int) -> memoryview | None:
        """The blob, or None. A hit in a probation segment is a second sighting: it is promoted.

        The view keeps its bytes alive by itself, whatever the store lets go meanwhile.
        """
        self.drain()
        with self._lock:
            blob = self._ram_find_locked(digest, length)
        # A client's claim is hashed at its first use, outside the lock, and
        # before the blob is counted or promoted.
        if blob is not None and self.shelf.check(blob):
            with self._lock:
                if self._ram_hit_locked(digest, length) is None:
                    self.counts["hits_ram"] += 1  # evicted since: still a hit
            return blob.view()
        if blob is not None:
            with self._lock:
                self._refuse_locked(digest)
        data = self._read_disk(digest, length)
        with self._lock:
            if data is None:
                self.counts["misses"] += 1
                return None
            self.counts["hits_disk"] += 1
            blob = ShelfBlob.copy_of(digest, data)
            self._promote_locked(digest, blob)
        return blob.view()

    def _ram_find_locked(self, digest: bytes, length: int) -> ShelfBlob | None:
        """A RAM tier's (or the disk queue's) blob of ``length`` bytes, as it is."""
        blob = self._protected.get(digest)
        if blob is None:
            blob = self._probation.get(digest)
        if blob is None and digest in self._pending:
            blob = self._pending[digest].data  # on its way to disk
        return blob if blob is not None and len(blob) == length else None

    def _ram_hit_locked(self, digest: bytes, length: int) -> ShelfBlob | None:
        """A RAM tier's (or the disk queue's) blob of ``length`` bytes, counted and promoted."""
        blob = self._ram_find_locked(digest, length)
        if blob is None:
            return None
        if digest in self._protected:
            self._protected.move_to_end(digest)
        else:
            self._promote_locked(digest, blob)
        self.counts["hits_ram"] += 1
        return blob

    def has(self, digest: bytes) -> bool:
        self.drain()
        with self._lock:
            return (digest in self._protected or digest in self._probation
                    or digest in self._pending
                    or (self._disk is not None and self._disk.segment_of(digest) is not None))

    # ------------------------------------------------------------ admission

    def offer(self, digest: bytes, data: bytes | memoryview | ShelfBlob,
              image: bool = False) -> None:
        """Bytes received inline: hashed by this agent (so they match ``digest``), or
        a serving lane's copy under a client's claim (a ShelfBlob not ``verified``,
        checked at its first use).

        ``data`` may be a view into a transient buffer: it is copied only if kept
        (a ShelfBlob, a serving lane's copy, is kept as it is).
        """
        with self._lock:
            self.counts["offered"] += 1
            if digest in self._protected:
                self._insert_locked(self._protected, "protected", digest, data)
                return
            held = self._probation.get(digest)
            if held is not None and _gives_way(held, data):
                held = None
            pending = self._pending.get(digest)
            disk = self._disk.segment_of(digest) if self._disk is not None else None
            # A ghost is a second sighting whose first copy probation already dropped
            # (weights larger than both probation segments): promote it too.
            ghost = digest in self._ghosts
            if ghost:
                del self._ghosts[digest]
            if (held is not None or pending is not None or disk is not None or image
                    or ghost):
                self._promote_locked(digest, held if held is not None else _blob(digest, data))
                return
            # A first sighting: RAM probation, and a write into disk probation
            # (one copy of the bytes serves both).
            if self._forget_first:
                return
            in_ram = len(data) <= self._room_locked("probation")
            to_disk = self._writer is not None and self._disk is not None and self._disk.fits(
                PROBATION, len(data))
            if not in_ram and not to_disk:
                return
            kept = _blob(digest, data)
            if in_ram:
                self._insert_locked(self._probation, "probation", digest, kept)
            # A writer behind (a link faster than the disk) loses nothing yet when
            # RAM keeps the bytes: they are queued again when probation drops them.
            self._queue_write_locked(digest, kept, PROBATION, count_drop=not in_ram)

    def put_verified(self, digest: bytes, data: bytes) -> None:
        """Bytes a client sent for a reference that missed: checked before they enter.

        Raises BlobMismatch (and stores nothing) when they do not hash to ``digest``.
        """
        if content_digest(data) != digest:
            with self._lock:
                self.counts["refused"] += 1
            raise BlobMismatch(f"blob {digest.hex()[:16]}: bytes do not match the digest")
        with self._lock:
            # It was referenced, so this is at least its second sighting.
            self._promote_locked(digest, _blob(digest, data))

    # ------------------------------------------------------------ under the lock

    def _promote_locked(self, digest: bytes, data: ShelfBlob) -> None:
        """A second sighting: into both protected segments."""
        held = self._probation.pop(digest, None)
        if held is not None:
            self._bytes["probation"] -= len(held)
            if not self._insert_locked(self._protected, "protected", digest, data):
                self.shelf.drop(digest)  # too large for protected: in no RAM tier now
        else:
            self._insert_locked(self._protected, "protected", digest, data)
        pending = self._pending.get(digest)
        if pending is not None:
            pending.segment = PROTECTED  # the writer names the file when it is written
            if _gives_way(pending.data, data) and len(data) == len(pending.data):
                pending.data = data
        elif self._disk is not None and self._disk.segment_of(digest) == PROBATION:
            # Copied out of its probation log by the writer, from the bytes in hand;
            # the record is let go once the protected file is in place.
            self._queue_write_locked(digest, data, PROTECTED)
        elif self._disk is not None and self._disk.segment_of(digest) == PROTECTED:
            self._disk.touch_locked(digest)
        else:
            self._queue_write_locked(digest, data, PROTECTED)

    def _queue_write_locked(self, digest: bytes, data: ShelfBlob, segment: str,
                            count_drop: bool = True) -> bool:
        """Queues a disk write; False when there is no room for it (on disk or in the backlog)."""
        if self._writer is None or self._disk is None or not self._disk.fits(segment, len(data)):
            return False
        if self._backlog + len(data) > self.write_backlog:
            if count_drop:
                self.counts["writes_dropped"] += 1
            return False
        self._backlog += len(data)
        self._pending[digest] = _Pending(data, segment)
        self._writes.put_nowait(digest)
        return True

    def _on_disk_locked(self, digest: bytes, data: ShelfBlob) -> bool:
        """Whether a blob RAM probation drops is, or will be, in disk probation."""
        if digest in self._pending or (
                self._disk is not None and self._disk.segment_of(digest) is not None):
            return True
        return self._queue_write_locked(digest, data, PROBATION)

    def _insert_locked(self, tier: OrderedDict[bytes, ShelfBlob], name: str, digest: bytes,
                       data: bytes | memoryview | ShelfBlob) -> bool:
        """Whether ``digest`` is in ``tier`` now (and so on the shelf). A blob held
        under a client's unchecked claim gives way to bytes known to match."""
        old = tier.get(digest)
        if old is not None and not _gives_way(old, data):
            tier.move_to_end(digest)
            return True
        if old is not None:
            del tier[digest]
            self.shelf.drop(digest)
            self._bytes[name] -= len(old)
        if len(data) > self._room_locked(name):
            return False
        data = _blob(digest, data)
        tier[digest] = data
        self.shelf.put(data)
        self._bytes[name] += len(data)
        self.counts["admitted"] += 1
        self._trim_locked()
        return True

    def _room_locked(self, name: str) -> int:
        """What a segment may hold now. Protected keeps to its share; probation
        has its own share and borrows what protected does not use (a server that
        just started keeps a whole first run in RAM), and yields it back first."""
        protected_cap = self.ram_cap - self.probation_cap
        if name == "protected":
            return protected_cap
        return self.ram_cap - min(self._bytes["protected"], protected_cap)

    def _trim_locked(self) -> None:
        # Probation is trimmed last and only ever from itself: a first sighting
        # never pushes out a protected blob.
        for name, tier in (("protected", self._protected), ("probation", self._probation)):
            while self._bytes[name] > self._room_locked(name) and tier:
                old, gone = tier.popitem(last=False)
                self.shelf.drop(old)  # a lane still running on it holds its own reference
                self._bytes[name] -= len(gone)
                self.counts["evicted"] += 1
                if name == "probation" and not self._on_disk_locked(old, gone):
                    self._ghost_locked(old)
                elif (name == "protected" and old not in self._pending
                      and self._disk is not None and self._disk.segment_of(old) == PROBATION):
                    # Its copy-out found the writer's backlog full: RAM no longer
                    # holds it, so the disk must (queued again, as probation does;
                    # not a lost write while the record still holds it).
                    self._queue_write_locked(old, gone, PROTECTED, count_drop=False)

    def _refuse_locked(self, digest: bytes) -> None:
        """A client's claim failed its check: the blobs held under it unchecked go
        (a later reference misses and the client resends the true bytes). A disk
        copy stays: every read from disk is checked."""
        for name, tier in (("protected", self._protected), ("probation", self._probation)):
            blob = tier.get(digest)
            if blob is not None and not blob.verified:
                del tier[digest]
                self.shelf.drop(digest)
                self._bytes[name] -= len(blob)
        pending = self._pending.get(digest)
        if pending is not None and not pending.data.verified:
            self._done_locked(digest, pending)  # the writer then drops its file

    def _ghost_locked(self, digest: bytes) -> None:
        self._ghosts[digest] = None
        self._ghosts.move_to_end(digest)
        if len(self._ghosts) > GHOSTS_MAX:
            self._ghosts.popitem(last=False)

    def _forget(self, evicted: list[bytes]) -> None:
        """Digests the disk tier evicted (lock held, or before the store is shared)."""
        self.counts["evicted"] += len(evicted)
        for digest in evicted:
            if digest not in self._probation and digest not in self._protected:
                self._ghost_locked(digest)

    # ------------------------------------------------------------ disk tier

    def _read_disk(self, digest: bytes, length: int) -> bytes | None:
        """The verified file, or None; a torn or changed file is deleted and counted."""
        disk = self._disk
        if disk is None:
            return None
        for _ in range(3):  # a copy-out or a trim may move the blob while it is read
            with self._lock:
                segment = disk.segment_of(digest)
                if segment is None or disk.size(digest) != length:
                    return None
                located = disk.locator(digest)
            data = disk.read(digest, segment, length)
            if data is not None:
                return data
            with self._lock:
                if disk.locator(digest) is not located:
                    continue  # moved, evicted or written again meanwhile: look again
                claim = disk.claimed(digest)
                disk.drop_locked(digest)
                self.counts["disk_claims_refused" if claim else "torn"] += 1
            if claim:  # a client's false claim, written before its first use: not a fault here
                log.info("blob %s on disk did not match its client's claim; dropped it",
                         digest.hex()[:16])
            else:
                log.warning("blob %s on disk is torn or changed; deleted it", digest.hex()[:16])
            return None
        return None

    def _write_loop(self) -> None:
        disk = self._disk
        assert disk is not None
        # The disk copy is a spare: it must never take a core from the sessions
        # whose blobs it keeps (a cold run writes every first sighting, fsync
        # included, and must not pay for it on a small machine).
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        while True:
            digest = self._writes.get()
            if digest is None:
                return
            if digest == _CLOSE_RETIRED:
                disk.logs.close_retired()
                self._writes.task_done()
                continue
            with self._lock:
                pending = self._pending.get(digest)
            try:
                if pending is not None:
                    self._write_one(disk, digest, pending)
            except OSError as exc:
                log.warning("cannot write blob %s to disk: %s", digest.hex()[:16], exc)
            finally:
                with self._lock:
                    self._done_locked(digest, pending)
                self._writes.task_done()

    def _done_locked(self, digest: bytes, pending: _Pending | None) -> None:
        if pending is not None and self._pending.get(digest) is pending:
            del self._pending[digest]
            self._backlog -= len(pending.data)

    def _write_one(self, disk: DiskTier, digest: bytes, pending: _Pending) -> None:
        with self._lock:
            segment = pending.segment
            data = pending.data
        if segment == PROBATION:
            self._append_one(disk, digest, pending)
            return
        # A claim is checked before it becomes a protected file (a copy-out of
        # probation, a ghost sighted again, an image): it never displaces a record
        # that may hold the true bytes, and a protected file is never a false claim,
        # so a protected file that reads wrong is torn.
        while not data.verified and not self.shelf.check(data):
            with self._lock:
                if pending.data is data:
                    self._refuse_locked(digest)
                    return
                data = pending.data  # checked bytes replaced the claim meanwhile: those
        tmp = disk.write_temp(digest, data)
        with self._lock:
            if self._pending.get(digest) is not pending:  # cleared meanwhile
                tmp.unlink(missing_ok=True)
                return
            self._forget(disk.install_locked(tmp, digest, len(data)))
            self._done_locked(digest, pending)

    def _append_one(self, disk: DiskTier, digest: bytes, pending: _Pending) -> None:
        where = disk.append(digest, pending.data)
        with self._lock:
            if self._pending.get(digest) is not pending:  # cleared meanwhile: a dead record
                return
            self._forget(disk.index_record_locked(where, digest, len(pending.data)))
            self._done_locked(digest, pending)
            if pending.segment == PROTECTED:
                # A second sighting while the record was written: copied out in turn.
                self._queue_write_locked(digest, pending.data, PROTECTED)

    def flush(self) -> None:
        """Wait until the lanes' events are applied and every queued disk write is on disk."""
        self.drain()
        if self._writer is not None:
            self._writes.join()

    # ------------------------------------------------------------ the lanes' events

    def drain(self) -> None:
        """Applies what the serving lanes queued on the shelf, oldest first."""
        with self._drain_lock:
            for event in self.shelf.events():
                self._apply(event)

    def _apply(self, event: ShelfEvent) -> None:
        if event.kind == "hit":  # the lane ran on these bytes: a RAM hit, as get() counts
            with self._lock:
                if self._ram_hit_locked(event.digest, event.length) is None:
                    self.counts["hits_ram"] += 1  # evicted since: still a hit for the lane
            return
        if event.kind == "refused":
            with self._lock:
                self._refuse_locked(event.digest)
            return
        assert event.blob is not None
        self.offer(event.digest, event.blob, image=event.call_id != h2d_call_id())

    def _drain_loop(self) -> None:
        while self.shelf.wait(DRAIN_WAIT) >= 0:
            try:
                self.drain()
            except MemoryError:  # a copy the store could not keep is only a later resend
                log.warning("no memory to keep a cached blob; dropped it")

    # ------------------------------------------------------------ reporting

    def summary(self, limit: int = SUMMARY_MAX) -> bytes:
        """8-byte digest prefixes of what this store can serve, most recently used first.

        The lanes' queued offers are applied first: a payload a lane received
        before its reply is announced to every session opened after that reply.
        """
        self.drain()
        with self._lock:
            digests = [*reversed(self._protected), *reversed(self._probation),
                       *self._pending]
            if self._disk is not None:
                digests += [*reversed(self._disk.index[PROTECTED]),
                            *reversed(self._disk.index[PROBATION])]
        out: dict[bytes, None] = {}
        for d in digests:
            out.setdefault(d[:PREFIX])
            if len(out) >= limit:
                break
        return b"".join(out)

    def stats(self) -> dict[str, Any]:
        self.drain()
        shelf = {**self.shelf.counts(), **spare_counts()}
        with self._lock:
            lookups = self.counts["hits_ram"] + self.counts["hits_disk"] + self.counts["misses"]
            hits = self.counts["hits_ram"] + self.counts["hits_disk"]
            disk = self._disk
            entries = {"probation": len(self._probation), "protected": len(self._protected)}
            sizes = dict(self._bytes)
            for segment in (PROTECTED, PROBATION):
                entries[segment] = len(disk.index[segment]) if disk else 0
                sizes[segment] = disk.bytes[segment] if disk else 0
            return {
                # A probation segment's room: its share of the cap and what
                # protected does not use.
                "ram_cap": self.ram_cap, "probation_cap": self.probation_cap,
                "probation_room": self._room_locked("probation"),
                "disk_cap": self.disk_cap,
                "disk_protected_cap": disk.protected_cap if disk else 0,
                "disk_probation_room": disk.room(PROBATION) if disk else 0,
                "disk_spare_files": disk.spare_count() if disk else 0,
                # Probation's logs on disk: records, their headers, and what was
                # copied out or evicted from a log still in use.
                "disk_probation_space": disk.logs.space() if disk else 0,
                "root": str(self.root) if self.root else None,
                "entries": entries, "bytes": sizes, "write_backlog": self._backlog,
                **self.counts, "hit_rate": hits / lookups if lookups else None,
                **shelf,
            }

    def entries(self) -> list[dict[str, Any]]:
        self.drain()
        with self._lock:
            rows: dict[bytes, dict[str, Any]] = {}
            for name, tier in (("probation", self._probation), ("protected", self._protected)):
                for d, data in tier.items():
                    rows[d] = {"digest": d.hex(), "size": len(data), "tiers": [name]}
            for segment in (PROTECTED, PROBATION) if self._disk else ():
                assert self._disk is not None
                for d, size in self._disk.index[segment].items():
                    rows.setdefault(d, {"digest": d.hex(), "size": size, "tiers": []})[
                        "tiers"].append(segment)
        return list(rows.values())

    def clear(self) -> int:
        """Drop every blob from both tiers; the number of blobs dropped."""
        self.flush()
        with self._lock:
            self.shelf.clear()
            held = set(self._probation) | set(self._protected)
            paths = []
            if self._disk is not None:
                held |= {d for s in (PROTECTED, PROBATION) for d in self._disk.index[s]}
                paths = self._disk.clear_locked()
            self._probation.clear()
            self._protected.clear()
            self._ghosts.clear()
            self._bytes = {"probation": 0, "protected": 0}
        for path in paths:
            with contextlib.suppress(OSError):
                path.unlink()
        if self._writer is not None:  # the old tail's file, deleted, holds its blocks till closed
            self._writes.put(_CLOSE_RETIRED)
        if self._disk is not None:  # evicted files hold old blobs' bytes too
            self._disk.drop_spares()
        return len(held)

    def close(self) -> None:
        """Apply the lanes' last events and finish the disk writes (the agent is stopping)."""
        if self._drainer is not None:
            self.shelf.close()
            self._drainer.join(10)
            self._drainer = None
            self.drain()
        writing = False
        if self._writer is not None:
            self._writes.put(None)
            self._writer.join(10)
            writing = self._writer.is_alive()  # stuck in a write: its file stays open
            self._writer = None
        if self._disk is not None:
            self._disk.close(files=not writing)


def _gives_way(held: ShelfBlob, new: bytes | bytearray | memoryview | ShelfBlob) -> bool:
    """Whether ``held`` (a client's unchecked claim) should be replaced by ``new``
    (bytes known to match: hashed by this agent, or a checked buffer). Checked bytes
    are never replaced by a claim."""
    return not held.verified and (not isinstance(new, ShelfBlob) or new.verified)


def _blob(digest: bytes, data: bytes | bytearray | memoryview | ShelfBlob) -> ShelfBlob:
    """The bytes as a shelf buffer: a lane's copy as it is, anything else copied once."""
    return data if isinstance(data, ShelfBlob) else ShelfBlob.copy_of(digest, data)
