"""A client session's journal: what rebuilds its device state on another server.

The journal keeps every BATCH envelope the program sent, in order, as the very
buffers the client agent received them into (the agent owns them: the program
cannot change them, and keeping one costs no copy). Replaying them on a fresh
server with the same virtual range rebuilds contexts, modules, functions,
streams, events, allocations and memory exactly: handles are minted by the
client and device pointers are the same. docs/consistency.md has the design.

Per batch, one C pass (``gl_journal_scan``) says whether it ends with a waiting
call and whether it holds a call that cannot be replayed; Python appends one
entry. Nothing runs per call.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from gleam.peer.nativelib import ffi, lib

MIB = 1 << 20
DEFAULT_LIMIT_MB = 1024

# Calls whose answer the program keeps and another server cannot honour: the
# address of a module global lies outside the session's range, wherever that
# server's loader put it (docs/consistency.md).
NOT_REPLAYABLE = {
    "cuModuleGetGlobal": "the address of a module global belongs to the server that gave it",
}


def limit_from_env() -> int:
    """``GLEAM_JOURNAL_MB`` (fractions allowed; 0 keeps no journal) in bytes."""
    raw = os.environ.get("GLEAM_JOURNAL_MB", "").strip()
    try:
        mb = float(raw) if raw else DEFAULT_LIMIT_MB
    except ValueError:
        mb = DEFAULT_LIMIT_MB
    return max(0, int(mb * MIB))


def _deny_bitmap() -> bytes:
    from gleam.peer.cuda.native import call_ids

    ids = call_ids()
    bits = bytearray((max(ids.values()) + 8) // 8)
    for name in NOT_REPLAYABLE:
        i = ids[name]
        bits[i // 8] |= 1 << (i % 8)
    return bytes(bits)


_DENY = _deny_bitmap()
_NAMES: dict[int, str] = {}


def _name_of(call_id: int) -> str:
    if not _NAMES:
        from gleam.peer.cuda.native import call_ids

        _NAMES.update({i: n for n, i in call_ids().items()})
    return _NAMES.get(call_id, f"call {call_id}")


@dataclass(frozen=True)
class Entry:
    """One journaled envelope (header included) and whether a reply answers it."""

    envelope: memoryview
    waits: bool


class Journal:
    """The envelopes since the session opened. Appended on the session's reader
    thread, read by a move (replay) under the session's route lock."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.entries: list[Entry] = []
        self.bytes = 0
        self.batches = 0   # envelopes ever journaled
        self.answered = 0  # replies the program has had for the entries
        self.checkpoints = 0
        self.snapshot_bytes = 0  # device memory and module variables the last checkpoint read
        self.checkpoint_seconds = 0.0  # how long the last one took
        self.folded = 0  # batches the last checkpoint folded away
        # Why this session can no longer be rebuilt elsewhere (None: it can).
        self.broken: str | None = None if limit > 0 else "the journal is off (GLEAM_JOURNAL_MB=0)"
        self._seen = ffi.new("gl_journal_seen *")
        self._lock = threading.Lock()

    def add(self, buf: memoryview, body_at: int) -> bool:
        """Journal one envelope (its batch at ``body_at``); True when it ends with a
        waiting call."""
        src = ffi.from_buffer("uint8_t[]", buf)
        rc = lib.gl_journal_scan(src + body_at, len(buf) - body_at, _DENY, len(_DENY), self._seen)
        waits = rc == 0 and bool(self._seen.waits)
        with self._lock:
            self.batches += 1
            if self.broken is not None:
                return waits
            if rc != 0:
                # The server ends the session over it; nothing worth replaying follows.
                self._break("the program sent a malformed batch")
            elif self._seen.denied >= 0:
                name = _name_of(self._seen.denied)
                self._break(f"{name} cannot be replayed ({NOT_REPLAYABLE.get(name, '')})")
            elif self.bytes + len(buf) > self.limit:
                self._break(f"the journal passed its bound ({self.limit / MIB:g} MiB, "
                            "GLEAM_JOURNAL_MB)")
            else:
                self.entries.append(Entry(buf, waits))
                self.bytes += len(buf)
        return waits

    def replace(self, entries: list[Entry], answered: int, snapshot_bytes: int,
                seconds: float, folded: int) -> None:
        """A checkpoint: ``entries`` (state, then snapshot) rebuild what the ``folded``
        old ones did; replaying them yields ``answered`` replies, all already answered."""
        with self._lock:
            if self.broken is not None:
                return  # (a session once unmovable stays so: nothing to fold)
            self.entries = entries
            self.bytes = sum(len(e.envelope) for e in entries)
            self.answered = answered
            self.checkpoints += 1
            self.snapshot_bytes = snapshot_bytes
            self.checkpoint_seconds = seconds
            self.folded = folded

    def cannot_move(self, why: str) -> None:
        """A checkpoint found state it cannot keep: the session runs on, unmovable."""
        with self._lock:
            if self.broken is None:
                self._break(why)

    def next_checkpoint(self) -> int:
        """The journal size at which the next checkpoint is taken: half the bound,
        or half again what the last checkpoint left, whichever is more (but below
        the bound, so that a checkpoint comes before the journal breaks)."""
        return int(min(0.9 * self.limit, max(0.5 * self.limit, 1.5 * self.bytes)))

    def _break(self, why: str) -> None:
        # Past the bound nothing is kept: the memory goes back at once, and the
        # session runs on where it is (only a move becomes impossible).
        self.broken = why
        self.entries = []
        self.bytes = 0

    def row(self) -> dict[str, object]:
        return {"journal_bytes": self.bytes, "journal_batches": len(self.entries),
                "journal_limit": self.limit, "checkpoints": self.checkpoints,
                "snapshot_bytes": self.snapshot_bytes,
                "checkpoint_seconds": self.checkpoint_seconds, "checkpoint_folded": self.folded,
                "movable": self.broken is None,
                "not_movable_because": self.broken}
