# Type stub for the cffi extension module built from cffi_build/ (gleam.peer._native).
# cffi generates `ffi` and `lib` at build time; their members come from the cdef
# generated from the headers (cffi_build/cdef.py), so they are typed as Any here.
from typing import Any

ffi: Any
lib: Any
