"""Join codes: the mesh key as text a person can copy between machines.

``gleam1-`` followed by the base32 of key + a 4-byte checksum, in groups of
eight. The checksum catches a mistyped or truncated code before it replaces a
working key.
"""

from __future__ import annotations

import base64
import hashlib

PREFIX = "gleam1-"
_CHECK = 4


class JoinCodeError(ValueError):
    pass


def _checksum(key: bytes) -> bytes:
    return hashlib.sha256(b"gleam join code" + key).digest()[:_CHECK]


def encode_join_code(key: bytes) -> str:
    text = base64.b32encode(key + _checksum(key)).decode().rstrip("=").lower()
    return PREFIX + "-".join(text[i : i + 8] for i in range(0, len(text), 8))


def decode_join_code(code: str) -> bytes:
    """Return the key inside ``code``; raise JoinCodeError with the reason."""
    code = code.strip().lower()
    if not code.startswith(PREFIX):
        raise JoinCodeError(
            f"a join code starts with {PREFIX!r}; get one with `gleam-peer mesh show`"
        )
    body = code[len(PREFIX) :].replace("-", "").replace(" ", "").upper()
    body += "=" * (-len(body) % 8)
    try:
        raw = base64.b32decode(body)
    except ValueError as exc:
        raise JoinCodeError("the join code contains characters that are not base32") from exc
    key, check = raw[:-_CHECK], raw[-_CHECK:]
    if len(key) != 32 or _checksum(key) != check:
        raise JoinCodeError("the join code is damaged (checksum mismatch); copy it again")
    return key
