"""CUDA arrays, textures and surfaces in an in-process session (tests/cuda_session.py):
the records the interposer would send, built here, and the kernels of
tests/ptx_textures/textures.cu launched on them."""

from __future__ import annotations

import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np

from gleam.peer.nativelib import ffi

from .cuda_session import Session, mint, rec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "cffi_build"))
from cuda_api import HANDLE_KINDS  # noqa: E402

ARRAY, MIPMAP, TEXOBJ, SURFOBJ = (HANDLE_KINDS.index(k) + 1
                                  for k in ("array", "mipmap", "texobj", "surfobj"))
TEXTURES_PTX = ROOT / "tests" / "ptx_textures" / "textures.ptx"

# CUarray_format, address and filter modes, flags (CUDA's numbers; include/gl_array.h).
U8, U16, U32, S8, S16, S32, HALF, FLOAT = 0x01, 0x02, 0x03, 0x08, 0x09, 0x0A, 0x10, 0x20
WRAP, CLAMP, MIRROR, BORDER = 0, 1, 2, 3
POINT, LINEAR = 0, 1
READ_AS_INTEGER, NORMALIZED, SRGB = 0x01, 0x02, 0x10
LAYERED, SURFACE, CUBEMAP, GATHER = 0x01, 0x02, 0x04, 0x08
RES_ARRAY, RES_MIPMAP, RES_LINEAR, RES_PITCH2D = 0, 1, 2, 3
DTYPES = {U8: np.uint8, U16: np.uint16, U32: np.uint32, S8: np.int8, S16: np.int16,
          S32: np.int32, HALF: np.float16, FLOAT: np.float32}


def desc_bytes(width: int, height: int = 0, depth: int = 0, fmt: int = FLOAT,
               channels: int = 1, flags: int = 0, levels: int = 0) -> bytes:
    d = ffi.new("gl_array_desc *", {"width": width, "height": height, "depth": depth,
                                    "format": fmt, "channels": channels, "flags": flags,
                                    "levels": levels})
    return bytes(ffi.buffer(d))


def layout_bytes(desc: bytes) -> int:
    """The host layout's size (include/gl_array.h), as the interposer computes it."""
    d = ffi.from_buffer("gl_array_desc *", desc)
    elem = np.dtype(DTYPES[d.format]).itemsize * d.channels
    layered = d.flags & (LAYERED | CUBEMAP)
    total = 0
    for level in range(max(1, d.levels)):
        w = max(1, d.width >> level)
        h = 1 if d.height == 0 else max(1, d.height >> level)
        z = d.depth if layered else (1 if d.depth == 0 else max(1, d.depth >> level))
        total += (elem * w * h * z + 255) // 256 * 256
    return total


class Textures:
    """A session with the texture kernels loaded."""

    def __init__(self, s: Session) -> None:
        self.s = s
        self.mod = s.load(TEXTURES_PTX.read_bytes() + b"\0")
        self.fns: dict[str, int] = {}

    def fn(self, name: str) -> int:
        if name not in self.fns:
            self.fns[name] = self.s.function(self.mod, name)
        return self.fns[name]

    def array(self, desc: bytes, mipmap: bool = False) -> tuple[int, int]:
        """A new array (or mipmapped array) over fresh storage: (handle, storage)."""
        storage = self.s.alloc(layout_bytes(desc))
        h = mint(MIPMAP if mipmap else ARRAY)
        name = "glMipmapCreate" if mipmap else "glArrayCreate"
        assert self.s.run(rec(name, h, len(desc), storage, payload=desc)) is None
        return h, storage

    def level(self, mipmap: int, level: int) -> int:
        h = mint(ARRAY)
        assert self.s.run(rec("cuMipmappedArrayGetLevel", h, mipmap, level)) is None
        return h

    def upload(self, array: int, data: np.ndarray, x: int = 0, y: int = 0, z: int = 0) -> None:
        """data[z][y][x...] (a 3D block of rows of bytes) into the array."""
        block = np.ascontiguousarray(data).view(np.uint8)
        block = block.reshape(block.shape[0], block.shape[1], -1)
        for k in range(block.shape[0]):
            rows = block[k]
            payload = rows.tobytes()
            assert self.s.run(rec("glMemcpyHtoA", array, x, y, z + k, rows.shape[1],
                                  rows.shape[0], 0, payload=payload)) is None

    def download(self, array: int, width: int, height: int, x: int = 0, y: int = 0,
                 z: int = 0) -> tuple[int, bytes]:
        r = self.s.run(rec("glMemcpyAtoH", array, x, y, z, width, height, 0))
        assert r is not None
        return r[0], r[3]

    def texture(self, res: dict[str, Any], tex: dict[str, Any] | None = None,
                view: dict[str, Any] | None = None, surface: bool = False) -> tuple[int, int]:
        """glTexObjectCreate: (result, value)."""
        q = ffi.new("gl_tex_request *")
        q.handle = mint(SURFOBJ if surface else TEXOBJ)
        q.kind = 2 if surface else 1
        for k, v in res.items():
            setattr(q, k, v)
        for k, v in (tex or {}).items():
            setattr(q.tex, k, v)
        if view is not None:
            q.has_view = 1
            for k, v in view.items():
                setattr(q.view, k, v)
        payload = bytes(ffi.buffer(q))
        r = self.s.run(rec("glTexObjectCreate", len(payload), payload=payload))
        assert r is not None
        return r[0], (r[2][0] if r[2] else 0)

    def run(self, kernel: str, n: int, *params: bytes) -> None:
        """Launches kernel over n threads with the packed parameters."""
        block = 64
        self.s.launch(self.fn(kernel), ((n + block - 1) // block, 1, 1), (block, 1, 1),
                      b"".join(params))

    def buffer(self, data: bytes) -> int:
        p = self.s.alloc(max(len(data), 16))
        self.s.htod(p, data)
        return p

    def lookup(self, kernel: str, value: int, coords: np.ndarray) -> np.ndarray:
        """Runs a fetch kernel over coords (one row per thread); the four 32-bit results
        of each thread as uint32 rows (r[0] == 0 and r[1] == 0 checked)."""
        n = coords.shape[0]
        c = self.buffer(np.ascontiguousarray(coords).tobytes())
        out = self.s.alloc(16 * n)
        self.run(kernel, n, q(out), q(value), q(c), struct.pack("<i", n))
        return np.frombuffer(self.s.dtoh(out, 16 * n), dtype=np.uint32).reshape(n, 4)


def q(v: int) -> bytes:
    return struct.pack("<Q", v)
