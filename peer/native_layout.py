"""Wire headers that C and Python both read, laid out once: in C.

A header both sides parse is a struct in a header's cdef region (gl_session.h);
Python builds its little-endian ``struct.Struct`` from the struct's fields, so a
field added, moved or widened in C cannot leave Python reading other bytes.
"""

from __future__ import annotations

import struct
from typing import Any

from gleam.peer.nativelib import ffi as _native_ffi

# The fixed-width integer types a wire header may hold, by struct format code.
_CODES = {
    "int8_t": "b", "uint8_t": "B", "int16_t": "h", "uint16_t": "H",
    "int32_t": "i", "uint32_t": "I", "int64_t": "q", "uint64_t": "Q",
}


class LayoutError(TypeError):
    """A C struct that is not a plain wire header (padding, or a field of no fixed width)."""


def wire_struct(ctype: str, ffi: Any = _native_ffi) -> struct.Struct:
    """The little-endian ``struct.Struct`` of the C struct ``ctype`` (as ``ffi``,
    by default the native core's, declares it): one code per integer field,
    ``NQ`` for an array of N; refused if the C struct has padding, which the
    wire does not."""
    codes = ["<"]
    at = 0
    for name, field in ffi.typeof(ctype).fields:
        kind, count = field.type, 1
        if kind.kind == "array":
            kind, count = kind.item, kind.length
        code = _CODES.get(kind.cname)
        if code is None:
            raise LayoutError(f"{ctype}.{name}: {kind.cname} is not a fixed-width integer")
        if field.offset != at:
            raise LayoutError(f"{ctype}.{name}: padding before it (at {field.offset}, not {at})")
        codes.append(f"{count}{code}" if count > 1 else code)
        at += ffi.sizeof(field.type)
    if at != ffi.sizeof(ctype):
        raise LayoutError(f"{ctype}: padding at its end ({ffi.sizeof(ctype)} bytes, fields {at})")
    return struct.Struct("".join(codes))
