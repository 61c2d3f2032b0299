"""A session's data connection: its own TCP connection between the two agents.

The session's envelopes travel on it, sealed and opened by C threads
(``cffi_build/src/wire/dpstream.c``, ``pump.c``, ``serve.c``); the peer link keeps
the control plane. docs/data-connection.md has the format.

Keys: both agents hold the link's exporter secret (from its authenticated
handshake, ``handshake.exporter_secret``). The server picks a fresh 32-byte
salt per session and sends it, with the port, in ``cuda_opened`` over the
sealed link; HKDF over the secret, the salt and the session id gives one key
per direction. Only the two agents of that link can derive them.

Who may connect: the server listens on a port of its own for that one session,
on the link's local address, accepts one connection from the link's peer
address within ``ACCEPT_TIMEOUT``, and the first frame each way is a sealed
hello naming the session: a connection that does not authenticate is closed
before it touches the session.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
from typing import TYPE_CHECKING, Any

import trio
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from gleam.peer.cuda.wire import envelope
from gleam.peer.cuda.wire.stream import SealedStream
from gleam.peer.nativelib import lib

if TYPE_CHECKING:
    from gleam.peer.cuda.wire.messages import CudaOpened
    from gleam.peer.link import PeerLink

ACCEPT_TIMEOUT = 10.0
HELLO_TIMEOUT = 5.0
SALT_SIZE = 32
_INFO = b"gleam v1 data connection"
_CLIENT_HELLO = b"GLDC"
_SERVER_HELLO = b"GLDS"
# A frame carries one envelope: a copy chunk in a batch, with room for headers.
MAX_FRAME = envelope.HEADER_SIZE + envelope.MAX_BODY
# What one direction of a local pair holds before its sender waits (as a
# socket's buffers would make it): a few copy chunks, so copies overlap.
LOCAL_QUEUED = 16 * MAX_FRAME


class DataConnectionError(OSError):
    """The data connection could not be set up or failed; the message says why."""


def data_keys(exporter: bytes, session: int, salt: bytes) -> tuple[bytes, bytes]:
    """(client → server, server → client) keys of one session's data connection."""
    if len(exporter) != 32 or len(salt) != SALT_SIZE:
        raise DataConnectionError("the link has no exporter secret (not authenticated)")
    okm = HKDF(algorithm=hashes.SHA256(), length=64, salt=salt,
               info=_INFO + struct.pack("<Q", session)).derive(exporter)
    return okm[:32], okm[32:]


def _timeout(sock: socket.socket, seconds: float) -> None:
    """A receive timeout on the descriptor itself (the C reader blocks in read())."""
    whole = int(seconds)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                    struct.pack("ll", whole, int((seconds - whole) * 1e6)))


class DataConnection:
    """One session's sealed stream and its socket; closed once no thread uses it."""

    def __init__(self, sock: socket.socket, send_key: bytes, send_dir: int,
                 recv_key: bytes, recv_dir: int) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)  # blocking: the C threads own the waits
        try:
            sealed = SealedStream(sock.fileno(), send_key, send_dir, recv_key, recv_dir,
                                  MAX_FRAME)
        except ValueError as exc:
            raise DataConnectionError(str(exc)) from None
        self._adopt(sealed, sock)

    def _adopt(self, sealed: SealedStream, sock: socket.socket | None) -> None:
        self.sealed = sealed
        self.sock = sock  # None: a local pair's end (no socket under it)
        self._closed = False

    @classmethod
    def _local(cls, sealed: SealedStream) -> DataConnection:
        end = cls.__new__(cls)
        end._adopt(sealed, None)
        return end

    @property
    def stream(self) -> Any:
        """The ``gl_stream *`` the native lanes read and write."""
        return self.sealed.native

    def send(self, buf: bytes | bytearray | memoryview) -> None:
        """Seal and write one envelope (thread-safe); OSError when the connection failed."""
        self.sealed.send(buf)

    def recv(self) -> bytes:
        """The next frame's plaintext (a copy); b"" at a clean end (one thread only)."""
        return self.sealed.recv() or b""

    def describe(self, code: int) -> str:
        """What a ``GL_STREAM_E_*`` code a native lane returned means."""
        return str(self.sealed.error(code)) if not self._closed else "closed"

    def shutdown(self) -> None:
        """Wake the threads blocked on it (any thread)."""
        if not self._closed:
            self.sealed.shutdown()

    def close(self) -> None:
        """Free the stream and close the socket: only once no thread is inside it."""
        if self._closed:
            return
        self._closed = True
        self.sealed.close()
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()


def _hello(session: int, tag: bytes) -> bytes:
    return tag + struct.pack("<Q", session)


def _handshake(conn: DataConnection, session: int, ours: bytes, theirs: bytes,
               first: bool) -> None:
    """Each side's first frame names the session under the keys: proof of both."""
    assert conn.sock is not None  # (a TCP connection's, never a local pair's)
    _timeout(conn.sock, HELLO_TIMEOUT)
    if first:
        conn.send(_hello(session, ours))
    got = conn.recv()
    if got != _hello(session, theirs):
        raise DataConnectionError("the data connection's hello did not match")
    if not first:
        conn.send(_hello(session, ours))
    _timeout(conn.sock, 0)


class DataListener:
    """The server's side before the client connects: one port, one connection."""

    def __init__(self, link: PeerLink, session: int) -> None:
        self.link = link
        self.session = session
        self.salt = os.urandom(SALT_SIZE)
        local = link.io.sock.getsockname()
        family = socket.AF_INET6 if ":" in local[0] else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        self._sock.bind((local[0], 0))
        self._sock.listen(1)
        self.port: int = self._sock.getsockname()[1]

    def accept(self) -> DataConnection:
        """Wait for the client (a worker thread); raises DataConnectionError."""
        to_server, to_client = data_keys(self.link.conn.exporter, self.session, self.salt)
        peer_host = self.link.io.sock.getpeername()[0]
        self._sock.settimeout(ACCEPT_TIMEOUT)
        try:
            while True:
                try:
                    sock, address = self._sock.accept()
                except TimeoutError:
                    raise DataConnectionError(
                        f"the client did not open the data connection within "
                        f"{ACCEPT_TIMEOUT:.0f} s") from None
                if address[0] == peer_host:
                    break
                sock.close()  # not the link's peer: not for this session
        finally:
            self.close()
        conn = DataConnection(sock, to_client, lib.GL_DIR_TO_CLIENT, to_server,
                              lib.GL_DIR_TO_SERVER)
        try:
            _handshake(conn, self.session, _SERVER_HELLO, _CLIENT_HELLO, first=False)
        except OSError:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()


def connect(link: PeerLink, session: int, port: int, salt: bytes) -> DataConnection:
    """The client's side (a worker thread); raises DataConnectionError."""
    to_server, to_client = data_keys(link.conn.exporter, session, salt)
    host = link.io.sock.getpeername()[0]
    try:
        sock = socket.create_connection((host, port), timeout=HELLO_TIMEOUT)
    except OSError as exc:
        raise DataConnectionError(f"cannot reach {host} port {port}: {exc}") from None
    conn = DataConnection(sock, to_server, lib.GL_DIR_TO_SERVER, to_client, lib.GL_DIR_TO_CLIENT)
    try:
        _handshake(conn, session, _CLIENT_HELLO, _SERVER_HELLO, first=True)
    except OSError:
        conn.close()
        raise
    return conn


def local_pair() -> tuple[DataConnection, DataConnection]:
    """(client end, server end) of a data connection inside this agent, for a
    session it serves for its own interposer: the same native lanes as a peer's
    session, over two bounded in-process queues (``gl_stream_pair``): a frame is
    copied once, nothing is sealed (nothing leaves the process), and nobody
    outside the process can reach it."""
    try:
        client, server = SealedStream.local_pair(MAX_FRAME, LOCAL_QUEUED)
    except ValueError as exc:
        raise DataConnectionError(str(exc)) from None
    return DataConnection._local(client), DataConnection._local(server)


async def open_client(link: PeerLink, session: int, answer: CudaOpened) -> DataConnection:
    """The client's data connection to the server that answered ``answer``; raises
    DataConnectionError (a session has no other path for its envelopes)."""
    if not answer.data_port:
        raise DataConnectionError(
            f"{link.name} offered no data connection (an agent of an older gleam?)")
    return await trio.to_thread.run_sync(connect, link, session, answer.data_port,
                                         answer.data_salt)
