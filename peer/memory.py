"""Process-wide allocator settings for an agent that moves megabyte frames.

glibc serves allocations above a dynamic threshold with mmap and, by default,
returns freed memory to the kernel when the heap top grows past 128 KiB. An
agent receiving 1 MiB batches then pays an mmap, munmap and 256 page faults
per frame, which costs more than the AES-GCM that protects it. Raising both
thresholds keeps those buffers in the heap and reused. Elsewhere (musl,
macOS) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("gleam.memory")

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# Larger than any frame the agent takes by default (16 MiB plus headers).
THRESHOLD = 64 * 1024 * 1024


def tune_allocator_for_bulk() -> bool:
    """Apply the thresholds; True when the allocator accepted them."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(M_MMAP_THRESHOLD, THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, THRESHOLD))
    if not ok:
        log.debug("mallopt refused the bulk-transfer thresholds")
    return ok
