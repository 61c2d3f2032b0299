"""cffi out-of-line API build of gleam's native core (``gleam.peer._native``).

The C lives in real files under ``cffi_build/src``; the declarations that
Python may call are in ``cffi_build/native.cdef``, a header subset that cffi
can parse. Adding C to the core is adding a ``.c`` file and its declarations.
"""

from __future__ import annotations

import pathlib

from cffi import FFI

HERE = pathlib.Path(__file__).resolve().parent
SRC = HERE / "src"

ffibuilder = FFI()
ffibuilder.cdef((HERE / "native.cdef").read_text())
ffibuilder.set_source(
    "gleam.peer._native",
    '#include "gleam_native.h"\n',
    # setuptools wants sources relative to the project root.
    sources=sorted(str(p.relative_to(HERE.parent)) for p in SRC.glob("*.c")),
    include_dirs=[str(SRC)],
    extra_compile_args=[
        "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror=implicit-function-declaration",
    ],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
