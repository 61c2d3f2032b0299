"""A reference sealer for the data connection's frames, written from the
format in docs/data-connection.md with Python's ``cryptography``: tests use it
to prove the C stream speaks exactly that format, and to forge, replay and
mangle frames."""

from __future__ import annotations

import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM


def nonce(direction: int, seq: int) -> bytes:
    return struct.pack("<IQ", direction, seq)


def seal(key: bytes, direction: int, seq: int, plaintext: bytes) -> bytes:
    header = struct.pack("<I", len(plaintext))
    return header + AESGCM(key).encrypt(nonce(direction, seq), plaintext, header)


def split(wire: bytes) -> list[bytes]:
    """The frames (header, ciphertext, tag) of well-formed wire bytes."""
    frames = []
    while wire:
        (n,) = struct.unpack_from("<I", wire)
        frames.append(wire[: 4 + n + 16])
        wire = wire[4 + n + 16 :]
    return frames


def open_frame(key: bytes, direction: int, seq: int, frame: bytes) -> bytes:
    return AESGCM(key).decrypt(nonce(direction, seq), frame[4:], frame[:4])


def model_receive(
    key: bytes, direction: int, wire: bytes, max_frame: int
) -> tuple[list[bytes], str]:
    """What a receiver must make of ``wire`` per the doc: the frames that open,
    then how it stops ("end", "too_big", "truncated" or "auth"), checking in
    the doc's order (the length before the body, the tag last)."""
    frames: list[bytes] = []
    pos = 0
    while True:
        if pos == len(wire):
            return frames, "end"
        if len(wire) - pos < 4:
            return frames, "truncated"
        (n,) = struct.unpack_from("<I", wire, pos)
        if not 1 <= n <= max_frame:
            return frames, "too_big"
        if len(wire) - pos < 4 + n + 16:
            return frames, "truncated"
        try:
            frames.append(open_frame(key, direction, len(frames), wire[pos : pos + 4 + n + 16]))
        except InvalidTag:
            return frames, "auth"
        pos += 4 + n + 16
