"""Control messages between agents that open and close forwarded CUDA sessions.

The client's agent picks a 64-bit random session id and sends ``cuda_open``;
the server answers ``cuda_opened`` (the session's address range and device
facts, which become the interposer's HELLO) or ``cuda_refused``. Either side
ends a session with ``cuda_close``. Batches and replies travel as data-plane
frames, not as these messages. Only authenticated links carry messages, so
only mesh members can open sessions.
"""

from __future__ import annotations

import dataclasses

from gleam.peer.protocol import Message, register_message

MAX_PROGRAM = 256
MAX_REASON = 500
MAX_DEVICES = 8
MAX_ATTRS = 256
MAX_NAME = 256
MAX_SUMMARY = 8 * 16384
MAX_WANTED = 64
_U64 = 2**64 - 1


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise ValueError(what)


def _session(value: int) -> None:
    _check(0 < value <= _U64, "session must be a non-zero unsigned 64-bit integer")


@dataclasses.dataclass(frozen=True)
class DeviceRecord:
    """One device as the server's backend reports it.

    ``attrs`` holds (CUdevice_attribute number, value) pairs: CBOR maps on
    the wire must have text keys, and pairs keep the numbers numbers.
    """

    name: str
    total_mem: int
    uuid: bytes
    attrs: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        _check(len(self.name) <= MAX_NAME, "device name too long")
        _check(len(self.uuid) == 16, "device uuid must be 16 bytes")
        _check(len(self.attrs) <= MAX_ATTRS, "too many device attributes")


@register_message("cuda_open")
@dataclasses.dataclass(frozen=True)
class CudaOpen(Message):
    session: int
    program: str
    client: str
    # A session moving here (docs/consistency.md) asks for the range it had:
    # the server reserves exactly that or refuses with the reason. 0, 0: any range.
    va_base: int = 0
    va_size: int = 0

    def __post_init__(self) -> None:
        _session(self.session)
        # Only the types are checked here; whether the range can be had is the
        # backend's answer, given back as cuda_refused.
        _check(0 <= self.va_base <= _U64 and 0 <= self.va_size <= _U64, "bad address range")
        _check(len(self.program) <= MAX_PROGRAM, "program name too long")
        _check(len(self.client) <= 64, "client name too long")


@register_message("cuda_opened")
@dataclasses.dataclass(frozen=True)
class CudaOpened(Message):
    session: int
    va_base: int
    va_size: int
    driver_version: int
    backend: str
    server: str
    devices: tuple[DeviceRecord, ...]
    # The blob cache (docs/cache.md): 8-byte prefixes of the digests the server
    # holds, and the smallest copy and image it stores (0: it caches nothing).
    cache_summary: bytes = b""
    cache_min: int = 0
    cache_image_min: int = 0
    # The session's data connection (docs/data-connection.md): the port the
    # client dials on the server's address and the salt of its keys (0 / empty:
    # the session's envelopes travel on the link).
    data_port: int = 0
    data_salt: bytes = b""

    def __post_init__(self) -> None:
        _session(self.session)
        _check(0 <= self.data_port < 65536, "bad data port")
        _check(len(self.data_salt) in (0, 32), "bad data salt")
        _check(len(self.devices) <= MAX_DEVICES, "too many devices")
        _check(len(self.cache_summary) <= MAX_SUMMARY and len(self.cache_summary) % 8 == 0,
               "bad cache summary")
        _check(len(self.backend) <= 15 and len(self.server) <= 64, "backend or server too long")


@register_message("cuda_refused")
@dataclasses.dataclass(frozen=True)
class CudaRefused(Message):
    session: int
    reason: str

    def __post_init__(self) -> None:
        _session(self.session)
        _check(len(self.reason) <= MAX_REASON, "reason too long")


@register_message("cuda_close")
@dataclasses.dataclass(frozen=True)
class CudaClose(Message):
    session: int
    reason: str

    def __post_init__(self) -> None:
        _session(self.session)
        _check(len(self.reason) <= MAX_REASON, "reason too long")


@register_message("cuda_blob_want")
@dataclasses.dataclass(frozen=True)
class CudaBlobWant(Message):
    """The server missed these references (evicted): the client resends their bytes."""

    session: int
    digests: tuple[bytes, ...]

    def __post_init__(self) -> None:
        _session(self.session)
        _check(0 < len(self.digests) <= MAX_WANTED, "bad number of digests")
        _check(all(len(d) == 32 for d in self.digests), "a digest must be 32 bytes")


def short_reason(text: str) -> str:
    """A reason cut to what the messages carry."""
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."
