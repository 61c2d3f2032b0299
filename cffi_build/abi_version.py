"""The native core's ABI number: the first 28 bits of the SHA-256 of native.cdef.

build_native.py compiles it into the module; gleam.peer.native_abi carries the
number the Python side was written against (a test keeps the two equal).
"""

from __future__ import annotations

import hashlib
import pathlib

CDEF = pathlib.Path(__file__).resolve().parent / "native.cdef"


def abi_version(cdef: bytes | None = None) -> int:
    data = CDEF.read_bytes() if cdef is None else cdef
    return int(hashlib.sha256(data).hexdigest()[:7], 16)
