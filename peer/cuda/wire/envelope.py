"""The envelope around every message of a forwarded CUDA session.

``u32 body_len (LE), u8 type, u8 flags (0), u16 reserved (0), u64 session``,
then the body (``cffi_build/include/gl_session.h`` has the bytes, as the
``gl_env_head`` struct and the ``gl_env_type`` enum this module reads through
cffi; docs/cuda-forwarding.md the story). The agents never look inside a BATCH
or REPLY body beyond the batch header's record count: they stamp the
session id into the header in place and move the same buffer on.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from gleam.peer.native_layout import wire_struct
from gleam.peer.nativelib import ffi
from gleam.peer.nativelib import lib as _native_lib

HEADER_SIZE: int = _native_lib.GL_ENV_HEADER_SIZE
BATCH: int = _native_lib.GL_ENV_BATCH
REPLY: int = _native_lib.GL_ENV_REPLY
HELLO: int = _native_lib.GL_ENV_HELLO
FAIL: int = _native_lib.GL_ENV_FAIL
BLOB: int = _native_lib.GL_ENV_BLOB
CLAIMED: int = _native_lib.GL_ENV_CLAIMED
# Every type C knows, by number: "BATCH", "REPLY" ...
TYPE_NAMES: dict[int, str] = {
    number: name.removeprefix("GL_ENV_")
    for number, name in ffi.typeof("enum gl_env_type").elements.items()
}

# What one envelope may carry: a host-to-device chunk (GL_COPY_CHUNK, from
# gl_session.h) inside a batch, with room for the batch and record headers.
# Anything larger is a broken or hostile interposer, refused before it is buffered.
COPY_CHUNK: int = _native_lib.GL_COPY_CHUNK
MAX_BODY = COPY_CHUNK + 64 * 1024

_HEADER = wire_struct("gl_env_head")
_SESSION = struct.Struct("<Q")
_SESSION_AT: int = ffi.offsetof("gl_env_head", "session")
_TYPE_AT: int = ffi.offsetof("gl_env_head", "type")
# The batch header's record count (docs/wire-format-data-plane.md, records.h).
_BATCH_COUNT = struct.Struct("<I")
_BATCH_COUNT_AT: int = _native_lib.GL_BATCH_COUNT_AT
_BATCH_HEADER_SIZE: int = _native_lib.GL_BATCH_HEADER_SIZE
_REASON_MAX: int = _native_lib.GL_FAIL_REASON_MAX


# A CLAIMED body (gl_session.h): gl_claims_head, count gl_claim, then the batch.
_CLAIMS_HEAD = wire_struct("gl_claims_head")
_CLAIM_HEAD = struct.Struct("<IIQ")  # gl_claim's record, zero, len; its digest follows
_CLAIM_SIZE: int = _native_lib.GL_CLAIM_SIZE
_MAX_CLAIMS: int = _native_lib.GL_BLOB_MAX_SEEN  # (as gl_claims_open checks)
_CLAIM_DIGEST_AT: int = ffi.offsetof("gl_claim", "digest")
assert _CLAIM_HEAD.size == _CLAIM_DIGEST_AT and _CLAIM_SIZE == _CLAIM_DIGEST_AT + 32


@dataclass(frozen=True)
class Claim:
    """The client agent's word that record ``record``'s inline payload of ``length``
    bytes has content digest ``digest`` (checked by the server at its first use)."""

    record: int
    length: int
    digest: bytes


class EnvelopeError(ValueError):
    """An envelope header that no well-behaved sender writes."""


def pack_header(kind: int, session: int, body_len: int) -> bytes:
    return _HEADER.pack(body_len, kind, 0, 0, session)


def write_header(buf: bytearray | memoryview, kind: int, session: int, body_len: int) -> None:
    """Fill the 16 bytes at the front of ``buf`` (the body is already behind them)."""
    _HEADER.pack_into(buf, 0, body_len, kind, 0, 0, session)


def parse_header(buf: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """``(kind, session, body_len)`` of the header at the front of ``buf``."""
    if len(buf) < HEADER_SIZE:
        raise EnvelopeError(f"envelope header of {len(buf)} bytes (needs {HEADER_SIZE})")
    body_len, kind, flags, reserved, session = _HEADER.unpack_from(buf, 0)
    if flags or reserved:
        raise EnvelopeError("envelope flags or reserved bits set")
    if kind not in TYPE_NAMES:
        raise EnvelopeError(f"unknown envelope type {kind}")
    return kind, session, body_len


def kind_of(buf: bytes | bytearray | memoryview) -> int:
    """The type of the envelope at the front of ``buf`` (unchecked: see parse_header)."""
    return int(buf[_TYPE_AT])


def session_of(buf: bytes | bytearray | memoryview) -> int:
    (session,) = _SESSION.unpack_from(buf, _SESSION_AT)
    return int(session)


def stamp_session(buf: bytearray | memoryview, session: int) -> None:
    """Write the session id into an envelope's header, in place (no copy of the body)."""
    _SESSION.pack_into(buf, _SESSION_AT, session)


def record_count(buf: bytes | bytearray | memoryview, offset: int = 0) -> int:
    """Records in the batch at ``offset`` of ``buf`` (0 when too short to say).

    Read from the batch header for accounting only; the executor validates
    the batch itself.
    """
    if len(buf) < offset + _BATCH_HEADER_SIZE:
        return 0
    (count,) = _BATCH_COUNT.unpack_from(buf, offset + _BATCH_COUNT_AT)
    return int(count)


def claimed_body(claims: list[Claim], batch: bytes | bytearray | memoryview) -> bytes:
    """A CLAIMED envelope's body: the claims, then the batch."""
    head = _CLAIMS_HEAD.pack(len(claims), 0)
    parts = [_CLAIM_HEAD.pack(c.record, 0, c.length) + c.digest for c in claims]
    return head + b"".join(parts) + bytes(batch)


def split_claimed(body: bytes | bytearray | memoryview) -> tuple[list[Claim], memoryview]:
    """A CLAIMED body's claims and the batch behind them (EnvelopeError if malformed)."""
    view = memoryview(body)
    if len(view) < _CLAIMS_HEAD.size:
        raise EnvelopeError("CLAIMED body shorter than its claims header")
    count, zero = _CLAIMS_HEAD.unpack_from(view, 0)
    end = _CLAIMS_HEAD.size + count * _CLAIM_SIZE
    if zero or count > _MAX_CLAIMS or end > len(view):
        raise EnvelopeError("CLAIMED body's claims are malformed")
    claims = []
    for at in range(_CLAIMS_HEAD.size, end, _CLAIM_SIZE):
        record, claim_zero, length = _CLAIM_HEAD.unpack_from(view, at)
        if claim_zero:
            raise EnvelopeError("CLAIMED body's claims are malformed")
        digest = bytes(view[at + _CLAIM_DIGEST_AT:at + _CLAIM_SIZE])
        claims.append(Claim(record, length, digest))
    return claims, view[end:]


def fail_envelope(reason: str) -> bytes:
    """A FAIL envelope: the session is over, and the interposer shows why."""
    body = reason.encode("utf-8", "replace")[:_REASON_MAX]
    return pack_header(FAIL, 0, len(body)) + body


def is_session_envelope(buf: bytes | bytearray | memoryview, kinds: tuple[int, ...]) -> bool:
    """Whether a data-plane payload is a well-formed envelope of one of ``kinds``."""
    if len(buf) < HEADER_SIZE:
        return False
    body_len, kind, flags, reserved, _session = _HEADER.unpack_from(buf, 0)
    return kind in kinds and not flags and not reserved and body_len == len(buf) - HEADER_SIZE
