"""What a Python host kernel receives when the host backend launches it.

A ``Launch`` wraps the native ``gl_launch`` for the duration of one call: the
grid, the packed parameter buffer (read with the kernel's layout) and checked
views of the session's device memory. It must not be kept after the kernel
returns: the memory views stay valid only while the session's allocations do.
"""

from __future__ import annotations

import struct
from typing import Any

from gleam.peer.nativelib import ffi, lib

__all__ = ["IllegalAddress", "Launch", "param_layout"]


class IllegalAddress(Exception):
    """A kernel touched memory outside the session's allocations."""


def param_layout(sizes: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """Offsets of parameters of these sizes, aligned as ``cuLaunchKernel`` packs them."""
    offsets = []
    end = 0
    for size in sizes:
        align = size if size in (1, 2, 4, 8) else 8
        end = (end + align - 1) // align * align
        offsets.append(end)
        end += size
    return tuple(offsets), end


class Launch:
    """One launch of a host kernel: ``grid``, ``block``, ``shared``, ``params``."""

    def __init__(self, raw: Any, offsets: tuple[int, ...], sizes: tuple[int, ...]) -> None:
        self._exec = raw.x
        self.grid: tuple[int, int, int] = (raw.grid[0], raw.grid[1], raw.grid[2])
        self.block: tuple[int, int, int] = (raw.block[0], raw.block[1], raw.block[2])
        self.shared: int = raw.shared
        self.params: bytes = ffi.buffer(raw.params, raw.params_len)[:] if raw.params_len else b""
        self._offsets = offsets
        self._sizes = sizes

    def arg(self, index: int, fmt: str) -> Any:
        """Parameter ``index`` decoded with struct format ``fmt`` (e.g. "Q", "f", "i")."""
        if not 0 <= index < len(self._offsets):
            raise IndexError(f"kernel has {len(self._offsets)} parameters, not {index + 1}")
        code = "<" + fmt.lstrip("<>=!@")
        if struct.calcsize(code) != self._sizes[index]:
            raise ValueError(f"parameter {index} is {self._sizes[index]} bytes, not {fmt!r}")
        value = struct.unpack_from(code, self.params, self._offsets[index])
        return value[0] if len(value) == 1 else value

    def threads(self, axis: int = 0) -> int:
        """Threads launched along an axis (grid times block)."""
        return self.grid[axis] * self.block[axis]

    def array(self, ptr: int, dtype: Any, count: int) -> Any:
        """A writeable numpy view of ``count`` items at device address ``ptr``."""
        import numpy as np

        dt = np.dtype(dtype)
        size = dt.itemsize * count
        if count < 0 or ptr < 0 or ptr >= 1 << 64 or size >= 1 << 64:
            raise IllegalAddress(f"bad range {ptr:#x} + {size}")
        host = lib.gl_exec_host_ptr(self._exec, ptr, size)
        if host == ffi.NULL:
            raise IllegalAddress(f"{ptr:#x} + {size} bytes is outside the session's memory")
        if count == 0:
            return np.zeros(0, dtype=dt)
        return np.frombuffer(ffi.buffer(host, size), dtype=dt, count=count)
