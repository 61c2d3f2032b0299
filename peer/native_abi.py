"""What the Python side expects of the native core, importable without loading it
(so that the command line can report a stale build in one line).

The cffi module is built from a cdef generated from the C headers
(``cffi_build/cdef.py``); the build compiles the cdef's ABI number into the module
(``gl_native_abi_version``, see ``cffi_build/abi_version.py``) and ``EXPECTED_ABI``
is the number this code was written against. An editable checkout updated without
a rebuild, or a module copied from another version, then fails at import with one
line saying how to rebuild, instead of a missing symbol mid-run or a struct read
with the wrong layout.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

# tests/test_packaging.py checks this against the cdef generated from the headers
# and prints the value to put here when the cdef changes.
EXPECTED_ABI = 0x6d44c65
REBUILD = "rebuild it with ./scripts/test.sh, or pip install . from the gleam checkout"
# Present when gleam runs from a source checkout (an editable install).
_CHECKOUT_ABI = Path(__file__).resolve().parents[1] / "cffi_build" / "abi_version.py"


def _checkout_abi() -> int:
    # Loaded by path: the build scripts are not a package of gleam.
    spec = importlib.util.spec_from_file_location("gleam_cffi_build_abi", _CHECKOUT_ABI)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    abi: int = module.abi_version()
    return abi


def expected_abi() -> int:
    """The ABI this code needs: in a source checkout the checkout's own cdef (so a
    checkout updated without a rebuild is caught, and a developer changing the
    cdef is told to rebuild, not to edit a constant), else ``EXPECTED_ABI``."""
    if _CHECKOUT_ABI.is_file():
        return _checkout_abi()
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
