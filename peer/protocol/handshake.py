"""The key schedule and the sealed-frame cipher of the peer protocol.

Everything here is a pure function of its inputs (or, for the ciphers, of a
per-direction counter). See docs/protocol.md for the reasoning.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from gleam.peer.protocol.errors import ErrorCode, LocalProtocolError, ProtocolError
from gleam.peer.protocol.framing import HEADER_SIZE, frame_header

# 3: a client agent sends CLAIMED envelopes (its digests of the inline payloads) that a
# version-2 server would refuse; 2: blobs are addressed by BLAKE3 (1: SHA-256), so
# agents of different versions would not find each other's blobs. They do not pair.
PROTOCOL_VERSION = 3
KEY_SIZE = 32
TAG_SIZE = 16
MIN_MESH_KEY = 16

# Work buffers up to this size are kept between frames.
_SCRATCH_RETAIN = 4 * 1024 * 1024 + 64

# Counters run 0 .. 2**64 - 1; the next frame would reuse a nonce.
COUNTER_LIMIT = 2**64

_MESH_ID_TAG = b"gleam mesh id v1"
_TRANSCRIPT_TAG = b"gleam v1 transcript"
_AUTH_INFO = b"gleam v1 auth"
_SESSION_INFO = b"gleam v1 session"
_EXPORTER_INFO = b"gleam v1 exporter"
_LENGTH = struct.Struct(">I")
_GCM_NONCE = struct.Struct(">4xQ")  # 4 zero bytes | u64 counter


class Role(enum.Enum):
    """Which end of the TCP connection: INITIATOR dialled, RESPONDER accepted."""

    INITIATOR = "initiator"
    RESPONDER = "responder"

    @property
    def other(self) -> Role:
        return Role.RESPONDER if self is Role.INITIATOR else Role.INITIATOR


# Equal length, different bytes: a MAC made for one role never verifies for the other.
_ROLE_TAG = {
    Role.INITIATOR: b"gleam v1 auth initiator",
    Role.RESPONDER: b"gleam v1 auth responder",
}


def mesh_id(mesh_key: bytes) -> str:
    """Public name of a mesh: 16 hex chars of a hash of the key (reveals nothing of it)."""
    return hashlib.sha256(_MESH_ID_TAG + mesh_key).hexdigest()[:16]


def transcript_hash(initiator_hello: bytes, responder_hello: bytes) -> bytes:
    """SHA-256 over both hello frame bodies exactly as sent, initiator's first."""
    digest = hashlib.sha256(_TRANSCRIPT_TAG)
    for body in (initiator_hello, responder_hello):
        digest.update(_LENGTH.pack(len(body)))
        digest.update(body)
    return digest.digest()


def _hkdf(mesh_key: bytes, *, salt: bytes | None, info: bytes, length: int) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(mesh_key)


def auth_key(mesh_key: bytes) -> bytes:
    """The key that handshake MACs are made with (never the mesh key itself)."""
    return _hkdf(mesh_key, salt=None, info=_AUTH_INFO, length=KEY_SIZE)


def auth_mac(key: bytes, role: Role, transcript: bytes) -> bytes:
    """The Auth MAC that ``role`` sends for this transcript."""
    return hmac.new(key, _ROLE_TAG[role] + transcript, hashlib.sha256).digest()


def verify_auth_mac(key: bytes, role: Role, transcript: bytes, mac: bytes) -> bool:
    """Whether ``mac`` is the Auth MAC ``role`` should have sent (constant time)."""
    return hmac.compare_digest(auth_mac(key, role, transcript), mac)


@dataclass(frozen=True, repr=False)
class SessionKeys:
    """One AES-256-GCM key per direction."""

    initiator_to_responder: bytes
    responder_to_initiator: bytes

    def sending(self, role: Role) -> bytes:
        if role is Role.INITIATOR:
            return self.initiator_to_responder
        return self.responder_to_initiator

    def receiving(self, role: Role) -> bytes:
        return self.sending(role.other)


def session_keys(
    mesh_key: bytes, initiator_nonce: bytes, responder_nonce: bytes, transcript: bytes
) -> SessionKeys:
    """Fresh per-connection keys: both nonces salt the HKDF, the transcript binds them."""
    okm = _hkdf(
        mesh_key,
        salt=initiator_nonce + responder_nonce,
        info=_SESSION_INFO + transcript,
        length=2 * KEY_SIZE,
    )
    return SessionKeys(okm[:KEY_SIZE], okm[KEY_SIZE:])


def exporter_secret(
    mesh_key: bytes, initiator_nonce: bytes, responder_nonce: bytes, transcript: bytes
) -> bytes:
    """A secret both ends of one authenticated link share, from which other
    channels between the same two agents (a session's data connection) derive
    their keys; never used to seal anything itself."""
    return _hkdf(mesh_key, salt=initiator_nonce + responder_nonce,
                 info=_EXPORTER_INFO + transcript, length=KEY_SIZE)


def gcm_nonce(counter: int) -> bytes:
    """The implicit AES-GCM nonce of the ``counter``-th frame of a direction."""
    return _GCM_NONCE.pack(counter)


class _Scratch:
    """A reused work buffer for sealing and opening.

    Fresh megabyte-sized objects per frame cost page faults that outweigh the
    cipher; reusing one buffer per direction leaves a single fresh object per
    frame (the one handed to the caller).
    """

    def __init__(self) -> None:
        self._buf = bytearray()

    def view(self, size: int) -> memoryview:
        if size > _SCRATCH_RETAIN:
            return memoryview(bytearray(size))
        if len(self._buf) < size:
            self._buf = bytearray(max(size, min(2 * len(self._buf), _SCRATCH_RETAIN)))
        return memoryview(self._buf)[:size]


def _as_bytes_view(body: bytes | bytearray | memoryview) -> memoryview:
    view = memoryview(body)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


class FrameSealer:
    """Seals outgoing frames of one direction: ``u32 length | kind | AES-GCM(body)``.

    The length header and the kind byte are the associated data, so both are
    authenticated without being encrypted; keeping the kind out of the
    plaintext lets a payload be encrypted straight from the caller's buffer.
    The nonce is the frame's position in the direction, so it is never sent
    and never repeats.
    """

    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)
        self._frame = _Scratch()
        self.counter = 0

    def _next_nonce(self) -> bytes:
        if self.counter >= COUNTER_LIMIT:
            raise LocalProtocolError(
                "this connection has sent 2**64 frames and cannot seal another "
                "without reusing a nonce; reconnect"
            )
        nonce = gcm_nonce(self.counter)
        self.counter += 1
        return nonce

    def seal(self, kind: int, body: bytes | bytearray | memoryview) -> bytes:
        """The complete wire frame for ``kind`` and ``body``, as a new object."""
        with _as_bytes_view(body) as data:
            aad = frame_header(1 + data.nbytes + TAG_SIZE) + bytes((kind,))
            return aad + self._aead.encrypt(self._next_nonce(), data, aad)

    def seal_reusing(self, kind: int, body: bytes | bytearray | memoryview) -> memoryview:
        """Like ``seal``, written into this sealer's work buffer.

        The bulk path: no allocation and no copy besides the cipher's own
        pass. The view is valid until the next ``seal_reusing`` call, so the
        caller must have written it out before sealing the next frame.
        """
        with _as_bytes_view(body) as data:
            size = data.nbytes
            out = self._frame.view(HEADER_SIZE + 1 + size + TAG_SIZE)
            aad = frame_header(1 + size + TAG_SIZE) + bytes((kind,))
            out[: len(aad)] = aad
            self._aead.encrypt_into(self._next_nonce(), data, aad, out[len(aad) :])
            return out


class FrameOpener:
    """Opens incoming sealed frame bodies of one direction, strictly in order."""

    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)
        self.counter = 0

    def open(self, sealed: bytes | memoryview) -> tuple[int, bytes]:
        """``(kind, body)`` of one sealed frame body; raises ProtocolError if it fails."""
        if len(sealed) < 1 + TAG_SIZE:
            raise ProtocolError(
                f"sealed frame of {len(sealed)} bytes is too short to hold a kind and a tag",
                code=ErrorCode.FRAME_REJECTED,
            )
        if self.counter >= COUNTER_LIMIT:
            raise ProtocolError(
                "peer sent more than 2**64 frames; the nonce space is spent",
                code=ErrorCode.FRAME_REJECTED,
            )
        kind = sealed[0]
        aad = frame_header(len(sealed)) + bytes((kind,))
        try:
            # decrypt() allocates the result once; decrypting into a work
            # buffer would need a second copy to hand the body out.
            body = self._aead.decrypt(gcm_nonce(self.counter), sealed[1:], aad)
        except InvalidTag:
            raise ProtocolError(
                "frame failed authentication (tampered or replayed)",
                code=ErrorCode.FRAME_REJECTED,
            ) from None
        self.counter += 1
        return kind, body
