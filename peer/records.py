"""Data-plane call batches, seen from Python.

The encoder and decoder live in the native core (``cffi_build/src/wire/records.c``)
because the interposer and the server executor run the same code without
Python. This module is a thin wrapper for the agents' tests, tools and
slow paths: the hot path moves batches as opaque buffers and never loops over
single calls here. The byte layout is described in
``docs/wire-format-data-plane.md``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gleam.peer.nativelib import ffi, lib

__all__ = [
    "BATCH_HEADER_SIZE",
    "DIGEST_SIZE",
    "MAX_ARGS",
    "BatchWriter",
    "BlobRef",
    "CallRecord",
    "DecodedBatch",
    "RecordError",
    "RecordFlag",
    "decode_batch",
    "encode_batch",
    "record_size",
]

MAX_ARGS: int = lib.GL_MAX_ARGS
BATCH_HEADER_SIZE: int = lib.GL_BATCH_HEADER_SIZE
DIGEST_SIZE: int = lib.GL_REF_DIGEST_SIZE

_U16_MAX = (1 << 16) - 1
_U32_MAX = (1 << 32) - 1
_U64_MAX = (1 << 64) - 1


class RecordFlag(enum.IntFlag):
    """Per-record flags as they appear on the wire."""

    ONEWAY = lib.GL_REC_ONEWAY
    INLINE = lib.GL_REC_INLINE
    REF = lib.GL_REC_REF
    QUIET = lib.GL_REC_QUIET


class RecordError(ValueError):
    """A batch could not be encoded or decoded.

    ``code`` is the native ``GL_E_*`` code, so callers can tell a truncated
    batch (wait for more bytes) from a malformed one (drop the peer); ``index``
    is the record at fault when the error was found while walking records.
    """

    def __init__(self, code: int, index: int | None = None) -> None:
        self.code = code
        self.index = index
        message = ffi.string(lib.gl_strerror(code)).decode()
        if index is not None:
            message = f"{message} (record {index})"
        super().__init__(message)


@dataclass(frozen=True)
class BlobRef:
    """A payload that the receiver already holds: content digest and size."""

    digest: bytes
    size: int

    def __post_init__(self) -> None:
        if not isinstance(self.digest, bytes) or len(self.digest) != DIGEST_SIZE:
            raise ValueError(f"BlobRef.digest must be {DIGEST_SIZE} bytes (a SHA-256 digest)")
        if not 0 <= self.size <= _U64_MAX:
            raise ValueError("BlobRef.size must fit in an unsigned 64-bit integer")


@dataclass(frozen=True)
class CallRecord:
    """One forwarded driver call: its id, fixed arguments and optional payload.

    ``payload=b""`` (an empty inline payload) and ``payload=None`` (no payload)
    are different records on the wire, and both round-trip.
    """

    call_id: int
    args: tuple[int, ...] = ()
    payload: bytes | None = None
    ref: BlobRef | None = None
    oneway: bool = False
    # A waiting call whose reply leaves the deferred error and kernel output for
    # the program's next one (a checkpoint's snapshot read: records.h).
    quiet: bool = False

    def __post_init__(self) -> None:
        # Normalise so that equal records compare equal whatever sequence or
        # bytes-like type the caller used.
        object.__setattr__(self, "args", tuple(self.args))
        if self.payload is not None:
            object.__setattr__(self, "payload", bytes(self.payload))
        if not 0 <= self.call_id <= _U16_MAX:
            raise ValueError("call_id must fit in an unsigned 16-bit integer")
        if len(self.args) > MAX_ARGS:
            raise ValueError(f"a record holds at most {MAX_ARGS} arguments, got {len(self.args)}")
        if any(not 0 <= a <= _U64_MAX for a in self.args):
            raise ValueError("arguments must fit in an unsigned 64-bit integer")
        if self.oneway and self.quiet:
            raise ValueError("only a waiting record is quiet (its reply holds back what it owes)")
        if self.payload is not None and self.ref is not None:
            raise ValueError("a record carries an inline payload or a blob reference, not both")
        if self.payload is not None and len(self.payload) > _U32_MAX:
            raise ValueError("inline payload longer than 4 GiB; send it as a blob reference")

    @property
    def flags(self) -> RecordFlag:
        flags = RecordFlag(0)
        if self.oneway:
            flags |= RecordFlag.ONEWAY
        if self.quiet:
            flags |= RecordFlag.QUIET
        if self.payload is not None:
            flags |= RecordFlag.INLINE
        if self.ref is not None:
            flags |= RecordFlag.REF
        return flags


@dataclass(frozen=True)
class DecodedBatch:
    """A decoded batch: its sequence number and records in order."""

    seq: int
    records: tuple[CallRecord, ...]


def record_size(rec: CallRecord) -> int:
    """Bytes ``rec`` takes in a batch, padding included; lets callers size buffers."""
    payload_len = lib.GL_REF_PAYLOAD_SIZE if rec.ref is not None else len(rec.payload or b"")
    size: int = lib.gl_batch_record_size(len(rec.args), payload_len)
    if size == 0:
        raise RecordError(lib.GL_E_FULL)
    return size


class BatchWriter:
    """Builds one batch in a fixed buffer, as the interposer does.

    The capacity is fixed up front so that a full batch is a normal outcome
    (``append`` returns False and the caller flushes) rather than a
    reallocation on the hot path.
    """

    def __init__(self, capacity: int, seq: int = 0) -> None:
        if capacity < BATCH_HEADER_SIZE:
            raise ValueError(f"capacity must be at least the {BATCH_HEADER_SIZE}-byte header")
        if not 0 <= seq <= _U64_MAX:
            raise ValueError("seq must fit in an unsigned 64-bit integer")
        self._buf = ffi.new("uint8_t[]", capacity)
        self._writer = ffi.new("gl_batch_writer *")
        _check(lib.gl_batch_writer_init(self._writer, self._buf, capacity, seq))

    @property
    def count(self) -> int:
        """Records appended so far."""
        return int(self._writer.count)

    @property
    def size(self) -> int:
        """Bytes the batch takes so far, header included."""
        return int(self._writer.len)

    def append(self, rec: CallRecord) -> bool:
        """Append ``rec``; False (and nothing written) when it does not fit."""
        flags = rec.flags & (RecordFlag.ONEWAY | RecordFlag.QUIET)
        args: Any = ffi.new("uint64_t[]", list(rec.args)) if rec.args else ffi.NULL
        nargs = len(rec.args)
        if rec.ref is not None:
            rc = lib.gl_batch_append_ref(
                self._writer, rec.call_id, flags, args, nargs, rec.ref.digest, rec.ref.size
            )
        elif rec.payload is not None:
            payload = ffi.from_buffer(rec.payload)
            rc = lib.gl_batch_append_inline(
                self._writer, rec.call_id, flags, args, nargs, payload, len(rec.payload)
            )
        else:
            rc = lib.gl_batch_append(self._writer, rec.call_id, flags, args, nargs)
        if rc == lib.GL_E_FULL:
            return False
        _check(rc)
        return True

    def finish(self) -> bytes:
        """The batch as bytes. The writer stays usable: append more, finish again."""
        _check(lib.gl_batch_writer_finish(self._writer))
        return ffi.buffer(self._buf, self._writer.len)[:]


def encode_batch(records: Iterable[CallRecord], seq: int = 0) -> bytes:
    """Encode ``records`` into one batch whose buffer is sized exactly."""
    recs = list(records)
    total = BATCH_HEADER_SIZE + sum(record_size(r) for r in recs)
    if total > _U32_MAX:
        raise RecordError(lib.GL_E_FULL)
    writer = BatchWriter(total, seq)
    for rec in recs:
        if not writer.append(rec):  # pragma: no cover - sized exactly above
            raise RecordError(lib.GL_E_FULL)
    return writer.finish()


def decode_batch(data: bytes | bytearray | memoryview) -> DecodedBatch:
    """Decode and fully validate one batch of untrusted bytes.

    Raises RecordError on any malformed input; never reads outside ``data``.
    The input is not copied, only the payloads handed back are.
    """
    view = ffi.from_buffer("uint8_t[]", data)
    reader = ffi.new("gl_batch_reader *")
    _check(lib.gl_batch_reader_open(reader, view, len(view)))
    out = ffi.new("gl_record *")
    records: list[CallRecord] = []
    while True:
        rc = lib.gl_batch_reader_next(reader, out)
        if rc == 0:
            break
        if rc < 0:
            raise RecordError(rc, index=int(reader.index))
        records.append(_to_call_record(out))
    return DecodedBatch(seq=int(reader.seq), records=tuple(records))


def _to_call_record(rec: Any) -> CallRecord:
    flags = RecordFlag(rec.flags)
    payload = ref = None
    if flags & RecordFlag.INLINE:
        payload = ffi.buffer(rec.payload, rec.payload_len)[:]
    elif flags & RecordFlag.REF:
        ref = BlobRef(ffi.buffer(rec.ref_digest, DIGEST_SIZE)[:], int(rec.ref_size))
    return CallRecord(
        call_id=int(rec.call_id),
        args=tuple(int(a) for a in rec.args[0 : rec.nargs]),
        payload=payload,
        ref=ref,
        oneway=bool(flags & RecordFlag.ONEWAY),
        quiet=bool(flags & RecordFlag.QUIET),
    )


def _check(rc: int) -> None:
    if rc < 0:
        raise RecordError(rc)
