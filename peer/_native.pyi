# Type stub for the cffi extension module built from cffi_build/ (gleam.peer._native).
# cffi generates `ffi` and `lib` at build time; their members come from
# cffi_build/native.cdef, so they are typed as Any here.
from typing import Any

ffi: Any
lib: Any
