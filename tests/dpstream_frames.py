"""A reference sealer for the data connection's frames, written from the
format in docs/data-connection.md with Python's ``cryptography``: tests use it
to prove the C stream speaks exactly that format, and to forge, replay and
mangle frames."""

from __future__ import annotations

import struct

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
