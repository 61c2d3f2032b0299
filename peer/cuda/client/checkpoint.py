"""Checkpoints: the journal folded into the state it built (docs/consistency.md).

A checkpoint turns the journal into two parts that rebuild the same device
state with far fewer bytes:

* the *state*: every journaled record that creates or configures something
  (contexts, modules, functions, streams, events, allocations ...), in order,
  with the records that only move data or wait (copies, memsets, launches,
  synchronisations, queries) left out: their effect on memory is in the snapshot;
* the *snapshot*: the bytes of every live allocation, read back from the
  server at the checkpoint and written again by one-way copies (a chunk that
  reads as zeros becomes a memset), then the contents of every loaded module's
  and library's variables (``__device__`` globals), read with
  ``glModuleVarsRead`` and written back with ``glModuleVarsWrite``: kernels
  name a variable by symbol, so its contents are enough wherever the new
  server's loader puts it.

The compaction walks records in C (``gl_journal_compact``), once per batch at
checkpoint time; Python handles whole batches and the allocation list. The
snapshot's reads are quiet records (``records.h``): their replies leave a
deferred error of the program's, the server's notes on it and the output its
kernels printed on the server, for the program's own next reply.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from gleam.peer.cuda.client.journal import Entry
from gleam.peer.cuda.wire import envelope
from gleam.peer.native_layout import wire_struct
from gleam.peer.nativelib import cuda_error, ffi, lib
from gleam.peer.records import CallRecord, encode_batch

CHUNK: int = lib.GL_COPY_CHUNK
# A REPLY body's header, as gl_session.h lays it out (gl_reply_head).
REPLY_HEAD = wire_struct("gl_reply_head")
_ZEROS = bytes(CHUNK)
# The first read of a module's variables asks this much (and learns the whole
# size): most modules have a few bytes of them, and a read's reply is n bytes.
VARS_FIRST = 4096
CUDA_ERROR_INVALID_HANDLE = cuda_error("CUDA_ERROR_INVALID_HANDLE")
CUDA_ERROR_NOT_SUPPORTED = cuda_error("CUDA_ERROR_NOT_SUPPORTED")


def _ids() -> dict[str, int]:
    from gleam.peer.cuda.wire.calls import call_ids

    return call_ids()


_IDS = _ids()
# Calls whose lasting effect is only on memory (which the snapshot holds) or that
# have none: a checkpoint drops them. The API table says which (cuda_api.py's
# ``data=True`` rows, generated into gl_call_data); every other call is state
# and is kept, so a call added to the table later is replayed unless flagged.
DATA_CALLS: frozenset[str] = frozenset(
    name for name, i in _IDS.items() if lib.gl_call_is_data(i)
)


def _keep_bitmap() -> bytes:
    bits = bytearray((max(_IDS.values()) + 8) // 8)
    for name, i in _IDS.items():
        if name not in DATA_CALLS:
            bits[i // 8] |= 1 << (i % 8)
    return bytes(bits)


_KEEP = _keep_bitmap()


class CheckpointError(Exception):
    """The journal could not be compacted or the memory not read back."""


class NotMovable(CheckpointError):
    """The server cannot give what a checkpoint must keep: the session can no
    longer be rebuilt elsewhere (the message says why)."""


@dataclass(frozen=True)
class Built:
    """What a journal built: its state records, the allocations alive after them
    (ptr -> size) and the modules and libraries loaded (their minted handles, in
    load order)."""

    state: list[Entry]
    live: dict[int, int]
    code: list[int]


def compact(entries: Iterable[Entry]) -> Built:
    """The state part of ``entries`` and what is alive after them."""
    state: list[Entry] = []
    live: dict[int, int] = {}
    code: dict[int, None] = {}
    out_len = ffi.new("size_t *")
    waits = ffi.new("int *")
    n = ffi.new("uint32_t *")
    allocs = ffi.new("gl_journal_alloc[]", 64)
    for entry in entries:
        src = ffi.from_buffer("uint8_t[]", entry.envelope)
        body_len = len(entry.envelope) - envelope.HEADER_SIZE
        out = bytearray(len(entry.envelope))
        dst = ffi.from_buffer("uint8_t[]", out, require_writable=True)
        while True:
            rc = lib.gl_journal_compact(src + envelope.HEADER_SIZE, body_len, _KEEP, len(_KEEP),
                                        dst + envelope.HEADER_SIZE, body_len, out_len, waits,
                                        allocs, len(allocs), n)
            if rc != lib.GL_E_FULL or n[0] <= len(allocs):
                break
            allocs = ffi.new("gl_journal_alloc[]", n[0])
        ffi.release(dst)
        if rc != 0:
            raise CheckpointError(ffi.string(lib.gl_strerror(rc)).decode())
        for i in range(n[0]):
            kind, handle = allocs[i].kind, allocs[i].dptr
            if kind == lib.GL_JOURNAL_ALLOC:
                live[handle] = allocs[i].size
            elif kind == lib.GL_JOURNAL_FREE:
                live.pop(handle, None)
            elif kind == lib.GL_JOURNAL_LOAD:
                code[handle] = None
            else:
                code.pop(handle, None)
        if out_len[0]:
            del out[envelope.HEADER_SIZE + out_len[0]:]
            envelope.write_header(out, envelope.BATCH, 0, out_len[0])
            state.append(Entry(memoryview(out), bool(waits[0])))
    return Built(state, live, list(code))


def chunks(live: dict[int, int]) -> Iterator[tuple[int, int]]:
    """(pointer, length) pieces of at most one copy chunk covering ``live``."""
    for ptr in sorted(live):
        size = live[ptr]
        for off in range(0, size, CHUNK):
            yield ptr + off, min(CHUNK, size - off)


def _envelope(records: list[CallRecord], session: int = 0) -> bytearray:
    """A BATCH envelope of ``records``; writable, as a replay stamps the session id in place."""
    batch = encode_batch(records)
    return bytearray(envelope.pack_header(envelope.BATCH, session, len(batch)) + batch)


def read_request(session: int, ptr: int, n: int) -> bytearray:
    """A BATCH envelope that reads ``n`` bytes at ``ptr`` (one waiting copy). It is
    quiet: its reply leaves a deferred error of the program's and its kernels'
    output on the server, for the program's next reply (records.h)."""
    return _envelope([CallRecord(_IDS["glMemcpyDtoH"], (ptr, n, 0), quiet=True)], session)


def reply_parts(reply: bytes | bytearray | memoryview,
                n: int) -> tuple[int, bytes | None, tuple[int, ...]]:
    """A read's REPLY: its result (-1: malformed), its ``n`` bytes (None unless it
    carried exactly those) and its values."""
    body = memoryview(reply)[envelope.HEADER_SIZE:]
    if len(body) < REPLY_HEAD.size:
        return -1, None, ()
    result, _deferred, nv, n_bytes, *values = REPLY_HEAD.unpack_from(body)
    data = None
    if result == 0 and n_bytes == n and len(body) >= REPLY_HEAD.size + n:
        data = bytes(body[REPLY_HEAD.size:REPLY_HEAD.size + n])
    return result, data, tuple(values[:min(nv, len(values))])


def vars_request(session: int, handle: int, offset: int, n: int) -> bytearray:
    """A BATCH envelope that reads ``n`` bytes of a module's variables at ``offset``
    (quiet, as ``read_request``)."""
    return _envelope([CallRecord(_IDS["glModuleVarsRead"], (handle, offset, n), quiet=True)],
                     session)


def vars_first(handle: int, result: int, data: bytes | None,
               values: tuple[int, ...]) -> tuple[bytes, int] | None:
    """The first read of a module's variables: the bytes it gave and the whole
    storage's size; None when the module is gone (a load that failed: its
    replay fails alike). Raises NotMovable where the server cannot keep them."""
    if result == CUDA_ERROR_INVALID_HANDLE:
        return None
    if result == CUDA_ERROR_NOT_SUPPORTED:
        raise NotMovable("the server cannot keep module variables (__device__ globals) "
                         f"across a checkpoint (module 0x{handle:x}, the cuda backend)")
    if data is None or not values:
        raise CheckpointError(f"reading the variables of module 0x{handle:x} failed")
    size = values[0]
    return data[:min(size, len(data))], size


def vars_rest(size: int) -> Iterator[tuple[int, int]]:
    """(offset, length) reads of a storage of ``size`` bytes after the first one."""
    for off in range(VARS_FIRST, size, CHUNK):
        yield off, min(CHUNK, size - off)


def write_entries(pieces: Iterable[tuple[int, bytes]]) -> list[Entry]:
    """One-way batches that write ``pieces`` (pointer, bytes) back: a copy chunk
    per batch at most, zeros as memsets."""
    entries: list[Entry] = []
    batch: list[CallRecord] = []
    size = 0

    def flush() -> None:
        nonlocal batch, size
        if batch:
            entries.append(Entry(memoryview(_envelope(batch)), False))
        batch, size = [], 0

    for ptr, data in pieces:
        if data == _ZEROS[:len(data)]:
            batch.append(CallRecord(_IDS["cuMemsetD8"], (ptr, 0, len(data)), oneway=True))
            continue
        if size + len(data) > CHUNK:
            flush()
        batch.append(CallRecord(_IDS["glMemcpyHtoD"], (ptr, len(data), 0), payload=data,
                                oneway=True))
        size += len(data)
    flush()
    return entries


def vars_entries(pieces: Iterable[tuple[int, bytes]]) -> list[Entry]:
    """One-way batches that write each module's variables back, (handle, bytes)
    each from offset 0; a copy chunk per batch at most."""
    entries: list[Entry] = []
    for handle, data in pieces:
        for off in range(0, len(data), CHUNK):
            part = data[off:off + CHUNK]
            record = CallRecord(_IDS["glModuleVarsWrite"], (handle, off, len(part)),
                                payload=part, oneway=True)
            entries.append(Entry(memoryview(_envelope([record])), False))
    return entries


def fold(state: list[Entry], pieces: list[tuple[int, bytes]],
         variables: Iterable[tuple[int, bytes]] = ()) -> tuple[list[Entry], int]:
    """The journal after a checkpoint, and how many replies its replay yields (all of
    them answers the program already had).

    Between the state and the snapshot goes one waiting ``cuCtxSynchronize``: the
    state may hold a call that failed (its error deferred, as CUDA's are) whose
    error a dropped wait had taken; on a replay this wait takes it again, so it
    is never reported twice. The modules' variables come last, once the state has
    loaded the modules again.
    """
    drain = Entry(memoryview(_envelope([CallRecord(_IDS["cuCtxSynchronize"], ())])), True)
    return ([*state, drain, *write_entries(pieces), *vars_entries(variables)],
            sum(e.waits for e in state) + 1)
