"""A session's data connection: the native sealed stream (docs/data-connection.md).

Frames are sealed and opened in C (``cffi_build/src/wire/dpstream.c``) with the GIL
released, so a thread blocked in ``recv`` or pushing a megabyte through
``send`` does not hold up the rest of the agent. The stream borrows the socket's
file descriptor: keep the socket open until ``close`` and close it afterwards.

Threads: any number may ``send`` (whole frames never interleave); one thread
receives; ``shutdown`` from any thread wakes both. ``close`` only once no other
thread is inside the stream. After any error the stream is dead and every call
raises the same ``StreamError``.
"""

from __future__ import annotations

import errno as errno_mod
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gleam.peer.nativelib import ffi, lib

Buffer = bytes | bytearray | memoryview

KEY_SIZE: int = lib.GL_STREAM_KEY_SIZE
TAG_SIZE: int = lib.GL_STREAM_TAG_SIZE
HEADER_SIZE: int = lib.GL_STREAM_HEADER_SIZE
TO_SERVER: int = lib.GL_DIR_TO_SERVER
TO_CLIENT: int = lib.GL_DIR_TO_CLIENT

E_IO: int = lib.GL_STREAM_E_IO
E_TRUNCATED: int = lib.GL_STREAM_E_TRUNCATED
E_TOO_BIG: int = lib.GL_STREAM_E_TOO_BIG
E_AUTH: int = lib.GL_STREAM_E_AUTH
E_CRYPTO: int = lib.GL_STREAM_E_CRYPTO
E_CLOSED: int = lib.GL_STREAM_E_CLOSED
E_NOMEM: int = lib.GL_STREAM_E_NOMEM


class StreamError(OSError):
    """A data connection failure; ``code`` is one of the ``E_*`` numbers."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class StreamCounters:
    frames_sent: int
    bytes_sent: int
    frames_received: int
    bytes_received: int


def crypto_status() -> str | None:
    """None when libcrypto's AES-256-GCM is usable, else why not."""
    why = lib.gl_crypto_status()
    return None if why == ffi.NULL else ffi.string(why).decode()


def error_text(code: int) -> str:
    """The native core's one-line description of a ``GL_STREAM_E_*`` code."""
    return str(ffi.string(lib.gl_stream_strerror(code)).decode())


class SealedStream:
    """One sealed, framed byte stream over a connected, blocking socket ``fd``.

    ``send_dir``/``recv_dir`` are ``TO_SERVER`` and ``TO_CLIENT``, one each (the
    client sends ``TO_SERVER``); each key is 32 bytes and seals one direction.
    """

    def __init__(
        self,
        fd: int,
        send_key: bytes,
        send_dir: int,
        recv_key: bytes,
        recv_dir: int,
        max_frame: int,
    ) -> None:
        if len(send_key) != KEY_SIZE or len(recv_key) != KEY_SIZE:
            raise ValueError(f"stream keys are {KEY_SIZE} bytes")
        err = ffi.new("char[160]")
        s = lib.gl_stream_new(
            fd, send_key, send_dir, recv_key, recv_dir, max_frame, err, len(err)
        )
        if s == ffi.NULL:
            raise ValueError(f"cannot start the data connection: {ffi.string(err).decode()}")
        self._s: Any = s
        self._out = ffi.new("uint8_t **")
        self.max_frame = max_frame

    @classmethod
    def local_pair(cls, max_frame: int, max_queued: int) -> tuple[SealedStream, SealedStream]:
        """The two ends of a stream inside this process (``gl_stream_pair``): the
        same calls, over two bounded queues, unsealed (nothing leaves the process)."""
        a, b = ffi.new("gl_stream **"), ffi.new("gl_stream **")
        rc = lib.gl_stream_pair(max_frame, max_queued, a, b)
        if rc != 0:
            raise ValueError(f"cannot make a local stream pair: {error_text(rc)}")
        return cls._wrap(a[0], max_frame), cls._wrap(b[0], max_frame)

    @classmethod
    def _wrap(cls, native: Any, max_frame: int) -> SealedStream:
        end = cls.__new__(cls)
        end._s = native
        end._out = ffi.new("uint8_t **")
        end.max_frame = max_frame
        return end

    @property
    def native(self) -> Any:
        """The ``gl_stream *`` (for the session's native lanes; NULL once closed)."""
        return self._s if self._s is not None else ffi.NULL

    def error(self, code: int) -> StreamError:
        """The StreamError of a ``GL_STREAM_E_*`` code a native lane returned."""
        return self._raise(code)

    def _raise(self, code: int) -> StreamError:
        text = error_text(code)
        if code == E_IO:
            e = lib.gl_stream_errno(self._s)
            text = f"{text}: {os.strerror(e)} ({errno_mod.errorcode.get(e, e)})"
        return StreamError(code, text)

    def _live(self) -> Any:
        if self._s is None:
            raise StreamError(E_CLOSED, "the data connection was closed")
        return self._s

    def send(self, buf: Buffer) -> None:
        """Seals and writes one frame of 1 .. max_frame bytes; ``buf`` is not changed."""
        src = ffi.from_buffer("uint8_t[]", buf)
        rc = lib.gl_stream_send(self._live(), src, len(src))
        if rc != 0:
            raise self._raise(rc)

    def sendv(self, parts: Sequence[Buffer]) -> None:
        """Sends the concatenation of ``parts`` as one frame, without joining them."""
        srcs = [ffi.from_buffer("uint8_t[]", p) for p in parts]
        ptrs = ffi.new("uint8_t *[]", srcs)
        lens = ffi.new("size_t[]", [len(p) for p in srcs])
        rc = lib.gl_stream_sendv(self._live(), ptrs, lens, len(srcs))
        if rc != 0:
            raise self._raise(rc)

    def recv_view(self) -> memoryview | None:
        """The next frame's plaintext as a view into the stream's buffer, valid
        until the next ``recv``/``recv_view``/``close``; None at a clean end of stream."""
        n = lib.gl_stream_recv(self._live(), self._out)
        if n < 0:
            raise self._raise(int(n))
        if n == 0:
            return None
        return memoryview(ffi.buffer(self._out[0], n))

    def recv(self) -> bytes | None:
        """The next frame's plaintext (a copy); None at a clean end of stream."""
        view = self.recv_view()
        return None if view is None else bytes(view)

    def shutdown(self) -> None:
        """Wakes a blocked send or recv; later calls raise ``E_CLOSED``. Any thread."""
        if self._s is not None:
            lib.gl_stream_shutdown(self._s)

    def counters(self) -> StreamCounters:
        c = ffi.new("gl_stream_counters *")
        lib.gl_stream_counters_get(self._live(), c)
        return StreamCounters(
            c.frames_sent, c.bytes_sent, c.frames_received, c.bytes_received
        )

    def close(self) -> None:
        """Frees the stream (not the socket). Idempotent."""
        s, self._s = self._s, None
        if s is not None:
            lib.gl_stream_free(s)

    def __enter__(self) -> SealedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
