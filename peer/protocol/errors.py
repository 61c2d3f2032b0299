"""Errors raised by the sans-I/O peer protocol.

Every failure caused by bytes from the network is a ``ProtocolError``; the
transport catches that one class, logs ``reason``, flushes ``data_to_send()``
and closes the socket. ``code`` is a short stable word that tools can match on
(it also travels in the ``ErrorMessage`` a peer may be sent).
"""

from __future__ import annotations

import enum


class ErrorCode(enum.StrEnum):
    """Machine-readable reasons a connection failed."""

    VERSION_MISMATCH = "version-mismatch"
    MESH_MISMATCH = "mesh-mismatch"
    SELF_CONNECTION = "self-connection"
    AUTH_FAILED = "auth-failed"
    FRAME_REJECTED = "frame-rejected"
    FRAME_TOO_LARGE = "frame-too-large"
    MALFORMED = "malformed"
    UNEXPECTED_FRAME = "unexpected-frame"
    PEER_REFUSED = "peer-refused"
    CLOSED = "closed"
    LOCAL = "local"


class ProtocolError(Exception):
    """The connection cannot go on; ``reason`` says why in words for a person."""

    def __init__(self, reason: str, *, code: str = ErrorCode.UNEXPECTED_FRAME) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = str(code)


class FrameTooLarge(ProtocolError):
    """A frame header announced more bytes than this side accepts."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, code=ErrorCode.FRAME_TOO_LARGE)


class MalformedMessage(ProtocolError):
    """A frame body is not a well-formed message (bad CBOR, wrong fields, bad sizes)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, code=ErrorCode.MALFORMED)


class PeerRefused(ProtocolError):
    """The peer sent a plaintext error during the handshake and will close."""

    def __init__(self, reason: str, *, peer_code: str) -> None:
        super().__init__(reason, code=ErrorCode.PEER_REFUSED)
        self.peer_code = peer_code


class LocalProtocolError(ProtocolError):
    """This side used the connection wrongly (a bug in the caller, not the peer)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, code=ErrorCode.LOCAL)
