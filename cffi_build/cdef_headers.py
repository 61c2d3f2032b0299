"""The headers whose marked declarations make up the native core's cffi cdef.

Exposing a header to Python is one line here plus ``/* cdef: begin */`` and
``/* cdef: end */`` around the declarations Python may use (``cdef.py`` says
what may stand between them). Order matters: cffi reads the cdef top to
bottom, so a header comes after the headers whose types it uses.

Paths are relative to ``cffi_build``. A ``generated/`` path is produced in
memory by the generator that writes it (``cdef.GENERATED``), so the cdef and its
ABI number never depend on a build having run. A ``.cdef`` file is taken whole:
it holds what cannot stand in a C header.
"""

from __future__ import annotations

HEADERS: tuple[str, ...] = (
    "src/gleam_native.h",
    "src/wire/records.h",
    "src/measure/hostspeed.h",
    "src/train/sketch.h",
    "src/cache/digest.h",
    "src/cache/blobcache.h",
    "src/journal/journal.h",
    "include/gl_session.h",
    "include/gl_error_names.h",
    "include/gl_array.h",
    "generated/gl_cuda_extra.h",
    "src/exec/exec_api.h",
    "src/measure/pingpong.h",
    "src/image/fatbin.h",
    "include/gl_linkimage.h",
    "src/ptx/ptx.h",
    "src/wire/dpstream.h",
    "src/crypto/dpcrypto.h",
    "src/mem/spares.h",
    "src/journal/jlog.h",
    "src/cache/blobref.h",
    "include/gl_ring.h",
    "src/lanes/handover.h",
    "src/lanes/pump.h",
    "src/cache/shelf.h",
    "src/lanes/serve.h",
    "include/gl_mirror_diff.h",
    "python_callbacks.cdef",
)
