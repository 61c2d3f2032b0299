"""Sans-I/O peer protocol: framing, control messages, handshake and the connection state machine.

Nothing here touches a socket or a clock; the Trio transport feeds bytes in
and sends the bytes that come out. See docs/protocol.md.
"""

from gleam.peer.protocol.connection import (
    NEED_DATA,
    Connection,
    ConnectionClosed,
    ConnState,
    DataBatch,
    Event,
    LocalIdentity,
    NeedData,
    PeerAuthenticated,
)
from gleam.peer.protocol.errors import (
    ErrorCode,
    FrameTooLarge,
    LocalProtocolError,
    MalformedMessage,
    PeerRefused,
    ProtocolError,
)
from gleam.peer.protocol.framing import DEFAULT_MAX_FRAME, FrameBuffer, FrameKind, frame
from gleam.peer.protocol.handshake import PROTOCOL_VERSION, Role, mesh_id
from gleam.peer.protocol.messages import (
    Auth,
    ErrorMessage,
    Goodbye,
    Hello,
    Message,
    Ping,
    Pong,
    decode_cbor,
    decode_message,
    encode_message,
    register_message,
    registered_messages,
)

__all__ = [
    "DEFAULT_MAX_FRAME",
    "NEED_DATA",
    "PROTOCOL_VERSION",
    "Auth",
    "ConnState",
    "Connection",
    "ConnectionClosed",
    "DataBatch",
    "ErrorCode",
    "ErrorMessage",
    "Event",
    "FrameBuffer",
    "FrameKind",
    "FrameTooLarge",
    "Goodbye",
    "Hello",
    "LocalIdentity",
    "LocalProtocolError",
    "MalformedMessage",
    "Message",
    "NeedData",
    "PeerAuthenticated",
    "PeerRefused",
    "Ping",
    "Pong",
    "ProtocolError",
    "Role",
    "decode_cbor",
    "decode_message",
    "encode_message",
    "frame",
    "mesh_id",
    "register_message",
    "registered_messages",
]
