"""gleam's native core (``gleam.peer._native``), checked before first use.

Every Python module reaches the native core through this one, so a missing or
stale build is reported once, in one line (see ``gleam.peer.native_abi``).
"""

from __future__ import annotations

from typing import Any

from gleam.peer.native_abi import REBUILD, NativeCoreError, check_abi

__all__ = ["cuda_error", "ffi", "lib"]


def _load() -> tuple[Any, Any]:
    try:
        from gleam.peer._native import ffi, lib
    except ImportError as exc:
        raise NativeCoreError(f"gleam's native core cannot be loaded ({exc}); {REBUILD}") from exc
    check_abi(lib.gl_native_abi_version())
    return ffi, lib


ffi, lib = _load()


def cuda_error(name: str) -> int:
    """A CUresult's number by its cuda.h name, from the table the native core is
    built with (cffi_build/cuda_errors.txt), so Python keeps no copy of it."""
    code = int(lib.gl_cuda_error_code(name.encode()))
    if code < 0:
        raise ValueError(f"cuda.h has no error named {name}")
    return code
