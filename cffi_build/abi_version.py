"""The native core's ABI number: the first 28 bits of the SHA-256 of its cdef text.

The cdef is generated from the headers (cdef.py); build_native.py compiles the
number into the module, and gleam.peer.native_abi carries the number the Python
side was written against (tests/test_packaging.py keeps the two equal).
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

HERE = Path(__file__).resolve().parent


def checkout_cdef() -> str:
    """The cdef text generated from this checkout's headers."""
    # Loaded by path: gleam.peer.native_abi imports this file from a checkout,
    # where cffi_build is not on sys.path.
    spec = importlib.util.spec_from_file_location("gleam_cffi_build_cdef", HERE / "cdef.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text: str = module.cdef_text()
    return text


def abi_version(cdef: str | None = None) -> int:
    """The ABI number of cdef text (default: this checkout's generated cdef)."""
    text = checkout_cdef() if cdef is None else cdef
    return int(hashlib.sha256(text.encode()).hexdigest()[:7], 16)
