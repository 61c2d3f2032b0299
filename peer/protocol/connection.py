"""One peer connection as a state machine: bytes in, events out, no I/O.

Both sides send a plaintext Hello at once, answer the peer's Hello with a
plaintext Auth (an HMAC over both hellos), and seal every later frame with
per-direction AES-GCM keys. The transport's loop is::

    sock.send(conn.start())
    while True:
        event = conn.next_event()          # may raise ProtocolError
        if event is NEED_DATA:
            sock.send(conn.data_to_send())
            conn.receive_data(sock.recv())  # b"" at EOF
        else:
            handle(event)                  # conn.send(...) / conn.send_batch(...)

On ProtocolError the transport sends ``data_to_send()`` (it may hold an
ErrorMessage for the peer) and closes. See docs/protocol.md.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias

from gleam.peer.protocol import handshake
from gleam.peer.protocol.errors import (
    ErrorCode,
    LocalProtocolError,
    MalformedMessage,
    PeerRefused,
    ProtocolError,
)
from gleam.peer.protocol.framing import DEFAULT_MAX_FRAME, FrameBuffer, FrameKind, frame
from gleam.peer.protocol.handshake import PROTOCOL_VERSION, FrameOpener, FrameSealer, Role
from gleam.peer.protocol.messages import (
    MAX_TEXT,
    NONCE_SIZE,
    Auth,
    ErrorMessage,
    Goodbye,
    Hello,
    Message,
    decode_cbor,
    decode_message,
    encode_message,
    message_from_map,
)

# A peer's hello, with every field at its size limit, fits well within this.
MIN_MAX_FRAME = 16 * 1024
_SEAL_OVERHEAD = 1 + handshake.TAG_SIZE  # kind byte + GCM tag


class ConnState(enum.Enum):
    HANDSHAKE = "handshake"
    ESTABLISHED = "established"
    CLOSED = "closed"


class NeedData(enum.Enum):
    """Type of the NEED_DATA sentinel."""

    NEED_DATA = "NEED_DATA"


NEED_DATA: Final = NeedData.NEED_DATA


@dataclass(frozen=True)
class PeerAuthenticated:
    """The peer proved it holds the mesh key; ``peer`` is its hello."""

    peer: Hello


@dataclass(frozen=True)
class DataBatch:
    """One opaque data-plane buffer from the peer."""

    payload: bytes = field(repr=False)

    def __repr__(self) -> str:
        return f"DataBatch(<{len(self.payload)} bytes>)"


@dataclass(frozen=True)
class ConnectionClosed:
    """The peer closed its side cleanly (after the handshake, at a frame boundary)."""

    reason: str


Event: TypeAlias = (
    Message | PeerAuthenticated | DataBatch | ConnectionClosed | Literal[NeedData.NEED_DATA]
)


@dataclass(frozen=True)
class LocalIdentity:
    """Who this agent is and the mesh key it proves; the same for every connection."""

    node_id: str
    name: str
    mesh_key: bytes = field(repr=False)
    capabilities: tuple[str, ...] = ()
    listen_port: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.mesh_key, bytes) or len(self.mesh_key) < handshake.MIN_MESH_KEY:
            raise ValueError(f"the mesh key must be at least {handshake.MIN_MESH_KEY} bytes")
        self.hello(bytes(NONCE_SIZE))  # the identity must fit in a hello

    def hello(self, nonce: bytes) -> Hello:
        return Hello(
            node_id=self.node_id,
            name=self.name,
            version=PROTOCOL_VERSION,
            capabilities=tuple(self.capabilities),
            nonce=nonce,
            mesh_id=handshake.mesh_id(self.mesh_key),
            listen_port=self.listen_port,
        )


class _Expect(enum.Enum):
    """What the peer must send next."""

    HELLO = "hello"
    AUTH = "auth"
    SEALED = "sealed"


def _shown(text: str, limit: int = 200) -> str:
    """Peer-supplied text made safe for a log line."""
    clean = "".join(c if c.isprintable() else "?" for c in text[:limit])
    return clean + ("..." if len(text) > limit else "")


class Connection:
    """The protocol state of one TCP connection to a peer.

    Not thread-safe as a whole, but its two halves are independent once the
    handshake is done: one thread may drive the receiving half
    (``receive_data``/``receive_buffer``/``receive_commit``/``next_event``)
    while another drives the sending half (``send``/``send_batch``/
    ``data_to_send``). Only the sending half touches the sealing key and its
    nonce counter; an error notice produced by receiving is sealed when the
    sending half next runs.
    """

    def __init__(
        self,
        role: Role,
        identity: LocalIdentity,
        *,
        max_frame: int = DEFAULT_MAX_FRAME,
        random_bytes: Callable[[int], bytes] = os.urandom,
    ) -> None:
        if max_frame < MIN_MAX_FRAME:
            raise ValueError(f"max_frame must be at least {MIN_MAX_FRAME} bytes")
        self.role = role
        self.state = ConnState.HANDSHAKE
        self.peer: Hello | None = None
        self.max_frame = max_frame
        self._identity = identity
        self._random_bytes = random_bytes
        self._mesh_id = handshake.mesh_id(identity.mesh_key)
        self._auth_key = handshake.auth_key(identity.mesh_key)
        self._frames = FrameBuffer(max_frame)
        self._expect = _Expect.HELLO
        self._outgoing = bytearray()
        self._pending_notice: bytes | None = None
        self._our_hello: bytes | None = None  # frame body as sent: kind | CBOR
        self._our_nonce = b""
        self._peer_hello: Hello | None = None
        self._transcript = b""
        # Shared by both ends once the peer is authenticated (handshake.exporter_secret).
        self.exporter = b""
        self._opening_key = b""
        self._sealer: FrameSealer | None = None
        self._opener: FrameOpener | None = None
        self._eof = False
        self._closed: ConnectionClosed | None = None
        self._error: ProtocolError | None = None
        self._tell_peer: str | None = None
        self._goodbye_received: str | None = None
        self._goodbye_sent = False

    @property
    def max_batch_size(self) -> int:
        """The largest payload ``send_batch`` accepts."""
        return self.max_frame - _SEAL_OVERHEAD

    # ---------------------------------------------------------------- sending

    def start(self) -> bytes:
        """Our Hello frame. Call once, first; both roles send it without waiting."""
        if self._our_hello is not None:
            raise LocalProtocolError("start() was already called (or receiving began first)")
        if self.state is ConnState.CLOSED:
            raise LocalProtocolError("the connection is closed")
        nonce = self._random_bytes(NONCE_SIZE)
        if len(nonce) != NONCE_SIZE:
            raise ValueError(f"random_bytes returned {len(nonce)} bytes, not {NONCE_SIZE}")
        self._our_nonce = bytes(nonce)
        self._our_hello = bytes((FrameKind.HELLO,)) + encode_message(
            self._identity.hello(self._our_nonce)
        )
        return frame(self._our_hello)

    def data_to_send(self) -> bytes:
        """Bytes that receiving produced (our Auth, an error for the peer); send them now."""
        self._seal_pending_notice()
        out = bytes(self._outgoing)
        self._outgoing.clear()
        return out

    def _seal_pending_notice(self) -> None:
        # Sealing happens on the sending side only, so a link may receive on
        # one thread and send on another without both touching the nonce
        # counter: a failure found while receiving is sealed when sent.
        if self._pending_notice is not None and self._sealer is not None:
            self._outgoing += self._sealer.seal(FrameKind.CONTROL, self._pending_notice)
            self._pending_notice = None

    def send(self, msg: Message) -> bytes:
        """One sealed control frame (preceded by anything still queued for the peer).

        Allowed once ESTABLISHED. ErrorMessage and Goodbye are also allowed
        during the handshake and after a failure: sealed if our Auth has gone
        out, else (ErrorMessage only) as a plaintext error frame.
        """
        if isinstance(msg, Hello | Auth):
            raise LocalProtocolError("hello and auth are sent by the connection itself")
        if self._goodbye_sent:
            raise LocalProtocolError("nothing may be sent after goodbye")
        farewell = isinstance(msg, ErrorMessage | Goodbye)
        if self.state is not ConnState.ESTABLISHED and not farewell:
            raise LocalProtocolError(
                f"cannot send {msg.type_name!r} while the connection is {self.state.value}"
            )
        body = encode_message(msg)
        if self._sealer is not None:
            data = self._seal(FrameKind.CONTROL, body)
        elif isinstance(msg, ErrorMessage):
            data = frame(bytes((FrameKind.ERROR,)) + body)
        else:
            raise LocalProtocolError("only an error can be sent before our auth")
        self._goodbye_sent = isinstance(msg, Goodbye)
        return bytes(self._flush_with(data))  # a frame is bytes: no copy

    def send_batch(self, payload: bytes | bytearray | memoryview) -> bytes | memoryview:
        """One sealed data-plane frame carrying ``payload`` as opaque bytes.

        The hot path: the frame is usually a view of a reused buffer, valid
        until the next ``send_batch``; write it out before sealing another.
        """
        if self.state is not ConnState.ESTABLISHED or self._goodbye_sent:
            raise LocalProtocolError(
                f"cannot send a data batch while the connection is {self.state.value}"
            )
        self._check_size(payload)
        assert self._sealer is not None
        return self._flush_with(self._sealer.seal_reusing(FrameKind.BATCH, payload))

    def _check_size(self, body: bytes | bytearray | memoryview) -> None:
        size = body.nbytes if isinstance(body, memoryview) else len(body)
        if size + _SEAL_OVERHEAD > self.max_frame:
            raise LocalProtocolError(
                f"a payload of {size} bytes exceeds the frame limit; split it into pieces "
                f"of at most {self.max_batch_size} bytes"
            )

    def _seal(self, kind: FrameKind, body: bytes | bytearray | memoryview) -> bytes:
        assert self._sealer is not None
        self._check_size(body)
        return self._sealer.seal(kind, body)

    def _flush_with(self, data: bytes | memoryview) -> bytes | memoryview:
        # Frames queued by receiving (our Auth) must reach the peer first.
        self._seal_pending_notice()
        if not self._outgoing:
            return data
        out = bytes(self._outgoing) + data
        self._outgoing.clear()
        return out

    # ---------------------------------------------------------------- receiving

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Hand over bytes from the socket; ``b""`` means the peer closed its side."""
        if self._eof:
            if data:
                raise LocalProtocolError("receive_data() called with bytes after EOF")
            return
        if data:
            self._frames.feed(data)
        else:
            self._eof = True

    def receive_buffer(self, size: int) -> memoryview:
        """Space for up to ``size`` bytes to be read straight into; see ``receive_commit``.

        The zero-copy twin of ``receive_data``: ``n = sock.recv_into(view)``
        then ``receive_commit(n)``, where 0 means the peer closed its side.
        """
        if self._eof:
            raise LocalProtocolError("receive_buffer() called after EOF")
        return self._frames.writable(size)

    def receive_commit(self, size: int) -> None:
        """Count ``size`` bytes read into the last ``receive_buffer`` view; 0 is EOF."""
        if size:
            self._frames.commit(size)
        else:
            self._eof = True

    def next_event(self) -> Event:
        """The next event, or NEED_DATA. Raises ProtocolError; the connection is then CLOSED."""
        if self._error is not None:
            raise ProtocolError(self._error.reason, code=self._error.code)
        if self._closed is not None:
            return self._closed
        try:
            return self._next_event()
        except ProtocolError as exc:
            self._fail(exc)
            raise

    def _next_event(self) -> Event:
        event: Event | None
        while True:
            if self._expect is _Expect.SEALED:
                assert self._opener is not None
                # Decrypt straight out of the receive buffer: no copy of the frame.
                opened = self._frames.next_frame_with(self._opener.open)
                if opened is None:
                    return self._on_eof() if self._eof else NEED_DATA
                event = self._on_sealed(*opened)
            else:
                body = self._frames.next_frame()
                if body is None:
                    return self._on_eof() if self._eof else NEED_DATA
                event = self._on_plaintext(body)
            if event is not None:
                return event

    def _on_eof(self) -> Event:
        if self._frames.pending():
            raise ProtocolError(
                f"peer closed the connection in the middle of a frame "
                f"({self._frames.pending()} bytes left over)",
                code=ErrorCode.CLOSED,
            )
        if self.state is ConnState.HANDSHAKE:
            raise ProtocolError(
                "peer closed the connection during the handshake", code=ErrorCode.CLOSED
            )
        if self._goodbye_received is not None:
            reason = f"peer said goodbye: {self._goodbye_received}"
        else:
            reason = "peer closed the connection"
        self.state = ConnState.CLOSED
        self._closed = ConnectionClosed(reason)
        return self._closed

    def _fail(self, exc: ProtocolError) -> None:
        self.state = ConnState.CLOSED
        self._error = exc
        if isinstance(exc, PeerRefused | LocalProtocolError) or exc.code in (
            ErrorCode.CLOSED,
            ErrorCode.AUTH_FAILED,
        ):
            return  # nobody to tell, or nothing they could use
        if self._tell_peer is not None:
            text = self._tell_peer
        elif self._sealer is None:
            text = f"the remote agent rejected the handshake: {exc.reason}"
        else:
            text = f"the remote agent closed the connection: {exc.reason}"
        notice = ErrorMessage(code=exc.code, message=text[:MAX_TEXT])
        if self._sealer is None:
            self._outgoing += frame(bytes((FrameKind.ERROR,)) + encode_message(notice))
        else:
            self._pending_notice = encode_message(notice)

    def _refuse(self, code: ErrorCode, reason: str, tell_peer: str) -> ProtocolError:
        self._tell_peer = tell_peer
        return ProtocolError(reason, code=code)

    # ---------------------------------------------------------------- handshake

    def _on_plaintext(self, body: bytes) -> Event | None:
        if not body:
            raise ProtocolError("empty frame during the handshake")
        handler = _HANDSHAKE_TRANSITIONS.get((self._expect, body[0]))
        if handler is None:
            raise ProtocolError(_unexpected_during_handshake(self._expect, body[0]))
        return handler(self, body)

    def _on_hello(self, body: bytes) -> None:
        raw = decode_cbor(memoryview(body)[1:])
        # Read the version before full validation: a newer peer's hello may not
        # fit this version's rules, and "upgrade" is the useful answer then.
        if isinstance(raw, dict) and raw.get("t") == Hello.type_name:
            version = raw.get("version")
            if type(version) is int and version != PROTOCOL_VERSION:
                raise self._refuse(
                    ErrorCode.VERSION_MISMATCH,
                    f"peer speaks protocol version {version}, this agent speaks {PROTOCOL_VERSION}",
                    f"the remote agent speaks protocol version {PROTOCOL_VERSION}, not "
                    f"{version}; run the same gleam release on both devices",
                )
        hello = message_from_map(raw)
        if not isinstance(hello, Hello):
            raise MalformedMessage(f"a HELLO frame holds a {hello.type_name!r} message")
        if hello.mesh_id != self._mesh_id:
            raise self._refuse(
                ErrorCode.MESH_MISMATCH,
                f"peer belongs to another mesh (mesh id {_shown(hello.mesh_id)}); share the "
                "mesh key with `gleam-peer mesh show` / `mesh import`",
                f"the remote agent belongs to mesh {self._mesh_id}, not {hello.mesh_id}; "
                "share the mesh key with `gleam-peer mesh show` / `mesh import`",
            )
        if hello.node_id == self._identity.node_id:
            raise self._refuse(
                ErrorCode.SELF_CONNECTION,
                f"connected to itself (node id {_shown(hello.node_id)}); this address is this "
                "agent's own listener",
                "connected to itself: both ends have the same node id",
            )
        if self._our_hello is None:
            self._outgoing += self.start()
        assert self._our_hello is not None
        if self.role is Role.INITIATOR:
            transcript = handshake.transcript_hash(self._our_hello, body)
            nonces = (self._our_nonce, hello.nonce)
        else:
            transcript = handshake.transcript_hash(body, self._our_hello)
            nonces = (hello.nonce, self._our_nonce)
        keys = handshake.session_keys(self._identity.mesh_key, *nonces, transcript)
        self.exporter = handshake.exporter_secret(self._identity.mesh_key, *nonces, transcript)
        mac = handshake.auth_mac(self._auth_key, self.role, transcript)
        self._outgoing += frame(bytes((FrameKind.AUTH,)) + encode_message(Auth(mac=mac)))
        # From our Auth on, everything we send is sealed; the peer's frames are
        # opened only once its own Auth has verified.
        self._sealer = FrameSealer(keys.sending(self.role))
        self._opening_key = keys.receiving(self.role)
        self._transcript = transcript
        self._peer_hello = hello
        self._expect = _Expect.AUTH
        return None

    def _on_auth(self, body: bytes) -> Event:
        msg = decode_message(memoryview(body)[1:])
        if not isinstance(msg, Auth):
            raise MalformedMessage(f"an AUTH frame holds a {msg.type_name!r} message")
        if not handshake.verify_auth_mac(
            self._auth_key, self.role.other, self._transcript, msg.mac
        ):
            raise ProtocolError(
                "authentication failed: the peer does not hold this mesh key",
                code=ErrorCode.AUTH_FAILED,
            )
        assert self._peer_hello is not None
        self._opener = FrameOpener(self._opening_key)
        self._opening_key = b""
        self._expect = _Expect.SEALED
        self.state = ConnState.ESTABLISHED
        self.peer = self._peer_hello
        return PeerAuthenticated(self.peer)

    def _on_refusal(self, body: bytes) -> Event:
        msg = decode_message(memoryview(body)[1:])
        if not isinstance(msg, ErrorMessage):
            raise MalformedMessage(f"an ERROR frame holds a {msg.type_name!r} message")
        raise PeerRefused(
            f"peer refused the connection ({_shown(msg.code)}): {_shown(msg.message, 1000)}",
            peer_code=msg.code,
        )

    # ---------------------------------------------------------------- sealed frames

    def _on_sealed(self, kind: int, body: bytes) -> Event:
        if kind == FrameKind.BATCH:
            return DataBatch(body)
        if kind == FrameKind.CONTROL:
            return self._on_control(body)
        if kind == FrameKind.BULK:
            raise ProtocolError("peer sent a bulk frame; this agent does not support them yet")
        raise ProtocolError(f"unknown sealed frame kind 0x{kind:02x}")

    def _on_control(self, body: bytes) -> Event:
        msg = decode_message(body)
        if isinstance(msg, Hello | Auth):
            raise ProtocolError(f"peer sent a {msg.type_name} after authentication")
        if isinstance(msg, Goodbye):
            self._goodbye_received = _shown(msg.reason, 1000)
        return msg


_Handler = Callable[[Connection, bytes], "Event | None"]

# The handshake, as (what we expect next, frame kind received) -> handler.
# Any pair not listed is a protocol error.
_HANDSHAKE_TRANSITIONS: dict[tuple[_Expect, int], _Handler] = {
    (_Expect.HELLO, FrameKind.HELLO): Connection._on_hello,
    (_Expect.HELLO, FrameKind.ERROR): Connection._on_refusal,
    (_Expect.AUTH, FrameKind.AUTH): Connection._on_auth,
    (_Expect.AUTH, FrameKind.ERROR): Connection._on_refusal,
}


def _unexpected_during_handshake(expect: _Expect, kind: int) -> str:
    if expect is _Expect.HELLO and kind == FrameKind.AUTH:
        return "peer sent its auth before its hello"
    if expect is _Expect.AUTH and kind == FrameKind.HELLO:
        return "peer sent a second hello"
    return (
        f"unexpected frame kind 0x{kind:02x} while waiting for the peer's {expect.value} "
        "(a sealed frame before authentication, or not a gleam peer)"
    )
