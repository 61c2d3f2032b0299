"""A client session's journal: what rebuilds its device state on another server.

The journal keeps every BATCH envelope the program sent, in order, as the very
buffers the client agent received them into (the agent owns them: the program
cannot change them, and keeping one costs no copy). Replaying them on a fresh
server with the same virtual range rebuilds contexts, modules, functions,
streams, events, allocations and memory exactly: handles are minted by the
client and device pointers are the same. docs/consistency.md has the design.

The journal lives in native memory (``cffi_build/src/journal/jlog.c``): the client
agent's native uplink appends each envelope's block (one reference, no copy)
after one C pass says whether it ends with a waiting call and whether it
holds a call that cannot be replayed. Python reads it for a move or a
checkpoint. Nothing runs in Python per batch.
"""

from __future__ import annotations

import builtins
import os
from dataclasses import dataclass
from typing import Any

from gleam.peer.cuda.wire.blocks import block_view, new_block
from gleam.peer.nativelib import ffi, lib

MIB = 1 << 20
DEFAULT_LIMIT_MB = 1024

# Calls whose answer the program keeps and another server cannot honour: the
# address of a module global lies outside the session's range, wherever that
# server's loader put it (docs/consistency.md).
NOT_REPLAYABLE = {
    "cuModuleGetGlobal": "the address of a module global belongs to the server that gave it",
    # The program keeps the map's bytes (it passes them to kernels), and they are the
    # layout of the driver that wrote them: another server's device may read them otherwise.
    "glTensorMapEncode": "a tensor map is in the layout of the driver that wrote it",
    # Two views of one VMM allocation share pages that no checkpoint of the session's
    # allocations restores as one memory (src/exec/exec_vmm.c): a moved session would lose them.
    "glVmmCreate": "a VMM allocation is memory of the server that made it",
}
# The same for sessions on one kind of server only. A GPU keeps a CUDA array's
# contents in its driver's array, which no checkpoint reads, and gives texture
# and surface objects values of its own (the host device keeps arrays in session
# memory and answers the minted handle: docs/cuda-forwarding.md).
NOT_REPLAYABLE_ON: dict[str, dict[str, str]] = {"cuda": {
    "glArrayCreate": "a GPU's CUDA array holds its contents in the driver",
    "glMipmapCreate": "a GPU's CUDA array holds its contents in the driver",
    "glTexObjectCreate": "a GPU gives texture and surface objects values of its own",
}}


def not_replayable(backend: str = "") -> dict[str, str]:
    """The calls that break the journal of a session on this kind of server, and why."""
    return {**NOT_REPLAYABLE, **NOT_REPLAYABLE_ON.get(backend, {})}


def limit_from_env() -> int:
    """``GLEAM_JOURNAL_MB`` (fractions allowed; 0 keeps no journal) in bytes."""
    raw = os.environ.get("GLEAM_JOURNAL_MB", "").strip()
    try:
        mb = float(raw) if raw else DEFAULT_LIMIT_MB
    except ValueError:
        mb = DEFAULT_LIMIT_MB
    return max(0, int(mb * MIB))


def _deny_bitmap(backend: str = "") -> bytes:
    from gleam.peer.cuda.wire.calls import call_ids

    ids = call_ids()
    bits = bytearray((max(ids.values()) + 8) // 8)
    for name in not_replayable(backend):
        i = ids[name]
        bits[i // 8] |= 1 << (i % 8)
    return bytes(bits)
_NAMES: dict[int, str] = {}


def _name_of(call_id: int) -> str:
    if not _NAMES:
        from gleam.peer.cuda.wire.calls import call_ids

        _NAMES.update({i: n for n, i in call_ids().items()})
    return _NAMES.get(call_id, f"call {call_id}")


@dataclass(frozen=True)
class Entry:
    """One journaled envelope (header included), whether a reply answers it, and
    the native block it views (None: not a block), which the blob cache holds."""

    envelope: memoryview
    waits: bool
    block: Any = None


_WHY = {
    lib.GL_JLOG_OFF: "the journal is off (GLEAM_JOURNAL_MB=0)",
    lib.GL_JLOG_MALFORMED: "the program sent a malformed batch",
}


class Journal:
    """The envelopes since the session opened, kept in native blocks (``jlog.c``):
    the client agent's fast lane appends without Python, a move (replay) and a
    checkpoint read them here under the session's route lock."""

    def __init__(self, limit: int, backend: str = "") -> None:
        """``backend``: the kind of server the session opened on ("cuda", "host")."""
        self.limit = limit
        self._not_replayable = not_replayable(backend)
        self.checkpoints = 0
        self.snapshot_bytes = 0  # device memory and module variables the last checkpoint read
        self.checkpoint_seconds = 0.0  # how long the last one took
        self.folded = 0  # batches the last checkpoint folded away
        self._why: str | None = None  # a reason Python gave (cannot_move)
        deny = _deny_bitmap(backend)
        self._j = ffi.gc(lib.gl_jlog_new(limit, deny, len(deny)), lib.gl_jlog_free)
        self._state = ffi.new("gl_jlog_state *")
        self._waits = ffi.new("int *")

    @property
    def native(self) -> Any:
        """The ``gl_jlog *`` the session's native lanes append to."""
        return self._j

    def _get(self) -> Any:
        lib.gl_jlog_get(self._j, self._state)
        return self._state

    @property
    def bytes(self) -> int:
        return int(self._get().bytes)

    @property
    def batches(self) -> int:
        """Envelopes ever journaled."""
        return int(self._get().batches)

    @property
    def answered(self) -> int:
        """Replies the program has had for the entries."""
        return int(self._get().answered)

    @answered.setter
    def answered(self, value: int) -> None:
        lib.gl_jlog_set_answered(self._j, value)

    @property
    def broken(self) -> str | None:
        """Why this session can no longer be rebuilt elsewhere (None: it can)."""
        if self._why is not None:
            return self._why
        state = self._get()
        if state.broken == lib.GL_JLOG_KEEPING:
            return None
        if state.broken == lib.GL_JLOG_DENIED:
            name = _name_of(state.denied)
            return f"{name} cannot be replayed ({self._not_replayable.get(name, '')})"
        if state.broken == lib.GL_JLOG_BOUND:
            return f"the journal passed its bound ({self.limit / MIB:g} MiB, GLEAM_JOURNAL_MB)"
        return _WHY.get(state.broken, "the journal stopped")

    @property
    def entries(self) -> list[Entry]:
        """The journaled envelopes, in order (views of the native blocks)."""
        out: list[Entry] = []
        while (entry := self.entry(len(out))) is not None:
            out.append(entry)
        return out

    def entry(self, i: int) -> Entry | None:
        """The ``i``-th journaled envelope (None past the end): a replay's step,
        without building the whole list for each."""
        block = lib.gl_jlog_entry(self._j, i)
        return None if block == ffi.NULL else Entry(block_view(block), bool(block.waits), block)

    @property
    def count(self) -> int:
        """Envelopes the journal holds now."""
        return int(self._get().entries)

    def add(self, buf: builtins.bytes | bytearray | memoryview, body_at: int) -> bool:
        """Journal a copy of one envelope (its batch at ``body_at``); True when it
        ends with a waiting call."""
        block = new_block(buf)
        try:
            return self.add_block(block, body_at)
        finally:
            lib.gl_jblock_unref(block)

    def add_block(self, block: Any, body_at: int) -> bool:
        """Journal a native block (the journal takes its own reference)."""
        lib.gl_jlog_add(self._j, block, body_at, self._waits, ffi.NULL, ffi.NULL)
        return bool(self._waits[0])

    def replace(self, entries: list[Entry], answered: int, snapshot_bytes: int,
                seconds: float, folded: int) -> None:
        """A checkpoint: ``entries`` (state, then snapshot) rebuild what the ``folded``
        old ones did; replaying them yields ``answered`` replies, all already answered."""
        if self.broken is not None:
            return  # (a session once unmovable stays so: nothing to fold)
        size = sum(len(e.envelope) for e in entries)
        if size > self.keep_at_most():
            self.cannot_move(f"a checkpoint of {size / MIB:.2g} MiB is more than the journal "
                             f"keeps ({self.limit / MIB:g} MiB, GLEAM_JOURNAL_MB)")
            return
        blocks = []
        try:
            for entry in entries:
                block = new_block(entry.envelope)
                block.waits = int(entry.waits)
                blocks.append(block)
            lib.gl_jlog_replace(self._j, blocks, len(blocks), answered)
        finally:
            for block in blocks:
                lib.gl_jblock_unref(block)
        self.checkpoints += 1
        self.snapshot_bytes = snapshot_bytes
        self.checkpoint_seconds = seconds
        self.folded = folded

    def cannot_move(self, why: str) -> None:
        """A checkpoint found state it cannot keep: the session runs on, unmovable."""
        if self.broken is None:
            self._why = why
            lib.gl_jlog_break(self._j, lib.GL_JLOG_BROKEN)

    def keep_at_most(self) -> int:
        """The most a checkpoint may leave in the journal: beyond it the next
        checkpoint would come at once, again and again, so the session is not
        movable instead."""
        return int(0.75 * self.limit)

    def next_checkpoint(self) -> int:
        """The journal size at which the next checkpoint is taken: half the bound,
        or half again what the last checkpoint left, whichever is more (but below
        the bound, so that a checkpoint comes before the journal breaks)."""
        return int(min(0.9 * self.limit, max(0.5 * self.limit, 1.5 * self.bytes)))

    def row(self) -> dict[str, object]:
        state = self._get()
        broken = self.broken
        return {"journal_bytes": int(state.bytes), "journal_batches": int(state.entries),
                "journal_limit": self.limit, "checkpoints": self.checkpoints,
                "snapshot_bytes": self.snapshot_bytes,
                "checkpoint_seconds": self.checkpoint_seconds, "checkpoint_folded": self.folded,
                "movable": broken is None,
                "not_movable_because": broken}
