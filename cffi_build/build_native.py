"""cffi out-of-line API build of gleam's native core (``gleam.peer._native``).

The C lives in real files under ``cffi_build/src``, one folder per part of the
core (``native_parts.py`` lists the parts and which may include which); the
build compiles each core part's ``.c`` files. The declarations that Python may
call are the marked regions of the headers that ``cdef_headers.py`` lists
(``cdef.py`` extracts them). Adding C to the core is adding a ``.c`` file to
its part's folder, and exposing it to Python is marking its header's
declarations and adding the header to that list. The forwarding code generated
from the CUDA API table (``gen_cuda.py``) is written to ``cffi_build/generated``
first and compiled in with the rest.
"""

from __future__ import annotations

import pathlib
import sys

from cffi import FFI

HERE = pathlib.Path(__file__).resolve().parent
SRC = HERE / "src"
INCLUDE = HERE / "include"
GENERATED = HERE / "generated"
COMMON = HERE / "common"  # C that the interposer links too (build_interposer.py)

sys.path.insert(0, str(HERE))
from abi_version import abi_version  # noqa: E402
from cdef import cdef_text  # noqa: E402
from gen_cuda import generate  # noqa: E402
from native_parts import core_parts  # noqa: E402

generate(GENERATED)
PARTS = core_parts()

CDEF = cdef_text()
ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source(
    "gleam.peer._native",
    '#include "gleam_native.h"\n',
    # setuptools wants sources relative to the project root.
    sources=sorted(
        str(p.relative_to(HERE.parent))
        for p in [*SRC.glob("*.c"), *(c for part in PARTS for c in (SRC / part).glob("*.c")),
                  *COMMON.glob("*.c"), GENERATED / "gl_dispatch.c"]
    ),
    # Headers of another part are named "part/name.h" (native_parts.py), so src is the path.
    include_dirs=[str(SRC), str(INCLUDE), str(GENERATED)],
    define_macros=[("GL_NATIVE_ABI_VERSION", hex(abi_version(CDEF)))],
    extra_compile_args=[
        "-O2", "-std=gnu11", "-Wall", "-Wextra", "-Werror=implicit-function-declaration",
    ],
    libraries=["dl", "pthread"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
