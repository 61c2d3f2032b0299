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

# tests/test_packaging.py checks this against cffi_build/native.cdef and prints the
# value to put here when the cdef changes.
EXPECTED_ABI = 0xa12fe44
REBUILD = "rebuild it with ./scripts/test.sh, or pip install . from the gleam checkout"


class NativeCoreError(ImportError):
    """The native core is missing or was built from other sources."""


def check_abi(built: int) -> None:
    """Raise NativeCoreError unless the module's ABI number is the expected one."""
    if built != EXPECTED_ABI:
        raise NativeCoreError(
            f"gleam's native core was built from other sources (ABI {built:07x}, this code "
            f"expects {EXPECTED_ABI:07x}); {REBUILD}"
        )
