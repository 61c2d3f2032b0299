"""The serving agent's blob store: a RAM tier and a disk tier, keyed by SHA-256.

Admission (docs/cache.md): the RAM tier is a segmented LRU. A copy chunk seen
for the first time enters *probation* (a small share of the RAM cap); a second
sighting (a reference that resolves to it, or the same bytes again) promotes it
to the *protected* segment and writes it to disk. Module images are protected
and written to disk at once. One-off payloads (activations) therefore cycle
through probation and never push out weights that were used twice. Probation
remembers the digests it drops (ghosts, as 2Q's A1out), so weights larger than
probation are promoted at their second sighting too (cached from the third run).

The disk tier names each file by its digest under ``<state>/blobs/<2 hex>/``,
writes it to a temporary file, fsyncs and renames it, so a crash leaves either
the whole file or none. A file is served only after its length and SHA-256
are checked again; one that fails is deleted. Disk writes run on one writer
thread, off the executor's path.

Thread-safety: every public method may be called from any thread; one lock
guards both tiers' indexes (file I/O and hashing run outside it).
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

from gleam.peer.cache.blobs import sha256

log = logging.getLogger("gleam.cache")

MIB = 1 << 20
DEFAULT_RAM = 1024 * MIB
DEFAULT_DISK = 8192 * MIB
PROBATION_SHARE = 0.25
GHOSTS_MAX = 65536  # digests remembered after probation dropped their bytes (2Q's A1out)
SUMMARY_MAX = 16384  # digests announced at session open (8 bytes each)
PREFIX = 8
# Disk writes waiting for the writer thread, in bytes: they mostly share their
# bytes with the RAM tier; beyond this a burst only loses the copy on disk.
WRITE_BACKLOG = 512 * MIB


class BlobMismatch(ValueError):
    """Bytes that do not hash to the digest they were sent under."""


def _env_mib(name: str, default: int) -> int:
    try:
        value = float(os.environ.get(name, "").strip())
    except ValueError:
        return default
    return int(value * MIB) if value >= 0 else default


class BlobStore:
    def __init__(self, root: Path | None, ram_cap: int | None = None,
                 disk_cap: int | None = None, probation_share: float = PROBATION_SHARE) -> None:
        """``root`` None: RAM only. Caps default to GLEAM_CACHE_RAM_MB / GLEAM_CACHE_DISK_MB."""
        self.root = root
        self.ram_cap = _env_mib("GLEAM_CACHE_RAM_MB", DEFAULT_RAM) if ram_cap is None else ram_cap
        self.disk_cap = (_env_mib("GLEAM_CACHE_DISK_MB", DEFAULT_DISK) if disk_cap is None
                         else disk_cap)
        if root is None:
            self.disk_cap = 0
        self.probation_cap = int(self.ram_cap * probation_share)
        self._probation: OrderedDict[bytes, bytes] = OrderedDict()
        self._protected: OrderedDict[bytes, bytes] = OrderedDict()
        self._disk: OrderedDict[bytes, int] = OrderedDict()
        self._ghosts: OrderedDict[bytes, None] = OrderedDict()
        self._bytes = {"probation": 0, "protected": 0, "disk": 0}
        self.counts = {"hits_ram": 0, "hits_disk": 0, "misses": 0, "offered": 0,
                       "admitted": 0, "refused": 0, "evicted": 0, "torn": 0}
        self._lock = threading.Lock()
        self._writes: queue.Queue[tuple[bytes, bytes] | None] = queue.Queue()
        self._backlog = 0
        self._writer: threading.Thread | None = None
        if root is not None and self.disk_cap > 0:
            self._load_disk(root)
            self._writer = threading.Thread(target=self._write_loop, name="blob-writer",
                                            daemon=True)
            self._writer.start()

    # ------------------------------------------------------------ lookups

    def get(self, digest: bytes, length: int) -> bytes | None:
        """The blob, or None. A hit in probation is a second sighting: it is promoted."""
        with self._lock:
            data = self._protected.get(digest)
            if data is not None and len(data) == length:
                self._protected.move_to_end(digest)
                self.counts["hits_ram"] += 1
                return data
            data = self._probation.get(digest)
            if data is not None and len(data) == length:
                self._promote_locked(digest, data)
                self.counts["hits_ram"] += 1
                return data
            on_disk = self._disk.get(digest) == length
        data = self._read_disk(digest, length) if on_disk else None
        with self._lock:
            if data is None:
                self.counts["misses"] += 1
                return None
            self.counts["hits_disk"] += 1
            self._disk.move_to_end(digest)
            self._insert_locked(self._protected, "protected", digest, data)
        return data

    def has(self, digest: bytes) -> bool:
        with self._lock:
            return digest in self._protected or digest in self._probation or digest in self._disk

    # ------------------------------------------------------------ admission

    def offer(self, digest: bytes, data: bytes | memoryview, image: bool = False) -> None:
        """Bytes received inline, hashed by this agent (so they match ``digest``).

        ``data`` may be a view into a transient buffer: it is copied only if kept.
        """
        with self._lock:
            self.counts["offered"] += 1
            if digest in self._protected:
                self._protected.move_to_end(digest)
                return
            held = self._probation.get(digest)
            # A ghost is a second sighting whose first copy probation already dropped
            # (weights larger than probation): promote it too.
            ghost = digest in self._ghosts
            if ghost:
                del self._ghosts[digest]
            if held is not None or image or ghost:
                self._promote_locked(digest, held if held is not None else bytes(data))
                return
            if digest in self._disk:
                self._disk.move_to_end(digest)
                return
            if len(data) <= self.probation_cap:
                self._insert_locked(self._probation, "probation", digest, bytes(data))

    def put_verified(self, digest: bytes, data: bytes) -> None:
        """Bytes a client sent for a reference that missed: checked before they enter.

        Raises BlobMismatch (and stores nothing) when they do not hash to ``digest``.
        """
        if sha256(data) != digest:
            with self._lock:
                self.counts["refused"] += 1
            raise BlobMismatch(f"blob {digest.hex()[:16]}: bytes do not match the digest")
        with self._lock:
            # It was referenced, so this is at least its second sighting.
            self._promote_locked(digest, data)

    # ------------------------------------------------------------ under the lock

    def _promote_locked(self, digest: bytes, data: bytes) -> None:
        if self._probation.pop(digest, None) is not None:
            self._bytes["probation"] -= len(data)
        self._insert_locked(self._protected, "protected", digest, data)
        if (self._writer is not None and digest not in self._disk
                and len(data) <= self.disk_cap and self._backlog + len(data) <= WRITE_BACKLOG):
            self._backlog += len(data)
            self._writes.put_nowait((digest, data))

    def _insert_locked(self, tier: OrderedDict[bytes, bytes], name: str, digest: bytes,
                       data: bytes) -> None:
        cap = self.probation_cap if name == "probation" else self.ram_cap - self.probation_cap
        if len(data) > cap:
            return
        if digest in tier:
            tier.move_to_end(digest)
            return
        tier[digest] = data
        self._bytes[name] += len(data)
        self.counts["admitted"] += 1
        while self._bytes[name] > cap:
            old, gone = tier.popitem(last=False)
            self._bytes[name] -= len(gone)
            self.counts["evicted"] += 1
            if name == "probation":
                self._ghosts[old] = None
                if len(self._ghosts) > GHOSTS_MAX:
                    self._ghosts.popitem(last=False)

    # ------------------------------------------------------------ disk tier

    def _path(self, digest: bytes) -> Path:
        assert self.root is not None
        h = digest.hex()
        return self.root / h[:2] / h

    def _load_disk(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        found = []
        for sub in root.iterdir():
            if sub.name == "tmp":
                for stale in sub.iterdir():  # a write a crash interrupted
                    stale.unlink(missing_ok=True)
                continue
            if not sub.is_dir():
                continue
            for f in sub.iterdir():
                try:
                    digest = bytes.fromhex(f.name)
                except ValueError:
                    continue
                if len(digest) == 32 and f.name[:2] == sub.name:
                    st = f.stat()
                    found.append((st.st_mtime, digest, st.st_size))
        for _mtime, digest, size in sorted(found):
            self._disk[digest] = size
            self._bytes["disk"] += size
        self._evict_disk()

    def _read_disk(self, digest: bytes, length: int) -> bytes | None:
        path = self._path(digest)
        try:
            data = path.read_bytes()
        except OSError:
            data = b""
        if len(data) == length and sha256(data) == digest:
            with contextlib.suppress(OSError):
                os.utime(path)
            return data
        log.warning("blob %s on disk is torn or changed; deleting it", digest.hex()[:16])
        path.unlink(missing_ok=True)
        with self._lock:
            self.counts["torn"] += 1
            size = self._disk.pop(digest, None)
            if size is not None:
                self._bytes["disk"] -= size
        return None

    def _write_loop(self) -> None:
        assert self.root is not None
        # The disk copy is a spare: it must never take a core from the sessions
        # whose blobs it keeps (a program's second run promotes its weights and
        # would otherwise pay for their write, fsync included, on a small machine).
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        tmpdir = self.root / "tmp"
        tmpdir.mkdir(parents=True, exist_ok=True)
        while True:
            item = self._writes.get()
            if item is None:
                return
            digest, data = item
            try:
                self._write_one(tmpdir, digest, data)
            except OSError as exc:
                log.warning("cannot write blob %s to disk: %s", digest.hex()[:16], exc)
            finally:
                with self._lock:
                    self._backlog -= len(data)
                self._writes.task_done()

    def _write_one(self, tmpdir: Path, digest: bytes, data: bytes) -> None:
        final = self._path(digest)
        final.parent.mkdir(exist_ok=True)
        tmp = tmpdir / f"{digest.hex()}.{threading.get_ident()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
        with self._lock:
            if digest not in self._disk:
                self._disk[digest] = len(data)
                self._bytes["disk"] += len(data)
            self._evict_disk()

    def _evict_disk(self) -> None:
        while self._bytes["disk"] > self.disk_cap and self._disk:
            digest, size = self._disk.popitem(last=False)
            self._bytes["disk"] -= size
            self.counts["evicted"] += 1
            with contextlib.suppress(OSError):
                self._path(digest).unlink()

    def flush(self) -> None:
        """Wait until every queued disk write is on disk."""
        if self._writer is not None:
            self._writes.join()

    # ------------------------------------------------------------ reporting

    def summary(self, limit: int = SUMMARY_MAX) -> bytes:
        """8-byte digest prefixes of what this store holds, most recently used first."""
        with self._lock:
            digests = [*reversed(self._protected), *reversed(self._probation),
                       *reversed(self._disk)]
        out: dict[bytes, None] = {}
        for d in digests:
            out.setdefault(d[:PREFIX])
            if len(out) >= limit:
                break
        return b"".join(out)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            lookups = self.counts["hits_ram"] + self.counts["hits_disk"] + self.counts["misses"]
            hits = self.counts["hits_ram"] + self.counts["hits_disk"]
            return {
                "ram_cap": self.ram_cap, "probation_cap": self.probation_cap,
                "disk_cap": self.disk_cap, "root": str(self.root) if self.root else None,
                "entries": {"probation": len(self._probation), "protected": len(self._protected),
                            "disk": len(self._disk)},
                "bytes": dict(self._bytes), **self.counts,
                "hit_rate": hits / lookups if lookups else None,
            }

    def entries(self) -> list[dict[str, Any]]:
        with self._lock:
            rows: dict[bytes, dict[str, Any]] = {}
            for name, tier in (("probation", self._probation), ("protected", self._protected)):
                for d, data in tier.items():
                    rows[d] = {"digest": d.hex(), "size": len(data), "tiers": [name]}
            for d, size in self._disk.items():
                rows.setdefault(d, {"digest": d.hex(), "size": size, "tiers": []})["tiers"].append(
                    "disk")
        return list(rows.values())

    def clear(self) -> int:
        """Drop every blob from both tiers; the number of blobs dropped."""
        self.flush()
        with self._lock:
            n = len(set(self._probation) | set(self._protected) | set(self._disk))
            disk = list(self._disk)
            self._probation.clear()
            self._protected.clear()
            self._disk.clear()
            self._ghosts.clear()
            self._bytes = {"probation": 0, "protected": 0, "disk": 0}
        for d in disk:
            with contextlib.suppress(OSError):
                self._path(d).unlink()
        return n

    def close(self) -> None:
        """Finish the disk writes (the agent is stopping)."""
        if self._writer is not None:
            self._writes.put(None)
            self._writer.join(10)
            self._writer = None
