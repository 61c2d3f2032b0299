"""A forwarded CUDA session driven in-process: call batches straight into the executor.

No network and no agent: each ``run`` encodes records as the client would and hands the
batch to a native ``ExecSession`` over a backend, then decodes the reply header.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import struct
from collections.abc import Iterator

from gleam.peer.cuda.server import native
from gleam.peer.cuda.wire import trailer
from gleam.peer.nativelib import ffi, lib
from gleam.peer.records import CallRecord, encode_batch

IDS = native.call_ids()
CTX, MOD, FUNC, LIB, KERNEL, STREAM, EVENT = range(1, 8)
_serial = itertools.count(1)

Reply = tuple[int, int, list[int], bytes]  # result, deferred error, values, bytes


def mint(kind: int) -> int:
    """A client-minted handle of one kind, as the interposer makes them."""
    return 0x67 << 56 | kind << 48 | next(_serial)


def rec(name: str, *args: int, payload: bytes | None = None) -> CallRecord:
    cid = IDS[name]
    return CallRecord(cid, tuple(args), payload, oneway=not native.lib.gl_call_is_waiting(cid))


def quiet(record: CallRecord) -> CallRecord:
    """``record`` as a checkpoint sends it: its reply leaves what the program is owed."""
    return dataclasses.replace(record, quiet=True)


class Session:
    def __init__(self, backend: native.HostBackend, va_size: int = 1 << 30,
                 va_base: int = 0) -> None:
        self.x = native.ExecSession(backend, va_size, va_base)
        self.reply = bytearray(native.REPLY_CAPACITY)
        self._next = 0
        self.notes: list[str] = []  # the server's lines carried by the last reply
        self.sections: list[trailer.Section] = []  # the last reply's trailer
        self.stdout = b""  # what the kernels printed, as the replies so far carried it
        self.stderr = b""

    def run(self, *records: CallRecord) -> Reply | None:
        """None when the batch ended on a one-way call (no reply is owed)."""
        n = self.x.run(encode_batch(records), self.reply)
        if n < 0:
            return None
        result, deferred, nvals, nbytes = struct.unpack_from("<iiII", self.reply, 0)
        values = list(struct.unpack_from("<8Q", self.reply, 16))[:nvals]
        assert n >= 80 + nbytes
        self.sections = trailer.parse(self.reply[80 + nbytes:n])
        kinds = [s.kind for s in self.sections]
        assert trailer.NOTES not in kinds[1:], "notes come first"
        notes = trailer.notes_of(self.sections)
        assert not notes or result or deferred, "notes ride only on a reply that reports an error"
        assert len(notes) <= trailer.NOTES_MAX
        out = [s for s in self.sections if s.kind != trailer.NOTES]
        assert sum(trailer.HEADER.size + len(s.data) for s in out) <= trailer.OUTPUT_MAX
        assert not any(s.flags & trailer.MORE for s in out[:-1]), "MORE marks the last section"
        self.notes = notes.decode().splitlines()
        for s in out:
            if s.kind == trailer.STDOUT:
                self.stdout += s.data
            else:
                self.stderr += s.data
        return result, deferred, values, bytes(self.reply[80:80 + nbytes])

    def context(self) -> None:
        ctx = mint(CTX)
        retain = rec("cuDevicePrimaryCtxRetain", ctx, 0)
        assert self.run(retain, rec("glCtxSetCurrent", ctx)) is None
        assert self.sync() == (0, 0)

    def alloc(self, size: int, offset: int | None = None) -> int:
        """An allocation at va_base + offset (by default after the previous one, 256-aligned)."""
        if offset is None:
            offset = self._next
        self._next = max(self._next, (offset + max(size, 1) + 255) & ~255)
        p = self.x.va_base + offset
        assert self.run(rec("glMemAlloc", p, size)) is None
        return p

    def htod(self, p: int, data: bytes) -> None:
        assert self.run(rec("glMemcpyHtoD", p, len(data), 0, payload=data)) is None

    def dtoh(self, p: int, n: int) -> bytes:
        r = self.run(rec("glMemcpyDtoH", p, n, 0))
        assert r is not None and r[:2] == (0, 0), r
        return r[3]

    def sync(self) -> tuple[int, int]:
        r = self.run(rec("cuCtxSynchronize"))
        assert r is not None
        return r[0], r[1]

    def load(self, image: bytes) -> int:
        mod = mint(MOD)
        assert self.run(rec("glModuleLoad", mod, len(image), payload=image)) is None
        return mod

    def library(self, image: bytes) -> int:
        """cuLibraryLoadData, as cudart registers each image of a program."""
        lib = mint(LIB)
        assert self.run(rec("glLibraryLoad", lib, len(image), payload=image)) is None
        return lib

    def kernel(self, lib: int, name: str) -> int:
        kernel = mint(KERNEL)
        name_bytes = name.encode() + b"\0"
        assert self.run(rec("cuLibraryGetKernel", kernel, lib, payload=name_bytes)) is None
        return kernel

    def function(self, mod: int, name: str) -> int:
        fn = mint(FUNC)
        assert self.run(rec("cuModuleGetFunction", fn, mod, payload=name.encode() + b"\0")) is None
        return fn

    def global_(self, mod: int, name: str) -> tuple[int, int, int]:
        """cuModuleGetGlobal: (result, device pointer, size in bytes)."""
        r = self.run(rec("cuModuleGetGlobal", mod, payload=name.encode() + b"\0"))
        assert r is not None
        ptr, size = (r[2] + [0, 0])[:2]
        return r[0], ptr, size

    def launch(self, fn: int, grid: tuple[int, int, int], block: tuple[int, int, int],
               params: bytes, shared: int = 0, cooperative: bool = False) -> None:
        call = "glLaunchCooperative" if cooperative else "glLaunch"
        launch = rec(call, fn, *grid, *block, shared, 0, len(params), payload=params)
        assert self.run(launch) is None

    def more(self) -> bool:
        """Whether the last reply said the server holds more output."""
        return trailer.more_of(self.sections)

    def take_output(self) -> None:
        """glOutputTake until the server holds no more output for the program."""
        while True:
            r = self.run(rec("glOutputTake"))
            assert r is not None and r[0] == 0
            if not self.more():
                return

    def close(self) -> None:
        self.x.close()


# CUjitInputType: what each input of a link image is.
CUBIN, PTX, FATBIN, OBJECT, LIBRARY = range(5)


def link_image(inputs: list[tuple[int, bytes, str]], origin: int = 1,
               options: tuple[tuple[int, int], ...] = ()) -> bytes:
    """A link image (cffi_build/include/gl_linkimage.h) of (type, bytes, name) inputs, as
    the interposer writes one at cuLinkComplete (origin 1) or for an -rdc registration (2,
    the first input its linked fatbin)."""
    keep = []
    entries = ffi.new("gl_link_input[]", len(inputs))
    for k, (kind, data, name) in enumerate(inputs):
        buf, nm = ffi.from_buffer(data), ffi.new("char[]", name.encode())
        keep += [buf, nm]
        main = 1 if origin == 2 and k == 0 else 0
        entries[k] = (kind, main, ffi.cast("const uint8_t *", buf), len(data), nm,
                      len(name.encode()))
    flat = ffi.new("uint32_t[]", [v for pair in options for v in pair] or [0])
    out = ffi.new("uint8_t **")
    size = lib.gl_link_image_build(entries, len(inputs), flat, len(options), origin, out)
    assert size > 0
    try:
        return bytes(ffi.buffer(out[0], size))
    finally:
        lib.gl_link_image_free(out[0])


@contextlib.contextmanager
def ptx_only_session() -> Iterator[Session]:
    """A session with its context on a host backend with no host kernels registered,
    so every kernel runs from its PTX."""
    be = native.HostBackend({}, memory_limit=1 << 26)
    s = Session(be, 1 << 24)
    s.context()
    try:
        yield s
    finally:
        s.close()
        be.close()
