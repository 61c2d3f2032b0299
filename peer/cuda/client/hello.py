"""The HELLO body the local agent sends the interposer once a session is open.

The layout is ``gl_session_hello`` of ``cffi_build/include/gl_session.h``,
packed here with ``struct`` (little-endian, C's natural alignment spelled
out) so that the agent does not depend on the native module declaring the
struct; ``check_layout`` compares the two when the native module does.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

MAGIC = 0x4F4C4847  # "GHLO"
VERSION = 2
MAX_DEVICES = 8
ATTR_SLOTS = 256
NAME_LEN = 256
SERVER_LEN = 64
BACKEND_LEN = 16
LINE_LEN = 512

# magic, version, session, va_base, va_size, driver_version, device_count, server, backend,
# line (632 bytes: the devices start 8-aligned)
_HEAD = struct.Struct(f"<IIQQQii{SERVER_LEN}s{BACKEND_LEN}s{LINE_LEN}s")
# name, total_mem (offset 256, already 8-aligned), uuid, attrs: 1304 bytes, a multiple of 8
_DEVICE = struct.Struct(f"<{NAME_LEN}sQ16s{ATTR_SLOTS}i")
SIZE = _HEAD.size + MAX_DEVICES * _DEVICE.size
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1


@dataclass(frozen=True)
class HelloDevice:
    name: str
    total_mem: int
    uuid: bytes
    attrs: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Hello:
    session: int
    va_base: int
    va_size: int
    driver_version: int
    server: str
    backend: str
    devices: Sequence[HelloDevice]
    # Where the session runs and why, in words: what the interposer prints under
    # `gleam-peer run` (cuda/client/runs.py writes it).
    line: str = ""


def _text(value: str, size: int) -> bytes:
    # Leave room for the NUL the C side relies on; cut at a character boundary.
    raw = value.encode("utf-8")[: size - 1]
    return raw.decode("utf-8", "ignore").encode("utf-8")


def _clamp(value: int) -> int:
    return max(_I32_MIN, min(_I32_MAX, int(value)))


def pack_hello(hello: Hello) -> bytes:
    """The HELLO body (SIZE bytes). Devices beyond MAX_DEVICES are not offered."""
    devices = list(hello.devices)[:MAX_DEVICES]
    out = bytearray(SIZE)
    _HEAD.pack_into(
        out, 0, MAGIC, VERSION, hello.session, hello.va_base, hello.va_size,
        _clamp(hello.driver_version), len(devices), _text(hello.server, SERVER_LEN),
        _text(hello.backend, BACKEND_LEN), _text(hello.line, LINE_LEN),
    )
    for index, dev in enumerate(devices):
        attrs = [0] * ATTR_SLOTS
        for number, value in dev.attrs.items():
            if 0 <= number < ATTR_SLOTS:
                attrs[number] = _clamp(value)
        _DEVICE.pack_into(
            out, _HEAD.size + index * _DEVICE.size, _text(dev.name, NAME_LEN),
            dev.total_mem, bytes(dev.uuid[:16]).ljust(16, b"\0"), *attrs,
        )
    return bytes(out)


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def unpack_hello(body: bytes | bytearray | memoryview) -> Hello:
    """Read a HELLO body (what the interposer does in C; for tests and tools)."""
    if len(body) != SIZE:
        raise ValueError(f"a HELLO body is {SIZE} bytes, not {len(body)}")
    magic, version, session, va_base, va_size, driver, count, server, backend, line = (
        _HEAD.unpack_from(body, 0)
    )
    if magic != MAGIC or version != VERSION:
        raise ValueError("not a gleam session hello (magic or version)")
    if not 0 <= count <= MAX_DEVICES:
        raise ValueError(f"device_count {count} out of range")
    devices = []
    for index in range(count):
        name, total, uuid, *attrs = _DEVICE.unpack_from(body, _HEAD.size + index * _DEVICE.size)
        devices.append(HelloDevice(
            _cstr(name), total, uuid, {n: v for n, v in enumerate(attrs) if v}
        ))
    return Hello(session, va_base, va_size, driver, _cstr(server), _cstr(backend), devices,
                 _cstr(line))


def check_layout() -> None:
    """Raise if the native module declares gl_session_hello with another size."""
    from gleam.peer.nativelib import ffi

    try:
        native = ffi.sizeof("gl_session_hello")
    except Exception:  # not declared in the native cdef: nothing to compare
        return
    if native != SIZE:
        raise RuntimeError(f"gl_session_hello is {native} bytes natively, {SIZE} here")
