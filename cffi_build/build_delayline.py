"""cffi out-of-line API build of the lab's delay line (``gleam.peer.lab._delayline``).

A module of its own, apart from the native core: only the lab (root, Linux)
loads it, and its C (``src/delayline/``) has nothing to share with the core.
"""

from __future__ import annotations

import pathlib

from cffi import FFI

HERE = pathlib.Path(__file__).resolve().parent
SRC = HERE / "src" / "delayline"

ffibuilder = FFI()
# The header is the cdef: only its include guard and includes are left out.
HEADER = (SRC / "delayline.h").read_text()
ffibuilder.cdef("\n".join(
    line for line in HEADER.splitlines()
    if not line.startswith(("#if", "#endif", "#include", "#define GL_DELAYLINE_H"))
))
ffibuilder.set_source(
    "gleam.peer.lab._delayline",
    '#include "delayline.h"\n',
    sources=[str((SRC / "delayline.c").relative_to(HERE.parent))],
    include_dirs=[str(SRC)],
    extra_compile_args=["-O2", "-std=gnu11", "-Wall", "-Wextra",
                        "-Werror=implicit-function-declaration"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
