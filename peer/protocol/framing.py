"""Length-prefixed frames: ``u32 big-endian length | body``.

The length counts the body only. The peer protocol and the local control
socket both use these frames; the peer protocol gives each body a kind byte
(``FrameKind``) and, once authenticated, seals it.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from typing import TypeVar

from gleam.peer.protocol.errors import FrameTooLarge

DEFAULT_MAX_FRAME = 16 * 1024 * 1024
HEADER_SIZE = 4
MAX_FRAME_LIMIT = 0xFFFF_FFFF

_HEADER = struct.Struct(">I")
T = TypeVar("T")

# An emptied receive buffer keeps up to this much storage for the next frames.
_RETAIN = 4 * 1024 * 1024


class FrameKind(enum.IntEnum):
    """First byte of a peer-protocol frame body (inside the ciphertext once sealed)."""

    # Plaintext, handshake only.
    HELLO = 0x01
    AUTH = 0x02
    ERROR = 0x03
    # Sealed, after authentication.
    CONTROL = 0x10
    BATCH = 0x11
    BULK = 0x12  # reserved for bulk payload frames; refused for now


def frame_header(length: int) -> bytes:
    """The 4-byte header announcing a body of ``length`` bytes."""
    if not 0 <= length <= MAX_FRAME_LIMIT:
        raise ValueError(f"a frame body must be 0..{MAX_FRAME_LIMIT} bytes, not {length}")
    return _HEADER.pack(length)


def frame(body: bytes | memoryview) -> bytes:
    """Prefix ``body`` with its length."""
    size = body.nbytes if isinstance(body, memoryview) else len(body)
    return frame_header(size) + body


class FrameBuffer:
    """Collects received bytes and cuts them into frame bodies.

    Bytes land in one bytearray between a read offset and a write offset.
    The storage is reused from frame to frame (allocating and touching fresh
    megabytes per frame costs more than the copy itself); the unread tail is
    moved to the front only when the end is reached, so each byte is copied
    a bounded number of times however the stream is chunked.
    """

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        if not 0 < max_frame <= MAX_FRAME_LIMIT:
            raise ValueError(f"max_frame must be 1..{MAX_FRAME_LIMIT}, not {max_frame}")
        self.max_frame = max_frame
        self._buf = bytearray()
        self._start = 0  # first unread byte
        self._end = 0  # one past the last received byte

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes."""
        size = data.nbytes if isinstance(data, memoryview) else len(data)
        if self._end + size > len(self._buf):
            self._make_room(size)
        self._buf[self._end : self._end + size] = data
        self._end += size

    def writable(self, size: int) -> memoryview:
        """A view of ``size`` free bytes after the received ones, to read into.

        Lets a socket read land where the frames are parsed, saving a copy of
        every byte. Call ``commit`` with the count actually written before
        anything else touches this buffer.
        """
        if size <= 0:
            raise ValueError("writable() needs a positive size")
        if self._end + size > len(self._buf):
            self._make_room(size)
        return memoryview(self._buf)[self._end : self._end + size]

    def commit(self, size: int) -> None:
        """Count ``size`` bytes written into the last ``writable`` view as received."""
        if not 0 <= size <= len(self._buf) - self._end:
            raise ValueError(f"commit({size}) exceeds the space handed out")
        self._end += size

    def pending(self) -> int:
        """Bytes received but not yet returned as frames (a partial frame, or whole ones)."""
        return self._end - self._start

    def next_frame(self) -> bytes | None:
        """The next complete frame body, or None until more bytes arrive.

        Raises FrameTooLarge as soon as a header announces more than
        ``max_frame`` bytes, before the body is buffered.
        """
        return self.next_frame_with(bytes)

    def next_frame_with(self, use: Callable[[memoryview], T]) -> T | None:
        """Like ``next_frame``, but hands ``use`` a view of the body instead of a copy.

        The view is valid only during the call. The frame counts as consumed
        even if ``use`` raises.
        """
        if self._end - self._start < HEADER_SIZE:
            return None
        (length,) = _HEADER.unpack_from(self._buf, self._start)
        if length > self.max_frame:
            raise FrameTooLarge(
                f"peer announced a frame of {length} bytes; this side accepts at most "
                f"{self.max_frame}"
            )
        begin = self._start + HEADER_SIZE
        end = begin + length
        if end > self._end:
            return None
        self._start = end
        try:
            with memoryview(self._buf) as whole, whole[begin:end] as body:
                return use(body)
        finally:
            if self._start == self._end:
                self._start = self._end = 0
                if len(self._buf) > _RETAIN:
                    self._buf = bytearray()

    def _make_room(self, size: int) -> None:
        pending = self._end - self._start
        if pending + size <= len(self._buf):
            # Slide the unread tail to the front (memoryview copies are overlap-safe).
            with memoryview(self._buf) as view:
                view[:pending] = view[self._start : self._end]
        else:
            grown = bytearray(max(pending + size, 2 * len(self._buf)))
            grown[:pending] = memoryview(self._buf)[self._start : self._end]
            self._buf = grown
        self._start, self._end = 0, pending
