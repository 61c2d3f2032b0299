"""List the symbols NVIDIA's libcuda exports, from a ``cuda.h``.

    python cffi_build/list_driver_symbols.py CUDA_H > cffi_build/driver_symbols.txt

Why: libraries that open ``libcuda.so.1`` themselves (cuBLASLt resolves about a
hundred entry points with ``dlsym`` and gives up when one is missing) need every
name a real driver has, not only those gleam forwards. gen_cuda.py gives each name
of this list that no row exports a stub that says once that it is not forwarded and
returns ``CUDA_ERROR_NOT_SUPPORTED``, as the trampolines of ``cuGetProcAddress`` do.

A name is exported when the header declares it (``CUresult CUDAAPI name(``), names
it as the versioned form of another (``#define cuMemAlloc cuMemAlloc_v2``), or
gives it per-thread-stream twins (``__CUDA_API_PTDS(name)`` is ``name_ptds``). The
list is data committed beside the generator, so building gleam needs no CUDA header.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

_DECLARED = re.compile(r"\bCUresult\s+CUDAAPI\s+(cu\w+)\s*\(")
_VERSIONED = re.compile(r"^\s*#\s*define\s+cu\w+\s+(cu\w+_v\d+)\b", re.M)
_TWIN = re.compile(r"__CUDA_API_PT(DS|SZ)\((cu\w+)\)")


def driver_symbols(header: str) -> list[str]:
    """The exported names a cuda.h implies, sorted."""
    names = set(_DECLARED.findall(header)) | set(_VERSIONED.findall(header))
    names |= {f"{base}_pt{kind.lower()}" for kind, base in _TWIN.findall(header)}
    return sorted(names)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    header = Path(argv[1]).read_text(encoding="utf-8", errors="replace")
    version = re.search(r"#define CUDA_VERSION (\d+)", header)
    print(f"# libcuda's exported names, from cuda.h (CUDA_VERSION "
          f"{version.group(1) if version else '?'}) by cffi_build/list_driver_symbols.py")
    for name in driver_symbols(header):
        print(name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
