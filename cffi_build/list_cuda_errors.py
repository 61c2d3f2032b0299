"""List every CUresult of a ``cuda.h`` with its name and message.

    python cffi_build/list_cuda_errors.py CUDA_H [LIBCUDART] > cffi_build/cuda_errors.txt

Why: ``cuGetErrorName`` and ``cuGetErrorString`` must know every code NVIDIA's
driver can return, not only those gleam makes itself; a program that prints the
name of an error a library passed up must not get ``CUDA_ERROR_INVALID_VALUE``
instead. gen_errors.py turns the list into the interposer's table (errors.c).

Each line is ``CODE<TAB>NAME<TAB>MESSAGE``. Codes and names are the enum
``cudaError_enum`` of the header. The message is the one NVIDIA's runtime gives
for the same number (``cudaGetErrorString`` of LIBCUDART, a pure lookup that
needs no driver): the runtime's codes are the driver's numbers, and its
messages are the driver's (``invalid argument`` for 1, ``invalid device
context`` for 201). A code the runtime does not know gets the first sentence of
the header's comment on it. The list is data committed beside the generator,
so building gleam needs neither the header nor the runtime.
"""

from __future__ import annotations

import ctypes
import re
import sys
from pathlib import Path

_ENUM = re.compile(r"typedef\s+enum\s+cudaError_enum\s*\{(.*?)\}\s*CUresult\s*;", re.S)
_ENTRY = re.compile(r"/\*\*(.*?)\*/\s*(CUDA_\w+)\s*=\s*(\d+)", re.S)
_UNKNOWN = "unrecognized error code"


def _first_sentence(comment: str) -> str:
    words = []
    for line in comment.splitlines():
        text = line.strip().lstrip("*").strip()
        if text and not text.startswith("\\"):
            words.append(text)
    prose = re.sub(r"::(\w+)", r"\1", " ".join(words))
    end = prose.find(". ")
    return (prose if end < 0 else prose[:end]).rstrip(".")


def header_errors(header: str) -> list[tuple[int, str, str]]:
    """(code, name, first sentence of its comment) of every CUresult, by code."""
    enum = _ENUM.search(header)
    if enum is None:
        raise ValueError("no cudaError_enum in the header")
    found = [(int(code), name, _first_sentence(comment))
             for comment, name, code in _ENTRY.findall(enum.group(1))]
    return sorted(found)


def runtime_messages(libcudart: str) -> dict[int, str]:
    """cudaGetErrorString of every number below 10000 the runtime knows."""
    lib = ctypes.CDLL(libcudart)
    lib.cudaGetErrorString.restype = ctypes.c_char_p
    lib.cudaGetErrorString.argtypes = [ctypes.c_int]
    known = {}
    for code in range(10000):
        text = lib.cudaGetErrorString(code).decode()
        if text != _UNKNOWN:
            known[code] = text
    return known


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    header = Path(argv[1]).read_text(encoding="utf-8", errors="replace")
    runtime = runtime_messages(argv[2]) if len(argv) == 3 else {}
    version = re.search(r"#define CUDA_VERSION (\d+)", header)
    print(f"# CUresult codes of cuda.h (CUDA_VERSION {version.group(1) if version else '?'}) "
          "by cffi_build/list_cuda_errors.py: code, name, message")
    for code, name, sentence in header_errors(header):
        print(f"{code}\t{name}\t{runtime.get(code, sentence)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
