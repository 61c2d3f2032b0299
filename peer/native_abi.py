"""What the Python side expects of the native core, importable without loading it
(so that the command line can report a stale build in one line).

The cffi module is built from ``cffi_build/native.cdef``; the build compiles the
cdef's ABI number into the module (``gl_native_abi_version``, see
``cffi_build/abi_version.py``) and ``EXPECTED_ABI`` is the number this code was
written against. An editable checkout updated without a rebuild, or a module
copied from another version, then fails at import with one line saying how to
rebuild, instead of a missing symbol mid-run or a struct read with the wrong layout.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

# tests/test_packaging.py checks this against cffi_build/native.cdef and prints the
# value to put here when the cdef changes.
EXPECTED_ABI = 0xfb86405
REBUILD = "rebuild it with ./scripts/test.sh, or pip install . from the gleam checkout"
# Present when gleam runs from a source checkout (an editable install).
_CHECKOUT_CDEF = Path(__file__).resolve().parents[1] / "cffi_build" / "native.cdef"


def expected_abi() -> int:
    """The ABI this code needs: in a source checkout the checkout's own cdef (so a
    checkout updated without a rebuild is caught, and a developer changing the
    cdef is told to rebuild, not to edit a constant), else ``EXPECTED_ABI``."""
    if _CHECKOUT_CDEF.is_file():
        return int(hashlib.sha256(_CHECKOUT_CDEF.read_bytes()).hexdigest()[:7], 16)
    return EXPECTED_ABI


class NativeCoreError(ImportError):
    """The native core is missing or was built from other sources."""


def check_abi(built: int) -> None:
    """Raise NativeCoreError unless the module's ABI number is the expected one."""
    expected = expected_abi()
    if built != expected:
        raise NativeCoreError(
            f"gleam's native core was built from other sources (ABI {built:07x}, this code "
            f"expects {expected:07x}); {REBUILD}"
        )
